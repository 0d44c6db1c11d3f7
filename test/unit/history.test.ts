// History: counter deltas across restarts, histogram quantiles, the on-disk store (rotation,
// torn and corrupt lines), and the sample's size bound.
import { describe, it, expect } from 'vitest';
import { readFileSync, writeFileSync, appendFileSync, readdirSync, utimesSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { counterDelta, seriesIncrease, histDelta, histQuantile } from '../../src/history/delta.js';
import { readVllm } from '../../src/client/metrics.js';
import { buildSample, sampleLine, LINE_MAX, type Sample } from '../../src/history/sample.js';
import { appendSample, historyDir, lastSample } from '../../src/history/store.js';
import { readHistory } from '../../src/history/read.js';
import { execa } from 'execa';
import { ROOT, tempDirs } from '../helpers.js';

const tmp = tempDirs('sparkctl-history-');

describe('counterDelta', () => {
  it.each([
    ['growth', 100, 250, false, 150],
    ['no change', 7, 7, false, 0],
    ['reset: the new value counts from zero', 900, 40, false, 40],
    ['reset to zero', 900, 0, false, 0],
    ['restart seen by start time although the counter grew', 100, 300, true, 300],
    ['missing before', undefined, 5, false, undefined],
    ['missing now', 5, undefined, false, undefined],
  ])('%s', (_n, prev, cur, restarted, want) => {
    expect(counterDelta(prev as number | undefined, cur as number | undefined, restarted as boolean)).toBe(want);
  });
});

describe('seriesIncrease', () => {
  it.each([
    ['steady', [0, 10, 25, 25], 25, 0],
    ['one restart mid-way', [100, 150, 20, 70], 50 + 20 + 50, 1],
    ['two restarts', [5, 9, 1, 3, 0, 4], 4 + 1 + 2 + 0 + 4, 2],
    ['gaps (unreachable) are skipped', [10, undefined, 30, undefined, 35], 25, 0],
    ['a restart hidden in a gap still counts from zero', [500, undefined, 120], 120, 1],
    ['one reading: nothing to say', [42], 0, 0],
  ])('%s', (_n, vals, want, resets) => {
    const pts = (vals as Array<number | undefined>).map((v, k) => ({ t: k * 1000, v }));
    const r = seriesIncrease(pts);
    expect(r.increase).toBe(want);
    expect(r.resets).toBe(resets);
  });
  it('a changed start time is a restart even when the counter grew past its old value', () => {
    const r = seriesIncrease([
      { t: 0, v: 100, start: 1000 },
      { t: 1, v: 300, start: 2000 },
    ]);
    expect(r).toMatchObject({ increase: 300, resets: 1 });
  });
});

describe('histograms', () => {
  const le = [0.1, 0.5, 1, Infinity];
  it('delta of cumulative buckets; a reset counts the new histogram whole', () => {
    const a = { le, n: [10, 20, 30, 30], sum: 12, count: 30 };
    const b = { le, n: [10, 25, 40, 42], sum: 20, count: 42 };
    expect(histDelta(a, b)).toEqual({ le, n: [0, 5, 10, 12], sum: 8, count: 12 });
    const restarted = { le, n: [1, 2, 2, 2], sum: 0.5, count: 2 };
    expect(histDelta(b, restarted)).toEqual(restarted);
  });
  it.each([
    ['median inside the second bucket', [0, 10, 10, 10], 0.5, 0.3],
    ['p99 in the first bucket', [100, 100, 100, 100], 0.99, 0.099],
    ['in the +Inf bucket: the highest finite bound', [0, 0, 0, 10], 0.5, 1],
    ['empty', [0, 0, 0, 0], 0.5, undefined],
  ])('quantile: %s', (_n, n, q, want) => {
    const got = histQuantile({ le, n: n as number[], sum: 0, count: (n as number[])[3]! }, q as number);
    if (want === undefined) expect(got).toBeUndefined();
    else expect(got).toBeCloseTo(want as number, 6);
  });
});

describe('readVllm', () => {
  it('reads counters, gauges, reasons and histograms with labels (sum and count kept)', () => {
    const text = [
      '# TYPE vllm:prompt_tokens_total counter',
      'vllm:prompt_tokens_total{engine="0",model_name="m"} 1200',
      'vllm:generation_tokens_total{engine="0",model_name="m"} 300',
      'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 4',
      'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 1',
      'vllm:num_preemptions_total{engine="0",model_name="m"} 2',
      'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000',
      'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 250',
      'vllm:request_prefill_time_seconds_sum{engine="0",model_name="m"} 1.5',
      'vllm:request_decode_time_seconds_sum{engine="0",model_name="m"} 6',
      'vllm:num_requests_running{engine="0",model_name="m"} 3',
      'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.42',
      'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 3',
      'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 5',
      'vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.25',
      'vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 5',
      'process_start_time_seconds 1764500000.5',
      'garbage line here',
    ].join('\n');
    const r = readVllm(text);
    expect(r.counters).toEqual({
      prompt: 1200,
      generation: 300,
      finished: { stop: 4, length: 1 },
      preemptions: 2,
      prefixHits: 250,
      prefixQueries: 1000,
      prefillS: 1.5,
      decodeS: 6,
    });
    expect(r.gauges).toEqual({ running: 3, waiting: undefined, kv: 0.42 });
    expect(r.ttft).toEqual({ le: [0.1, Infinity], n: [3, 5], sum: 1.25, count: 5 });
    expect(r.start).toBe(1764500000.5);
  });
});

const sample = (over: Partial<Parameters<typeof buildSample>[0]> = {}): Sample =>
  buildSample({
    at: new Date('2026-11-30T10:00:00Z'),
    target: 'qwen-0',
    url: 'http://127.0.0.1:8000',
    verdict: 'healthy',
    ms: 40,
    steps: [{ step: 'live', status: 'pass', detail: '', ms: 2 }],
    vllm: { counters: { prompt: 10, generation: 5 }, gauges: {} },
    ...over,
  });

describe('store', () => {
  it('appends one line per sample and reads them back in time order', () => {
    const d = tmp();
    appendSample(d, sample({ at: new Date('2026-11-30T10:05:00Z') }));
    appendSample(d, sample());
    const r = readHistory(d);
    expect(r.skipped).toEqual([]);
    expect(r.samples.map((s) => s.t)).toEqual(['2026-11-30T10:00:00.000Z', '2026-11-30T10:05:00.000Z']);
    expect(lastSample(d, 'qwen-0', 'http://127.0.0.1:8000')!.t).toBe('2026-11-30T10:00:00.000Z');
    const f = readdirSync(historyDir(d))[0]!;
    expect(statSync(join(historyDir(d), f)).mode & 0o777).toBe(0o600);
  });

  it('the newest sample is read from the end of a file past the tail window, its Xid time kept', () => {
    const d = tmp();
    // ~300 samples of ~700 bytes: well past the 64 KiB read from the end
    const why = 'x'.repeat(600);
    for (let m = 0; m < 300; m++)
      appendSample(
        d,
        sample({
          at: new Date(Date.UTC(2026, 10, 30, 0, m)),
          steps: [{ step: 'live', status: 'fail', detail: why, ms: 2 }],
          xidT: m,
        }),
      );
    const f = join(historyDir(d), readdirSync(historyDir(d))[0]!);
    expect(statSync(f).size).toBeGreaterThan(128 * 1024);
    expect(lastSample(d, 'qwen-0', 'http://127.0.0.1:8000')).toEqual({ t: '2026-11-30T04:59:00.000Z', xidT: 299 });
  });

  it.each([
    ['a torn last line', '{"v":1,"t":"2026-11-30T11:00:00.000Z","xi'],
    ['another version', '{"v":2,"t":"2026-11-30T11:00:00.000Z"}\n'],
    ['a time that is no time', '{"v":1,"t":"soon"}\n'],
    ['a hostile Xid time', '{"v":1,"t":"2026-11-30T11:00:00.000Z","xidT":-5}\n'],
    ['not an object', '[1,2]\n'],
  ])('the newest sample passes over %s to the good one before it', (_n, bad) => {
    const d = tmp();
    appendSample(d, sample({ xidT: 12 }));
    const f = join(historyDir(d), readdirSync(historyDir(d))[0]!);
    appendFileSync(f, bad);
    expect(lastSample(d, 'qwen-0', 'http://127.0.0.1:8000')).toEqual({ t: '2026-11-30T10:00:00.000Z', xidT: 12 });
  });

  it('a tail of torn lines longer than the window: the whole file is read for the good line before it', () => {
    const d = tmp();
    appendSample(d, sample());
    const f = join(historyDir(d), readdirSync(historyDir(d))[0]!);
    appendFileSync(f, '{"v":1,"t":"torn\n'.repeat(8000));
    expect(statSync(f).size).toBeGreaterThan(64 * 1024);
    expect(lastSample(d, 'qwen-0', 'http://127.0.0.1:8000')).toEqual({ t: '2026-11-30T10:00:00.000Z' });
    expect(lastSample(d, 'nobody', 'http://127.0.0.1:1')).toBeUndefined();
  });

  it('a window reads only the samples inside it', () => {
    const d = tmp();
    for (const m of [0, 5, 10, 15]) appendSample(d, sample({ at: new Date(Date.UTC(2026, 10, 30, 10, m)) }));
    const r = readHistory(d, undefined, { from: Date.UTC(2026, 10, 30, 10, 5), to: Date.UTC(2026, 10, 30, 10, 10) });
    expect(r.samples.map((s) => s.t)).toEqual(['2026-11-30T10:05:00.000Z', '2026-11-30T10:10:00.000Z']);
  });

  it('the window holds for a line the quick time filter cannot read (keys in another order)', () => {
    const d = tmp();
    const p = appendSample(d, sample({ at: new Date(Date.UTC(2026, 10, 30, 10, 5)) }));
    // the same sample outside the window, its keys reordered so the line does not start with {"v":N,"t":
    const { v, t: _t, ...rest } = sample({ at: new Date(Date.UTC(2026, 10, 30, 9, 0)) }) as Sample & { v: number };
    appendFileSync(p, `${JSON.stringify({ ...rest, t: '2026-11-30T09:00:00.000Z', v })}\n`);
    const r = readHistory(d, undefined, { from: Date.UTC(2026, 10, 30, 10, 0) });
    expect(r.samples.map((s) => s.t)).toEqual(['2026-11-30T10:05:00.000Z']);
    expect(readHistory(d).samples).toHaveLength(2);
  });

  it('a torn last line, a corrupt line and a wrong shape are skipped and reported, never fatal', () => {
    const d = tmp();
    const p = appendSample(d, sample());
    appendFileSync(p, 'not json at all\n');
    appendFileSync(p, JSON.stringify({ v: 1, t: 'yesterday', verdict: 'healthy' }) + '\n');
    appendSample(d, sample({ at: new Date('2026-11-30T10:10:00Z') }));
    appendFileSync(p, '{"v":1,"t":"2026-11-30T10:1');
    const r = readHistory(d);
    expect(r.samples).toHaveLength(2);
    expect(r.skipped.map((s) => [s.line, s.why.split(':')[0]])).toEqual([
      [2, 'not JSON'],
      [3, 't'],
      [5, 'incomplete last line (torn or still being written)'],
    ]);
    // the next append lands on its own line (the torn tail stays one bad line)
    appendSample(d, sample({ at: new Date('2026-11-30T10:15:00Z') }));
    const again = readHistory(d);
    expect(again.samples).toHaveLength(3);
    expect(again.skipped.map((s) => s.line)).toEqual([2, 3, 5]);
  });

  it('rotates by size into archives, keeps a bounded number, drops archives past the age limit', () => {
    const d = tmp();
    const rot = { maxBytes: 2000, maxAgeMs: 3_600_000, maxArchives: 2 };
    let now = Date.parse('2026-11-30T00:00:00Z');
    for (let k = 0; k < 40; k++) {
      appendSample(d, sample({ at: new Date(now) }), rot, now);
      now += 60_000;
    }
    const files = readdirSync(historyDir(d));
    const archives = files.filter((f) => /\.\d{13}-\d+\.jsonl$/.test(f));
    expect(archives).toHaveLength(2);
    for (const f of files) expect(statSync(join(historyDir(d), f)).size).toBeLessThanOrEqual(2000);
    const kept = readHistory(d).samples;
    expect(kept.length).toBeLessThan(40);
    expect(kept[kept.length - 1]!.t).toBe(new Date(now - 60_000).toISOString());
    // age: an archive last written two hours ago goes at the next append
    const old = join(historyDir(d), archives[0]!);
    const twoHoursAgo = (now - 7_200_000) / 1000;
    utimesSync(old, twoHoursAgo, twoHoursAgo);
    appendSample(d, sample({ at: new Date(now) }), rot, now);
    expect(readdirSync(historyDir(d))).not.toContain(archives[0]);
  });

  it('four processes appending at once never interleave or tear a line', async () => {
    const d = tmp();
    const script = `import { appendSample } from ${JSON.stringify(join(ROOT, 'dist/history/store.js'))};
import { buildSample } from ${JSON.stringify(join(ROOT, 'dist/history/sample.js'))};
const w = Number(process.argv[1]);
for (let k = 0; k < 100; k++) appendSample(process.env.D, buildSample({ at: new Date(Date.UTC(2026, 10, 30, w, 0, k)), target: 'same', url: 'http://x', verdict: 'healthy', ms: k, steps: [{ step: 'live', status: 'warn', detail: 'x'.repeat(250), ms: 1 }], gpus: Array.from({ length: 8 }, (_, i) => ({ i, util: 50, temp: 60, mem: 1000, memTotal: 2000, power: 500, ecc: 0, xid: 0 })) }));`;
    await Promise.all(
      [0, 1, 2, 3].map((w) =>
        execa(process.execPath, ['--input-type=module', '-e', script, String(w)], { env: { D: d } }),
      ),
    );
    const r = readHistory(d);
    expect(r.skipped).toEqual([]);
    expect(r.samples).toHaveLength(400);
  });
});

describe('sample line', () => {
  it('stays below PIPE_BUF, dropping histograms first and saying so', () => {
    const big = {
      le: Array.from({ length: 200 }, (_, k) => k / 10),
      n: Array.from({ length: 201 }, (_, k) => k * 1000),
      sum: 1,
      count: 200_000,
    };
    const s = sample({
      gpus: Array.from({ length: 8 }, (_, i) => ({
        i,
        util: 90,
        mem: 132000,
        memTotal: 143771,
        temp: 70,
        power: 600,
        ecc: 0,
        xid: 0,
      })),
    });
    s.ttft = big;
    s.itl = big;
    const line = sampleLine(s);
    expect(Buffer.byteLength(line)).toBeLessThanOrEqual(LINE_MAX);
    const back = JSON.parse(line);
    expect(back.trunc).toBe(true);
    expect(back.ttft).toBeUndefined();
    expect(back.gpu).toHaveLength(8);
  });
  it('keeps failing-step details as the cause of an incident', () => {
    const s = sample({
      verdict: 'unhealthy',
      steps: [{ step: 'inference', status: 'fail', detail: 'no token within 5000 ms', ms: 5000 }],
    });
    expect(s.why).toEqual(['inference fail: no token within 5000 ms']);
  });
});

it('history files are plain JSON Lines that other tools can read', () => {
  const d = tmp();
  const p = appendSample(d, sample());
  writeFileSync(p + '.copy', readFileSync(p));
  expect(
    readFileSync(p, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).verdict),
  ).toEqual(['healthy']);
});
