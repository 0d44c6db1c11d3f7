// The load generator: sends the dataset's requests on a schedule (open loop), under a concurrency
// cap (closed loop), or both, streams each answer and times it as `vllm bench serve` does.
import { Pool } from 'undici';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import hdr from 'hdr-histogram-js';
import { schedule, gapSampler } from './arrivals.js';
import { Semaphore } from './semaphore.js';
import { SseSplitter, SseError } from './sse.js';
import { classifyFailure, type RequestOutput } from './metrics.js';
import { judgeClient, type ClientCheck } from './selfcheck.js';
import { Scraper, type ScrapeSample } from './scrape.js';
import { percentile } from './stats.js';

export interface BenchRequest {
  /** completions: the prompt text */
  prompt: string;
  /** chat: the conversation (defaults to one user message with the prompt) */
  messages?: Array<{ role: string; content: string }>;
  promptLen: number;
  outputLen: number;
}

export interface RunConfig {
  url: string;
  model: string;
  apiKey?: string;
  endpoint: 'completions' | 'chat';
  stream: boolean;
  dataset: BenchRequest[];
  /** stop after this many measured requests (the dataset is cycled) */
  maxRequests?: number;
  /** stop sending after this many seconds */
  durationS?: number;
  rate: number;
  burstiness: number;
  seed: number;
  concurrency?: number;
  warmup: number;
  requestTimeoutMs: number;
  ignoreEos: boolean;
  /** ask for usage on every chunk (per-token ITL, multi-token chunk flag) */
  continuousUsage: boolean;
  scrapeIntervalMs?: number;
  /** first Ctrl-C: send nothing new, let requests in flight finish */
  stop?: AbortSignal;
  /** second Ctrl-C: abort requests in flight too */
  abort?: AbortSignal;
  onProgress?: (p: Progress) => void;
  progressIntervalMs?: number;
}

export interface Progress {
  done: number;
  failed: number;
  inFlight: number;
  elapsedS: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
}

export interface RunResult {
  outputs: RequestOutput[];
  durationS: number;
  /** perf-clock second at which the measured run started (request times are relative to it) */
  startedAt: number;
  stoppedEarly: boolean;
  client: ClientCheck;
  scrape: ScrapeSample[];
}

const now = () => performance.now() / 1000;

/** Waits until perf-clock second t: a timer for the bulk, then a few yields for the last ms. */
async function until(t: number, stop?: AbortSignal) {
  for (;;) {
    if (stop?.aborted) return;
    const left = (t - now()) * 1000;
    // Due (or late): still let I/O run once, or a client behind schedule would send everything
    // in one synchronous burst and read no answer meanwhile (the lag would feed itself).
    if (left <= 0) return void (await new Promise((r) => setImmediate(r)));
    if (left > 2) await new Promise((r) => setTimeout(r, left - 1.5));
    else await new Promise((r) => setImmediate(r));
  }
}

export function requestBody(cfg: Pick<RunConfig, 'model' | 'endpoint' | 'stream' | 'ignoreEos' | 'continuousUsage'>, r: BenchRequest): Record<string, unknown> {
  const body: Record<string, unknown> = { model: cfg.model, stream: cfg.stream };
  if (cfg.endpoint === 'chat') {
    body.messages = r.messages ?? [{ role: 'user', content: r.prompt }];
    body.max_completion_tokens = r.outputLen;
  } else {
    body.prompt = r.prompt;
    body.max_tokens = r.outputLen;
    body.repetition_penalty = 1.0;
  }
  if (cfg.stream) body.stream_options = cfg.continuousUsage ? { include_usage: true, continuous_usage_stats: true } : { include_usage: true };
  if (cfg.ignoreEos) body.ignore_eos = true;
  return body;
}

/** One request, timed from `startTime` (the moment it is handed to the connection pool). */
export async function sendOne(pool: Pool, cfg: RunConfig, r: BenchRequest, scheduledTime: number): Promise<RequestOutput> {
  const path = cfg.endpoint === 'chat' ? '/v1/chat/completions' : '/v1/completions';
  const out: RequestOutput = { success: false, error: '', promptLen: r.promptLen, outputTokens: 0, ttft: 0, itl: [], latency: 0, startTime: 0, scheduledTime };
  // One controller per request, its timer and listener removed when it ends: AbortSignal.any over
  // the run's long-lived signal would keep every request's signal alive until the run ends.
  const ctl = new AbortController();
  let byDeadline = false;
  const timer = setTimeout(() => {
    byDeadline = true;
    ctl.abort();
  }, cfg.requestTimeoutMs);
  const onAbort = () => ctl.abort();
  cfg.abort?.addEventListener('abort', onAbort, { once: true });
  const signal = ctl.signal;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (cfg.apiKey) headers.authorization = `Bearer ${cfg.apiKey}`;
  const payload = JSON.stringify(requestBody(cfg, r));
  const st = now();
  out.startTime = st;
  let last = st;
  let first = false;
  let text = '';
  let prevTokens = 0;
  const perToken: number[] = [];
  let multi = 0;
  let sawContinuous = false;
  try {
    const res = await pool.request({ path, method: 'POST', headers, body: payload, signal });
    if (res.statusCode !== 200) {
      const body = (await res.body.text()).slice(0, 500);
      out.failure = classifyFailure({ status: res.statusCode });
      out.error = `HTTP ${res.statusCode}: ${oneLine(body)}`;
      return out;
    }
    if (!cfg.stream) {
      const raw = await res.body.text();
      const t = now();
      const j = JSON.parse(raw);
      const c = Array.isArray(j?.choices) ? j.choices[0] : undefined;
      if (!c) throw new SseError('the answer has no choices');
      out.ttft = out.latency = t - st;
      applyUsage(out, j.usage);
      out.generatedText = typeof c.text === 'string' ? c.text : String(c.message?.content ?? '');
      out.success = true;
      return out;
    }
    const sse = new SseSplitter();
    const handle = (data: string, ts: number) => {
      if (data === '[DONE]') return;
      let j: any;
      try {
        j = JSON.parse(data);
      } catch {
        throw new SseError(`a stream message is not JSON: ${oneLine(data.slice(0, 80))}`);
      }
      if (typeof j !== 'object' || j === null) throw new SseError('a stream message is not an object');
      if (j.error) throw new SseError(`the server reported an error mid-stream: ${oneLine(JSON.stringify(j.error).slice(0, 200))}`);
      const choices = j.choices;
      if (Array.isArray(choices) && choices.length > 0) {
        const c = choices[0] ?? {};
        if (!first) {
          first = true;
          out.ttft = ts - st;
        } else out.itl.push(ts - last);
        const gap = ts - last;
        last = ts;
        const piece = c.text ?? c.delta?.content;
        if (typeof piece === 'string') text += piece;
        const ct = j.usage?.completion_tokens;
        if (typeof ct === 'number' && Number.isFinite(ct)) {
          sawContinuous = true;
          const k = ct - prevTokens;
          const before = prevTokens;
          prevTokens = ct;
          if (k > 1) multi++;
          // the gap before a chunk of k tokens is k gaps of gap / k; the first token's chunk is TTFT, not ITL
          if (before > 0 && k > 0) for (let i = 0; i < k; i++) perToken.push(gap / k);
          applyUsage(out, j.usage);
        }
      } else if (j.usage) applyUsage(out, j.usage);
    };
    for await (const chunk of res.body) {
      const ts = now();
      for (const data of sse.push(chunk as Uint8Array)) handle(data, ts);
    }
    for (const data of sse.end()) handle(data, now());
    out.generatedText = text;
    out.latency = last - st;
    if (sawContinuous) {
      out.itlPerToken = perToken;
      out.multiTokenChunks = multi;
    }
    if (!first) {
      out.failure = 'no_token';
      out.error = 'Never received a valid chunk to calculate TTFT.';
      return out;
    }
    out.success = true;
    return out;
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
    const code = err.code ?? err.cause?.code;
    const aborted = Boolean(cfg.abort?.aborted) && !byDeadline;
    out.failure = e instanceof SseError ? 'bad_stream' : e instanceof SyntaxError ? 'bad_stream' : classifyFailure({ code, name: err.name, aborted, deadline: byDeadline });
    out.error = byDeadline ? `no complete answer within the request deadline (${cfg.requestTimeoutMs} ms)` : aborted ? 'aborted (interrupted)' : oneLine(err.message ?? String(e));
    out.latency = now() - st;
    return out;
  } finally {
    clearTimeout(timer);
    cfg.abort?.removeEventListener('abort', onAbort);
  }
}

function applyUsage(out: RequestOutput, u: any) {
  if (!u || typeof u !== 'object') return;
  if (Number.isInteger(u.completion_tokens) && u.completion_tokens >= 0) out.outputTokens = u.completion_tokens;
  if (Number.isInteger(u.prompt_tokens) && u.prompt_tokens >= 0) out.promptLen = u.prompt_tokens;
}

const oneLine = (s: string) => s.replace(/\s+/g, ' ').trim();

export function makePool(url: string, concurrency?: number): Pool {
  const u = new URL(url);
  return new Pool(u.origin, {
    // Sized to the load: one connection per allowed request in flight, unbounded in open loop.
    connections: concurrency ?? null,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    // Per-request deadlines are our own AbortSignal; undici's must not cut a long stream.
    headersTimeout: 0,
    bodyTimeout: 0,
    connect: { timeout: 10_000 },
  });
}

export async function runBench(cfg: RunConfig): Promise<RunResult> {
  if (!cfg.dataset.length) throw new Error('the dataset is empty');
  if (cfg.maxRequests === undefined && cfg.durationS === undefined) throw new Error('a run needs --requests or --duration');
  const pool = makePool(cfg.url, cfg.concurrency);
  const sem = cfg.concurrency ? new Semaphore(cfg.concurrency) : undefined;
  const live = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: 3 });
  const scraper = new Scraper(cfg.url, cfg.apiKey, cfg.scrapeIntervalMs ?? 1000);
  const loop = monitorEventLoopDelay({ resolution: 5 });
  try {
    // Warm-up: sent, awaited, and left out of every number.
    if (cfg.warmup > 0) {
      const wsem = new Semaphore(Math.min(cfg.warmup, cfg.concurrency ?? cfg.warmup));
      await Promise.all(
        Array.from({ length: cfg.warmup }, async (_, i) => {
          await wsem.acquire();
          try {
            if (!cfg.stop?.aborted) await sendOne(pool, cfg, cfg.dataset[i % cfg.dataset.length]!, now());
          } finally {
            wsem.release();
          }
        }),
      );
    }
    await scraper.start();
    loop.enable();
    const t0 = now();
    const outputs: RequestOutput[] = [];
    const tasks: Promise<void>[] = [];
    const sendLagMs: number[] = [];
    let done = 0;
    let failed = 0;
    let inFlight = 0;
    const fixed = cfg.maxRequests !== undefined && cfg.durationS === undefined && Number.isFinite(cfg.rate) ? schedule(cfg.maxRequests, cfg.rate, cfg.burstiness, cfg.seed) : undefined;
    const gap = gapSampler(cfg.rate, cfg.burstiness, cfg.seed);
    const report = () =>
      cfg.onProgress?.({
        done,
        failed,
        inFlight,
        elapsedS: now() - t0,
        ttftP50Ms: live.totalCount ? live.getValueAtPercentile(50) / 1000 : 0,
        ttftP99Ms: live.totalCount ? live.getValueAtPercentile(99) / 1000 : 0,
      });
    const ticker = cfg.onProgress ? setInterval(report, cfg.progressIntervalMs ?? 250) : undefined;
    let stoppedEarly = false;
    let offset = 0;
    let lastScheduled = t0;
    let lastStart = t0;
    try {
      for (let i = 0; cfg.maxRequests === undefined || i < cfg.maxRequests; i++) {
        offset = fixed ? fixed[i]! : offset + gap();
        const scheduled = t0 + offset;
        if (cfg.durationS !== undefined && offset >= cfg.durationS) break;
        await until(scheduled, cfg.stop);
        let ready = scheduled;
        if (sem) {
          const w = sem.acquire();
          if (w) {
            await w;
            // held back by the cap: from here on any delay is the client's
            ready = Math.max(scheduled, now());
          }
        }
        if (cfg.stop?.aborted) {
          stoppedEarly = true;
          sem?.release();
          break;
        }
        if (cfg.durationS !== undefined && now() - t0 >= cfg.durationS) {
          sem?.release();
          break;
        }
        lastScheduled = scheduled;
        const req = cfg.dataset[i % cfg.dataset.length]!;
        inFlight++;
        const idx = i;
        // Closed loop with everything due at once (rate inf): the intended send is when a slot frees,
        // as vLLM counts it; with a finite rate the schedule is the intent (coordinated omission).
        const p = sendOne(pool, cfg, req, Number.isFinite(cfg.rate) ? scheduled : ready).then((o) => {
          inFlight--;
          sem?.release();
          if (o.success) {
            done++;
            live.recordValue(Math.max(1, Math.round(o.ttft * 1e6)));
          } else failed++;
          outputs[idx] = o;
          sendLagMs.push((o.startTime - ready) * 1000);
          lastStart = Math.max(lastStart, o.startTime);
        });
        tasks.push(p);
        // Let the request leave before scheduling the next one when they are due together.
        if (!Number.isFinite(cfg.rate) && !sem && i % 64 === 63) await new Promise((r) => setImmediate(r));
      }
      await Promise.all(tasks);
    } finally {
      if (ticker) clearInterval(ticker);
      loop.disable();
    }
    const durationS = now() - t0;
    report();
    const scrape = await scraper.stop();
    // Offered rate as achieved: the target scaled by how late the last send was against its schedule.
    const openLoop = Number.isFinite(cfg.rate) && !cfg.concurrency;
    const client = judgeClient({
      targetRate: openLoop ? cfg.rate : undefined,
      achievedRate: openLoop && lastStart > t0 ? (cfg.rate * (lastScheduled - t0)) / (lastStart - t0) : undefined,
      sendLagMs,
      loopDelayP99Ms: loop.count ? loop.percentile(99) / 1e6 : 0,
    });
    return { outputs: outputs.filter(Boolean), durationS, startedAt: t0, stoppedEarly: stoppedEarly || Boolean(cfg.stop?.aborted), client, scrape };
  } finally {
    scraper.cancel();
    await pool.close().catch(() => {});
  }
}

export { percentile };
