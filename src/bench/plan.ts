// bench's flags as a plan: every number checked (exit 2 naming the flag) before a request is sent.
import { UsageError } from '../errors.js';
import { parseSlo } from './sweep.js';

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
  /** --force: replace an existing --save-result / --html file */
  force?: boolean;
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
const BENCH_LIMITS = { tokens: 1_048_576, requests: 100_000, warmup: 10_000 } as const;

/**
 * A number flag as bench reads it: plain decimal (or inf where allowed), checked against its bounds; exit 2 naming the
 * flag.
 */
export function num(
  v: string | undefined,
  flag: string,
  o: { int?: boolean; min?: number; max?: number; inf?: boolean; gt0?: boolean } = {},
): number | undefined {
  if (v === undefined) return undefined;
  if (o.inf && /^inf(inity)?$/i.test(v)) return Infinity;
  // The same plain decimals as every other verb's numbers (src/verbs/args.ts): not 1e3, 0x10 or " 8 ".
  const n = /^\d{1,15}(\.\d{1,12})?$/.test(v) ? Number(v) : NaN;
  const bad =
    !Number.isFinite(n) || (o.int && !Number.isInteger(n)) || (o.min !== undefined && n < o.min) || (o.gt0 && !(n > 0));
  if (bad)
    throw new UsageError(
      `${flag}: "${v}" is not ${o.int ? 'a whole number' : 'a number'}${o.min !== undefined ? ` >= ${o.min}` : o.gt0 ? ' above 0' : ''}${o.inf ? ' (or inf)' : ''}`,
      [
        `plain decimal digits, e.g. ${flag} ${o.int ? Math.max(1, o.min ?? 1) : '0.5'}${o.inf ? ` or ${flag} inf` : ''}`,
      ],
    );
  if (o.max !== undefined && n > o.max)
    throw new UsageError(`${flag}: ${v} is above ${o.max}, the most a run takes`, [
      `e.g. ${flag} ${Math.min(o.max, 1024)}`,
    ]);
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
  if (rangeRatio >= 1)
    throw new UsageError(`--range-ratio: "${opts.rangeRatio}" must be below 1 (lengths vary by at most this share)`, [
      'e.g. --range-ratio 0.25',
    ]);
  const prefixLen = num(opts.prefixLen, '--prefix-len', { int: true, min: 0, max: BENCH_LIMITS.tokens })!;
  const scrapeMs = opts.scrapeEvery;
  const pcts = opts.percentiles.split(',').map((p) => {
    const n = Number(p.trim());
    if (!(n > 0 && n < 100) && n !== 100)
      throw new UsageError(`--percentiles: "${p}" is not a percentile in (0, 100]`, [
        'e.g. --percentiles 50,90,99,99.9',
      ]);
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
  if (prefixLen + inputLen > BENCH_LIMITS.tokens)
    throw new UsageError(
      `--prefix-len ${prefixLen} + --input-len ${inputLen} is above ${BENCH_LIMITS.tokens} tokens, the most a prompt takes`,
    );
  if (Object.keys(slo).length && !opts.sweep)
    throw new UsageError('--slo goes with --sweep (the highest load meeting it); for one run use --goodput');
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
