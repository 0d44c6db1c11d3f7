// The sweep: one level after another until saturation, and its point per level.
import { ProblemsFound } from '../errors.js';
import { c } from '../output/format.js';
import type { RunConfig } from './runner.js';
import type { BenchResult } from './report.js';
import { levels, saturated, bestUnderSlo, type SweepPoint } from './sweep.js';
import type { BenchPlan } from './plan.js';

export interface SweepOutcome {
  by: string;
  points: SweepPoint[];
  best?: SweepPoint;
  stoppedAt?: string;
}

/** One sweep level's point, from its result (the highest percentile asked for when p99 was not). */
export function sweepPoint(level: number, res: BenchResult, pcts: number[]): SweepPoint {
  const x = res as Record<string, any>;
  const top = pcts[pcts.length - 1];
  return {
    level,
    throughput: x.request_throughput,
    ttftP99Ms: x.p99_ttft_ms ?? x[`p${top}_ttft_ms`],
    tpotP99Ms: x.p99_tpot_ms ?? x[`p${top}_tpot_ms`],
    e2elP99Ms: x.p99_e2el_ms ?? x[`p${top}_e2el_ms`],
    meanTtftMs: x.mean_ttft_ms,
    maxWaiting: res.sparkctl.server.maxWaiting,
    failed: x.failed,
    completed: x.completed,
    valid: res.sparkctl.valid,
  };
}

/**
 * The sweep loop: each level doubles the last until --sweep-max, saturation (throughput stopped
 * growing while latency or the queue grew), a level where every request failed, or Ctrl-C.
 * `runLevel` runs one level (the first one with the warm-up); no server is needed to test the loop.
 */
export async function runSweep(
  plan: Pick<BenchPlan, 'requests' | 'durationS' | 'rate' | 'slo' | 'pcts'> & { sweep?: BenchPlan['sweep'] },
  stop: AbortSignal,
  runLevel: (level: number, over: Partial<RunConfig>, first: boolean) => Promise<BenchResult>,
  say?: (line: string) => void,
): Promise<SweepOutcome & { last: BenchResult }> {
  const { by, max } = plan.sweep ?? { by: 'concurrency', max: 256 };
  const points: SweepPoint[] = [];
  let last: BenchResult | undefined;
  let stoppedAt: string | undefined;
  for (const level of levels(by === 'rate' ? Math.min(1, max) : 1, max)) {
    if (stop.aborted) break;
    const per =
      plan.requests ??
      (plan.durationS === undefined
        ? Math.max(16, by === 'concurrency' ? level * 4 : Math.ceil(level * 4))
        : undefined);
    const over: Partial<RunConfig> =
      by === 'concurrency'
        ? { concurrency: level, rate: Infinity, maxRequests: per }
        : { rate: level, concurrency: undefined, maxRequests: per };
    const res = await runLevel(level, over, points.length === 0);
    const p = sweepPoint(level, res, plan.pcts);
    points.push(p);
    last = res;
    say?.(
      `  ${by} ${level}: ${p.throughput.toFixed(2)} req/s, p99 TTFT ${p.ttftP99Ms.toFixed(1)} ms, p99 E2EL ${p.e2elP99Ms.toFixed(1)} ms${p.maxWaiting ? `, ${p.maxWaiting} waiting` : ''}${p.valid ? '' : c.red(' INVALID (client-bound)')}`,
    );
    if (points.length >= 2 && saturated(points[points.length - 2]!, p)) {
      stoppedAt = `saturated at ${by} ${level}: throughput stopped growing while latency or the queue grew`;
      break;
    }
    if (p.completed === 0) {
      stoppedAt = `every request failed at ${by} ${level}`;
      break;
    }
  }
  if (!last) throw new ProblemsFound('the sweep ran no level');
  return {
    by,
    points,
    best: Object.keys(plan.slo).length ? bestUnderSlo(points, plan.slo) : undefined,
    stoppedAt,
    last,
  };
}
