// The load generator: sends the dataset's requests on a schedule (open loop), under a concurrency
// cap (closed loop), or both, streams each answer and times it as `vllm bench serve` does.
import { socketPathOf } from '../util/socket-url.js';
import { Pool, type Dispatcher } from 'undici';
import { MAX_BODY_BYTES } from '../client/http.js';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import hdr from 'hdr-histogram-js';
import { schedule, gapSampler } from './arrivals.js';
import { Semaphore } from './semaphore.js';
import { SseSplitter, SseError } from './sse.js';
import { classifyFailure, type RequestOutput } from './metrics.js';
import { judgeClient, type ClientCheck } from './selfcheck.js';
import { Scraper, type ScrapeSample } from './scrape.js';
import { pause } from '../util/pause.js';

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
  /** where /metrics is read, when not at url (a run through the gateway reads the server's own) */
  metricsUrl?: string;
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
  /** warm-up requests, sent first at the run's own load shape and left out of every number */
  warmup: number;
  /** the warm-up also lasts at least this long (seconds), when it runs on a schedule or a cap */
  warmupS?: number;
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

interface Progress {
  done: number;
  failed: number;
  inFlight: number;
  elapsedS: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
}

interface RunResult {
  outputs: RequestOutput[];
  durationS: number;
  /** perf-clock second at which the measured run started (request times are relative to it) */
  startedAt: number;
  stoppedEarly: boolean;
  client: ClientCheck;
  scrape: ScrapeSample[];
}

const now = () => performance.now() / 1000;

/**
 * Waits until perf-clock second t: a timer for the bulk, then yields for the last millisecond.
 * The yield loop burns the core it runs on, so it is kept to 1 ms (measured at 1000 req/s on one
 * core: 0.6 ms of CPU a request with a 1 ms spin, 0.85 ms with 2 ms), leaving the core to V8's own
 * compiler and GC threads, whose preemption of the loop is what late sends are made of.
 */
async function until(t: number, stop?: AbortSignal) {
  for (;;) {
    if (stop?.aborted) return;
    const left = (t - now()) * 1000;
    // Due (or late): still let I/O run once, or a client behind schedule would send everything
    // in one synchronous burst and read no answer meanwhile (the lag would feed itself).
    if (left <= 0) return void (await new Promise((r) => setImmediate(r)));
    // libuv timers fire up to 1 ms after their time: aim the timer 1 ms early
    if (left > 1.5) await pause(left - 1);
    else await new Promise((r) => setImmediate(r));
  }
}

function requestBody(
  cfg: Pick<RunConfig, 'model' | 'endpoint' | 'stream' | 'ignoreEos' | 'continuousUsage'>,
  r: BenchRequest,
): Record<string, unknown> {
  const body: Record<string, unknown> = { model: cfg.model, stream: cfg.stream };
  if (cfg.endpoint === 'chat') {
    body.messages = r.messages ?? [{ role: 'user', content: r.prompt }];
    body.max_completion_tokens = r.outputLen;
  } else {
    body.prompt = r.prompt;
    body.max_tokens = r.outputLen;
    body.repetition_penalty = 1.0;
  }
  if (cfg.stream)
    body.stream_options = cfg.continuousUsage
      ? { include_usage: true, continuous_usage_stats: true }
      : { include_usage: true };
  if (cfg.ignoreEos) body.ignore_eos = true;
  return body;
}

/** The run's second Ctrl-C reaches every request in flight through one listener, not one each. */
const abortersBySignal = new WeakMap<AbortSignal, Set<() => void>>();
function onRunAbort(signal: AbortSignal | undefined, fn: () => void): () => void {
  if (!signal) return () => {};
  if (signal.aborted) {
    fn();
    return () => {};
  }
  const set = abortersBySignal.get(signal) ?? watchRunAbort(signal);
  set.add(fn);
  return () => set.delete(fn);
}

function watchRunAbort(signal: AbortSignal): Set<() => void> {
  const set = new Set<() => void>();
  abortersBySignal.set(signal, set);
  signal.addEventListener(
    'abort',
    () => {
      for (const f of [...set]) f();
    },
    { once: true },
  );
  return set;
}

/**
 * One request, timed from `startTime` (the moment it is handed to the connection pool). It runs on
 * undici's dispatch interface, not `request()`: no stream object, async iterator or AbortController
 * per request, and each chunk is timed in the callback that received it. Measured at 1000 req/s:
 * less garbage, so fewer young-generation collections, each of which holds every send behind it.
 */
export function sendOne(pool: Pool, cfg: RunConfig, r: BenchRequest, scheduledTime: number): Promise<RequestOutput> {
  const path = cfg.endpoint === 'chat' ? '/v1/chat/completions' : '/v1/completions';
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (cfg.apiKey) headers.authorization = `Bearer ${cfg.apiKey}`;
  const payload = JSON.stringify(requestBody(cfg, r));
  const limits = usageLimits(r, Buffer.byteLength(payload));
  return new Promise<RequestOutput>((resolve) => {
    const send = new Send(cfg, r, scheduledTime, limits, resolve);
    try {
      pool.dispatch({ path, method: 'POST', headers, body: payload }, send);
    } catch (e) {
      send.fail(e);
    }
  });
}

/** The times and usage read from a streamed answer, chunk by chunk. */
class StreamTimes {
  first = false;
  last: number;
  text = '';
  prevTokens = 0;
  perToken: number[] = [];
  multi = 0;
  sawContinuous = false;
  constructor(
    private out: RequestOutput,
    private limits: UsageLimits,
    private st: number,
  ) {
    this.last = st;
  }

  /** One SSE message's data, received at `ts`; throws SseError on a message no server should send. */
  read(data: string, ts: number) {
    if (data === '[DONE]') return;
    let j: any;
    try {
      j = JSON.parse(data);
    } catch {
      throw new SseError(`a stream message is not JSON: ${oneLine(data.slice(0, 80))}`);
    }
    if (typeof j !== 'object' || j === null) throw new SseError('a stream message is not an object');
    if (j.error)
      throw new SseError(`the server reported an error mid-stream: ${oneLine(JSON.stringify(j.error).slice(0, 200))}`);
    const choices = j.choices;
    if (Array.isArray(choices) && choices.length > 0) this.chunk(j, choices[0] ?? {}, ts);
    else if (j.usage) applyUsage(this.out, j.usage, this.limits);
  }

  private chunk(j: any, c: any, ts: number) {
    const out = this.out;
    if (!this.first) {
      this.first = true;
      out.ttft = ts - this.st;
    } else out.itl.push(ts - this.last);
    const gap = ts - this.last;
    this.last = ts;
    const piece = c.text ?? c.delta?.content;
    if (typeof piece === 'string') this.text += piece;
    const ct = j.usage?.completion_tokens;
    if (typeof ct !== 'number' || !Number.isFinite(ct)) return;
    // Checked before anything is kept per claimed token: a server claiming 3e8 would otherwise fill memory.
    checkUsage(j.usage, this.limits);
    this.sawContinuous = true;
    const k = ct - this.prevTokens;
    const before = this.prevTokens;
    this.prevTokens = ct;
    if (k > 1) this.multi++;
    // the gap before a chunk of k tokens is k gaps of gap / k; the first token's chunk is TTFT, not ITL
    if (before > 0 && k > 0) for (let i = 0; i < k; i++) this.perToken.push(gap / k);
    applyUsage(out, j.usage, this.limits);
  }
}

/** One request in flight: undici's handler, its deadline, the run's abort, and what it measured. */
class Send implements Dispatcher.DispatchHandler {
  private out: RequestOutput;
  private finished = false;
  private byDeadline = false;
  private byRun = false;
  private ctl: Dispatcher.DispatchController | undefined;
  private pendingAbort: Error | undefined;
  private timer: NodeJS.Timeout;
  private unlisten: () => void;
  private status = 0;
  private errBody = '';
  private raw: Buffer[] = [];
  private rawLen = 0;
  private sse = new SseSplitter();
  private times: StreamTimes;
  private st: number;

  constructor(
    private cfg: RunConfig,
    r: BenchRequest,
    scheduledTime: number,
    private limits: UsageLimits,
    private resolve: (o: RequestOutput) => void,
  ) {
    this.out = {
      success: false,
      error: '',
      promptLen: r.promptLen,
      outputTokens: 0,
      ttft: 0,
      itl: [],
      latency: 0,
      startTime: 0,
      scheduledTime,
    };
    this.timer = setTimeout(() => {
      this.byDeadline = true;
      this.abort(Object.assign(new Error('request deadline'), { name: 'TimeoutError' }));
    }, cfg.requestTimeoutMs);
    this.unlisten = onRunAbort(cfg.abort, () => {
      this.byRun = true;
      this.abort(Object.assign(new Error('aborted'), { name: 'AbortError' }));
    });
    this.st = now();
    this.out.startTime = this.st;
    this.times = new StreamTimes(this.out, limits, this.st);
  }

  private abort(why: Error) {
    if (this.ctl) this.ctl.abort(why);
    else this.pendingAbort = why;
  }

  private finish() {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.timer);
    this.unlisten();
    this.resolve(this.out);
  }

  fail(e: unknown) {
    if (this.finished) return;
    const out = this.out;
    const err = e as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
    const code = err?.code ?? err?.cause?.code;
    const aborted = this.byRun && !this.byDeadline;
    out.failure =
      e instanceof SseError || e instanceof SyntaxError
        ? 'bad_stream'
        : classifyFailure({ code, name: err?.name, aborted, deadline: this.byDeadline });
    out.error = this.byDeadline
      ? `no complete answer within the request deadline (${this.cfg.requestTimeoutMs} ms)`
      : aborted
        ? 'aborted (interrupted)'
        : oneLine(String(err?.message ?? e));
    out.latency = now() - this.st;
    this.finish();
  }

  onRequestStart(c: Dispatcher.DispatchController) {
    this.ctl = c;
    if (this.pendingAbort) c.abort(this.pendingAbort);
  }

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number) {
    this.status = statusCode;
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer) {
    if (this.finished) return;
    const ts = now();
    try {
      if (this.status !== 200) {
        if (this.errBody.length < 500) this.errBody += chunk.toString('utf8', 0, Math.min(chunk.length, 500));
      } else if (!this.cfg.stream) {
        this.rawLen += chunk.length;
        if (this.rawLen > MAX_BODY_BYTES) throw new SseError(`the answer grew past ${MAX_BODY_BYTES} bytes`);
        this.raw.push(chunk);
      } else for (const data of this.sse.push(chunk)) this.times.read(data, ts);
    } catch (e) {
      this.fail(e);
      c.abort(e as Error);
    }
  }

  onResponseEnd() {
    if (this.finished) return;
    try {
      if (this.status !== 200) {
        this.out.failure = classifyFailure({ status: this.status });
        this.out.error = `HTTP ${this.status}: ${oneLine(this.errBody.slice(0, 500))}`;
      } else if (!this.cfg.stream) this.endWhole();
      else this.endStream();
      this.finish();
    } catch (e) {
      this.fail(e);
    }
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error) {
    this.fail(err);
  }

  private endWhole() {
    const out = this.out;
    const t = now();
    const j = JSON.parse(Buffer.concat(this.raw, this.rawLen).toString('utf8'));
    const c = Array.isArray(j?.choices) ? j.choices[0] : undefined;
    if (!c) throw new SseError('the answer has no choices');
    out.ttft = out.latency = t - this.st;
    applyUsage(out, j.usage, this.limits);
    out.generatedText = typeof c.text === 'string' ? c.text : String(c.message?.content ?? '');
    out.success = true;
  }

  private endStream() {
    const out = this.out;
    const s = this.times;
    for (const data of this.sse.end()) s.read(data, now());
    out.generatedText = s.text;
    out.latency = s.last - this.st;
    if (s.sawContinuous) {
      out.itlPerToken = s.perToken;
      out.multiTokenChunks = s.multi;
    }
    if (!s.first) {
      out.failure = 'no_token';
      out.error = 'Never received a valid chunk to calculate TTFT.';
    } else out.success = true;
  }
}

/**
 * What a server can truthfully claim for one request: no more completion tokens than the request
 * allowed (max_tokens), no more prompt tokens than the bytes the client sent (a byte-level
 * tokenizer's worst case) plus room for a chat template. A claim past either is a bad answer.
 */
type UsageLimits = { completion: number; prompt: number };

function usageLimits(r: Pick<BenchRequest, 'outputLen'>, payloadBytes: number): UsageLimits {
  return { completion: r.outputLen, prompt: payloadBytes + 16_384 };
}

function checkUsage(u: any, lim: { completion: number; prompt: number }) {
  if (!u || typeof u !== 'object') return;
  const bad = (k: string, v: unknown, max: number) => typeof v === 'number' && !(Number.isFinite(v) && v <= max);
  if (bad('completion_tokens', u.completion_tokens, lim.completion))
    throw new SseError(
      `the server claims ${u.completion_tokens} completion tokens; the request allowed at most ${lim.completion}`,
    );
  if (bad('prompt_tokens', u.prompt_tokens, lim.prompt))
    throw new SseError(
      `the server claims ${u.prompt_tokens} prompt tokens for a request of ${lim.prompt - 16_384} bytes`,
    );
}

function applyUsage(out: RequestOutput, u: any, lim: { completion: number; prompt: number }) {
  if (!u || typeof u !== 'object') return;
  checkUsage(u, lim);
  if (Number.isInteger(u.completion_tokens) && u.completion_tokens >= 0) out.outputTokens = u.completion_tokens;
  if (Number.isInteger(u.prompt_tokens) && u.prompt_tokens >= 0) out.promptLen = u.prompt_tokens;
}

const oneLine = (s: string) => s.replace(/\s+/g, ' ').trim();

export function makePool(url: string, concurrency?: number): Pool {
  // a server on a Unix socket (a router's replica on vLLM's --uds: util/socket-url.ts): the same pool over the socket
  const socketPath = socketPathOf(url);
  return new Pool(socketPath ? 'http://localhost' : new URL(url).origin, {
    ...(socketPath ? { socketPath } : {}),
    // Sized to the load: one connection per allowed request in flight, unbounded in open loop.
    connections: concurrency ?? null,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    // Per-request deadlines are sendOne's own timer; undici's must not cut a long stream.
    headersTimeout: 0,
    bodyTimeout: 0,
    connect: { timeout: 10_000 },
  });
}

/** A warm-up prompt never shares a prefix with a measured one: a distinct tag goes first. */
function warmupRequest(r: BenchRequest, i: number): BenchRequest {
  const tag = `warm-up ${i}.`;
  if (r.messages) {
    const [first, ...rest] = r.messages;
    return { ...r, messages: first ? [{ ...first, content: `${tag} ${first.content}` }, ...rest] : r.messages };
  }
  return { ...r, prompt: `${tag} ${r.prompt}` };
}

interface DriveSpec {
  /** stop after this many sends */
  maxRequests?: number;
  /** stop sending after this many seconds */
  durationS?: number;
  /** warm-up: go on until this many were sent... */
  minRequests?: number;
  /** ...and this many seconds have passed */
  minS?: number;
  seed: number;
  /** the warm-up's requests: each prompt tagged as it is sent (no copy of the dataset) */
  warmup?: boolean;
  onProgress?: (p: Progress) => void;
}

interface Driven {
  outputs: RequestOutput[];
  t0: number;
  durationS: number;
  stoppedEarly: boolean;
  sendLagMs: number[];
  lastScheduled: number;
  lastStart: number;
  sent: number;
}

/**
 * The send loop, one for the warm-up and the measured run: the warm-up runs the very code the
 * measurement will (this loop, its callbacks, the histogram), so V8 has compiled all of it before
 * anything is measured. With a warm-up of other code, sends half a second into the measured run
 * were still 10-18 ms late while this loop was being optimised.
 */
async function drive(pool: Pool, cfg: RunConfig, spec: DriveSpec): Promise<Driven> {
  const sem = cfg.concurrency ? new Semaphore(cfg.concurrency) : undefined;
  const live = hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 3_600_000_000,
    numberOfSignificantValueDigits: 3,
  });
  const t0 = now();
  const tally: Tally = { done: 0, failed: 0, inFlight: 0, live, outputs: [], sendLagMs: [], lastStart: t0 };
  const tasks: Promise<void>[] = [];
  const offsetOf = offsets(cfg, spec);
  const report = () => spec.onProgress?.(progressOf(tally, t0));
  const ticker = spec.onProgress ? setInterval(report, cfg.progressIntervalMs ?? 250) : undefined;
  let stoppedEarly = false;
  let lastScheduled = t0;
  try {
    for (let i = 0; spec.maxRequests === undefined || i < spec.maxRequests; i++) {
      if (spec.minRequests !== undefined && i >= spec.minRequests && now() - t0 >= (spec.minS ?? 0)) break;
      const offset = offsetOf(i);
      const scheduled = t0 + offset;
      if (spec.durationS !== undefined && offset >= spec.durationS) break;
      await until(scheduled, cfg.stop);
      // When the request was meant to leave: on its schedule (a rate), or as soon as the cap let it
      // (rate inf with a cap: the moment a slot was free, whether it had to wait for one or not;
      // taking the run's start there made every later request look seconds late).
      let ready = scheduled;
      if (sem) {
        const w = sem.acquire();
        if (w) await w;
        if (!Number.isFinite(cfg.rate)) ready = now();
        // held back by the cap: from here on any delay is the client's
        else if (w) ready = Math.max(scheduled, now());
      }
      if (cfg.stop?.aborted) {
        stoppedEarly = true;
        sem?.release();
        break;
      }
      if (spec.durationS !== undefined && now() - t0 >= spec.durationS) {
        sem?.release();
        break;
      }
      lastScheduled = scheduled;
      tally.inFlight++;
      // Closed loop with everything due at once (rate inf): the intended send is when a slot frees,
      // as vLLM counts it; with a finite rate the schedule is the intent (coordinated omission).
      const p = sendOne(pool, cfg, requestOf(cfg, spec, i), Number.isFinite(cfg.rate) ? scheduled : ready).then((o) =>
        ended(tally, sem, i, ready, o),
      );
      tasks.push(p);
      // Let the request leave before scheduling the next one when they are due together.
      if (!Number.isFinite(cfg.rate) && !sem && i % 64 === 63) await new Promise((r) => setImmediate(r));
    }
    await Promise.all(tasks);
  } finally {
    if (ticker) clearInterval(ticker);
  }
  report();
  return {
    outputs: tally.outputs.filter(Boolean),
    t0,
    durationS: now() - t0,
    stoppedEarly,
    sendLagMs: tally.sendLagMs,
    lastScheduled,
    lastStart: tally.lastStart,
    sent: tasks.length,
  };
}

/** What the send loop has seen come back: counted as each request ends, read by the progress line. */
interface Tally {
  done: number;
  failed: number;
  inFlight: number;
  /** the successes' TTFT (us), for the live p50 and p99 */
  live: hdr.Histogram;
  /** by send index: a slot stays empty until its request ends */
  outputs: RequestOutput[];
  sendLagMs: number[];
  lastStart: number;
}

/**
 * The i-th request ended: its slot under the cap freed, its output in its send's place, how late it left against
 * `ready`, a success's TTFT.
 */
function ended(tally: Tally, sem: Semaphore | undefined, i: number, ready: number, o: RequestOutput) {
  tally.inFlight--;
  sem?.release();
  if (o.success) {
    tally.done++;
    tally.live.recordValue(Math.max(1, Math.round(o.ttft * 1e6)));
  } else tally.failed++;
  tally.outputs[i] = o;
  tally.sendLagMs.push((o.startTime - ready) * 1000);
  tally.lastStart = Math.max(tally.lastStart, o.startTime);
}

/** The progress line's numbers, as of now. */
function progressOf(tally: Tally, t0: number): Progress {
  const { done, failed, inFlight, live } = tally;
  return {
    done,
    failed,
    inFlight,
    elapsedS: now() - t0,
    ttftP50Ms: live.totalCount ? live.getValueAtPercentile(50) / 1000 : 0,
    ttftP99Ms: live.totalCount ? live.getValueAtPercentile(99) / 1000 : 0,
  };
}

/**
 * The i-th send's offset from the start (s), asked in order: a fixed schedule for a set number of
 * sends at a finite rate, else the gaps drawn one by one.
 */
function offsets(cfg: RunConfig, spec: DriveSpec): (i: number) => number {
  const fixed =
    spec.maxRequests !== undefined && spec.durationS === undefined && Number.isFinite(cfg.rate)
      ? schedule(spec.maxRequests, cfg.rate, cfg.burstiness, spec.seed)
      : undefined;
  const gap = gapSampler(cfg.rate, cfg.burstiness, spec.seed);
  let offset = 0;
  return (i) => {
    offset = fixed ? fixed[i]! : offset + gap();
    return offset;
  };
}

/** The i-th send's request: the dataset cycled, a warm-up's tagged. */
function requestOf(cfg: RunConfig, spec: DriveSpec, i: number): BenchRequest {
  const k = i % cfg.dataset.length;
  return spec.warmup ? warmupRequest(cfg.dataset[k]!, k) : cfg.dataset[k]!;
}

export async function runBench(cfg: RunConfig): Promise<RunResult> {
  if (!cfg.dataset.length) throw new Error('the dataset is empty');
  if (cfg.maxRequests === undefined && cfg.durationS === undefined)
    throw new Error('a run needs --requests or --duration');
  const pool = makePool(cfg.url, cfg.concurrency);
  const scraper = new Scraper(cfg.metricsUrl ?? cfg.url, cfg.apiKey, cfg.scrapeIntervalMs ?? 1000);
  const loop = monitorEventLoopDelay({ resolution: 5 });
  try {
    // The warm-up: `cfg.warmup` requests at the run's own load shape (its rate and burstiness on a
    // seed of its own, under its cap), continued for `cfg.warmupS` seconds when the run has a rate
    // or a cap (all at once with neither: vLLM's warm-up), awaited, and counted nowhere. It warms
    // the server (caches, batches) and the client: at 1000 req/s this client's compiled code takes
    // about half a second to reach its steady state (sends up to 150 ms late before that). Its
    // prompts carry a distinct tag in front, so they never fill the server's prefix cache for the
    // measured ones (vLLM's cache works from the first token on).
    const paced = Number.isFinite(cfg.rate) || cfg.concurrency !== undefined;
    const minS = paced ? (cfg.warmupS ?? 0) : 0;
    let warm = { requests: 0, seconds: 0 };
    if (cfg.warmup > 0 || minS > 0) {
      const w = await drive(pool, cfg, {
        minRequests: cfg.warmup,
        minS,
        maxRequests: paced ? undefined : cfg.warmup,
        seed: cfg.seed + 0x5eed,
        warmup: true,
      });
      warm = { requests: w.sent, seconds: w.durationS };
    }
    await scraper.start();
    loop.enable();
    let r: Driven;
    try {
      r = await drive(pool, cfg, {
        maxRequests: cfg.maxRequests,
        durationS: cfg.durationS,
        seed: cfg.seed,
        onProgress: cfg.onProgress,
      });
    } finally {
      loop.disable();
    }
    const scrape = await scraper.stop();
    // Offered rate as achieved: the target scaled by how late the last send was against its schedule.
    const openLoop = Number.isFinite(cfg.rate) && !cfg.concurrency;
    const client = judgeClient({
      targetRate: openLoop ? cfg.rate : undefined,
      achievedRate:
        openLoop && r.lastStart > r.t0 ? (cfg.rate * (r.lastScheduled - r.t0)) / (r.lastStart - r.t0) : undefined,
      sendLagMs: r.sendLagMs,
      loopDelayP99Ms: loop.count ? loop.percentile(99) / 1e6 : 0,
    });
    client.warmupRequests = warm.requests;
    client.warmupS = warm.seconds;
    return {
      outputs: r.outputs,
      durationS: r.durationS,
      startedAt: r.t0,
      stoppedEarly: r.stoppedEarly || Boolean(cfg.stop?.aborted),
      client,
      scrape,
    };
  } finally {
    scraper.cancel();
    await pool.close().catch(() => {});
  }
}
