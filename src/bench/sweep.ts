// --sweep: from one request at a time up to saturation. A level is "saturated" when throughput
// stops growing while latency and queueing grow; with --slo the answer is the highest level
// whose p99s meet every limit.
export interface SweepPoint {
  /** concurrency, or offered rate (req/s) */
  level: number;
  throughput: number;
  ttftP99Ms: number;
  tpotP99Ms: number;
  e2elP99Ms: number;
  meanTtftMs: number;
  /** the server's largest waiting queue during the level, when /metrics was readable */
  maxWaiting?: number;
  failed: number;
  completed: number;
  valid: boolean;
}

type Slo = Partial<Record<'ttft' | 'tpot' | 'e2el', number>>;

/**
 * The rule, documented in docs/bench.md: < 5 % more throughput for >= 20 % more p99 TTFT or E2EL, or a queue that grew.
 */
const SATURATION = { minThroughputGain: 0.05, minLatencyRise: 0.2 };

export function saturated(prev: SweepPoint, cur: SweepPoint): boolean {
  const gain = prev.throughput > 0 ? cur.throughput / prev.throughput - 1 : 1;
  if (gain >= SATURATION.minThroughputGain) return false;
  const rose = (a: number, b: number) => a > 0 && b / a - 1 >= SATURATION.minLatencyRise;
  const queued = cur.maxWaiting !== undefined && cur.maxWaiting > (prev.maxWaiting ?? 0);
  return rose(prev.ttftP99Ms, cur.ttftP99Ms) || rose(prev.e2elP99Ms, cur.e2elP99Ms) || queued;
}

function meetsSlo(p: SweepPoint, slo: Slo): boolean {
  if (p.failed > 0 || !p.valid || p.completed === 0) return false;
  return (
    (slo.ttft === undefined || p.ttftP99Ms <= slo.ttft) &&
    (slo.tpot === undefined || p.tpotP99Ms <= slo.tpot) &&
    (slo.e2el === undefined || p.e2elP99Ms <= slo.e2el)
  );
}

/** The highest level that meets the SLO (undefined when none does). */
export function bestUnderSlo(points: SweepPoint[], slo: Slo): SweepPoint | undefined {
  let best: SweepPoint | undefined;
  for (const p of points) if (meetsSlo(p, slo) && (!best || p.level > best.level)) best = p;
  return best;
}

/** Levels 1, 2, 4, ... up to max (max itself included last). */
export function levels(start: number, max: number): number[] {
  const out: number[] = [];
  for (let l = start; l < max; l *= 2) out.push(l);
  out.push(max);
  return [...new Set(out)];
}

/** "ttft:300 tpot:50" or "ttft:300,e2el:5000" -> ms limits; throws naming the bad part. */
export function parseSlo(parts: string[], flag: string): Slo {
  const slo: Slo = {};
  for (const part of parts.flatMap((p) => p.split(/[,\s]+/)).filter(Boolean)) {
    const m = /^(ttft|tpot|e2el):(\d+(?:\.\d+)?)$/.exec(part);
    if (!m)
      throw new Error(
        `${flag}: "${part}" is not METRIC:MS; use ttft, tpot or e2el with a limit in ms, e.g. ttft:300 tpot:50`,
      );
    slo[m[1] as keyof Slo] = Number(m[2]);
  }
  return slo;
}
