// The result of a run, computed as `vllm bench serve` computes it (vllm/benchmarks/serve.py,
// calculate_metrics): same inputs, same definitions, same units (seconds inside, ms in the keys).
import { mean, std, percentile } from './stats.js';

export type FailureKind =
  | 'refused'
  | 'timeout'
  | 'reset'
  | 'http_429'
  | 'http_4xx'
  | 'http_5xx'
  | 'bad_stream'
  | 'no_token'
  | 'aborted'
  | 'other';

/** One request as the client saw it. Times in seconds on the client's monotonic clock. */
export interface RequestOutput {
  success: boolean;
  error: string;
  failure?: FailureKind;
  /** prompt tokens: the server's usage.prompt_tokens when given, else what the dataset asked */
  promptLen: number;
  /** usage.completion_tokens (0 when the server sent no usage) */
  outputTokens: number;
  /** first SSE event with non-empty choices, minus the actual send */
  ttft: number;
  /** gaps between consecutive choices events */
  itl: number[];
  /** last choices event minus the actual send */
  latency: number;
  /** actual send time */
  startTime: number;
  /** when the schedule said to send it (open loop); equals startTime in closed loop */
  scheduledTime: number;
  /** gaps per token (continuous_usage_stats): a chunk of k tokens counts its gap / k, k times */
  itlPerToken?: number[];
  /** choices events that carried more than one token */
  multiTokenChunks?: number;
  generatedText?: string;
}

/**
 * The output tokens of one request. vLLM's bench takes usage.completion_tokens, else the generated
 * text's tokens through the model's tokenizer; sparkctl loads no tokenizer, so without usage it
 * counts the stream's content chunks (vLLM streams one token per chunk at its default
 * stream interval; each chunk is a gap in `itl` after the first), and 1 only for a non-streamed
 * answer without usage. Counting 1 per request for a stream without usage made a 256-token answer
 * look like 1 token and divided every throughput by its length.
 */
function outputTokenCount(o: Pick<RequestOutput, 'outputTokens' | 'itl' | 'generatedText' | 'ttft'>): number {
  if (o.outputTokens > 0) return o.outputTokens;
  if (o.itl.length > 0) return o.itl.length + 1;
  return 1;
}

export type Goodput = Partial<Record<'ttft' | 'tpot' | 'e2el', number>>;

export interface SummaryStats {
  mean: number;
  median: number;
  std: number;
  percentiles: Array<[number, number]>;
}

interface BenchMetrics {
  completed: number;
  failed: number;
  total_input: number;
  total_output: number;
  request_throughput: number;
  request_goodput: number;
  output_throughput: number;
  total_token_throughput: number;
  ttft: SummaryStats;
  tpot: SummaryStats;
  itl: SummaryStats;
  e2el: SummaryStats;
  max_output_tokens_per_s: number;
  max_concurrent_requests: number;
  actualOutputLens: number[];
}

/** ms statistics of values in seconds, numpy's way (empty -> all 0, as vLLM's `values or 0`). */
export function summarize(valuesS: readonly number[], pcts: readonly number[]): SummaryStats {
  const sorted = [...valuesS].sort((a, b) => a - b);
  return {
    mean: mean(sorted) * 1000,
    median: percentile(sorted, 50) * 1000,
    std: std(sorted) * 1000,
    percentiles: pcts.map((p) => [p, percentile(sorted, p) * 1000]),
  };
}

export function calculateMetrics(
  outputs: readonly RequestOutput[],
  durS: number,
  pcts: readonly number[],
  goodput: Goodput = {},
): BenchMetrics {
  const actualOutputLens: number[] = [];
  let totalInput = 0;
  let completed = 0;
  let good = 0;
  const itls: number[] = [];
  const tpots: number[] = [];
  const allTpots: number[] = [];
  const ttfts: number[] = [];
  const e2els: number[] = [];
  for (const o of outputs) {
    if (!o.success) {
      actualOutputLens.push(0);
      continue;
    }
    const outLen = outputTokenCount(o);
    actualOutputLens.push(outLen);
    totalInput += o.promptLen;
    let tpot = 0;
    if (outLen > 1) {
      tpot = (o.latency - o.ttft) / (outLen - 1);
      tpots.push(tpot);
    }
    allTpots.push(tpot);
    for (const x of o.itl) itls.push(x);
    ttfts.push(o.ttft);
    e2els.push(o.latency);
    completed++;
  }
  const slo = Object.entries(goodput) as Array<['ttft' | 'tpot' | 'e2el', number]>;
  if (slo.length) {
    const cols = { ttft: ttfts, tpot: allTpots, e2el: e2els };
    for (let i = 0; i < completed; i++) if (slo.every(([k, ms]) => ms / 1000 >= cols[k][i]!)) good++;
  }
  const totalOutput = actualOutputLens.reduce((a, b) => a + b, 0);
  const ok = outputs.filter((o) => o.success);
  let maxTokS = 0;
  let peak = 0;
  if (ok.length) {
    maxTokS = maxOutputTokensPerS(ok);
    peak = peakConcurrency(ok);
  }
  return {
    completed,
    failed: outputs.length - completed,
    total_input: totalInput,
    total_output: totalOutput,
    request_throughput: completed / durS,
    request_goodput: good / durS,
    output_throughput: totalOutput / durS,
    total_token_throughput: (totalInput + totalOutput) / durS,
    ttft: summarize(ttfts, pcts),
    tpot: summarize(tpots, pcts),
    itl: summarize(itls, pcts),
    e2el: summarize(e2els, pcts),
    max_output_tokens_per_s: maxTokS,
    max_concurrent_requests: peak,
    actualOutputLens,
  };
}

/**
 * The peak output tokens per second of the successful requests: one-second buckets from the first send, a token at each
 * chunk's arrival (the first at ttft, the next after each itl gap).
 */
function maxOutputTokensPerS(ok: readonly RequestOutput[]): number {
  const t0 = Math.min(...ok.map((o) => o.startTime));
  const tEnd = Math.max(...ok.map((o) => o.startTime + o.latency));
  const buckets = new Array<number>(Math.ceil(tEnd - t0) + 1).fill(0);
  for (const o of ok) {
    let t = o.startTime + o.ttft;
    const mark = (x: number) => {
      const b = Math.trunc(x - t0);
      if (b >= 0 && b < buckets.length) buckets[b]!++;
    };
    mark(t);
    for (const g of o.itl) mark((t += g));
  }
  return Math.max(...buckets);
}

/** Peak concurrency: a sweep over half-open [start, end) intervals, ends before starts on ties. */
function peakConcurrency(ok: readonly RequestOutput[]): number {
  let peak = 0;
  const ev: Array<[number, number]> = [];
  for (const o of ok) ev.push([o.startTime, 1], [o.startTime + o.latency, -1]);
  ev.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let cur = 0;
  for (const [, d] of ev) peak = Math.max(peak, (cur += d));
  return peak;
}

/** Classifies a failed request; the run reports counts per kind, never averages them in. */
export function classifyFailure(f: {
  status?: number;
  code?: string;
  name?: string;
  aborted?: boolean;
  deadline?: boolean;
  stream?: string;
}): FailureKind {
  if (f.aborted) return 'aborted';
  if (
    f.deadline ||
    f.name === 'TimeoutError' ||
    f.code === 'UND_ERR_HEADERS_TIMEOUT' ||
    f.code === 'UND_ERR_BODY_TIMEOUT' ||
    f.code === 'UND_ERR_CONNECT_TIMEOUT'
  )
    return 'timeout';
  if (f.status !== undefined) {
    if (f.status === 429) return 'http_429';
    if (f.status >= 500) return 'http_5xx';
    if (f.status >= 400) return 'http_4xx';
    if (f.status !== 200) return 'other';
  }
  if (f.code === 'ECONNREFUSED') return 'refused';
  if (f.code === 'ECONNRESET' || f.code === 'UND_ERR_SOCKET' || f.code === 'EPIPE' || f.code === 'UND_ERR_CLOSED')
    return 'reset';
  if (f.stream === 'no_token') return 'no_token';
  if (f.stream) return 'bad_stream';
  return 'other';
}
