// /metrics (Prometheus text) -> the few vLLM numbers the probe judges.
// @ts-expect-error the parser ships no types
import parsePrometheus from 'parse-prometheus-text-format';

type Family = { name: string; type: string; metrics: Array<{ value?: string; labels?: Record<string, string> }> };

export interface VllmMetrics {
  kvCacheUsage?: number;
  running?: number;
  waiting?: number;
  preemptions?: number;
  families: number;
  /** readings a server cannot really have (NaN, Inf, negative, a usage above 1): left out, and named here */
  invalid: string[];
}

export function parseVllmMetrics(text: string): VllmMetrics {
  const fams = parsePrometheus(text) as Family[];
  const by = new Map(fams.map((f) => [f.name, f]));
  const sum = (...names: string[]) => {
    for (const n of names) {
      const f = by.get(n);
      if (f) return f.metrics.reduce((a, m) => a + Number(m.value ?? 0), 0);
    }
    return undefined;
  };
  const max = (...names: string[]) => {
    for (const n of names) {
      const f = by.get(n);
      // a family with no sample (a truncated scrape) is no reading, not -Infinity
      if (f?.metrics.length) return Math.max(...f.metrics.map((m) => Number(m.value ?? 0)));
    }
    return undefined;
  };
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
    kvCacheUsage: bounded('KV cache usage', max('vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'), 1),
    running: bounded('running', sum('vllm:num_requests_running')),
    waiting: bounded('waiting', sum('vllm:num_requests_waiting')),
    // a counter: registered as vllm:num_preemptions, exposed (and named in # TYPE) as ..._total by every version
    preemptions: bounded('preemptions', sum('vllm:num_preemptions_total')),
    families: fams.length,
    invalid,
  };
}

/** The families read above (checked against vLLM's per-version metric tables in a test). */
export const READ_METRICS = ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc', 'vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:num_preemptions_total'];
