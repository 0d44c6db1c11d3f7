// Cost arithmetic: the document's example with its unit slip corrected, bases, splits, restarts.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { computeCost, monthlyToHourly, parseSince, measuredUtilization, sumCosts } from '../../src/history/cost.js';
import { Sample } from '../../src/history/sample-schema.js';
import { FIXTURES } from '../helpers.js';

const doc = readFileSync(join(FIXTURES, 'history', 'document-example.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => Sample.parse(JSON.parse(l)));

const mk = (t: number, prompt: number, generation: number, extra: Partial<Sample> = {}): Sample => ({
  v: 1,
  t: new Date(Date.UTC(2026, 10, 1) + t * 3_600_000).toISOString(),
  target: 'a',
  url: 'u',
  verdict: 'healthy',
  ms: 1,
  steps: {},
  ngpu: 1,
  c: { prompt, generation },
  ...extra,
});

describe("the document's example", () => {
  it('8 GPUs x 24 h x 0.78 = 149.76 GPU-hours, 12,843,210 tokens, $1200/GPU-month -> $0.0192 per 1K (usage)', () => {
    const price = monthlyToHourly(1200);
    expect(price).toBeCloseTo(1.643836, 5);
    const r = computeCost({ samples: doc, pricePerGpuHour: price });
    expect(r.gpus).toBe(8);
    expect(r.hours).toBe(24);
    expect(r.utilization).toEqual({ value: 0.78, source: 'measured' });
    expect(r.tokens).toEqual({ prompt: 9_000_000, generation: 3_843_210, total: 12_843_210 });
    expect(r.allocation!.gpuHours).toBe(192);
    expect(r.usage!.gpuHours).toBeCloseTo(149.76, 10);
    // by hand: 1200 / 730 x 149.76 = 246.1808; / 12,843,210 x 1000 = 0.019168
    expect(r.usage!.dollars).toBeCloseTo(246.1808, 3);
    expect(r.usage!.per1K).toBeCloseTo(0.019168, 6);
    expect(r.usage!.per1M).toBeCloseTo(19.168, 2);
    // allocation: 1200 / 730 x 192 = 315.6164; / 12,843,210 x 1000 = 0.024575
    expect(r.allocation!.per1K).toBeCloseTo(0.024575, 6);
    // the document's own figure multiplies the monthly price by GPU-hours: not what sparkctl shows
    expect((1200 * 149.76) / 12_843_210).toBeCloseTo(0.014, 3);
    expect(r.usage!.per1K).not.toBeCloseTo(0.014, 3);
  });

  it('split by an assumed ratio when vLLM exposes no prefill/decode times: prompt + generation = total', () => {
    const r = computeCost({ samples: doc, pricePerGpuHour: 1, genWeight: 4 });
    expect(r.split.by).toBe('ratio');
    // prompt share = 9,000,000 / (9,000,000 + 4 x 3,843,210)
    expect(r.split.promptShare).toBeCloseTo(9e6 / (9e6 + 4 * 3_843_210), 12);
    const u = r.usage!;
    expect((u.promptPer1K! * 9_000_000) / 1000 + (u.generationPer1K! * 3_843_210) / 1000).toBeCloseTo(u.dollars, 9);
    expect(u.generationPer1K! / u.promptPer1K!).toBeCloseTo(4, 9);
  });
});

describe('computeCost', () => {
  it.each([
    [
      'steady traffic',
      [
        [0, 0, 0],
        [1, 1000, 500],
        [2, 3000, 1000],
      ],
      3000,
      1000,
      0,
    ],
    [
      'a restart: the counter starts over and counts from zero',
      [
        [0, 0, 0],
        [1, 1000, 500],
        [2, 200, 100],
        [3, 1200, 600],
      ],
      2200,
      1100,
      1,
    ],
    [
      'an unreachable probe in the middle is skipped',
      [
        [0, 0, 0],
        [1, undefined, undefined],
        [2, 400, 40],
      ],
      400,
      40,
      0,
    ],
  ])('%s', (_n, rows, prompt, gen, restarts) => {
    const samples = (rows as Array<[number, number | undefined, number | undefined]>).map(([t, p, g]) =>
      p === undefined ? { ...mk(t, 0, 0), verdict: 'unreachable' as const, c: undefined } : mk(t, p, g!),
    );
    const r = computeCost({ samples, pricePerGpuHour: 2, utilization: 0.5 });
    expect(r.tokens).toEqual({ prompt, generation: gen, total: prompt + gen });
    expect(r.restarts).toBe(restarts);
    expect(r.allocation!.gpuHours).toBe(rows.length - 1);
    expect(r.allocation!.dollars).toBe(2 * (rows.length - 1));
    expect(r.usage!.gpuHours).toBe((rows.length - 1) * 0.5);
    expect(r.utilization).toEqual({ value: 0.5, source: 'given' });
  });

  it('split by prefill vs decode time sums when vLLM has them', () => {
    const r = computeCost({
      samples: [
        mk(0, 0, 0, { c: { prompt: 0, generation: 0, prefillS: 10, decodeS: 10 } }),
        mk(1, 0, 0, { c: { prompt: 1000, generation: 1000, prefillS: 12, decodeS: 18 } }),
      ],
      pricePerGpuHour: 10,
    });
    expect(r.split).toEqual({ by: 'prefill-decode-time', promptShare: 0.2 });
    expect(r.allocation!.promptPer1K).toBeCloseTo(2, 12); // $10 x 0.2 / 1000 tokens x 1000
    expect(r.allocation!.generationPer1K).toBeCloseTo(8, 12);
    expect(r.usage).toBeUndefined(); // no utilisation measured or given
  });

  it('no tokens: dollars but no price per token', () => {
    const r = computeCost({ samples: [mk(0, 5, 5), mk(2, 5, 5)], pricePerGpuHour: 3 });
    expect(r.allocation).toMatchObject({ gpuHours: 2, dollars: 6 });
    expect(r.allocation!.per1K).toBeUndefined();
  });

  it('replicas add up', () => {
    const a = computeCost({ samples: [mk(0, 0, 0), mk(1, 1000, 0)], pricePerGpuHour: 1 });
    const b = computeCost({ samples: [mk(0, 0, 0, { url: 'v' }), mk(1, 3000, 0, { url: 'v' })], pricePerGpuHour: 1 });
    const s = sumCosts([a, b], 1);
    expect(s.tokens.total).toBe(4000);
    expect(s.allocation).toMatchObject({ gpuHours: 2, dollars: 2, per1K: 0.5 });
  });

  it('measured utilisation averages GPUs within a sample, then samples', () => {
    const g = (u: number[]) => u.map((util, i) => ({ i, util }));
    expect(
      measuredUtilization([mk(0, 0, 0, { gpu: g([100, 0]) }), mk(1, 0, 0, { gpu: g([50, 50]) }), mk(2, 0, 0)]),
    ).toBeCloseTo(0.5, 12);
    expect(measuredUtilization([mk(0, 0, 0)])).toBeUndefined();
  });
});

it.each([
  ['24h', Date.UTC(2026, 10, 30, 12) - 86_400_000],
  ['7d', Date.UTC(2026, 10, 30, 12) - 7 * 86_400_000],
  ['90m', Date.UTC(2026, 10, 30, 12) - 90 * 60_000],
  ['2026-11-01T00:00:00Z', Date.UTC(2026, 10, 1)],
  ['yesterday-ish', undefined],
])('parseSince %s', (text, want) => {
  expect(parseSince(text, Date.UTC(2026, 10, 30, 12))).toBe(want);
});
