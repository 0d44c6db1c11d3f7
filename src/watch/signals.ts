// One /metrics answer -> the engine-reported numbers the watcher compares between ticks. Pure.
//
// Which signal shows progress, per vLLM version (the tables in vllm-source-facts, 0.9 to 0.28, all
// the V1 engine):
// - vllm:generation_tokens_total moves with every decode step of every running request.
// - vllm:prompt_tokens_total does NOT move during a prefill: V1 counts a request's whole prompt
//   when its prefill ends (vllm/v1/metrics/stats.py, IterationStats.update_from_output: "EngineCore
//   does not stream outputs for partially completed prefills"). Neither do vllm:iteration_tokens_total,
//   vllm:time_to_first_token_seconds or vllm:request_prefill_time_seconds: all are recorded from the
//   engine core's outputs, and a chunk of a prefill makes none.
// - What does move during a long (chunked) prefill is the scheduler's own report, sent by the engine
//   core with every step (SchedulerStats): vllm:kv_cache_usage_perc (vllm:gpu_cache_usage_perc before
//   0.9.2) rises as each chunk's KV blocks are allocated, and num_requests_running / _waiting change
//   as the scheduler admits. So "progress" here is ANY engine-reported value changing; a frozen
//   engine (SIGSTOP, a hung collective, a GPU fault) freezes every one of them at once, because the
//   API server only re-sets its gauges when the engine core reports.
// - A prefill that is one step (the prompt fits in max_num_batched_tokens) moves nothing until it
//   ends: the window must outlast the longest step this server has shown, which is what windowOf
//   in verdict.ts takes from the TTFT histogram and from the longest quiet gap that ended in progress.
import { maxOf, parseExposition, samplesOf, sumOf, type Exposition } from '../client/prom.js';

/**
 * What the engine core reported, as the API server exposes it. A family the server did not write is undefined, never 0.
 */
export interface EngineNumbers {
  running?: number;
  waiting?: number;
  /** 0..1 */
  kv?: number;
  generation?: number;
  prompt?: number;
  preemptions?: number;
  /** vllm:iteration_tokens_total_count: engine outputs recorded */
  iterations?: number;
  /** vllm:time_to_first_token_seconds_count: prefills ended */
  prefills?: number;
  /** vllm:request_success_total summed over finished_reason */
  finished?: number;
  /**
   * the TTFT histogram: the upper bound of the lowest bucket holding every observation (Infinity: above the top finite
   * bucket, which is `ttftAtLeastS`)
   */
  ttftMaxS?: number;
  ttftAtLeastS?: number;
  /** vllm:engine_sleep_state{sleep_state="awake"} (0.12 and later): 0 while asleep */
  awake?: number;
}

/** The keys compared between two readings to see whether the engine did anything. */
const PROGRESS_KEYS = [
  'generation',
  'prompt',
  'iterations',
  'prefills',
  'finished',
  'preemptions',
  'kv',
  'running',
  'waiting',
] as const;

const ok = (v: number | undefined, max = Number.MAX_SAFE_INTEGER) =>
  v !== undefined && Number.isFinite(v) && v >= 0 && v <= max ? v : undefined;

function ttftBound(e: Exposition): { maxS?: number; atLeastS?: number } {
  const buckets = samplesOf(e, 'vllm:time_to_first_token_seconds_bucket');
  if (!buckets) return {};
  const per = new Map<number, number>();
  for (const b of buckets) {
    const le = b.labels.le === '+Inf' ? Infinity : Number(b.labels.le);
    if (Number.isNaN(le) || ok(b.value) === undefined) continue;
    per.set(le, (per.get(le) ?? 0) + b.value);
  }
  const les = [...per.keys()].sort((a, b) => a - b);
  const total = per.get(Infinity) ?? 0;
  if (!total) return {};
  const lowest = les.find((le) => per.get(le)! >= total);
  const finite = les.filter((le) => Number.isFinite(le));
  return { maxS: lowest, atLeastS: lowest === Infinity ? finite[finite.length - 1] : undefined };
}

/**
 * The numbers of one /metrics text; a line that is not a sample is passed over (the answer is hostile: only readings a
 * server can have are kept).
 */
export function engineNumbers(text: string): EngineNumbers {
  return numbersOf(parseExposition(text));
}

function numbersOf(e: Exposition): EngineNumbers {
  const sum = (...n: string[]) => ok(sumOf(e, ...n));
  const awake = e.byName.get('vllm:engine_sleep_state')?.find((s) => s.labels.sleep_state === 'awake')?.value;
  const t = ttftBound(e);
  return {
    running: sum('vllm:num_requests_running'),
    waiting: sum('vllm:num_requests_waiting'),
    kv: ok(maxOf(e, 'vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'), 1),
    generation: sum('vllm:generation_tokens_total'),
    prompt: sum('vllm:prompt_tokens_total'),
    preemptions: sum('vllm:num_preemptions_total'),
    iterations: sum('vllm:iteration_tokens_total_count'),
    prefills: sum('vllm:time_to_first_token_seconds_count'),
    finished: sum('vllm:request_success_total'),
    ttftMaxS: t.maxS,
    ttftAtLeastS: t.atLeastS,
    awake: ok(awake),
  };
}

/** The families the verdict reads, and the largest value each can have (a share of the KV cache is at most 1). */
const READ_FAMILIES: Array<[string, number]> = [
  ['vllm:num_requests_running', Number.MAX_SAFE_INTEGER],
  ['vllm:num_requests_waiting', Number.MAX_SAFE_INTEGER],
  ['vllm:kv_cache_usage_perc', 1],
  ['vllm:gpu_cache_usage_perc', 1],
  ['vllm:generation_tokens_total', Number.MAX_SAFE_INTEGER],
  ['vllm:prompt_tokens_total', Number.MAX_SAFE_INTEGER],
  ['vllm:num_preemptions_total', Number.MAX_SAFE_INTEGER],
  ['vllm:iteration_tokens_total_count', Number.MAX_SAFE_INTEGER],
  ['vllm:time_to_first_token_seconds_count', Number.MAX_SAFE_INTEGER],
  ['vllm:request_success_total', Number.MAX_SAFE_INTEGER],
  ['vllm:engine_sleep_state', 1],
];

const said = (v: number) =>
  `"${Number.isNaN(v) ? 'NaN' : v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : String(v)}"`;

/**
 * One /metrics answer as the watcher takes it: the numbers, or why the answer is no reading. An
 * answer is no reading when a family the verdict reads holds a value no server has (NaN, an
 * infinity, a negative count, a KV share past 1: a lie or a broken exporter, and either way the
 * numbers cannot say "idle"), or when it holds no vLLM metric at all (a page of HTML, another
 * program on the port). A family that is absent is only unknown (an older vLLM, a fresh server).
 */
export function readMetrics(
  text: string,
): { numbers: EngineNumbers; problem?: undefined } | { numbers?: undefined; problem: string } {
  const e = parseExposition(text);
  const bad: string[] = [];
  for (const [name, max] of READ_FAMILIES) {
    const v = e.byName.get(name)?.find((x) => !(Number.isFinite(x.value) && x.value >= 0 && x.value <= max))?.value;
    if (v !== undefined) bad.push(`${name} ${said(v)}`);
  }
  if (bad.length)
    return {
      problem: `it says what no server has: ${bad.slice(0, 4).join(', ')}${bad.length > 4 ? ` and ${bad.length - 4} more` : ''}`,
    };
  if (
    ![...e.byName.keys()].some((n) => n.startsWith('vllm:')) &&
    !/^# (?:TYPE|HELP) vllm:/m.test(text.slice(0, 1024 * 1024))
  )
    return {
      problem: `no vLLM metric in it (${e.malformedLines ? `${e.malformedLines} line(s) that are no sample` : `${e.byName.size} other metric(s)`})`,
    };
  return { numbers: numbersOf(e) };
}

/** The progress keys whose value differs between two readings (a key one of them lacks is no change). */
export function moved(a: EngineNumbers, b: EngineNumbers): string[] {
  return PROGRESS_KEYS.filter((k) => a[k] !== undefined && b[k] !== undefined && a[k] !== b[k]);
}
