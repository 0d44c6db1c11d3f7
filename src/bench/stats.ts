// Statistics exactly as `vllm bench serve` computes them (numpy defaults), so numbers compare.
// simple-statistics 7's quantile interpolates linearly between closest ranks, which is numpy's
// default method; test/unit/bench-core.test.ts pins both against values numpy printed.
import { quantileSorted, mean as ssMean, standardDeviation } from 'simple-statistics';

/** numpy.percentile(values, p) with the default method "linear" (type 7). Empty -> 0, as vLLM's `values or 0`. */
export function percentile(values: readonly number[], p: number): number {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile ${p} is outside 0..100`);
  if (values.length === 0) return 0;
  const a = [...values].sort((x, y) => x - y);
  return percentileSorted(a, p);
}

function percentileSorted(a: readonly number[], p: number): number {
  if (a.length === 0) return 0;
  return quantileSorted(a as number[], p / 100);
}

/** numpy.mean; empty -> 0. */
export function mean(values: readonly number[]): number {
  return values.length === 0 ? 0 : ssMean(values as number[]);
}

/** numpy.std (population, ddof=0); empty -> 0. */
export function std(values: readonly number[]): number {
  // simple-statistics' standardDeviation is the population one (ddof=0), as numpy's
  return values.length === 0 ? 0 : standardDeviation(values as number[]);
}

export const median = (values: readonly number[]) => percentile(values, 50);

/** "99" for 99, "99.9" for 99.9: vLLM's key spelling (p99_ttft_ms, p99.9_ttft_ms). */
export const pWord = (p: number): string => String(p);
