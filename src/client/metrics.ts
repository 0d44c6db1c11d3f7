// /metrics -> the vLLM numbers sparkctl reads: the few the probe judges (parseVllmMetrics, strict:
// a line that is not Prometheus text makes the answer unreadable), and the counters, gauges and
// histograms probe history keeps (readVllm, lenient: what can be read is kept). Both read the text
// through client/prom.ts; a metric the server did not write is undefined in both, never 0.
import { maxOf, parseExposition, samplesOf, sumOf, type Exposition } from './prom.js';
import type { Histogram, VllmReading } from '../history/vllm.js';

interface VllmMetrics {
  kvCacheUsage?: number;
  running?: number;
  waiting?: number;
  preemptions?: number;
  families: number;
  /** readings a server cannot really have (NaN, Inf, negative, a usage above 1): left out, and named here */
  invalid: string[];
}

/** The probe's numbers; throws on a line that is not a comment or a sample. */
export function parseVllmMetrics(text: string): VllmMetrics {
  const e = parseExposition(text);
  const bad = e.malformed[0];
  if (bad) throw new Error(`line ${bad.line} is not a metric sample: ${JSON.stringify(bad.text)}`);
  // Every byte of /metrics is the server's word: a reading outside what the quantity can be is no
  // reading (and is said), so it cannot pass a threshold check or reach the textfile as "+Inf".
  const invalid: string[] = [];
  const bounded = (what: string, v: number | undefined, max = Number.MAX_SAFE_INTEGER) => {
    if (v === undefined) return undefined;
    if (Number.isFinite(v) && v >= 0 && v <= max) return v;
    invalid.push(`${what} ${v}`);
    return undefined;
  };
  return {
    // vllm:gpu_cache_usage_perc was renamed vllm:kv_cache_usage_perc in 0.9.2 (both exposed through
    // 0.11) and removed in 0.12: read the new name, fall back to the old one for older servers
    kvCacheUsage: bounded('KV cache usage', maxOf(e, 'vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'), 1),
    running: bounded('running', sumOf(e, 'vllm:num_requests_running')),
    waiting: bounded('waiting', sumOf(e, 'vllm:num_requests_waiting')),
    // a counter: registered as vllm:num_preemptions, exposed (and named in # TYPE) as ..._total by every version
    preemptions: bounded('preemptions', sumOf(e, 'vllm:num_preemptions_total')),
    families: e.byName.size,
    invalid,
  };
}

/** The families read above (checked against vLLM's per-version metric tables in a test). */
export const READ_METRICS = [
  'vllm:kv_cache_usage_perc',
  'vllm:gpu_cache_usage_perc',
  'vllm:num_requests_running',
  'vllm:num_requests_waiting',
  'vllm:num_preemptions_total',
];

// History keeps a reading only when it is one a server can have: finite and not negative.
const finite = (v: number | undefined) => (v !== undefined && Number.isFinite(v) && v >= 0 ? v : undefined);

/**
 * A histogram summed over its label sets; none without buckets, with a bucket count that is no count, or without the
 * _sum its mean needs.
 */
function histogramOf(e: Exposition, base: string): Histogram | undefined {
  const buckets = samplesOf(e, `${base}_bucket`);
  if (!buckets) return undefined;
  const per = new Map<number, number>();
  for (const b of buckets) {
    const le = b.labels.le === '+Inf' ? Infinity : Number(b.labels.le);
    if (b.labels.le === undefined || Number.isNaN(le)) continue;
    // a count no server can have (NaN, Inf, negative): no histogram, as for a missing _sum (history's reader refuses
    // the whole sample for one)
    if (finite(b.value) === undefined) return undefined;
    per.set(le, (per.get(le) ?? 0) + b.value);
  }
  const sum = finite(sumOf(e, `${base}_sum`));
  // the +Inf bucket is the count by definition, where _count is missing
  const count = finite(sumOf(e, `${base}_count`)) ?? finite(per.get(Infinity));
  if (sum === undefined || count === undefined) return undefined;
  const le = [...per.keys()].sort((a, b) => a - b);
  return { le, n: le.map((x) => per.get(x)!), sum, count };
}

/** What probe history keeps of one /metrics answer; a line that is not a sample is passed over. */
export function readVllm(text: string): VllmReading {
  const e = parseExposition(text);
  const sum = (...names: string[]) => finite(sumOf(e, ...names));
  const max = (...names: string[]) => finite(maxOf(e, ...names));
  let finished: Record<string, number> | undefined;
  for (const l of e.byName.get('vllm:request_success_total') ?? []) {
    if (!Number.isFinite(l.value) || l.value < 0) continue;
    const r = (l.labels.finished_reason ?? 'unknown').replace(/[^a-z_]/gi, '').slice(0, 20) || 'unknown';
    // a label is the server's text: kept on an object with no prototype ("constructor" is a reason like any other)
    finished ??= Object.create(null) as Record<string, number>;
    finished[r] = (finished[r] ?? 0) + l.value;
  }
  return {
    counters: {
      prompt: sum('vllm:prompt_tokens_total'),
      generation: sum('vllm:generation_tokens_total'),
      finished,
      preemptions: sum('vllm:num_preemptions_total'),
      prefixHits: sum('vllm:prefix_cache_hits_total', 'vllm:gpu_prefix_cache_hits_total'),
      prefixQueries: sum('vllm:prefix_cache_queries_total', 'vllm:gpu_prefix_cache_queries_total'),
      prefillS: sum('vllm:request_prefill_time_seconds_sum'),
      decodeS: sum('vllm:request_decode_time_seconds_sum'),
    },
    gauges: {
      running: sum('vllm:num_requests_running'),
      waiting: sum('vllm:num_requests_waiting'),
      kv: max('vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'),
    },
    ttft: histogramOf(e, 'vllm:time_to_first_token_seconds'),
    itl: histogramOf(e, 'vllm:inter_token_latency_seconds'),
    start: max('process_start_time_seconds'),
  };
}
