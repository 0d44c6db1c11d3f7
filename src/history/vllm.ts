// The vLLM numbers history keeps, read from /metrics text. A small line reader rather than
// parse-prometheus-text-format: that parser drops a histogram's _sum and _count when the series
// carry labels (seen with vLLM's model_name/engine labels), and history needs both.
export interface Histogram {
  /** upper bounds, ascending, +Inf last as Infinity (JSON: null) */
  le: number[];
  /** cumulative counts per bound, summed over label sets */
  n: number[];
  sum: number;
  count: number;
}

export interface VllmCounters {
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
export interface VllmGauges {
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

interface Line {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseLines(text: string): Line[] {
  const out: Line[] = [];
  for (const raw of text.split('\n')) {
    const l = raw.trim();
    if (!l || l.startsWith('#')) continue;
    const m = LINE.exec(l);
    if (!m) continue;
    const v = m[4] === '+Inf' ? Infinity : m[4] === '-Inf' ? -Infinity : Number(m[4]);
    if (Number.isNaN(v)) continue;
    const labels: Record<string, string> = {};
    if (m[3]) for (const lm of m[3].matchAll(LABEL)) labels[lm[1]!] = lm[2]!;
    out.push({ name: m[1]!, labels, value: v });
  }
  return out;
}

const finite = (v: number) => (Number.isFinite(v) && v >= 0 ? v : undefined);

export function readVllm(text: string): VllmReading {
  const lines = parseLines(text);
  const by = new Map<string, Line[]>();
  for (const l of lines) {
    const a = by.get(l.name);
    if (a) a.push(l);
    else by.set(l.name, [l]);
  }
  const sum = (...names: string[]) => {
    for (const n of names) {
      const ls = by.get(n);
      if (ls) return finite(ls.reduce((a, l) => a + l.value, 0));
    }
    return undefined;
  };
  const max = (...names: string[]) => {
    for (const n of names) {
      const ls = by.get(n);
      if (ls) return finite(Math.max(...ls.map((l) => l.value)));
    }
    return undefined;
  };
  const hist = (base: string): Histogram | undefined => {
    const buckets = by.get(`${base}_bucket`);
    if (!buckets) return undefined;
    const per = new Map<number, number>();
    for (const b of buckets) {
      const le = b.labels.le === '+Inf' ? Infinity : Number(b.labels.le);
      if (Number.isNaN(le)) continue;
      per.set(le, (per.get(le) ?? 0) + b.value);
    }
    const le = [...per.keys()].sort((a, b) => a - b);
    return { le, n: le.map((x) => per.get(x)!), sum: sum(`${base}_sum`) ?? 0, count: sum(`${base}_count`) ?? per.get(Infinity) ?? 0 };
  };
  let finished: Record<string, number> | undefined;
  for (const l of by.get('vllm:request_success_total') ?? []) {
    const r = (l.labels.finished_reason ?? 'unknown').replace(/[^a-z_]/gi, '').slice(0, 20) || 'unknown';
    (finished ??= {})[r] = (finished[r] ?? 0) + l.value;
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
    ttft: hist('vllm:time_to_first_token_seconds'),
    itl: hist('vllm:inter_token_latency_seconds'),
    start: max('process_start_time_seconds'),
  };
}
