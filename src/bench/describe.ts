// What one bench run is, from its plan: the description its result carries (vLLM's bench-serve
// result fields) and the load generator's configuration. Pure: the verb hands in what it read
// (the target, the model the server serves, the dataset) and the cancellation signals.
import type { BenchOptions, BenchPlan } from './plan.js';
import type { BenchRequest, RunConfig } from './runner.js';
import type { RunDescription } from './report.js';

export interface BenchInputs {
  plan: BenchPlan;
  opts: Pick<BenchOptions, 'dataset' | 'stream' | 'ignoreEos' | 'continuousUsage'>;
  /** metricsUrl: the server's own /metrics, when url is the gateway in front of it */
  target: { name: string; url: string; apiKey?: string; metricsUrl?: string };
  model: string;
  dataset: BenchRequest[];
  datasetName: string;
  exact: boolean;
}

/** The run as its result describes it (a sweep's point overrides num_prompts, max_concurrency and request_rate). */
export function runDescription({ plan, opts, target, model, datasetName, exact }: BenchInputs): RunDescription {
  return {
    date: new Date().toISOString(),
    target: target.name,
    url: target.url,
    model_id: model,
    endpoint_type: plan.endpoint === 'chat' ? 'openai-chat' : 'openai',
    dataset: datasetName,
    num_prompts: plan.requests ?? 0,
    request_rate: plan.rate,
    burstiness: plan.burstiness,
    max_concurrency: plan.concurrency ?? null,
    seed: plan.seed,
    warmups: plan.warmup,
    goodput: plan.goodput,
    percentiles: plan.pcts,
    input_len: opts.dataset ? undefined : plan.inputLen,
    output_len: plan.outputLen ?? (opts.dataset ? undefined : 128),
    range_ratio: opts.dataset ? undefined : plan.rangeRatio,
    prefix_len: opts.dataset ? undefined : plan.prefixLen,
    exact_lengths: exact,
  };
}

/** The load generator's configuration: stop ends the sending, abort what is in flight. */
export function runConfig(
  { plan, opts, target, model, dataset }: BenchInputs,
  signals: { stop: AbortSignal; abort: AbortSignal },
  over: Partial<RunConfig> = {},
): RunConfig {
  return {
    url: target.url,
    ...(target.metricsUrl ? { metricsUrl: target.metricsUrl } : {}),
    model,
    apiKey: target.apiKey,
    endpoint: plan.endpoint,
    stream: opts.stream,
    dataset,
    maxRequests: plan.requests,
    durationS: plan.durationS,
    rate: plan.rate,
    burstiness: plan.burstiness,
    seed: plan.seed,
    concurrency: plan.concurrency,
    warmup: plan.warmup,
    warmupS: plan.warmupS,
    requestTimeoutMs: plan.requestTimeoutMs,
    ignoreEos: opts.ignoreEos,
    continuousUsage: opts.continuousUsage && opts.stream,
    scrapeIntervalMs: plan.scrapeMs,
    stop: signals.stop,
    abort: signals.abort,
    ...over,
  };
}
