// /metrics (Prometheus text) -> the few vLLM numbers the probe judges. Read line by line here (the
// library parser, 10 KB of CommonJS and a second pass over the text, was the last dependency a
// probe loaded): samples are grouped by their own name, a value is kept as the server wrote it
// (Number() of "+Inf" or "NaN" is no reading, named), and a line that is neither a comment nor a
// sample makes the whole answer unreadable; a last line without its newline is not read.

type Family = { name: string; metrics: Array<{ value: string }> };

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)(?:\s+-?\d+)?\s*$/;

/** The samples of a /metrics text by name; throws on a line that is not Prometheus text. */
function parsePrometheus(text: string): Family[] {
  const by = new Map<string, Family>();
  const lines = text.split('\n');
  // the exposition format ends every line with a newline: one without it may be cut (0.2 of 0.25)
  lines.pop();
  for (const [k, raw] of lines.entries()) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`line ${k + 1} is not a metric sample: ${JSON.stringify(line.slice(0, 60))}`);
    let f = by.get(m[1]!);
    if (!f) by.set(m[1]!, (f = { name: m[1]!, metrics: [] }));
    f.metrics.push({ value: m[3]! });
  }
  return [...by.values()];
}

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
  const fams = parsePrometheus(text);
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
