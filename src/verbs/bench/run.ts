// `sparkctl bench NAME | --url URL`: load a server the way `vllm bench serve` does and report the
// same numbers, plus what those tools leave out (see src/bench/*). `bench compare A B`: verdicts.
import { checkOutputFile, writeOutputFile } from '../../util/fs.js';
import { Registry } from '../../engine/registry.js';
import { stateDir } from '../common.js';
import { targetFromUrl, type Target } from '../../health/target.js';
import { targetFromInstance } from '../../engine/target.js';
import { loadProfile } from '../../profiles/load.js';
import { http, closeHttp } from '../../client/http.js';
import { servedModels } from '../../client/answers.js';
import { envelope, table, c } from '../../output/format.js';
import { say, note, progress } from '../../output/log.js';
import { UsageError, ProblemsFound, UnreachableError, SparkError } from '../../errors.js';
import { runBench, type BenchRequest, type RunConfig } from '../../bench/runner.js';
import { randomDataset, fileDataset, serverTokenizer, DatasetError, checkDatasetFile } from '../../bench/dataset.js';
import { buildResult, summaryRows, latencyRows, type BenchResult, type RunDescription } from '../../bench/report.js';
import { parseSlo, levels, saturated, bestUnderSlo, type SweepPoint } from '../../bench/sweep.js';
import { scatter } from '../../bench/chart.js';
import { compareResults } from '../../bench/compare.js';
import { renderPage } from '../../output/html.js';
import { benchPage } from '../../bench/page.js';
import { readTextSync, READ_LIMITS, FileRefused } from '../../util/read.js';

export interface BenchOptions {
  url?: string;
  model?: string;
  profiles?: string;
  endpoint: string;
  stream: boolean;
  requests?: string;
  /** seconds (commander parsed the duration) */
  duration?: number;
  concurrency?: string;
  rate: string;
  burstiness: string;
  seed: string;
  warmup: string;
  /** seconds */
  warmupDuration?: number;
  inputLen: string;
  outputLen?: string;
  rangeRatio: string;
  prefixLen: string;
  dataset?: string;
  ignoreEos: boolean;
  continuousUsage: boolean;
  goodput: string[];
  percentiles: string;
  /** milliseconds */
  requestTimeout: number;
  /** ms (--scrape-every, or the old --scrape-interval in bare ms) */
  scrapeEvery: number;
  saveResult?: string;
  html?: string;
  json?: boolean;
  sweep?: boolean;
  sweepBy: string;
  sweepMax?: string;
  slo: string[];
}

/**
 * Sane ceilings for what a run builds before it sends anything: every prompt is made up front, so a
 * length or a count past these is memory the process runs out of (V8 aborts at about 2 GB of
 * string), or a warm-up that never ends. 2^20 tokens is past every served context length today.
 */
export const BENCH_LIMITS = { tokens: 1_048_576, requests: 100_000, warmup: 10_000 } as const;

function num(v: string | undefined, flag: string, o: { int?: boolean; min?: number; max?: number; inf?: boolean; gt0?: boolean } = {}): number | undefined {
  if (v === undefined) return undefined;
  if (o.inf && /^inf(inity)?$/i.test(v)) return Infinity;
  // The same plain decimals as every other verb's numbers (src/verbs/args.ts): not 1e3, 0x10 or " 8 ".
  const n = /^\d{1,15}(\.\d{1,12})?$/.test(v) ? Number(v) : NaN;
  const bad = !Number.isFinite(n) || (o.int && !Number.isInteger(n)) || (o.min !== undefined && n < o.min) || (o.gt0 && !(n > 0));
  if (bad)
    throw new UsageError(`${flag}: "${v}" is not ${o.int ? 'a whole number' : 'a number'}${o.min !== undefined ? ` >= ${o.min}` : o.gt0 ? ' above 0' : ''}${o.inf ? ' (or inf)' : ''}`, [
      `plain decimal digits, e.g. ${flag} ${o.int ? Math.max(1, o.min ?? 1) : '0.5'}${o.inf ? ` or ${flag} inf` : ''}`,
    ]);
  if (o.max !== undefined && n > o.max) throw new UsageError(`${flag}: ${v} is above ${o.max}, the most a run takes`, [`e.g. ${flag} ${Math.min(o.max, 1024)}`]);
  return n;
}

/** What a run is, from its flags: every value checked (exit 2) before any request is sent. */
export interface BenchPlan {
  endpoint: 'completions' | 'chat';
  requests?: number;
  durationS?: number;
  concurrency?: number;
  rate: number;
  burstiness: number;
  seed: number;
  warmup: number;
  warmupS: number;
  inputLen: number;
  outputLen?: number;
  rangeRatio: number;
  prefixLen: number;
  requestTimeoutMs: number;
  scrapeMs: number;
  pcts: number[];
  goodput: ReturnType<typeof parseSlo>;
  slo: ReturnType<typeof parseSlo>;
  /** --sweep: what it raises, up to where */
  sweep?: { by: 'concurrency' | 'rate'; max: number };
}

/** Flags to a plan: pure, no server, no file. */
export function benchPlan(opts: BenchOptions): BenchPlan {
  const endpoint = opts.endpoint === 'chat' ? 'chat' : opts.endpoint === 'completions' ? 'completions' : undefined;
  if (!endpoint) throw new UsageError(`--endpoint: "${opts.endpoint}" is not completions or chat`);
  let requests = num(opts.requests, '--requests', { int: true, min: 1, max: BENCH_LIMITS.requests });
  const durationS = opts.duration;
  if (durationS !== undefined && !(durationS > 0)) throw new UsageError('--duration must be above 0');
  if (requests === undefined && durationS === undefined && !opts.sweep) requests = 200;
  const concurrency = num(opts.concurrency, '--concurrency', { int: true, min: 1 });
  const rate = num(opts.rate, '--rate', { gt0: true, inf: true })!;
  const burstiness = num(opts.burstiness, '--burstiness', { gt0: true, inf: true })!;
  const seed = num(opts.seed, '--seed', { int: true, min: 0 })!;
  const warmup = num(opts.warmup, '--warmup', { int: true, min: 0, max: BENCH_LIMITS.warmup })!;
  // With a rate, the warm-up runs on the run's schedule for at least a second by default: the
  // client's own code needs that long at high rates to send on time (see warmUp in the runner).
  const warmupS = opts.warmupDuration ?? (Number.isFinite(rate) && warmup > 0 ? 1 : 0);
  const inputLen = num(opts.inputLen, '--input-len', { int: true, min: 1, max: BENCH_LIMITS.tokens })!;
  const outputLen = num(opts.outputLen, '--output-len', { int: true, min: 1, max: BENCH_LIMITS.tokens });
  const rangeRatio = num(opts.rangeRatio, '--range-ratio', { min: 0 })!;
  if (rangeRatio >= 1) throw new UsageError(`--range-ratio: "${opts.rangeRatio}" must be below 1 (lengths vary by at most this share)`, ['e.g. --range-ratio 0.25']);
  const prefixLen = num(opts.prefixLen, '--prefix-len', { int: true, min: 0, max: BENCH_LIMITS.tokens })!;
  const scrapeMs = opts.scrapeEvery;
  const pcts = opts.percentiles.split(',').map((p) => {
    const n = Number(p.trim());
    if (!(n > 0 && n < 100) && n !== 100) throw new UsageError(`--percentiles: "${p}" is not a percentile in (0, 100]`, ['e.g. --percentiles 50,90,99,99.9']);
    return n;
  });
  let goodput: BenchPlan['goodput'];
  let slo: BenchPlan['slo'];
  try {
    goodput = parseSlo(opts.goodput, '--goodput');
    slo = parseSlo(opts.slo, '--slo');
  } catch (e) {
    throw new UsageError((e as Error).message, ['e.g. --goodput ttft:300 tpot:50 (milliseconds)']);
  }
  const sweepBy = opts.sweepBy === 'rate' ? 'rate' : opts.sweepBy === 'concurrency' ? 'concurrency' : undefined;
  if (!sweepBy) throw new UsageError(`--sweep-by: "${opts.sweepBy}" is not concurrency or rate`);
  const sweepMax = num(opts.sweepMax, '--sweep-max', { gt0: true }) ?? 256;
  if (prefixLen + inputLen > BENCH_LIMITS.tokens) throw new UsageError(`--prefix-len ${prefixLen} + --input-len ${inputLen} is above ${BENCH_LIMITS.tokens} tokens, the most a prompt takes`);
  if (Object.keys(slo).length && !opts.sweep) throw new UsageError('--slo goes with --sweep (the highest load meeting it); for one run use --goodput');
  return {
    endpoint,
    requests,
    durationS,
    concurrency,
    rate,
    burstiness,
    seed,
    warmup,
    warmupS,
    inputLen,
    outputLen,
    rangeRatio,
    prefixLen,
    requestTimeoutMs: opts.requestTimeout,
    scrapeMs,
    pcts,
    goodput,
    slo,
    sweep: opts.sweep ? { by: sweepBy, max: sweepMax } : undefined,
  };
}

/** NAME: a running instance (registry) or a profile (its port, served name, key by env name); or --url. */
function resolveTarget(name: string | undefined, opts: BenchOptions): Target {
  if (opts.url) {
    try {
      new URL(opts.url);
    } catch {
      throw new UsageError(`--url: "${opts.url}" is not a URL; use http://HOST:PORT`);
    }
    return targetFromUrl(opts.url, opts.model);
  }
  if (!name) throw new UsageError('bench what? name a running instance or a profile, or --url URL', ['sparkctl status lists running servers']);
  const running = new Registry(stateDir()).find(name).filter((x) => x.alive);
  if (running.length) {
    // A profile behind a router is benched through it: the one endpoint its clients use.
    const t = targetFromInstance((running.find((x) => x.inst.role === 'router') ?? running[0])!.inst);
    if (opts.model) t.servedName = opts.model;
    return t;
  }
  const { profile } = loadProfile(name, { profilesDir: opts.profiles });
  const env = profile.server.apiKeyEnv;
  return {
    name: profile.name,
    url: `http://127.0.0.1:${profile.server.port}`,
    servedName: opts.model ?? profile.model.servedName ?? profile.model.id,
    apiKeyEnv: env,
    apiKey: env ? process.env[env] : undefined,
    maxModelLen: profile.engine.maxModelLen,
  };
}

export async function run(name: string | undefined, opts: BenchOptions) {
  const plan = benchPlan(opts);
  // Where the results go is checked now, not after a run of ten minutes.
  if (opts.saveResult !== undefined) checkOutputFile(opts.saveResult, '--save-result');
  if (opts.html !== undefined) checkOutputFile(opts.html, '--html');
  if (opts.dataset !== undefined) checkDatasetFile(opts.dataset);
  const target = resolveTarget(name, opts);
  const quiet = Boolean(opts.json);
  const prog = progress({ quiet });
  const { model, maxModelLen } = await serverModel(target, name, opts);
  if (!opts.dataset) checkFitsServer(plan, maxModelLen, model);
  const { dataset, exact, datasetName } = await prepareDataset(target, model, plan, opts, prog);

  // ---- Ctrl-C: first stops sending, second aborts what is in flight ----
  const stop = new AbortController();
  const abort = new AbortController();
  const onSigint = () => {
    if (!stop.signal.aborted) {
      stop.abort();
      note('\ninterrupted: no new requests; waiting for those in flight (Ctrl-C again to abort them)');
    } else abort.abort();
  };
  process.on('SIGINT', onSigint);

  const { endpoint, requests, rate, warmup, warmupS, pcts } = plan;
  const baseDesc = (): RunDescription => ({
    date: new Date().toISOString(),
    target: target.name,
    url: target.url,
    model_id: model,
    endpoint_type: endpoint === 'chat' ? 'openai-chat' : 'openai',
    dataset: datasetName,
    num_prompts: requests ?? 0,
    request_rate: rate,
    burstiness: plan.burstiness,
    max_concurrency: plan.concurrency ?? null,
    seed: plan.seed,
    warmups: warmup,
    goodput: plan.goodput,
    percentiles: pcts,
    input_len: opts.dataset ? undefined : plan.inputLen,
    output_len: plan.outputLen ?? (opts.dataset ? undefined : 128),
    range_ratio: opts.dataset ? undefined : plan.rangeRatio,
    prefix_len: opts.dataset ? undefined : plan.prefixLen,
    exact_lengths: exact,
  });
  const config = (over: Partial<RunConfig>): RunConfig => ({
    url: target.url,
    model,
    apiKey: target.apiKey,
    endpoint,
    stream: opts.stream,
    dataset,
    maxRequests: requests,
    durationS: plan.durationS,
    rate,
    burstiness: plan.burstiness,
    seed: plan.seed,
    concurrency: plan.concurrency,
    warmup,
    warmupS,
    requestTimeoutMs: plan.requestTimeoutMs,
    ignoreEos: opts.ignoreEos,
    continuousUsage: opts.continuousUsage && opts.stream,
    scrapeIntervalMs: plan.scrapeMs,
    stop: stop.signal,
    abort: abort.signal,
    ...over,
  });
  const live = (label: string) => (p: { done: number; failed: number; inFlight: number; elapsedS: number; ttftP50Ms: number; ttftP99Ms: number }) =>
    prog.update(
      `${label}${p.done}${requests ? `/${requests}` : ''} done, ${p.failed} failed, ${p.inFlight} in flight, TTFT p50 ${p.ttftP50Ms.toFixed(0)} ms p99 ${p.ttftP99Ms.toFixed(0)} ms [${p.elapsedS.toFixed(0)} s]`,
    );

  try {
    let result: BenchResult;
    let sweep: SweepOutcome | undefined;
    if (!plan.sweep) {
      prog.phase(`benchmarking ${model} at ${target.url}`);
      const r = await runBench(config({ onProgress: quiet ? undefined : live('') }));
      prog.done();
      result = buildResult(baseDesc(), r.outputs, r.durationS, r.startedAt, r.client, r.scrape, r.stoppedEarly);
    } else {
      const by = plan.sweep.by;
      const { last, ...sw } = await runSweep(
        plan,
        stop.signal,
        async (level, over, first) => {
          prog.phase(`sweep: ${by} ${level}`);
          const r = await runBench(config({ ...over, warmup: first ? warmup : 0, warmupS: first ? warmupS : 0, onProgress: quiet ? undefined : live(`${by} ${level}: `) }));
          prog.done();
          return buildResult(
            { ...baseDesc(), num_prompts: over.maxRequests ?? 0, max_concurrency: over.concurrency ?? null, request_rate: over.rate ?? rate },
            r.outputs,
            r.durationS,
            r.startedAt,
            r.client,
            r.scrape,
            r.stoppedEarly,
          );
        },
        quiet ? undefined : (line) => note(line),
      );
      sweep = sw;
      result = last;
      (result as any).sparkctl.sweep = { by, points: sweep.points, slo: plan.slo, best: sweep.best ?? null, stopped: sweep.stoppedAt ?? null };
    }

    if (opts.saveResult) writeOutputFile(opts.saveResult, JSON.stringify(result, null, 2) + '\n', '--save-result');
    if (opts.html) writeOutputFile(opts.html, renderPage(benchPage(`sparkctl bench: ${model}`, result, pcts, sweep)), '--html');

    const x = result as Record<string, any>;
    const s = result.sparkctl;
    if (opts.json) say(envelope('bench', { target: target.name, url: target.url, model, result: stripLists(x), sweep: sweep ?? null }));
    else for (const [stream, line] of renderText({ model, url: target.url, datasetName, plan, result, sweep, saveResult: opts.saveResult, html: opts.html })) (stream === 'out' ? say : note)(line);
    if (!s.valid) throw new ProblemsFound('', []);
    if (x.completed === 0) throw new ProblemsFound('every request failed');
    if (sweep && Object.keys(plan.slo).length && !sweep.best) throw new ProblemsFound('');
  } finally {
    process.off('SIGINT', onSigint);
    await closeHttp();
  }
}

/**
 * Random prompts the server could never take are refused before one is built (exit 2): prefix +
 * input (+ output) past the max model len /v1/models states for the model (vLLM lists it).
 */
export function checkFitsServer(plan: Pick<BenchPlan, 'inputLen' | 'prefixLen' | 'outputLen' | 'rangeRatio'>, maxModelLen: number | undefined, model: string): void {
  if (maxModelLen === undefined) return;
  const longest = plan.prefixLen + Math.floor(plan.inputLen * (1 + plan.rangeRatio));
  const total = longest + (plan.outputLen ?? 128);
  if (total > maxModelLen)
    throw new UsageError(
      `a prompt of up to ${longest} tokens (--prefix-len + --input-len, with --range-ratio) and ${plan.outputLen ?? 128} out is ${total} tokens, above ${model}'s max model len ${maxModelLen} (its /v1/models)`,
      [`lower --input-len (at most ${Math.max(1, Math.floor((maxModelLen - (plan.outputLen ?? 128) - plan.prefixLen) / (1 + plan.rangeRatio)))} here), --prefix-len or --output-len`],
    );
}

/** The server is reachable, takes the key, and serves the model the run will ask for. */
async function serverModel(target: Target, name: string | undefined, opts: BenchOptions): Promise<{ model: string; maxModelLen?: number }> {
  const models = await http(`${target.url}/v1/models`, { timeoutMs: 10_000, apiKey: target.apiKey });
  if (!models.ok)
    throw new UnreachableError(`${target.url}: ${models.message}`, [name && !opts.url ? `is it running? sparkctl status; sparkctl serve ${name}` : 'check the URL and that the server is up']);
  if (models.status === 401 || models.status === 403)
    throw new UsageError(`${target.url} refused the API key (HTTP ${models.status})`, [
      target.apiKeyEnv ? `set ${target.apiKeyEnv} to the server's key` : "set SPARKCTL_API_KEY (or VLLM_API_KEY) to the server's key",
    ]);
  // A list of the wrong shape names no model; --model still says which to ask for.
  const listed = models.status === 200 ? servedModels(models.json, models.body) : undefined;
  const ids = listed?.ok ? listed.models.map((d) => d.id) : [];
  const model = target.servedName ?? ids[0];
  if (!model) throw new ProblemsFound(`${target.url}${listed && !listed.ok ? `: ${listed.problem}` : '/v1/models lists no model'}; name one with --model`);
  if (ids.length && !ids.includes(model)) throw new UsageError(`the server at ${target.url} does not serve "${model}"`, [`it serves: ${ids.join(', ')}`]);
  // what the server states is hostile: only a whole number in range counts
  const stated = listed?.ok ? (listed.models.find((m) => m.id === model) as { max_model_len?: unknown } | undefined)?.max_model_len : undefined;
  const maxModelLen = typeof stated === 'number' && Number.isInteger(stated) && stated > 0 && stated <= 2 ** 31 ? stated : undefined;
  return { model, maxModelLen };
}

/** The prompts: a file (--dataset) or random ones of exact length (through the server's /tokenize). */
async function prepareDataset(
  target: Target,
  model: string,
  plan: BenchPlan,
  opts: BenchOptions,
  prog: ReturnType<typeof progress>,
): Promise<{ dataset: BenchRequest[]; exact: boolean; datasetName: string }> {
  const tok = serverTokenizer(target.url, model, target.apiKey);
  const needed = Math.max(plan.requests ?? 0, 1);
  prog.phase('preparing prompts' + (opts.dataset ? ` from ${opts.dataset}` : ` (${plan.inputLen} tokens in, exact through /tokenize)`));
  try {
    if (opts.dataset) {
      const d = await fileDataset(opts.dataset, { num: plan.requests, outputLen: plan.outputLen, chat: plan.endpoint === 'chat' }, tok);
      if (d.skipped) note(`${d.skipped} record(s) of ${opts.dataset} had no prompt and were skipped`);
      return { dataset: d.requests, exact: true, datasetName: `file:${opts.dataset}` };
    }
    const count = plan.sweep ? Math.min(1024, Math.max(needed, 64)) : plan.durationS !== undefined ? Math.min(2048, Math.max(needed, 256)) : needed;
    const d = await randomDataset(
      { num: count, inputLen: plan.inputLen, outputLen: plan.outputLen ?? 128, rangeRatio: plan.rangeRatio, prefixLen: plan.prefixLen, seed: plan.seed, chat: plan.endpoint === 'chat' },
      tok,
    );
    if (!d.exact) note(c.yellow("the server has no usable /tokenize: prompt lengths are approximate (the server's usage counts are still used)"));
    return { dataset: d.requests, exact: d.exact, datasetName: plan.prefixLen ? 'random+prefix' : 'random' };
  } catch (e) {
    if (e instanceof DatasetError) throw new UsageError(e.message);
    throw e;
  }
}

export interface SweepOutcome {
  by: string;
  points: SweepPoint[];
  best?: SweepPoint;
  stoppedAt?: string;
}

/** One sweep level's point, from its result (the highest percentile asked for when p99 was not). */
export function sweepPoint(level: number, res: BenchResult, pcts: number[]): SweepPoint {
  const x = res as Record<string, any>;
  const top = pcts[pcts.length - 1];
  return {
    level,
    throughput: x.request_throughput,
    ttftP99Ms: x.p99_ttft_ms ?? x[`p${top}_ttft_ms`],
    tpotP99Ms: x.p99_tpot_ms ?? x[`p${top}_tpot_ms`],
    e2elP99Ms: x.p99_e2el_ms ?? x[`p${top}_e2el_ms`],
    meanTtftMs: x.mean_ttft_ms,
    maxWaiting: res.sparkctl.server.maxWaiting,
    failed: x.failed,
    completed: x.completed,
    valid: res.sparkctl.valid,
  };
}

/**
 * The sweep loop: each level doubles the last until --sweep-max, saturation (throughput stopped
 * growing while latency or the queue grew), a level where every request failed, or Ctrl-C.
 * `runLevel` runs one level (the first one with the warm-up); no server is needed to test the loop.
 */
export async function runSweep(
  plan: Pick<BenchPlan, 'requests' | 'durationS' | 'rate' | 'slo' | 'pcts'> & { sweep?: BenchPlan['sweep'] },
  stop: AbortSignal,
  runLevel: (level: number, over: Partial<RunConfig>, first: boolean) => Promise<BenchResult>,
  say?: (line: string) => void,
): Promise<SweepOutcome & { last: BenchResult }> {
  const { by, max } = plan.sweep ?? { by: 'concurrency', max: 256 };
  const points: SweepPoint[] = [];
  let last: BenchResult | undefined;
  let stoppedAt: string | undefined;
  for (const level of levels(by === 'rate' ? Math.min(1, max) : 1, max)) {
    if (stop.aborted) break;
    const per = plan.requests ?? (plan.durationS === undefined ? Math.max(16, by === 'concurrency' ? level * 4 : Math.ceil(level * 4)) : undefined);
    const over: Partial<RunConfig> = by === 'concurrency' ? { concurrency: level, rate: Infinity, maxRequests: per } : { rate: level, concurrency: undefined, maxRequests: per };
    const res = await runLevel(level, over, points.length === 0);
    const p = sweepPoint(level, res, plan.pcts);
    points.push(p);
    last = res;
    say?.(
      `  ${by} ${level}: ${p.throughput.toFixed(2)} req/s, p99 TTFT ${p.ttftP99Ms.toFixed(1)} ms, p99 E2EL ${p.e2elP99Ms.toFixed(1)} ms${p.maxWaiting ? `, ${p.maxWaiting} waiting` : ''}${p.valid ? '' : c.red(' INVALID (client-bound)')}`,
    );
    if (points.length >= 2 && saturated(points[points.length - 2]!, p)) {
      stoppedAt = `saturated at ${by} ${level}: throughput stopped growing while latency or the queue grew`;
      break;
    }
    if (p.completed === 0) {
      stoppedAt = `every request failed at ${by} ${level}`;
      break;
    }
  }
  if (!last) throw new ProblemsFound('the sweep ran no level');
  return { by, points, best: Object.keys(plan.slo).length ? bestUnderSlo(points, plan.slo) : undefined, stoppedAt, last };
}

/** The text report, line by line: ['out', line] to stdout, ['err', line] to stderr. */
export function renderText(r: {
  model: string;
  url: string;
  datasetName: string;
  plan: Pick<BenchPlan, 'inputLen' | 'prefixLen' | 'outputLen' | 'concurrency' | 'rate' | 'pcts' | 'slo' | 'sweep'>;
  result: BenchResult;
  sweep?: SweepOutcome;
  saveResult?: string;
  html?: string;
}): Array<['out' | 'err', string]> {
  const { plan, sweep } = r;
  const { pcts, slo, rate, concurrency, prefixLen } = plan;
  const lines: Array<['out' | 'err', string]> = [];
  const out = (l: string) => lines.push(['out', l]);
  const err = (l: string) => lines.push(['err', l]);
  const x = r.result as Record<string, any>;
  const s = r.result.sparkctl;
  const shape = `${r.datasetName === 'random' || r.datasetName === 'random+prefix' ? `random ${plan.inputLen}${prefixLen ? `+${prefixLen} prefix` : ''} in / ${plan.outputLen ?? 128} out` : r.datasetName}, ${concurrency ? `concurrency ${concurrency}, ` : ''}rate ${Number.isFinite(rate) ? `${rate} req/s` : 'inf'}, ${x.completed + x.failed} requests in ${Number(x.duration).toFixed(1)} s`;
  out(`${c.bold(r.model)} at ${r.url}  (${plan.sweep ? 'last sweep level: ' : ''}${shape})`);
  out(table(summaryRows(x, pcts), ['metric', 'value']));
  out('');
  const lat = latencyRows(x, pcts);
  out(table(lat.rows, lat.header));
  out('');
  out(
    `completed ${x.completed}, failed ${x.failed}${
      x.failed
        ? ` (${Object.entries(s.failures)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')})`
        : ''
    }; peak concurrency ${x.max_concurrent_requests}, peak ${x.max_output_tokens_per_s} output tok/s`,
  );
  if (s.first_errors.length) for (const e of s.first_errors) err(`  ${c.red('error')}: ${e}`);
  if (s.multi_token_chunks) out(c.yellow(`${s.multi_token_chunks} stream chunk(s) carried more than one token: per-chunk ITL understates per-token ITL (see "ITL per token")`));
  const sv = s.server;
  if (sv.samples >= 2) {
    out(
      `server /metrics: max running ${sv.maxRunning ?? '-'}, max waiting ${sv.maxWaiting ?? '-'}, max KV cache ${sv.maxKvUsage === undefined ? '-' : `${(sv.maxKvUsage * 100).toFixed(1)} %`}, preemptions ${sv.preemptions ?? '-'}${sv.prefixHitRate !== undefined ? `, prefix-cache hits ${(sv.prefixHitRate * 100).toFixed(1)} %` : ''}; tokens ${sv.tokensAgree === undefined ? 'not cross-checked' : sv.tokensAgree ? c.green('agree with the client') : c.yellow('DISAGREE with the client')}`,
    );
  }
  for (const n of sv.notes) out(c.dim(`  ${n}`));
  out(
    c.dim(
      `client: send lag p99 ${s.client.sendLagP99Ms.toFixed(2)} ms, event-loop delay p99 ${s.client.loopDelayP99Ms.toFixed(1)} ms${s.client.achievedRate !== undefined ? `, offered ${s.client.achievedRate.toFixed(1)} of ${s.client.targetRate} req/s` : ''}`,
    ),
  );
  if (!s.valid) out(c.red(`INVALID RUN: the client was the bottleneck, these are not the server's numbers:\n  - ${s.invalid_reasons.join('\n  - ')}`));
  if (s.stopped_early) out(c.yellow('interrupted: partial results'));
  if (sweep) {
    out('');
    out(
      scatter(
        sweep.points.map((p) => ({ x: p.throughput, y: p.ttftP99Ms, label: `${sweep.by} ${p.level}` })),
        { xLabel: 'req/s', yLabel: 'p99 TTFT (ms)' },
      ),
    );
    if (sweep.stoppedAt) out(sweep.stoppedAt);
    if (Object.keys(slo).length)
      out(
        sweep.best
          ? c.green(
              `highest ${sweep.by} meeting the SLO (${Object.entries(slo)
                .map(([k, v]) => `p99 ${k} <= ${v} ms`)
                .join(', ')}): ${sweep.best.level} (${sweep.best.throughput.toFixed(2)} req/s)`,
            )
          : c.red('no level met the SLO'),
      );
  }
  if (r.saveResult) out(c.dim(`result: ${r.saveResult}`));
  if (r.html) out(c.dim(`page: ${r.html}`));
  return lines;
}

/** The JSON envelope carries every summary number; the per-request lists stay in --save-result. */
function stripLists(r: Record<string, any>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(r)) if (!['input_lens', 'output_lens', 'ttfts', 'itls', 'latencies', 'start_times', 'generated_texts', 'errors'].includes(k)) out[k] = v;
  return out;
}

export async function compare(a: string, b: string, own: { threshold: string; json?: boolean }, cmd?: { optsWithGlobals?: () => Record<string, unknown> }) {
  // `bench compare A B --json`: --json is also bench's own option, so commander may hand it to the parent
  const opts = { ...own, json: Boolean(own.json || cmd?.optsWithGlobals?.().json) };
  const threshold = num(opts.threshold, '--threshold', { min: 0 })!;
  const read = (f: string) => {
    let text: string;
    try {
      text = readTextSync(f, { maxBytes: READ_LIMITS.history });
    } catch (e) {
      if (e instanceof FileRefused) throw e;
      throw new UsageError(`${f}: cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    try {
      const j = JSON.parse(text);
      if (typeof j !== 'object' || j === null || Array.isArray(j)) throw new Error('not an object');
      return j as Record<string, unknown>;
    } catch (e) {
      throw new UsageError(`${f}: not a bench result (${(e as Error).message}); write one with sparkctl bench --save-result FILE`);
    }
  };
  const { rows, warnings } = compareResults(read(a), read(b), threshold);
  if (!rows.length) throw new UsageError(`${a} and ${b} share no metric`, warnings);
  if (opts.json) say(envelope('bench-compare', { a, b, thresholdPct: threshold, rows, warnings }));
  else {
    const fmt = (v: number) => (Math.abs(v) >= 100 ? v.toFixed(1) : v.toFixed(2));
    const mark = (v: string) => (v === 'better' ? c.green(v) : v === 'worse' ? c.red(v) : v);
    say(
      table(
        rows.map((r) => [r.metric, fmt(r.a), fmt(r.b), `${r.changePct >= 0 ? '+' : ''}${Number.isFinite(r.changePct) ? r.changePct.toFixed(1) : 'inf'} %`, mark(r.verdict)]),
        ['metric', 'A', 'B', 'change', 'verdict'],
      ),
    );
    for (const w of warnings) note(c.yellow(`note: ${w}`));
    const worse = rows.filter((r) => r.verdict === 'worse').length;
    say(`${worse ? c.red(`${worse} metric(s) worse`) : c.green('no metric worse')} (changes within ${threshold} % count as the same)`);
  }
  if (rows.some((r) => r.verdict === 'worse')) throw new ProblemsFound('');
}

export { SparkError };
