// The vLLM numbers probe history keeps from one /metrics answer, as data. They are read from the
// text by client/metrics.ts (readVllm), one storey up: this room only stores and compares them.
export interface Histogram {
  /** upper bounds, ascending, +Inf last as Infinity (JSON: null) */
  le: number[];
  /** cumulative counts per bound, summed over label sets */
  n: number[];
  sum: number;
  count: number;
}

interface VllmCounters {
  prompt?: number;
  generation?: number;
  /** request_success_total by finished_reason */
  finished?: Record<string, number>;
  preemptions?: number;
  prefixHits?: number;
  prefixQueries?: number;
  /** sums of vllm:request_prefill_time_seconds / vllm:request_decode_time_seconds */
  prefillS?: number;
  decodeS?: number;
}
interface VllmGauges {
  running?: number;
  waiting?: number;
  kv?: number;
}
export interface VllmReading {
  counters: VllmCounters;
  gauges: VllmGauges;
  ttft?: Histogram;
  itl?: Histogram;
  /** process_start_time_seconds: a new value is a restart */
  start?: number;
}
