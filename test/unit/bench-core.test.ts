import { describe, it, expect } from 'vitest';
import { quantile } from 'simple-statistics';
import { percentile, std, mean } from '../../src/bench/stats.js';
import { schedule, gapSampler, gamma, rng } from '../../src/bench/arrivals.js';
import { calculateMetrics, classifyFailure, type RequestOutput } from '../../src/bench/metrics.js';
import { judgeClient } from '../../src/bench/selfcheck.js';
import { SseSplitter, SseError } from '../../src/bench/sse.js';
import { lengthRange } from '../../src/bench/dataset.js';

// Expected values printed by numpy 2.4.6: np.percentile(c, p) (method "linear"), np.std(c), np.mean(c).
const NUMPY: Array<[number[], number[], number, number]> = [
  [[1, 2, 3, 4], [1.0, 1.75, 2.5, 3.7, 3.9699999999999998, 3.9970000000000003, 4.0], 1.118033988749895, 2.5],
  [[15, 20, 35, 40, 50], [15.0, 20.0, 35.0, 46.0, 49.6, 49.96000000000001, 50.0], 12.884098726725126, 32.0],
  [
    [0.187, 0.243, 0.2, 0.19, 0.21, 0.5, 0.01],
    [0.01, 0.1885, 0.2, 0.3458000000000001, 0.4845799999999999, 0.4984580000000002, 0.5],
    0.13390721734523073,
    0.22,
  ],
  [[5], [5, 5, 5, 5, 5, 5, 5], 0, 5],
  [[3, 1, 2], [1.0, 1.5, 2.0, 2.8, 2.98, 2.998, 3.0], 0.816496580927726, 2.0],
];
const PS = [0, 25, 50, 90, 99, 99.9, 100];

describe('statistics match numpy', () => {
  it.each(NUMPY)('percentiles, std and mean of %j', (values, expected, sd, m) => {
    PS.forEach((p, i) => expect(percentile(values, p)).toBeCloseTo(expected[i]!, 12));
    expect(std(values)).toBeCloseTo(sd, 12);
    expect(mean(values)).toBeCloseTo(m, 12);
  });
  it('empty input is 0, as vLLM does with `values or 0`', () => {
    expect(percentile([], 99)).toBe(0);
    expect(std([])).toBe(0);
    expect(mean([])).toBe(0);
  });
  it.each(NUMPY)('simple-statistics quantile itself is numpy linear on %j (why it is used)', (values, expected) => {
    PS.forEach((p, i) => expect(quantile(values, p / 100)).toBeCloseTo(expected[i]!, 12));
  });
});

describe('arrivals: gamma with burstiness, as vLLM', () => {
  it('gamma(shape, scale) has mean shape*scale and variance shape*scale^2', () => {
    for (const [shape, scale] of [
      [1, 0.1],
      [0.5, 0.2],
      [4, 0.025],
    ] as const) {
      const u = rng(7);
      const xs = Array.from({ length: 100_000 }, () => gamma(u, shape, scale));
      const m = mean(xs);
      const v = std(xs) ** 2;
      expect(m).toBeCloseTo(shape * scale, 2);
      expect(Math.abs(v - shape * scale * scale) / (shape * scale * scale)).toBeLessThan(0.05);
    }
  });
  it('burstiness < 1 is burstier (higher coefficient of variation) than Poisson, > 1 smoother', () => {
    const cv = (b: number) => {
      const g = gapSampler(10, b, 3);
      const xs = Array.from({ length: 50_000 }, g);
      return std(xs) / mean(xs);
    };
    expect(cv(1)).toBeCloseTo(1, 1);
    expect(cv(0.25)).toBeCloseTo(2, 1);
    expect(cv(4)).toBeCloseTo(0.5, 1);
  });
  it('a fixed count lands exactly on n / rate, is repeatable with a seed and differs with another', () => {
    const a = schedule(200, 50, 1, 42);
    expect(a[199]).toBeCloseTo(4, 12);
    expect(schedule(200, 50, 1, 42)).toEqual(a);
    expect(schedule(200, 50, 1, 43)).not.toEqual(a);
    for (let i = 1; i < a.length; i++) expect(a[i]!).toBeGreaterThanOrEqual(a[i - 1]!);
  });
  it('rate inf sends everything at once; burstiness inf is evenly spaced', () => {
    expect(schedule(5, Infinity, 1, 1)).toEqual([0, 0, 0, 0, 0]);
    expect(schedule(4, 2, Infinity, 1).map((x) => +x.toFixed(9))).toEqual([0.5, 1, 1.5, 2]);
  });
});

const ok = (o: Partial<RequestOutput>): RequestOutput => ({
  success: true,
  error: '',
  promptLen: 10,
  outputTokens: 4,
  ttft: 0.1,
  itl: [0.02, 0.02, 0.02],
  latency: 0.16,
  startTime: 0,
  scheduledTime: 0,
  ...o,
});

describe('calculateMetrics: vLLM definitions', () => {
  it('TPOT, ITL, E2EL, throughputs over the duration, failures kept out of the averages', () => {
    const outs = [
      ok({ startTime: 0 }),
      ok({ startTime: 0.5, ttft: 0.2, latency: 0.5, outputTokens: 4, itl: [0.1, 0.1, 0.1], promptLen: 20 }),
      ok({ startTime: 1, outputTokens: 1, itl: [], latency: 0.1 }),
      { ...ok({}), success: false, error: 'HTTP 500', failure: 'http_5xx' as const, ttft: 99, latency: 99 },
    ];
    const m = calculateMetrics(outs, 2, [50, 99]);
    expect(m.completed).toBe(3);
    expect(m.failed).toBe(1);
    expect(m.total_input).toBe(40);
    expect(m.total_output).toBe(9);
    expect(m.actualOutputLens).toEqual([4, 4, 1, 0]);
    expect(m.request_throughput).toBe(1.5);
    expect(m.output_throughput).toBe(4.5);
    expect(m.total_token_throughput).toBe(24.5);
    // TPOT only for requests with more than one token: (0.16-0.1)/3 and (0.5-0.2)/3
    expect(m.tpot.mean).toBeCloseTo(((0.02 + 0.1) / 2) * 1000, 9);
    expect(m.ttft.mean).toBeCloseTo((0.4 / 3) * 1000, 9);
    expect(m.ttft.percentiles[1]![1]).toBeCloseTo(percentile([0.1, 0.2, 0.1], 99) * 1000, 9);
    expect(m.itl.median).toBeCloseTo(((0.02 + 0.1) / 2) * 1000, 9);
    expect(m.e2el.median).toBeCloseTo(160, 9);
    expect(m.max_concurrent_requests).toBe(1);
  });
  it('goodput counts requests meeting every SLO; a 1-token request has TPOT 0 for it', () => {
    const outs = [
      ok({ ttft: 0.1, latency: 0.16 }),
      ok({ ttft: 0.4, latency: 0.5 }),
      ok({ ttft: 0.1, latency: 3, outputTokens: 4 }),
      ok({ ttft: 0.2, outputTokens: 1, itl: [], latency: 0.2 }),
    ];
    expect(calculateMetrics(outs, 1, [99], { ttft: 300 }).request_goodput).toBe(3);
    expect(calculateMetrics(outs, 1, [99], { ttft: 300, tpot: 50 }).request_goodput).toBe(2);
    expect(calculateMetrics(outs, 2, [99], { e2el: 1000 }).request_goodput).toBe(1.5);
  });
  it('peak concurrency and peak output tokens per second', () => {
    const outs = [
      ok({ startTime: 0, latency: 1 }),
      ok({ startTime: 0.5, latency: 1 }),
      ok({ startTime: 1, latency: 1 }),
      ok({ startTime: 1.99, latency: 0.5 }),
    ];
    const m = calculateMetrics(outs, 3, [99]);
    expect(m.max_concurrent_requests).toBe(2); // [0,1) and [0.5,1.5): the third starts as the first ends
    expect(m.max_output_tokens_per_s).toBe(8);
  });
  it('a stream without usage counts its content chunks, not 1 per request (vLLM counts the text; one token per chunk)', () => {
    const outs = [
      ok({ outputTokens: 0, itl: [0.02, 0.02, 0.02, 0.02, 0.02], latency: 0.2, generatedText: 'a b c d e f' }),
      ok({ outputTokens: 0, itl: [], latency: 0.1 }),
    ];
    const m = calculateMetrics(outs, 1, [99]);
    expect(m.actualOutputLens).toEqual([6, 1]);
    expect(m.total_output).toBe(7);
    expect(m.tpot.mean).toBeCloseTo(((0.2 - 0.1) / 5) * 1000, 9);
  });
  it('no success: zeros, not NaN', () => {
    const m = calculateMetrics([{ ...ok({}), success: false }], 1, [99]);
    expect(m.ttft.mean).toBe(0);
    expect(m.ttft.percentiles[0]![1]).toBe(0);
    expect(m.request_throughput).toBe(0);
  });
});

describe('failure classes', () => {
  it.each([
    [{ status: 429 }, 'http_429'],
    [{ status: 400 }, 'http_4xx'],
    [{ status: 503 }, 'http_5xx'],
    [{ code: 'ECONNREFUSED' }, 'refused'],
    [{ code: 'ECONNRESET' }, 'reset'],
    [{ deadline: true, name: 'TimeoutError' }, 'timeout'],
    [{ aborted: true, name: 'AbortError' }, 'aborted'],
    [{ stream: 'not json' }, 'bad_stream'],
    [{}, 'other'],
  ] as const)('%j -> %s', (f, kind) => expect(classifyFailure(f)).toBe(kind));
});

describe('client self-check', () => {
  it('a run whose sends were late, or whose loop stalled, is invalid with reasons', () => {
    const good = judgeClient({
      targetRate: 200,
      achievedRate: 199,
      sendLagMs: Array(100).fill(0.5),
      loopDelayP99Ms: 3,
    });
    expect(good.valid).toBe(true);
    const late = judgeClient({
      targetRate: 200,
      achievedRate: 150,
      sendLagMs: [...Array(90).fill(1), ...Array(10).fill(40)],
      loopDelayP99Ms: 80,
    });
    expect(late.valid).toBe(false);
    expect(late.reasons.join('\n')).toMatch(/send lag p99/);
    expect(late.reasons.join('\n')).toMatch(/event loop/);
    expect(late.reasons.join('\n')).toMatch(/150\.0 req\/s of the 200/);
  });
  it('closed loop: send lag and offered rate are not judged (the cap holds requests back)', () => {
    expect(judgeClient({ sendLagMs: Array(10).fill(100), loopDelayP99Ms: 2 }).valid).toBe(true);
  });
});

describe('SSE splitting', () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  it('joins messages split across chunks, skips comments, keeps [DONE]', () => {
    const s = new SseSplitter();
    expect(s.push(enc('data: {"a":1}\n\ndata: {"b"'))).toEqual(['{"a":1}']);
    expect(s.push(enc(':2}\n\n: ping\n\ndata: [DONE]\n\n'))).toEqual(['{"b":2}', '[DONE]']);
    expect(s.push(enc('event: x\r\ndata: {"c":3}\r\n\r\n'))).toEqual(['{"c":3}']);
    expect(s.end()).toEqual([]);
  });
  it('every separator the event-stream grammar allows ends a message: CR LF LF (the old reader lost the next message there), CR CR, LF CR LF', () => {
    const s = new SseSplitter();
    expect(s.push(enc('data: {"a":1}\r\n\ndata: {"b":2}\n\n'))).toEqual(['{"a":1}', '{"b":2}']);
    expect(s.push(enc('data: {"c":3}\r\rdata: {"d":4}\n\r\ndata: [DONE]\r\n\r\n'))).toEqual([
      '{"c":3}',
      '{"d":4}',
      '[DONE]',
    ]);
    expect(s.end()).toEqual([]);
  });
  it('a CR LF split between two chunks is one line end; data lines join with LF; the last message needs no blank line', () => {
    const s = new SseSplitter();
    expect(s.push(enc('data: {"a":\r'))).toEqual([]);
    expect(s.push(enc('\ndata: 1}\r\n\r'))).toEqual([]);
    expect(s.push(enc('\ndata: {"z":0}'))).toEqual(['{"a":\n1}']);
    expect(s.end()).toEqual(['{"z":0}']);
  });
  it('a multi-byte character split across chunks survives', () => {
    const s = new SseSplitter();
    const b = enc('data: "é"\n\n');
    expect([...s.push(b.slice(0, 7)), ...s.push(b.slice(7))]).toEqual(['"é"']);
  });
  it('an endless message is an error, not unbounded memory', () => {
    const s = new SseSplitter();
    expect(() => {
      for (let i = 0; i < 5; i++) s.push(enc('x'.repeat(1024 * 1024)));
    }).toThrow(SseError);
  });
});

describe('dataset lengths', () => {
  it('range ratio as vLLM: [floor(n(1-r)), ceil(n(1+r))], and rejects r >= 1', () => {
    expect(lengthRange(1024, 0)).toEqual([1024, 1024]);
    expect(lengthRange(100, 0.25)).toEqual([75, 125]);
    expect(() => lengthRange(100, 1)).toThrow(/range-ratio/);
  });
});
