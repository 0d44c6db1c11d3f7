// The Prometheus names of what an operator watches, for one vLLM version: read from the per-version
// tables of vLLM's source (profiles/vllm-facts.ts), plus the renames the tables cannot date because
// they happened between two of them. Pure.
import { tablesFor } from '../profiles/vllm-flags.js';
import { gte } from '../profiles/versions.js';

/** What the rules and the dashboard read; each is one family name of the target version. */
export interface VllmNames {
  running: string;
  waiting: string;
  /** KV cache usage, 0..1 */
  kvCache: string;
  preemptions: string;
  promptTokens: string;
  generationTokens: string;
  /** histograms (the family name; series are _bucket, _sum, _count) */
  ttft: string;
  itl: string;
  e2e: string;
  /** vLLM's sleep gauge (sleep_state="awake" is 0 while it sleeps), where the version exposes it (0.12 and later) */
  sleepState?: string;
}

/**
 * One logical metric: its names, newest first, and the first version of each newer name where the
 * tables cannot tell (the table below the version lacks it, but the version has it).
 */
const CANDIDATES: Record<Exclude<keyof VllmNames, 'sleepState'>, Array<{ name: string; since?: string }>> = {
  running: [{ name: 'vllm:num_requests_running' }],
  waiting: [{ name: 'vllm:num_requests_waiting' }],
  // renamed in 0.9.2 (the V1 engine's name); the old one hidden in 0.11 and gone in 0.12
  kvCache: [{ name: 'vllm:kv_cache_usage_perc', since: '0.9.2' }, { name: 'vllm:gpu_cache_usage_perc' }],
  preemptions: [{ name: 'vllm:num_preemptions_total' }],
  promptTokens: [{ name: 'vllm:prompt_tokens_total' }],
  generationTokens: [{ name: 'vllm:generation_tokens_total' }],
  ttft: [{ name: 'vllm:time_to_first_token_seconds' }],
  // the same histogram, renamed in 0.11 (time_per_output_token_seconds then deprecated, gone by 0.16)
  itl: [{ name: 'vllm:inter_token_latency_seconds' }, { name: 'vllm:time_per_output_token_seconds' }],
  e2e: [{ name: 'vllm:e2e_request_latency_seconds' }],
};

/** The names vLLM `version` exposes. Between two tables the lower one decides, unless a rename is dated. */
export function vllmNames(version: string): VllmNames {
  const { exact, floor, ceil } = tablesFor(version);
  const table = (exact ?? floor ?? ceil)!;
  const out = {} as VllmNames;
  for (const [key, names] of Object.entries(CANDIDATES) as Array<
    [keyof typeof CANDIDATES, (typeof CANDIDATES)[keyof typeof CANDIDATES]]
  >) {
    // a dated rename decides by the version; otherwise the table does
    const pick =
      names.find((n) => (n.since ? gte(version, n.since) : Boolean(table.metrics[n.name]))) ??
      names.find((n) => table.metrics[n.name]) ??
      names[0]!;
    out[key] = pick.name;
  }
  if (table.metrics['vllm:engine_sleep_state']) out.sleepState = 'vllm:engine_sleep_state';
  return out;
}
