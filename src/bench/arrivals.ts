// When each request is sent: gamma-distributed gaps as `vllm bench serve` draws them
// (shape = burstiness, scale = 1 / (rate * burstiness); burstiness 1 is a Poisson process),
// from a seeded generator so a run can be repeated exactly.

/** mulberry32: small, fast, seedable; uniform in [0, 1). */
export function rng(seed: number): () => number {
  let s = seed >>> 0 || 0x9e3779b9;
  return () => {
    let t = (s = (s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function normal(u: () => number): number {
  // Box-Muller; 1 - u() keeps log away from 0.
  return Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u());
}

/** One draw from Gamma(shape, scale) (Marsaglia and Tsang; shape < 1 by the boost U^(1/shape)). */
export function gamma(u: () => number, shape: number, scale: number): number {
  if (!(shape > 0) || !(scale > 0))
    throw new RangeError(`gamma needs shape > 0 and scale > 0 (got ${shape}, ${scale})`);
  if (shape < 1) return gamma(u, shape + 1, scale) * (1 - u()) ** (1 / shape);
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = normal(u);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const w = 1 - u();
    if (w < 1 - 0.0331 * x ** 4) return d * v * scale;
    if (Math.log(w) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v * scale;
  }
}

/** The gap (seconds) before the next request at `rate` req/s; 0 for an infinite rate. */
export function gapSampler(rate: number, burstiness: number, seed: number): () => number {
  if (!(burstiness > 0)) throw new RangeError(`burstiness must be > 0 (got ${burstiness})`);
  if (rate === Infinity) return () => 0;
  if (!(rate > 0)) throw new RangeError(`rate must be > 0 (got ${rate})`);
  if (burstiness === Infinity) return () => 1 / rate;
  const u = rng(seed);
  const theta = 1 / (rate * burstiness);
  return () => gamma(u, burstiness, theta);
}

/**
 * Send times (seconds from the start) of n requests. As vLLM does for a fixed count, the
 * cumulative times are rescaled so the last one lands on n / rate exactly: the run's offered
 * rate does not wander by the 1-2 % a random sum would.
 */
export function schedule(n: number, rate: number, burstiness: number, seed: number): number[] {
  const gap = gapSampler(rate, burstiness, seed);
  const t: number[] = [];
  let acc = 0;
  for (let i = 0; i < n; i++) {
    acc += gap();
    t.push(acc);
  }
  if (rate !== Infinity && n > 0 && t[n - 1]! > 0) {
    const k = n / rate / t[n - 1]!;
    for (let i = 0; i < n; i++) t[i] = t[i]! * k;
  }
  return t;
}
