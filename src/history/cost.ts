// Cost per token from the probe's history: pure arithmetic, table-tested.
//
// The first source document's formula is cost = GPU price x GPU-hours x utilisation / tokens.
// Its example (8 GPUs x 24 h x 0.78 = 149.76 GPU-hours, 12,843,210 tokens, $1200 per GPU-month)
// computes (1200 x 149.76) / 12,843,210 = 0.014: a monthly price times hours, so the units do not
// work out. Priced per hour ($1200 / 730 h = $1.6438) the same inputs give $0.0192 per 1K tokens.
import { seriesIncrease, type Point } from './delta.js';
import type { Sample } from './sample.js';

/** Hours in a month: a 365-day year / 12 (the usual cloud convention). */
export const HOURS_PER_MONTH = 730;
/** A reference API price to compare the cost per token against. */
export const REFERENCE_PER_1K = 0.02;
/** Without prefill/decode time sums, a generated token is assumed to cost this many prompt tokens. */
const DEFAULT_GEN_WEIGHT = 4;

interface CostInput {
  samples: Sample[];
  pricePerGpuHour: number;
  /** GPUs held when the samples do not say (a --url target) */
  gpus?: number;
  /** utilisation 0..1 when the samples carry no GPU readings */
  utilization?: number;
  genWeight?: number;
}

interface Basis {
  gpuHours: number;
  dollars: number;
  per1K?: number;
  per1M?: number;
  promptPer1K?: number;
  generationPer1K?: number;
}

export interface CostResult {
  samples: number;
  from?: string;
  to?: string;
  hours: number;
  gpus?: number;
  tokens: { prompt: number; generation: number; total: number };
  restarts: number;
  utilization?: { value: number; source: 'measured' | 'given' };
  split: { promptShare?: number; by: 'prefill-decode-time' | 'ratio'; genWeight?: number };
  allocation?: Basis;
  usage?: Basis;
}

const pts = (samples: Sample[], get: (s: Sample) => number | undefined): Point[] =>
  samples.map((s) => ({ t: Date.parse(s.t), v: get(s), start: s.start }));

export function monthlyToHourly(perMonth: number): number {
  return perMonth / HOURS_PER_MONTH;
}

/** Mean GPU utilisation (0..1) over the samples that read GPUs. */
export function measuredUtilization(samples: Sample[]): number | undefined {
  const per = samples
    .map((s) => s.gpu?.map((g) => g.util).filter((u): u is number => u !== undefined) ?? [])
    .filter((u) => u.length);
  if (!per.length) return undefined;
  return per.reduce((a, u) => a + u.reduce((x, y) => x + y, 0) / u.length, 0) / per.length / 100;
}

export function computeCost(x: CostInput): CostResult {
  const s = [...x.samples].sort((a, b) => Date.parse(a.t) - Date.parse(b.t));
  const first = s[0];
  const last = s[s.length - 1];
  const hours = first && last ? (Date.parse(last.t) - Date.parse(first.t)) / 3_600_000 : 0;
  const gpus = [...s].reverse().find((q) => q.ngpu)?.ngpu ?? x.gpus;
  const prompt = seriesIncrease(pts(s, (q) => q.c?.prompt));
  const gen = seriesIncrease(pts(s, (q) => q.c?.generation));
  const prefill = seriesIncrease(pts(s, (q) => q.c?.prefillS)).increase;
  const decode = seriesIncrease(pts(s, (q) => q.c?.decodeS)).increase;
  const tokens = { prompt: prompt.increase, generation: gen.increase, total: prompt.increase + gen.increase };
  const measured = measuredUtilization(s);
  const utilization =
    measured !== undefined
      ? { value: measured, source: 'measured' as const }
      : x.utilization !== undefined
        ? { value: x.utilization, source: 'given' as const }
        : undefined;
  const w = x.genWeight ?? DEFAULT_GEN_WEIGHT;
  const split: CostResult['split'] =
    prefill + decode > 0
      ? { by: 'prefill-decode-time', promptShare: prefill / (prefill + decode) }
      : {
          by: 'ratio',
          genWeight: w,
          promptShare: tokens.total ? tokens.prompt / (tokens.prompt + w * tokens.generation) : undefined,
        };
  const basis = (gpuHours: number): Basis => {
    const dollars = gpuHours * x.pricePerGpuHour;
    const b: Basis = { gpuHours, dollars };
    if (tokens.total > 0) {
      b.per1K = (dollars / tokens.total) * 1000;
      b.per1M = (dollars / tokens.total) * 1_000_000;
      if (split.promptShare !== undefined) {
        if (tokens.prompt > 0) b.promptPer1K = ((dollars * split.promptShare) / tokens.prompt) * 1000;
        if (tokens.generation > 0) b.generationPer1K = ((dollars * (1 - split.promptShare)) / tokens.generation) * 1000;
      }
    }
    return b;
  };
  const held = gpus !== undefined ? gpus * hours : undefined;
  return {
    samples: s.length,
    from: first?.t,
    to: last?.t,
    hours,
    gpus,
    tokens,
    restarts: Math.max(prompt.resets, gen.resets),
    utilization,
    split,
    allocation: held !== undefined ? basis(held) : undefined,
    usage: held !== undefined && utilization ? basis(held * utilization.value) : undefined,
  };
}

/** Several replicas (or a profile's targets) as one service: GPU-hours, tokens and dollars add up. */
export function sumCosts(parts: CostResult[], pricePerGpuHour: number): CostResult {
  if (parts.length === 1) return parts[0]!;
  const add = (k: 'allocation' | 'usage'): Basis | undefined => {
    const have = parts.map((p) => p[k]).filter((b): b is Basis => !!b);
    if (have.length !== parts.length) return undefined;
    const gpuHours = have.reduce((a, b) => a + b.gpuHours, 0);
    const dollars = gpuHours * pricePerGpuHour;
    const total = parts.reduce((a, p) => a + p.tokens.total, 0);
    return { gpuHours, dollars, ...(total ? { per1K: (dollars / total) * 1000, per1M: (dollars / total) * 1e6 } : {}) };
  };
  const tokens = { prompt: 0, generation: 0, total: 0 };
  for (const p of parts) {
    tokens.prompt += p.tokens.prompt;
    tokens.generation += p.tokens.generation;
    tokens.total += p.tokens.total;
  }
  const times = parts
    .flatMap((p) => [p.from, p.to])
    .filter((t): t is string => !!t)
    .sort();
  return {
    samples: parts.reduce((a, p) => a + p.samples, 0),
    from: times[0],
    to: times[times.length - 1],
    hours: Math.max(...parts.map((p) => p.hours)),
    gpus: parts.every((p) => p.gpus !== undefined) ? parts.reduce((a, p) => a + p.gpus!, 0) : undefined,
    tokens,
    restarts: parts.reduce((a, p) => a + p.restarts, 0),
    utilization: parts[0]!.utilization,
    split: { by: parts.every((p) => p.split.by === 'prefill-decode-time') ? 'prefill-decode-time' : 'ratio' },
    allocation: add('allocation'),
    usage: add('usage'),
  };
}

/** "24h", "7d", "90m", "2w" or an ISO time -> the window's start. */
export function parseSince(text: string, now: number): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(m|h|d|w)$/.exec(text.trim());
  if (m)
    return (
      now - Number(m[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }[m[2] as 'm' | 'h' | 'd' | 'w']
    );
  const t = Date.parse(text);
  return Number.isNaN(t) ? undefined : t;
}
