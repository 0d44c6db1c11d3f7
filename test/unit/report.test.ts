// The report over a synthetic day (test/fixtures/history/make-day.mjs): every figure by hand.
import { describe, it, expect } from 'vitest';
import { buildReport, sparkline } from '../../src/history/report.js';
import { Sample } from '../../src/history/sample-schema.js';
// @ts-expect-error a plain .mjs fixture generator
import { day } from '../fixtures/history/make-day.mjs';

const samples = (day() as unknown[]).map((s) => Sample.parse(s));

describe('buildReport on a day with an incident and a restart', () => {
  const r = buildReport(samples);
  it('uptime is time-weighted: 3 of 47 half-hour intervals began unhealthy', () => {
    expect(r.uptime).toBeCloseTo(44 / 47, 12);
    expect(r.verdicts).toEqual({ healthy: 45, unhealthy: 3, unreachable: 0 });
  });
  it('one incident from the first failing probe to the first healthy one, with its cause', () => {
    expect(r.incidents).toEqual([
      {
        target: 'qwen-0',
        at: '2026-11-29T10:00:00.000Z',
        from: 'healthy',
        to: 'unhealthy',
        cause: 'inference fail: no token within 5000 ms while /health was 200: the engine is hung',
        until: '2026-11-29T11:30:00.000Z',
      },
    ]);
  });
  it('tokens from counter deltas, the restart counted from zero', () => {
    expect(r.tokens).toEqual({ prompt: 44 * 10_000, generation: 44 * 2_000 });
    expect(r.restarts).toBe(1);
    expect(r.finished).toEqual({ stop: 440, length: 0 });
  });
  it('TTFT quantiles from histogram deltas (6 <=100 ms, 3 <=250 ms, 1 <=500 ms per interval)', () => {
    expect(r.ttft.count).toBe(440);
    expect(r.ttft.p50).toBeCloseTo(0.05 + 0.05 * (220 / 264), 12);
    expect(r.ttft.p90).toBeCloseTo(0.25, 12);
    expect(r.ttft.p99).toBeCloseTo(0.25 + 0.25 * (39.6 / 44), 12);
    expect(r.ttft.mean).toBeCloseTo(0.12, 12);
    expect(r.itl).toMatchObject({ count: 88_000, p50: 0.025 });
  });
  it('GPU temperature and memory over time', () => {
    expect(r.gpu).toEqual({ tempMin: 50, tempMax: 74 + 1, memPctMax: (130000 / 143771) * 100, ecc: 0, xid: 0 });
    expect(r.series.gpuTempMax).toHaveLength(48);
  });
});

it.each([
  ['rising', [0, 1, 2, 3, 4, 5, 6, 7], '▁▂▃▄▅▆▇█'],
  ['flat', [3, 3, 3, 3], '▁▁▁▁'],
])('sparkline %s', (_n, vals, want) => {
  const pts = (vals as number[]).map((v, k) => ({ t: k, v }));
  expect(sparkline(pts, 0, pts.length, pts.length)).toBe(want);
});
it('sparkline leaves gaps blank', () => {
  expect(
    sparkline(
      [
        { t: 0, v: 1 },
        { t: 3, v: 2 },
      ],
      0,
      4,
      4,
    ),
  ).toBe('▁  █');
});

describe("the starts over time (Sample.boot, the probe copies each server's last start report)", async () => {
  const { Sample: Shape, BOOT_PHASES } = await import('../../src/history/sample-schema.js');
  const { StartReportShape } = await import('../../src/engine/start-shape.js');
  const base = {
    v: samples[0]!.v,
    target: 'a',
    url: 'http://127.0.0.1:1',
    verdict: 'healthy' as const,
    ms: 5,
    steps: {},
  };
  const boot = (at: string, ready: number, compile: 'hit' | 'miss') => ({
    at,
    ready,
    first: ready + 1,
    compile,
    ph: { process: 1, compile: ready / 2, api: ready },
  });
  it('one start per launch time, oldest first, whatever the number of probes that saw it', () => {
    const r = buildReport([
      { ...base, t: '2026-12-04T10:05:00.000Z', boot: boot('2026-12-04T10:00:00.000Z', 260, 'miss') },
      { ...base, t: '2026-12-04T10:10:00.000Z', boot: boot('2026-12-04T10:00:00.000Z', 260, 'miss') },
      { ...base, t: '2026-12-04T11:05:00.000Z', boot: boot('2026-12-04T11:00:00.000Z', 30, 'hit') },
      { ...base, t: '2026-12-04T11:06:00.000Z' },
    ]);
    expect(r.starts.map((s) => [s.at, s.ready, s.compile, s.phases.compile])).toEqual([
      ['2026-12-04T10:00:00.000Z', 260, 'miss', 130],
      ['2026-12-04T11:00:00.000Z', 30, 'hit', 15],
    ]);
  });
  it('a history line read back: a boot that does not check is refused (the line is skipped)', () => {
    const ok = { ...base, t: '2026-12-04T10:05:00.000Z' };
    expect(Shape.safeParse({ ...ok, boot: boot('2026-12-04T10:00:00.000Z', 30, 'hit') }).success).toBe(true);
    for (const bad of [
      { at: 'yesterday' },
      { at: '2026-12-04T10:00:00.000Z', ready: -1 },
      { at: '2026-12-04T10:00:00.000Z', compile: 'maybe' },
      { at: '2026-12-04T10:00:00.000Z', ph: { 'rm -rf': 1 } },
      { at: '2026-12-04T10:00:00.000Z', ph: { api: Number.POSITIVE_INFINITY } },
    ])
      expect(Shape.safeParse({ ...ok, boot: bad }).success, JSON.stringify(bad)).toBe(false);
  });
  it("names the phases as the engine's start report does", () => {
    expect([...BOOT_PHASES]).toEqual(StartReportShape.shape.phases.element.shape.id.options);
  });
});
