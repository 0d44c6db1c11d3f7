// Pure arithmetic over samples: counter deltas that survive server restarts, histogram deltas
// and quantiles. A counter that went down means the server restarted: the new value counts from
// zero (what it counted since the restart), never a negative delta.

/** Increase of a counter between two readings; undefined when either is missing. */
export function counterDelta(prev: number | undefined, cur: number | undefined, restarted = false): number | undefined {
  if (prev === undefined || cur === undefined) return undefined;
  if (restarted || cur < prev) return cur;
  return cur - prev;
}

export interface Point {
  t: number;
  v: number | undefined;
  /** the server's start time, when known: a change is a restart even if the counter grew */
  start?: number;
}

/** Total increase over a series (sorted by time), counting resets, skipping gaps without a reading. */
export function seriesIncrease(points: Point[]): { increase: number; resets: number; pairs: number } {
  let increase = 0;
  let resets = 0;
  let pairs = 0;
  let prev: Point | undefined;
  for (const p of points) {
    if (p.v === undefined) continue;
    if (prev) {
      const restarted = prev.start !== undefined && p.start !== undefined && prev.start !== p.start;
      if (restarted || p.v < prev.v!) resets++;
      increase += counterDelta(prev.v, p.v, restarted)!;
      pairs++;
    }
    prev = p;
  }
  return { increase, resets, pairs };
}

export interface Hist {
  le: number[];
  n: number[];
  sum: number;
  count: number;
}

/** Observations between two cumulative histograms (same bounds); a reset counts the new one whole. */
export function histDelta(prev: Hist | undefined, cur: Hist, restarted = false): Hist {
  const same = prev && prev.le.length === cur.le.length && prev.le.every((x, k) => x === cur.le[k]);
  if (!prev || !same || restarted || cur.count < prev.count || cur.n.some((x, k) => x < prev.n[k]!))
    return { ...cur, n: [...cur.n] };
  return {
    le: cur.le,
    n: cur.n.map((x, k) => x - prev.n[k]!),
    sum: Math.max(0, cur.sum - prev.sum),
    count: cur.count - prev.count,
  };
}

export function histAdd(a: Hist | undefined, b: Hist): Hist {
  if (!a) return { ...b, n: [...b.n] };
  if (a.le.length !== b.le.length || a.le.some((x, k) => x !== b.le[k])) return a.count >= b.count ? a : b;
  return { le: a.le, n: a.n.map((x, k) => x + b.n[k]!), sum: a.sum + b.sum, count: a.count + b.count };
}

/**
 * The q-quantile of a cumulative histogram, interpolated linearly within its bucket as
 * Prometheus's histogram_quantile does; in the +Inf bucket, the highest finite bound.
 */
export function histQuantile(h: Hist, q: number): number | undefined {
  const total = h.n[h.n.length - 1] ?? 0;
  if (!total || q < 0 || q > 1) return undefined;
  const rank = q * total;
  for (let k = 0; k < h.le.length; k++) {
    if (h.n[k]! >= rank) {
      const hi = h.le[k]!;
      if (!Number.isFinite(hi)) return k > 0 ? h.le[k - 1] : undefined;
      const lo = k > 0 ? h.le[k - 1]! : 0;
      const below = k > 0 ? h.n[k - 1]! : 0;
      const inBucket = h.n[k]! - below;
      return inBucket > 0 ? lo + ((hi - lo) * (rank - below)) / inBucket : hi;
    }
  }
  return undefined;
}
