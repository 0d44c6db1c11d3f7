// The simulator's engine: a batch of running requests bounded by max num seqs and KV capacity,
// a FIFO of waiting ones, and a timing model derived from the model and the GPU.
import type { Registry, Gauge, Counter, Histogram } from 'prom-client';
import { existsSync } from 'node:fs';
import { pause } from '../util/pause.js';
import { pollUntil } from '../util/poll.js';

export interface Timing {
  /** prompt tokens per second of prefill for the whole TP group */
  prefillTps: number;
  /** decode step time with one running request, ms */
  decodeMs: number;
  /** extra decode time per additional running request, as a share of decodeMs */
  batchSlowdown: number;
  /** one-time cost of the first request in each new prompt-length bucket, ms */
  coldMs: number;
  /** multiplies every delay; 0 makes the simulator instant (benchmarks of the client side) */
  timeFactor: number;
  /** added to every token, ms (fault slow:MS) */
  slowMs: number;
}

export interface Capacity {
  maxNumSeqs: number;
  kvTokens: number;
  maxModelLen: number;
}

export class EngineDead extends Error {}
/** vLLM's EngineDeadError text (vllm/v1/engine/exceptions.py). */
const DEAD = 'EngineCore encountered an issue. See stack trace (above) for the root cause.';
/** The client went away: vLLM aborts the request (frees its slot and KV blocks, queued or running). */
class RequestAborted extends Error {
  constructor() {
    super('request aborted: the client disconnected');
  }
}

interface Waiter {
  need: number;
  resolve: () => void;
  reject: (e: Error) => void;
  enq: number;
}

export interface Metrics {
  registry: Registry;
  running: Gauge;
  waiting: Gauge;
  kvUsage: Gauge;
  promptTokens: Counter;
  generationTokens: Counter;
  preemptions: Counter;
  success: Counter;
  ttft: Histogram;
  itl: Histogram;
  e2e: Histogram;
  queue: Histogram;
  /** vllm:engine_sleep_state{sleep_state}: absent where the target vLLM has no such gauge (before 0.12) */
  sleepState?: Gauge;
}

/** A sleep that ends early, with RequestAborted, when the client disconnects. */
function abortable(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(new RequestAborted());
  if (!signal || ms <= 0) return pause(ms);
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(t);
      reject(new RequestAborted());
    };
    const t = setTimeout(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

export class Engine {
  running = 0;
  kvUsed = 0;
  waiting: Waiter[] = [];
  warmBuckets = new Set<number>();
  generations = 0;
  dead = false;

  /**
   * A request to a dead engine fails before it is answered (vLLM checks engine_client.errored first): even a stream.
   */
  assertAlive(): void {
    if (this.dead) throw new EngineDead(DEAD);
  }

  /**
   * Wedged (fault zombie-after:N): the engine core stops stepping while the API server stays up, as a
   * SIGSTOPped EngineCore or a hung collective does. Requests it held stay counted in /metrics, every
   * gauge freezes at its last value (vLLM's API server re-sets them only when the engine core
   * reports), no counter moves, and a request that arrives after is never scheduled or counted.
   */
  zombie = false;
  /** called when fault crash-mid-stream:N fires: the simulator exits as vLLM does when its engine core dies */
  onCrash?: () => void;
  /**
   * prompt tokens of prefills in progress whose KV blocks are not yet allocated (chunked prefill: they fill chunk by
   * chunk)
   */
  private kvPending = 0;
  /** aborted on a shutdown in abort mode: ends every request, queued or running */
  /** every request's own signal, so abortAll() ends them all */
  private readonly live = new Set<AbortController>();
  private stopped = false;
  /**
   * The scheduler is paused (vLLM's sleep: EngineCore.sleep -> pause_scheduler, vllm/v1/engine/core.py):
   * a request that arrives is accepted and waits in the queue (vllm:num_requests_waiting) until wake_up
   * resumes scheduling. It is never refused.
   */
  paused = false;

  constructor(
    readonly cap: Capacity,
    readonly timing: Timing,
    readonly metrics: Metrics | undefined,
    readonly faults: {
      deadAfter?: number;
      zombieAfter?: number;
      zombieIf?: string;
      longPrefillS?: number;
      crashMidStream?: number;
      saturateAt?: number;
    },
  ) {}

  private gauges() {
    if (!this.metrics || this.zombie) return;
    this.metrics.running.set(this.running);
    this.metrics.waiting.set(this.waiting.length);
    this.metrics.kvUsage.set(this.cap.kvTokens ? (this.kvUsed - this.kvPending) / this.cap.kvTokens : 0);
  }

  private fits(need: number) {
    const seqs = Math.min(this.cap.maxNumSeqs, this.faults.saturateAt ?? Number.POSITIVE_INFINITY);
    return !this.paused && this.running < seqs && this.kvUsed + need <= this.cap.kvTokens;
  }

  /**
   * A wedged engine never returns from here; only the client's going away ends the request (its slot stays counted).
   */
  private async frozen(signal?: AbortSignal): Promise<void> {
    if (!this.zombie) return;
    await new Promise<void>((_, reject) =>
      signal?.addEventListener('abort', () => reject(new RequestAborted()), { once: true }),
    );
  }

  /**
   * Fault long-prefill:S: the prefill takes S s of wall time in ten chunks, each allocating its KV blocks (the gauge
   * rises); prompt tokens are counted when it ends, as V1 counts them.
   */
  private async longPrefill(promptTokens: number, signal: AbortSignal): Promise<void> {
    const chunks = 10;
    const per = Math.ceil(promptTokens / chunks);
    let left = promptTokens;
    this.kvPending += left;
    this.gauges();
    try {
      for (let i = 0; i < chunks; i++) {
        await abortable((this.faults.longPrefillS! * 1000) / chunks, signal);
        await this.frozen(signal);
        const n = Math.min(per, left);
        left -= n;
        this.kvPending -= n;
        this.gauges();
      }
    } finally {
      this.kvPending -= left;
    }
  }

  /** Admits the request at once (undefined) or queues it (a promise of its admission). */
  private admit(need: number, signal?: AbortSignal): Promise<void> | undefined {
    if (signal?.aborted) return Promise.reject(new RequestAborted());
    if (this.waiting.length === 0 && this.fits(need)) {
      this.running++;
      this.kvUsed += need;
      this.gauges();
      return undefined;
    }
    return new Promise((resolve, reject) => {
      const w: Waiter = { need, resolve, reject, enq: performance.now() };
      // A queued request whose client left is dropped from the queue (vLLM aborts it too).
      const onAbort = () => {
        const i = this.waiting.indexOf(w);
        if (i < 0) return;
        this.waiting.splice(i, 1);
        this.gauges();
        reject(new RequestAborted());
      };
      w.resolve = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      w.reject = (e) => {
        signal?.removeEventListener('abort', onAbort);
        reject(e);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(w);
      this.gauges();
    });
  }

  private release(need: number) {
    this.running--;
    this.kvUsed -= need;
    this.admitWaiting();
  }

  private admitWaiting() {
    while (this.waiting.length && this.fits(this.waiting[0]!.need)) {
      const w = this.waiting.shift()!;
      this.running++;
      this.kvUsed += w.need;
      w.resolve();
    }
    this.gauges();
  }

  /** Bucket of a prompt length: powers of two, everything up to 128 tokens in one (compile shapes). */
  static bucket(promptTokens: number): number {
    return Math.max(7, Math.ceil(Math.log2(Math.max(1, promptTokens))));
  }

  decodeStepMs(): number {
    const t = this.timing;
    return (t.decodeMs * (1 + t.batchSlowdown * Math.max(0, this.running - 1)) + t.slowMs) * t.timeFactor;
  }

  /**
   * Runs one request. onToken (streaming) is called for each generated token index. A signal that
   * aborts (the client disconnected) ends it wherever it is, queued, in prefill or decoding, and
   * frees its slot and KV share at once, as vLLM aborts a request whose client went away.
   */
  async generate(
    promptTokens: number,
    maxTokens: number,
    onToken?: (i: number) => void | Promise<void>,
    signal?: AbortSignal,
    /** when the request reached the server (performance.now()); the time model counts from there */
    arrived?: number,
  ): Promise<{ completionTokens: number; ttftMs: number }> {
    this.assertAlive();
    // Each request gets its own signal, aborted by the client's or by abortAll(). Not
    // AbortSignal.any([signal, stopAll]): on Node 20 every composite stays registered on the
    // long-lived stopAll signal, and at the throughput limit the garbage collector took 12 % of
    // the CPU (3 % without).
    const own = new AbortController();
    if (this.stopped || signal?.aborted) own.abort();
    else signal?.addEventListener('abort', () => own.abort(), { once: true });
    this.live.add(own);
    try {
      return await this.run(promptTokens, maxTokens, onToken, own.signal, arrived);
    } finally {
      this.live.delete(own);
    }
  }

  private async run(
    promptTokens: number,
    maxTokens: number,
    onToken: ((i: number) => void | Promise<void>) | undefined,
    signal: AbortSignal,
    arrived: number | undefined,
  ): Promise<{ completionTokens: number; ttftMs: number }> {
    this.generations++;
    const n = this.generations;
    if (this.faults.deadAfter !== undefined && n > this.faults.deadAfter) {
      this.dead = true;
      throw new EngineDead(DEAD);
    }
    // A wedged engine schedules nothing more: the request is never counted (the gauges are frozen).
    await this.frozen(signal);
    const need = promptTokens + maxTokens;
    const t0 = performance.now();
    const wait = this.admit(need, signal);
    if (wait) await wait;
    // the request that wedges it was scheduled (counted as running), then the engine stopped stepping
    if (
      (this.faults.zombieAfter !== undefined && n > this.faults.zombieAfter) ||
      (this.faults.zombieIf && existsSync(this.faults.zombieIf))
    )
      this.zombie = true;
    const queued = performance.now() - t0;
    // Admitted at once: the model's clock started when the request reached the server (reading
    // and checking its body is not prefill time: up to a few ms on a busy simulator). Held in the
    // queue: from its admission.
    const base = !wait && arrived !== undefined ? arrived : performance.now();
    try {
      const t = this.timing;
      const bucket = Engine.bucket(promptTokens);
      let prefill = (promptTokens / t.prefillTps) * 1000 * t.timeFactor;
      if (!this.warmBuckets.has(bucket)) {
        this.warmBuckets.add(bucket);
        prefill += t.coldMs * t.timeFactor;
      }
      if (this.faults.longPrefillS) await this.longPrefill(promptTokens, signal);
      await abortable(base + prefill + t.slowMs * t.timeFactor - performance.now(), signal);
      await this.frozen(signal);
      // vLLM counts tokens as the engine processes them (per step), not when a request finishes.
      this.metrics?.promptTokens.inc(promptTokens);
      this.metrics?.generationTokens.inc(1);
      const ttftMs = performance.now() - t0;
      this.metrics?.ttft.observe(ttftMs / 1000);
      this.metrics?.queue.observe(queued / 1000);
      // Each token is due one step after the one before it was DUE, not after it was sent: a late
      // timer then delays one token, not every one after it, and the gaps keep the time model's
      // mean (measured at 200 streams/s: p99 ITL 2.3 ms over the model with relative sleeps).
      await this.decode(n, maxTokens, onToken, signal, t0 + ttftMs);
      this.metrics?.e2e.observe((performance.now() - t0) / 1000);
      return { completionTokens: maxTokens, ttftMs };
    } finally {
      // a wedged engine frees nothing: an abandoned request's slot stays counted, as vLLM's frozen gauges keep it
      if (!this.zombie) this.release(need);
    }
  }

  /**
   * The tokens after the first: streamed one step apart (each due one step after the one before it was
   * due), or, without a listener, one timer for the whole decode.
   */
  private async decode(
    n: number,
    maxTokens: number,
    onToken: ((i: number) => void | Promise<void>) | undefined,
    signal: AbortSignal,
    firstDue: number,
  ): Promise<void> {
    let due = firstDue;
    if (onToken) await onToken(0);
    if (onToken) {
      for (let i = 1; i < maxTokens; i++) {
        if (signal?.aborted) throw new RequestAborted();
        const step = this.decodeStepMs();
        due += step;
        await abortable(due - performance.now(), signal);
        await this.frozen(signal);
        if (
          this.faults.crashMidStream !== undefined &&
          n === this.faults.crashMidStream &&
          i === Math.min(3, maxTokens - 1)
        )
          this.onCrash?.();
        this.metrics?.itl.observe(step / 1000);
        this.metrics?.generationTokens.inc(1);
        await onToken(i);
      }
    } else if (maxTokens > 1) {
      // One timer for the whole decode (timers have a 1 ms floor); an abort counts what was made.
      const step = this.decodeStepMs();
      const d0 = performance.now();
      try {
        await abortable(step * (maxTokens - 1), signal);
        await this.frozen(signal);
        if (this.faults.crashMidStream !== undefined && n === this.faults.crashMidStream) this.onCrash?.();
      } catch (e) {
        const made = step > 0 ? Math.min(maxTokens - 1, Math.floor((performance.now() - d0) / step)) : 0;
        this.metrics?.generationTokens.inc(made);
        throw e;
      }
      this.metrics?.itl.observe(step / 1000);
      this.metrics?.generationTokens.inc(maxTokens - 1);
    }
  }

  /** Requests the engine holds, queued or running (what vLLM's EngineCore counts as unfinished). */
  get unfinished(): number {
    return this.running + this.waiting.length;
  }

  /** Shutdown with a timeout (vLLM's mode=drain): queued and running requests finish; true when all did in time. */
  async drain(timeoutMs: number): Promise<boolean> {
    return (
      await pollUntil(
        () => this.unfinished,
        (n) => n === 0,
        { deadlineMs: timeoutMs, intervalMs: 20 },
      )
    ).done;
  }

  /**
   * Pause scheduling (vLLM's pause_scheduler): mode abort ends every request it holds now, queued or
   * running (scheduler.finish_requests(None, FINISHED_ABORTED)); mode wait lets the running ones
   * finish first. Either way the requests that arrive from now on wait in the queue.
   */
  async pause(mode: 'abort' | 'wait'): Promise<number> {
    this.paused = true;
    const n = this.unfinished;
    if (mode === 'abort') for (const c of this.live) c.abort();
    else while (this.running > 0) await pause(10);
    this.gauges();
    return n;
  }

  /** Resume scheduling: the requests queued while paused are admitted in their order. */
  resume(): void {
    this.paused = false;
    this.admitWaiting();
    this.gauges();
  }

  /** Shutdown without one (vLLM's mode=abort): every request ends now; how many there were. */
  abortAll(): number {
    const n = this.unfinished;
    this.stopped = true;
    for (const c of this.live) c.abort();
    return n;
  }
}

export async function createMetrics(modelName: string, opts: { sleepGauge?: boolean } = {}): Promise<Metrics> {
  // prom-client is CommonJS: its exports sit on .default when bundled as ESM.
  const mod = (await import('prom-client')) as typeof import('prom-client') & {
    default?: typeof import('prom-client');
  };
  const prom = mod.default ?? mod;
  const registry = new prom.Registry();
  const labelNames = ['model_name', 'engine'] as const;
  const mk = <T>(T: new (cfg: any) => T, name: string, help: string, extra: object = {}) =>
    new T({ name, help, labelNames, registers: [registry], ...extra });
  const latencyBuckets = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
  ];
  const m = {
    registry,
    running: mk(prom.Gauge, 'vllm:num_requests_running', 'Number of requests in model execution batches.'),
    waiting: mk(prom.Gauge, 'vllm:num_requests_waiting', 'Number of requests waiting to be processed.'),
    kvUsage: mk(prom.Gauge, 'vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.'),
    promptTokens: mk(prom.Counter, 'vllm:prompt_tokens_total', 'Number of prefill tokens processed.'),
    generationTokens: mk(prom.Counter, 'vllm:generation_tokens_total', 'Number of generation tokens processed.'),
    preemptions: mk(prom.Counter, 'vllm:num_preemptions_total', 'Cumulative number of preemption from the engine.'),
    success: new prom.Counter({
      name: 'vllm:request_success_total',
      help: 'Count of successfully processed requests.',
      labelNames: ['model_name', 'engine', 'finished_reason'],
      registers: [registry],
    }),
    ttft: mk(prom.Histogram, 'vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', {
      buckets: latencyBuckets,
    }),
    itl: mk(prom.Histogram, 'vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', {
      buckets: latencyBuckets,
    }),
    e2e: mk(prom.Histogram, 'vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', {
      buckets: latencyBuckets,
    }),
    queue: mk(
      prom.Histogram,
      'vllm:request_queue_time_seconds',
      'Histogram of time spent in WAITING phase for request.',
      { buckets: latencyBuckets },
    ),
  };
  if (opts.sleepGauge) {
    // vllm/v1/metrics/loggers.py, PrometheusStatLogger.__init__: one series per sleep_state, set by
    // record_sleep_state (awake 1 at start; sleep(level) -> awake 0 and weights_offloaded (1) or discard_all (2))
    (m as Partial<Metrics>).sleepState = new prom.Gauge({
      name: 'vllm:engine_sleep_state',
      help: 'Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.',
      labelNames: ['model_name', 'engine', 'sleep_state'],
      registers: [registry],
    });
  }
  registry.setDefaultLabels({ model_name: modelName, engine: '0' });
  recordSleepState(m as Metrics, 0, 0);
  // Zero-initialised, as vLLM exposes them before any traffic.
  for (const g of [m.running, m.waiting, m.kvUsage]) g.set(0);
  for (const c of [m.promptTokens, m.generationTokens, m.preemptions]) c.inc(0);
  // vLLM's label values (a request aborted because its client left is counted under none of them).
  for (const r of ['stop', 'length', 'abort', 'error', 'repetition']) m.success.inc({ finished_reason: r }, 0);
  // without labels, as every observation is made: the registry's default labels name both (zero() with them
  // spelled out made a second series of the same labels, and Prometheus kept the empty one)
  for (const h of [m.ttft, m.itl, m.e2e, m.queue]) h.zero({});
  return m as Metrics;
}

/** vLLM's record_sleep_state(sleep, level) (vllm/v1/metrics/loggers.py): the three series of the gauge. */
export function recordSleepState(m: Pick<Metrics, 'sleepState'> | undefined, sleep: 0 | 1, level: number): void {
  const g = m?.sleepState;
  if (!g) return;
  g.set({ sleep_state: 'awake' }, sleep ? 0 : 1);
  g.set({ sleep_state: 'weights_offloaded' }, sleep && level === 1 ? 1 : 0);
  g.set({ sleep_state: 'discard_all' }, sleep && level === 2 ? 1 : 0);
}
