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
      if (f) return Math.max(...f.metrics.map((m) => Number(m.value ?? 0)));
    }
    return undefined;
  };
  return {
    // renamed in late 2025; read the new name, fall back to the old one
    kvCacheUsage: max('vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'),
    running: sum('vllm:num_requests_running'),
    waiting: sum('vllm:num_requests_waiting'),
    preemptions: sum('vllm:num_preemptions_total', 'vllm:num_preemptions'),
    families: fams.length,
  };
}
