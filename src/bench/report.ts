// The result document: `vllm bench serve --save-result` keys with the same meanings (times in the
// per-request lists in seconds, summary keys in ms), plus sparkctl's extras in their own block.
import {
  calculateMetrics,
  summarize,
  type Goodput,
  type RequestOutput,
  type FailureKind,
  type SummaryStats,
} from './metrics.js';
import { pWord } from './stats.js';
import type { ClientCheck } from './selfcheck.js';
import { serverCheck, type ScrapeSample, type ServerCheck } from './scrape.js';

const METRIC_NAMES = ['ttft', 'tpot', 'itl', 'e2el'] as const;

export interface RunDescription {
  date: string;
  target: string;
  url: string;
  model_id: string;
  endpoint_type: 'openai' | 'openai-chat';
  dataset: string;
  num_prompts: number;
  request_rate: number;
  burstiness: number;
  max_concurrency: number | null;
  seed: number;
  warmups: number;
  goodput: Goodput;
  percentiles: number[];
  input_len?: number;
  output_len?: number;
  range_ratio?: number;
  prefix_len?: number;
  exact_lengths: boolean;
}

export interface SparkctlExtras {
  valid: boolean;
  invalid_reasons: string[];
  stopped_early: boolean;
  client: ClientCheck;
  failures: Partial<Record<FailureKind, number>>;
  first_errors: string[];
  /** latency from the scheduled send time (coordinated omission included), ms */
  scheduled: { ttft: SummaryStats; e2el: SummaryStats };
  itl_per_token?: SummaryStats;
  multi_token_chunks?: number;
  server: ServerCheck;
  metrics_timeline: Array<Omit<ScrapeSample, 't'> & { t: number }>;
}

export type BenchResult = Record<string, unknown> & { sparkctl: SparkctlExtras };

export function buildResult(
  d: RunDescription,
  outputs: RequestOutput[],
  durationS: number,
  startedAt: number,
  client: ClientCheck,
  samples: ScrapeSample[],
  stoppedEarly: boolean,
): BenchResult {
  const m = calculateMetrics(outputs, durationS, d.percentiles, d.goodput);
  const r = vllmKeys(d, m, outputs, durationS, startedAt);
  const ok = outputs.filter((o) => o.success);
  const failures: Partial<Record<FailureKind, number>> = {};
  for (const o of outputs) if (!o.success) failures[o.failure ?? 'other'] = (failures[o.failure ?? 'other'] ?? 0) + 1;
  const perToken = ok.flatMap((o) => o.itlPerToken ?? []);
  const anyContinuous = ok.some((o) => o.itlPerToken !== undefined);
  const reasons = [...client.reasons];
  const server = serverCheck(samples, m.total_input, m.total_output);
  const extras: SparkctlExtras = {
    valid: reasons.length === 0,
    invalid_reasons: reasons,
    stopped_early: stoppedEarly,
    client,
    failures,
    first_errors: [...new Set(outputs.filter((o) => !o.success).map((o) => o.error))].slice(0, 5),
    scheduled: {
      ttft: summarize(
        ok.map((o) => o.startTime - o.scheduledTime + o.ttft),
        d.percentiles,
      ),
      e2el: summarize(
        ok.map((o) => o.startTime - o.scheduledTime + o.latency),
        d.percentiles,
      ),
    },
    ...(anyContinuous
      ? {
          itl_per_token: summarize(perToken, d.percentiles),
          multi_token_chunks: ok.reduce((a, o) => a + (o.multiTokenChunks ?? 0), 0),
        }
      : {}),
    server,
    metrics_timeline: samples.map((s) => ({ ...s, t: +(s.t - startedAt).toFixed(3) })),
  };
  return { ...r, sparkctl_config: d, sparkctl: extras } as BenchResult;
}

/**
 * The keys `vllm bench serve --save-result` writes, with its meanings: the run's description and counts, the
 * throughputs, the per-request lists and each metric's summary in ms.
 */
function vllmKeys(
  d: RunDescription,
  m: ReturnType<typeof calculateMetrics>,
  outputs: RequestOutput[],
  durationS: number,
  startedAt: number,
): Record<string, unknown> {
  const r: Record<string, unknown> = {
    date: d.date,
    endpoint_type: d.endpoint_type,
    label: null,
    model_id: d.model_id,
    tokenizer_id: d.model_id,
    num_prompts: d.num_prompts,
    request_rate: Number.isFinite(d.request_rate) ? d.request_rate : 'inf',
    burstiness: d.burstiness,
    max_concurrency: d.max_concurrency,
    duration: durationS,
    completed: m.completed,
    failed: m.failed,
    total_input_tokens: m.total_input,
    total_output_tokens: m.total_output,
    request_throughput: m.request_throughput,
    request_goodput: Object.keys(d.goodput).length ? m.request_goodput : null,
    output_throughput: m.output_throughput,
    total_token_throughput: m.total_token_throughput,
    input_lens: outputs.map((o) => o.promptLen),
    output_lens: m.actualOutputLens,
    ttfts: outputs.map((o) => o.ttft),
    itls: outputs.map((o) => o.itl),
    latencies: outputs.map((o) => o.latency),
    start_times: outputs.map((o) => o.startTime - startedAt),
    generated_texts: outputs.map((o) => o.generatedText ?? ''),
    errors: outputs.map((o) => o.error),
    max_output_tokens_per_s: m.max_output_tokens_per_s,
    max_concurrent_requests: m.max_concurrent_requests,
  };
  for (const name of METRIC_NAMES) {
    const s = m[name];
    r[`mean_${name}_ms`] = s.mean;
    r[`median_${name}_ms`] = s.median;
    r[`std_${name}_ms`] = s.std;
    for (const [p, v] of s.percentiles) r[`p${pWord(p)}_${name}_ms`] = v;
  }
  return r;
}

const f = (x: unknown, digits = 2) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(digits) : '-');

/** The summary table (mean / P99 TTFT, req/s) and the rest of vLLM's summary, as rows. */
export function summaryRows(r: Record<string, any>, pcts: number[]): string[][] {
  const p99 = pcts.includes(99) ? 99 : pcts[pcts.length - 1]!;
  const rows: string[][] = [
    ['Mean TTFT', `${f(r.mean_ttft_ms, 1)} ms`],
    [`P${pWord(p99)} TTFT`, `${f(r[`p${pWord(p99)}_ttft_ms`], 1)} ms`],
    ['Request throughput', `${f(r.request_throughput, 1)} req/s`],
  ];
  if (r.request_goodput !== null && r.request_goodput !== undefined)
    rows.push(['Request goodput', `${f(r.request_goodput, 1)} req/s`]);
  rows.push(
    ['Output token throughput', `${f(r.output_throughput, 1)} tok/s`],
    ['Total token throughput', `${f(r.total_token_throughput, 1)} tok/s`],
  );
  return rows;
}

export function latencyRows(r: Record<string, any>, pcts: number[]): { header: string[]; rows: string[][] } {
  const header = ['latency (ms)', 'mean', 'median', ...pcts.map((p) => `p${pWord(p)}`)];
  const rows = METRIC_NAMES.map((n) => [
    n.toUpperCase(),
    f(r[`mean_${n}_ms`]),
    f(r[`median_${n}_ms`]),
    ...pcts.map((p) => f(r[`p${pWord(p)}_${n}_ms`])),
  ]);
  const s = r.sparkctl as SparkctlExtras | undefined;
  if (s) {
    rows.push([
      'TTFT from schedule',
      f(s.scheduled.ttft.mean),
      f(s.scheduled.ttft.median),
      ...s.scheduled.ttft.percentiles.map(([, v]) => f(v)),
    ]);
    rows.push([
      'E2EL from schedule',
      f(s.scheduled.e2el.mean),
      f(s.scheduled.e2el.median),
      ...s.scheduled.e2el.percentiles.map(([, v]) => f(v)),
    ]);
    if (s.itl_per_token)
      rows.push([
        'ITL per token',
        f(s.itl_per_token.mean),
        f(s.itl_per_token.median),
        ...s.itl_per_token.percentiles.map(([, v]) => f(v)),
      ]);
  }
  return { header, rows };
}
