// bench's phases without a server: flags to a plan (every bad value exit 2 before a request), the
// sweep loop driven by a scripted level runner, and the text report from a result.
import { describe, it, expect } from 'vitest';
import { benchPlan, type BenchOptions } from '../../src/bench/plan.js';
import { runSweep, sweepPoint } from '../../src/bench/sweep-run.js';
import { renderText } from '../../src/bench/text.js';
import { buildResult, type BenchResult } from '../../src/bench/report.js';
import { UsageError } from '../../src/errors.js';

const flags = (over: Partial<BenchOptions> = {}): BenchOptions => ({
  endpoint: 'completions',
  stream: true,
  rate: 'inf',
  burstiness: '1',
  seed: '0',
  warmup: '2',
  inputLen: '1024',
  rangeRatio: '0',
  prefixLen: '0',
  ignoreEos: true,
  continuousUsage: true,
  goodput: [],
  percentiles: '50,90,99',
  requestTimeout: 600_000,
  scrapeEvery: 1000,
  sweepBy: 'concurrency',
  slo: [],
  ...over,
});

/** A result as buildResult makes it, with only what the sweep and the report read. */
const result = (o: { throughput: number; ttft: number; completed?: number; valid?: boolean }): BenchResult =>
  ({
    request_throughput: o.throughput,
    p99_ttft_ms: o.ttft,
    p99_tpot_ms: 5,
    p99_e2el_ms: o.ttft * 2,
    mean_ttft_ms: o.ttft / 2,
    completed: o.completed ?? 10,
    failed: 0,
    duration: 1,
    max_concurrent_requests: 1,
    max_output_tokens_per_s: 1,
    sparkctl: {
      valid: o.valid ?? true,
      invalid_reasons: [],
      failures: {},
      first_errors: [],
      multi_token_chunks: 0,
      stopped_early: false,
      server: { samples: 0, notes: [], maxWaiting: undefined },
      client: { sendLagP99Ms: 0.1, loopDelayP99Ms: 1 },
    },
  }) as unknown as BenchResult;

describe('bench flags to a plan', () => {
  it('defaults: 200 requests, open loop, a warm-up of 2 with no minimum duration at rate inf', () => {
    const p = benchPlan(flags());
    expect(p).toMatchObject({
      endpoint: 'completions',
      requests: 200,
      rate: Infinity,
      warmup: 2,
      warmupS: 0,
      inputLen: 1024,
      requestTimeoutMs: 600_000,
      pcts: [50, 90, 99],
    });
    expect(p.sweep).toBeUndefined();
  });

  it('with a finite rate the warm-up lasts a second unless told; --duration leaves the count open', () => {
    expect(benchPlan(flags({ rate: '20' })).warmupS).toBe(1);
    expect(benchPlan(flags({ rate: '20', warmupDuration: 0 })).warmupS).toBe(0);
    expect(benchPlan(flags({ duration: 30 })).requests).toBeUndefined();
    expect(benchPlan(flags({ sweep: true, sweepBy: 'rate', sweepMax: '8' })).sweep).toEqual({ by: 'rate', max: 8 });
  });

  it.each([
    [{ requests: '0' }, /--requests: "0" is not a whole number >= 1/],
    [{ rate: 'fast' }, /--rate: "fast" is not a number above 0 \(or inf\)/],
    [{ rangeRatio: '1' }, /--range-ratio: "1" must be below 1/],
    [{ percentiles: '50,0' }, /--percentiles: "0" is not a percentile/],
    [{ slo: ['ttft:300'] }, /--slo goes with --sweep/],
    [{ goodput: ['ttft=3'] }, /--goodput/],
    [{ endpoint: 'embeddings' }, /--endpoint: "embeddings" is not completions or chat/],
  ] as Array<[Partial<BenchOptions>, RegExp]>)('%o is bad input naming the flag', (over, msg) => {
    expect(() => benchPlan(flags(over))).toThrow(UsageError);
    expect(() => benchPlan(flags(over))).toThrow(msg);
  });
});

describe('the sweep loop', () => {
  const plan = {
    requests: undefined,
    durationS: undefined,
    rate: Infinity,
    slo: {},
    pcts: [50, 99],
    sweep: { by: 'concurrency' as const, max: 64 },
  };

  it('doubles the level until throughput stops growing while latency grows; only the first level warms up', async () => {
    const seen: Array<[number, number | undefined, boolean]> = [];
    const curve: Record<number, [number, number]> = {
      1: [10, 50],
      2: [19, 52],
      4: [30, 60],
      8: [30.5, 120],
      16: [31, 300],
    };
    const out = await runSweep(plan, new AbortController().signal, async (level, over, first) => {
      seen.push([level, over.maxRequests, first]);
      const [throughput, ttft] = curve[level]!;
      return result({ throughput, ttft });
    });
    expect(seen).toEqual([
      [1, 16, true],
      [2, 16, false],
      [4, 16, false],
      [8, 32, false],
    ]);
    expect(out.stoppedAt).toMatch(/saturated at concurrency 8/);
    expect(out.points.map((p) => p.level)).toEqual([1, 2, 4, 8]);
  });

  it('stops at a level where every request failed, and names the best level under the SLO', async () => {
    const out = await runSweep({ ...plan, slo: { ttft: 100 } }, new AbortController().signal, async (level) =>
      result({ throughput: level * 10, ttft: level * 30, completed: level >= 8 ? 0 : 5 }),
    );
    expect(out.stoppedAt).toBe('every request failed at concurrency 8');
    expect(out.best?.level).toBe(2);
  });

  it('Ctrl-C before a level: no further level; a sweep that ran none is exit 1', async () => {
    const stop = new AbortController();
    const one = await runSweep(plan, stop.signal, async () => (stop.abort(), result({ throughput: 1, ttft: 1 })));
    expect(one.points).toHaveLength(1);
    await expect(runSweep(plan, stop.signal, async () => result({ throughput: 1, ttft: 1 }))).rejects.toThrow(
      'the sweep ran no level',
    );
  });

  it('a point takes the highest percentile asked for when p99 was not', () => {
    const r = {
      ...result({ throughput: 1, ttft: 1 }),
      p99_ttft_ms: undefined,
      p95_ttft_ms: 42,
    } as unknown as BenchResult;
    expect(sweepPoint(4, r, [50, 95]).ttftP99Ms).toBe(42);
  });
});

describe('the text report', () => {
  it('names the model and load shape; an invalid run says the client was the bottleneck', () => {
    const plan = benchPlan(flags({ concurrency: '8' }));
    const outputs = [0, 1, 2].map((i) => ({
      success: true,
      error: '',
      promptLen: 1024,
      outputTokens: 128,
      ttft: 0.05,
      itl: [0.01, 0.01],
      latency: 1.3,
      startTime: 1000 + i,
      scheduledTime: 1000 + i,
    }));
    const client = {
      valid: false,
      reasons: ['send lag p99 80 ms'],
      sendLagP50Ms: 1,
      sendLagP99Ms: 80,
      loopDelayP99Ms: 60,
    };
    const bad = buildResult(
      {
        date: 'd',
        target: 't',
        url: 'http://h:1',
        model_id: 'm',
        endpoint_type: 'openai',
        dataset: 'random',
        num_prompts: 3,
        request_rate: Infinity,
        burstiness: 1,
        max_concurrency: 8,
        seed: 0,
        warmups: 0,
        goodput: {},
        percentiles: [50, 99],
        exact_lengths: true,
      },
      outputs as never,
      3,
      1000,
      client as never,
      [],
      false,
    );
    const lines = renderText({
      model: 'm',
      url: 'http://h:1',
      datasetName: 'random',
      plan,
      result: bad,
      saveResult: 'r.json',
    }).map(([s, l]) => [s, l.replace(/\x1b\[\d+m/g, '')]);
    expect(lines[0]).toEqual([
      'out',
      'm at http://h:1  (random 1024 in / 128 out, concurrency 8, rate inf, 3 requests in 3.0 s)',
    ]);
    expect(lines.some(([s, l]) => s === 'out' && l.startsWith('INVALID RUN: the client was the bottleneck'))).toBe(
      true,
    );
    expect(lines.at(-1)).toEqual(['out', 'result: r.json']);
  });
});
