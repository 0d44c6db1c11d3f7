// Where a start's time went: vLLM's own start-up lines (what it says each step took) read beside
// sparkctl's clock (when each line appeared, ms after the launch), into one record per replica or
// rank: process start, model files read, weights loaded, compile (cache hit or miss), KV cache
// profiled, CUDA graphs, API up, first token. Pure: fed lines and times, table-tested on real lines
// (test/fixtures/vllm-start/SOURCE.md says where each came from).
//
// The wording per vLLM version, from its source and from real logs:
//  - model_loader/default_loader.py "Loading weights took %.2f seconds" (the files read); the tqdm bar
//    "Loading safetensors checkpoint shards: N% Completed" (every version with safetensors).
//  - gpu_model_runner.py "Model loading took %s GiB and %.6f seconds" (0.8-0.11), "... GiB memory and
//    ..." (0.12 on, also the CPU runner, which inherits it).
//  - compilation/backends.py "Using cache directory: %s for vLLM's torch.compile", "vLLM's torch.compile
//    cache is disabled.", "Dynamo bytecode transform time: %.2f s", "Directly load the compiled graph(s)
//    for dynamic shape|shape %s|compile range %s from the cache, took %.3f s" (a hit), "Compiling a
//    graph for dynamic shape|shape|compile range %s takes %.2f s" and "Cache the graph of ... for later
//    use" (a miss); compilation/decorators.py "Directly load AOT compilation from path %s" (a hit),
//    "Compiling model again due to a load failure" (the cache could not be used: a miss);
//    compilation/monitor.py "torch.compile takes %.2f s in total" (to 0.11) / "torch.compile took %.2f s
//    in total" (later) / "torch.compile and initial profiling/warmup run together took %.2f s in total".
//  - torch (a CPU build, where vllm/platforms/cpu.py compiles with DYNAMO_TRACE_ONCE and vLLM's own
//    cache is not used): "AOTAutograd cache hit|miss for key %s", "fx graph cache hit|miss for key %s",
//    "Bypassing FX Graph Cache because ...", at INFO with TORCH_LOGS naming their loggers.
//  - config "Enforce eager set, disabling torch.compile and CUDAGraphs" (0.27.2; compile off).
//  - worker "Available KV cache memory: %.2f GiB", kv_cache_utils.py "GPU KV cache size: %s tokens".
//  - gpu_model_runner.py "Capturing CUDA graphs (...): N%", "Graph capturing finished in %.0f secs, took
//    %.2f GiB".
//  - v1/engine/core.py "init engine (profile, create kv cache, warmup model) took %.2f s|seconds".
//  - uvicorn "Application startup complete." (the API answers).
import { stripPrefixes } from './causes.js';

export type PhaseId =
  | 'process'
  | 'files'
  | 'weights'
  | 'compile'
  | 'kv-cache'
  | 'cuda-graphs'
  | 'engine'
  | 'api'
  | 'first-token';

interface StartPhase {
  id: PhaseId;
  /** ms after the launch when sparkctl saw the phase end (its clock) */
  atMs: number;
  /** what vLLM itself says the phase took, where it says it */
  seconds?: number;
  detail?: string;
}

type CompileCache = 'hit' | 'miss' | 'off';

export interface StartReport {
  /** the phases in the order they ended; one entry per id */
  phases: StartPhase[];
  /** cache absent: a compile was logged without a line that tells hit from miss */
  compile?: { cache?: CompileCache; seconds?: number; clockSeconds?: number; dir?: string; evidence?: string };
  weights?: { gib?: number; seconds?: number; fileSeconds?: number };
  /** ms from the launch until the API answered (/v1/models), sparkctl's clock */
  readyMs?: number;
  /** ms from the launch until the first generated token came back (prewarm's or the probe's first request) */
  firstTokenMs?: number;
  /** sparkctl's start-cache folder (caches.ts) and whether it held entries before this start */
  caches?: { dir: string; warm: boolean };
  /** the model's files read ahead into the page cache (readahead.ts) */
  readAhead?: { bytes: number; seconds: number; gbps: number } | { skipped: string };
}

/** The message of a log line: process prefixes, level, time and source location taken off. */
const messageOf = (raw: string) =>
  stripPrefixes(raw)
    .trim()
    .replace(/^(?:INFO|WARNING|DEBUG|ERROR)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s*/, '')
    // torch's own format (TORCH_LOGS), in a worker "[rank0]:" first:
    // "[rank0]:I1204 17:36:45.144000 29031 torch/_inductor/codecache.py:2316] [0/0] "
    .replace(/^(?:\[rank\d+\]:)?[IWEDC]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\]\s*(?:\[[^\]]*\]\s*)?/, '');

const num = (s: string | undefined) => (s === undefined ? undefined : Number(s));

/** One recognised line: what it says, without time. */
type LineFact =
  | { kind: 'phase'; id: PhaseId; seconds?: number; detail?: string }
  | {
      kind: 'compile';
      cache?: CompileCache;
      seconds?: number;
      dir?: string;
      total?: boolean;
      begin?: boolean;
      end?: boolean;
    }
  | { kind: 'weights'; gib?: number; seconds?: number; fileSeconds?: number };

/**
 * The start-up fact one vLLM log line tells, if any (prefixes like "(EngineCore pid=1) INFO ... [x.py:1]" stripped).
 */
export function factOf(raw: string): LineFact | undefined {
  const line = stripPrefixes(raw);
  let m: RegExpExecArray | null;
  if ((m = /Loading weights took ([\d.]+) seconds/.exec(line))) return { kind: 'weights', fileSeconds: Number(m[1]) };
  if (/Loading safetensors checkpoint shards:\s+100%/.test(line)) return { kind: 'phase', id: 'files' };
  if (
    (m = /(?:Model loading|Loading model weights) took ([\d.]+) G(?:i)?B(?: memory)? and ([\d.]+) seconds/.exec(line))
  )
    return { kind: 'weights', gib: Number(m[1]), seconds: Number(m[2]) };
  if ((m = /Using cache directory: (.+?) for vLLM's torch\.compile/.exec(line))) return { kind: 'compile', dir: m[1] };
  if (/vLLM's torch\.compile cache is disabled/.test(line)) return { kind: 'compile', cache: 'miss', dir: '' };
  if (/Enforce eager set, disabling torch\.compile/.test(line)) return { kind: 'compile', cache: 'off' };
  if ((m = /Directly load the compiled graph\(s\) for .* from the cache, took ([\d.]+) s/.exec(line)))
    return { kind: 'compile', cache: 'hit', seconds: Number(m[1]) };
  // the CPU runner (cpu_model_runner.py) says when the compile begins; the AOT path when it ends
  if (/Warming up model for the compilation/.test(line)) return { kind: 'compile', begin: true };
  if (/Warming up done\./.test(line)) return { kind: 'compile', end: true };
  if ((m = /Dynamo bytecode transform time: ([\d.]+) s/.exec(line)))
    return { kind: 'compile', begin: true, seconds: Number(m[1]) };
  if (/Directly load AOT compilation from path/.test(line)) return { kind: 'compile', cache: 'hit', end: true };
  if (/saved AOT compiled function to/.test(line)) return { kind: 'compile', cache: 'miss', end: true };
  if (/Compiling model again due to a load failure/.test(line)) return { kind: 'compile', cache: 'miss' };
  if (/Compiling a graph for .* takes [\d.]+ s|Cache the graph of .* for later use/.test(line))
    return { kind: 'compile', cache: 'miss' };
  // torch's own caches (a CPU build's only compile cache: plan.ts sets TORCH_LOGS for these lines),
  // torch/_inductor/codecache.py and torch/_functorch/_aot_autograd/autograd_cache.py
  if (/\b(?:fx graph|AOTAutograd) cache hit for key/.test(line)) return { kind: 'compile', cache: 'hit' };
  if (/\b(?:fx graph|AOTAutograd) cache miss for key|Bypassing (?:FX Graph Cache|autograd cache)/.test(line))
    return { kind: 'compile', cache: 'miss' };
  if (
    (m = /torch\.compile (?:takes|took|and initial profiling\/warmup run together took) ([\d.]+) s in total/.exec(line))
  )
    return { kind: 'compile', seconds: num(m[1]), total: true };
  if ((m = /GPU KV cache size: ([\d,]+) tokens/.exec(line)))
    return { kind: 'phase', id: 'kv-cache', detail: `${m[1]} tokens` };
  if ((m = /Graph capturing finished in ([\d.]+) secs?/.exec(line)))
    return { kind: 'phase', id: 'cuda-graphs', seconds: Number(m[1]) };
  if ((m = /init engine .* took ([\d.]+) s/.exec(line))) return { kind: 'phase', id: 'engine', seconds: Number(m[1]) };
  if (/Application startup complete/.test(line)) return { kind: 'phase', id: 'api' };
  return undefined;
}

/**
 * The line sparkctl writes into a replica's log before each launch (engine/runtime: "=== sparkctl ISO launch: ...").
 */
const SPARKCTL_MARK = /^=== sparkctl /;

/**
 * A start's record, built as its lines come. `line(text, atMs)` for each log line with the ms after
 * the launch when sparkctl read it; `ready(ms)` and `firstToken(ms)` from sparkctl's own clock.
 */
export class StartClock {
  /** t0: the launch, ms since the epoch (Date.now()); every time fed after is against it */
  constructor(readonly t0 = Date.now()) {}
  private phases = new Map<PhaseId, StartPhase>();
  private compile: StartReport['compile'];
  private weights: StartReport['weights'];
  private readyMs?: number;
  private firstTokenMs?: number;
  private readAhead?: StartReport['readAhead'];

  /** A log line, read at `now` (ms since the epoch). */
  line(text: string, now = Date.now()): void {
    const atMs = now - this.t0;
    // sparkctl's own marker in the log ("=== sparkctl <time> launch: ...") is not the process's output
    if (SPARKCTL_MARK.test(text)) return;
    // the process started: its first line of output (Python's imports are done)
    if (!this.phases.has('process') && text.trim()) this.phases.set('process', { id: 'process', atMs });
    const f = factOf(text);
    if (!f) return;
    if (f.kind === 'phase') this.mark(f.id, atMs, f.seconds, f.detail);
    else if (f.kind === 'weights') {
      this.weights = { ...this.weights, ...defined({ gib: f.gib, seconds: f.seconds, fileSeconds: f.fileSeconds }) };
      if (f.fileSeconds !== undefined) this.mark('files', atMs, f.fileSeconds);
      if (f.seconds !== undefined)
        this.mark('weights', atMs, f.seconds, f.gib !== undefined ? `${f.gib.toFixed(2)} GiB` : undefined);
    } else this.compiled(f, atMs, text);
  }

  private seen = { hit: false, miss: false, off: false };
  private compileFrom?: number;

  private compiled(f: Extract<LineFact, { kind: 'compile' }>, atMs: number, text: string): void {
    const c = this.compile ?? {};
    if (f.dir !== undefined) c.dir = f.dir || undefined;
    if (f.cache && !this.seen[f.cache]) {
      this.seen[f.cache] = true;
      // the evidence is the line that decided: a miss anywhere beats a hit (one graph compiled again)
      if (f.cache === 'miss' || !this.seen.miss) c.evidence = messageOf(text).slice(0, 200);
    }
    if (f.begin && this.compileFrom === undefined) this.compileFrom = atMs - (f.seconds ?? 0) * 1000;
    if (f.total) c.seconds = f.seconds;
    // no total from vLLM (the AOT path logs none): the clock's, from its beginning to its end
    else if (f.end && c.seconds === undefined && c.clockSeconds === undefined && this.compileFrom !== undefined) {
      c.clockSeconds = Math.round(atMs - this.compileFrom) / 1000;
      this.mark('compile', atMs);
    }
    const cache: CompileCache | undefined = this.seen.miss
      ? 'miss'
      : this.seen.hit
        ? 'hit'
        : this.seen.off
          ? 'off'
          : undefined;
    this.compile = defined({ ...c, cache }) as NonNullable<StartReport['compile']>;
    if (f.total) this.mark('compile', atMs, f.seconds);
  }
  private mark(id: PhaseId, atMs: number, seconds?: number, detail?: string): void {
    const had = this.phases.get(id);
    // the first end counts (ranks echo theirs later); a figure vLLM adds later is kept
    this.phases.set(id, {
      id,
      atMs: had?.atMs ?? atMs,
      ...defined({ seconds: had?.seconds ?? seconds, detail: detail ?? had?.detail }),
    });
  }

  /** The API answered, at `now`. */
  ready(now = Date.now()): void {
    const ms = now - this.t0;
    this.readyMs = ms;
    if (!this.phases.has('api')) this.mark('api', ms);
  }

  /** The first generated token came back, at `now`. */
  firstToken(now = Date.now()): void {
    if (this.firstTokenMs !== undefined) return;
    const ms = now - this.t0;
    this.firstTokenMs = ms;
    this.mark('first-token', ms);
  }

  readAheadDone(r: NonNullable<StartReport['readAhead']>): void {
    this.readAhead = r;
  }

  private caches?: StartReport['caches'];
  cachesWere(c: NonNullable<StartReport['caches']>): void {
    this.caches = c;
  }

  report(): StartReport {
    const order: PhaseId[] = [
      'process',
      'files',
      'weights',
      'compile',
      'kv-cache',
      'cuda-graphs',
      'engine',
      'api',
      'first-token',
    ];
    const phases = [...this.phases.values()].sort(
      (a, b) => a.atMs - b.atMs || order.indexOf(a.id) - order.indexOf(b.id),
    );
    return defined({
      phases,
      compile: this.compile,
      weights: this.weights,
      readyMs: this.readyMs,
      firstTokenMs: this.firstTokenMs,
      caches: this.caches,
      readAhead: this.readAhead,
    }) as StartReport;
  }
}

function defined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

const LABEL: Record<PhaseId, string> = {
  process: 'process up',
  files: 'files read',
  weights: 'weights loaded',
  compile: 'compile',
  'kv-cache': 'KV cache',
  'cuda-graphs': 'CUDA graphs',
  engine: 'engine ready',
  api: 'API up',
  'first-token': 'first token',
};

const s1 = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** One line for people: each phase at the time it ended, with vLLM's own figure where it gave one. */
export function startLine(r: StartReport): string {
  const took = (x: number) => `${x.toFixed(x < 10 ? 1 : 0)} s`;
  const parts = r.phases.map((p) => {
    let detail: string[] = [p.detail ?? '', p.seconds !== undefined ? `took ${took(p.seconds)}` : ''];
    if (p.id === 'compile') {
      const secs = r.compile?.seconds ?? r.compile?.clockSeconds;
      const cache = r.compile?.cache
        ? `cache ${r.compile.cache}`
        : `vLLM logged no cache hit or miss${r.caches ? `; sparkctl's cache folder was ${r.caches.warm ? 'warm' : 'empty'}` : ''}`;
      detail = [cache, secs !== undefined ? `took ${took(secs)}` : ''];
    }
    const d = detail.filter(Boolean).join(', ');
    return `${LABEL[p.id]} ${s1(p.atMs)}${d ? ` (${d})` : ''}`;
  });
  if (r.compile && !r.phases.some((p) => p.id === 'compile'))
    parts.push(`compile: ${r.compile.cache === 'off' ? 'off' : `cache ${r.compile.cache ?? 'unknown'}`}`);
  if (r.readAhead)
    parts.push(
      'skipped' in r.readAhead
        ? `read-ahead skipped: ${r.readAhead.skipped}`
        : `read-ahead ${gib(r.readAhead.bytes)} at ${r.readAhead.gbps.toFixed(2)} GB/s`,
    );
  return parts.join(' · ');
}

const gib = (b: number) => (b >= 2 ** 30 ? `${(b / 2 ** 30).toFixed(1)} GiB` : `${(b / 2 ** 20).toFixed(1)} MiB`);
