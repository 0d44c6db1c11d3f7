// The watcher's verdict over recorded metric sequences: a wedge only with requests held, nothing the
// engine reports moving for the evidence-set window, and a second signal agreeing; every other state
// has its own verdict and is never wedged. Sequences are written as ticks of the real shape (the
// numbers vLLM's /metrics gives, test/fixtures/captures/vllm-0.27.2/metrics.txt, read by engineNumbers).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { engineNumbers, moved, type EngineNumbers } from '../../src/watch/signals.js';
import { DEFAULT_POLICY, judge, windowOf, type Reading, type Verdict } from '../../src/watch/verdict.js';

const T0 = Date.parse('2026-12-04T03:00:00Z');
const idle: EngineNumbers = {
  running: 0,
  waiting: 0,
  kv: 0,
  generation: 100,
  prompt: 500,
  preemptions: 0,
  iterations: 50,
  prefills: 10,
  finished: 10,
};

/** One reading every `every` s from T0, each tick's numbers from `at(i)` on top of `idle`. */
function seq(
  n: number,
  at: (i: number) => Partial<EngineNumbers>,
  extra: (i: number) => Partial<Reading> = () => ({}),
  every = 5,
): Reading[] {
  return Array.from({ length: n }, (_, i) => ({
    at: T0 + i * every * 1000,
    process: 'alive' as const,
    health: 'ok' as const,
    metrics: { ...idle, ...at(i) },
    ...extra(i),
  }));
}
const last = (rs: Reading[], r: Partial<Reading>) => [...rs.slice(0, -1), { ...rs[rs.length - 1]!, ...r }];
const decoding = (i: number) => ({ running: 2, generation: 100 + 40 * i, iterations: 50 + 20 * i, kv: 0.1 });
const frozen = (i: number) => ({
  running: 2,
  generation: i < 2 ? 100 + 40 * i : 140,
  iterations: i < 2 ? 50 + 20 * i : 70,
  kv: 0.1,
});
const failed = { ok: false, ms: 10_000, detail: 'no token in 10 s' };
const answered = { ok: true, ms: 800, detail: '1 token in 800 ms' };

const cases: Array<{ name: string; rs: Reading[]; verdict: Verdict; wantProbe?: boolean; evidence?: string[] }> = [
  { name: 'idle', rs: seq(6, () => ({})), verdict: 'healthy' },
  {
    name: 'idle for an hour (nothing held: quiet is not a wedge)',
    rs: seq(
      60,
      () => ({}),
      () => ({}),
      60,
    ),
    verdict: 'healthy',
  },
  { name: 'decoding', rs: seq(6, decoding), verdict: 'busy' },
  {
    name: 'queue moving: saturated',
    rs: seq(6, (i) => ({ ...decoding(i), running: 8, waiting: 12 })),
    verdict: 'saturated',
  },
  { name: 'KV cache full, moving: saturated', rs: seq(6, (i) => ({ ...decoding(i), kv: 0.97 })), verdict: 'saturated' },
  {
    name: 'preemptions in the window: preempting',
    rs: seq(6, (i) => ({ ...decoding(i), waiting: 3, preemptions: i > 3 ? 2 : 0 })),
    verdict: 'preempting',
    evidence: ['vllm:num_preemptions_total'],
  },
  { name: 'frozen 15 s of a 20 s window: busy, no probe yet', rs: seq(5, frozen), verdict: 'busy', wantProbe: false },
  {
    name: 'frozen past the window, no probe: probe first',
    rs: seq(8, frozen),
    verdict: 'busy',
    wantProbe: true,
    evidence: ['frozen'],
  },
  {
    name: 'frozen past the window, probe unanswered: wedged',
    rs: last(seq(8, frozen), { probe: failed }),
    verdict: 'wedged',
    evidence: ['frozen', 'probe', 'vllm:generation_tokens_total'],
  },
  {
    name: 'frozen past the window, probe answered: busy (a long step)',
    rs: last(seq(8, frozen), { probe: answered }),
    verdict: 'busy',
    wantProbe: false,
  },
  {
    name: 'frozen with queued requests only, probe unanswered: wedged',
    rs: last(
      seq(8, () => ({ waiting: 4 })),
      { probe: failed },
    ),
    verdict: 'wedged',
  },
  {
    name: 'frozen and the engine process stopped (SIGSTOP): wedged without a probe',
    rs: seq(8, frozen, () => ({ process: 'stopped', processDetail: 'VLLM::EngineCore pid 42' })),
    verdict: 'wedged',
    evidence: ['process', 'frozen'],
  },
  {
    name: 'a probe from before the quiet spell does not count',
    rs: seq(9, frozen, (i) => (i === 0 ? { probe: failed } : {})),
    verdict: 'busy',
    wantProbe: true,
  },
  {
    name: 'long chunked prefill: tokens frozen, KV cache rising',
    rs: seq(20, (i) => ({ running: 1, kv: 0.05 + 0.02 * i })),
    verdict: 'busy',
  },
  {
    name: 'long prefill with a queue behind it: KV rising, saturated not wedged',
    rs: seq(20, (i) => ({ running: 1, waiting: 5, kv: 0.05 + 0.02 * i })),
    verdict: 'saturated',
  },
  {
    name: 'one-step prefill quiet 60 s on a server once quiet 40 s before moving: window 80 s, busy',
    rs: seq(25, (i) =>
      i < 2
        ? { running: 1 }
        : i < 10
          ? { running: 1, generation: 101 }
          : i < 12
            ? { running: 1, generation: 100 + i }
            : { running: 1, generation: 112 },
    ),
    verdict: 'busy',
    wantProbe: false,
  },
  {
    name: 'slow first tokens (TTFT up to 20 s): window 40 s, 30 s quiet is busy',
    rs: seq(8, (i) => ({ ...frozen(i), ttftMaxS: 20 })),
    verdict: 'busy',
    wantProbe: false,
  },
  {
    name: 'processes gone: dead',
    rs: last(seq(4, decoding), { process: 'gone', health: 'unreachable', metrics: undefined }),
    verdict: 'dead',
  },
  {
    name: 'a rank lost: dead',
    rs: last(seq(4, decoding), { ranks: { alive: 1, total: 2 } }),
    verdict: 'dead',
    evidence: ['ranks'],
  },
  {
    name: 'one failed /health: unknown, not dead',
    rs: last(seq(4, decoding), { health: 'unreachable', metrics: undefined }),
    verdict: 'unknown',
  },
  {
    name: '/health unreachable 10 s over 3 readings: dead',
    rs: seq(6, decoding, (i) => (i >= 3 ? { health: 'unreachable', metrics: undefined } : {})),
    verdict: 'dead',
    evidence: ['/health'],
  },
  {
    name: '/health 503 (engine dead) twice over 10 s: dead',
    rs: seq(6, decoding, (i) => (i >= 3 ? { health: 'fail', healthDetail: 'HTTP 503' } : {})),
    verdict: 'dead',
  },
  {
    name: 'the gateway is starting it (no process yet): loading',
    rs: seq(
      4,
      () => ({}),
      () => ({ owner: { by: 'gateway', state: 'starting' }, process: 'gone', health: 'unreachable' }),
    ),
    verdict: 'loading',
  },
  {
    name: 'the gateway is evicting it: draining, never dead',
    rs: seq(4, frozen, () => ({ owner: { by: 'gateway', state: 'evicting' }, process: 'gone' })),
    verdict: 'draining',
  },
  {
    name: 'the gateway put it to sleep: sleeping',
    rs: seq(10, frozen, () => ({ owner: { by: 'gateway', state: 'sleeping' } })),
    verdict: 'sleeping',
  },
  {
    name: 'serve is still starting it: loading',
    rs: seq(
      10,
      () => ({}),
      () => ({ owner: { by: 'serve', state: 'loading' }, health: 'unreachable' }),
    ),
    verdict: 'loading',
  },
  {
    name: 'held in drain by its router: draining, even frozen',
    rs: seq(10, frozen, () => ({ owner: { by: 'router', state: 'drain' } })),
    verdict: 'draining',
  },
  {
    name: 'asleep (sleep gauge awake=0) with requests queued: sleeping',
    rs: seq(10, () => ({ waiting: 2, awake: 0 })),
    verdict: 'sleeping',
  },
  {
    name: 'asleep by /is_sleeping: sleeping',
    rs: seq(
      10,
      () => ({ waiting: 2 }),
      () => ({ asleep: true }),
    ),
    verdict: 'sleeping',
  },
  {
    name: '/metrics unreadable, /health 200: unknown',
    rs: last(seq(4, decoding), { metrics: undefined }),
    verdict: 'unknown',
  },
  {
    name: 'idle, engine process stopped: probe',
    rs: seq(
      3,
      () => ({}),
      () => ({ process: 'stopped' }),
    ),
    verdict: 'unknown',
    wantProbe: true,
  },
  {
    name: 'idle, engine process stopped, probe unanswered: wedged',
    rs: last(
      seq(
        3,
        () => ({}),
        () => ({ process: 'stopped' }),
      ),
      { probe: failed },
    ),
    verdict: 'wedged',
  },
  {
    name: 'engine stopped while it decodes, before the window: probe first',
    rs: [
      ...seq(4, decoding),
      ...seq(
        2,
        () => decoding(3),
        () => ({ process: 'stopped', processDetail: 'VLLM::EngineCor pid 42' }),
      ).map((r, i) => ({ ...r, at: T0 + (4 + i) * 5000 })),
    ],
    verdict: 'unknown',
    wantProbe: true,
  },
  {
    name: 'engine stopped while it decodes, its probe unanswered a reading ago: wedged, and no second probe',
    rs: [
      ...seq(4, decoding),
      ...seq(
        3,
        () => decoding(3),
        (i) => ({ process: 'stopped', processDetail: 'VLLM::EngineCor pid 42', ...(i === 0 ? { probe: failed } : {}) }),
      ).map((r, i) => ({ ...r, at: T0 + (4 + i) * 5000 })),
    ],
    verdict: 'wedged',
    wantProbe: false,
    evidence: ['process', 'probe', 'vllm:num_requests_running'],
  },
  {
    name: 'another member stopped later (a new stop): probed again',
    rs: [
      ...seq(4, decoding),
      {
        ...seq(1, () => decoding(3))[0]!,
        at: T0 + 20_000,
        process: 'stopped',
        processDetail: 'VLLM::Worker pid 43',
        probe: answered,
      },
      {
        ...seq(1, () => decoding(3))[0]!,
        at: T0 + 25_000,
        process: 'stopped',
        processDetail: 'VLLM::EngineCor pid 42',
      },
    ],
    verdict: 'unknown',
    wantProbe: true,
  },
  {
    name: 'idle, engine process stopped, probe answered: healthy',
    rs: last(
      seq(
        3,
        () => ({}),
        () => ({ process: 'stopped' }),
      ),
      { probe: answered },
    ),
    verdict: 'healthy',
  },
];

describe('judge: recorded sequences', () => {
  for (const c of cases)
    it(c.name, () => {
      const r = judge(c.rs, DEFAULT_POLICY);
      expect(r.verdict, `${r.why} ${JSON.stringify(r.evidence)}`).toBe(c.verdict);
      if (c.wantProbe !== undefined) expect(r.wantProbe).toBe(c.wantProbe);
      for (const e of c.evidence ?? []) expect(r.evidence.map((x) => x.signal)).toContain(e);
      expect(r.why.length).toBeGreaterThan(5);
    });

  it('a wedge names the counters, their values and the times', () => {
    const r = judge(last(seq(8, frozen), { probe: failed }));
    const f = r.evidence.find((e) => e.signal === 'frozen')!;
    expect(f.at).toBe(new Date(T0 + 5_000).toISOString());
    expect(f.value).toBe(30);
    expect(r.stalledS).toBe(30);
    expect(r.evidence.find((e) => e.signal === 'vllm:generation_tokens_total')!.value).toBe(140);
    expect(r.evidence.find((e) => e.signal === 'vllm:num_requests_running')!.value).toBe(2);
  });

  it('no busy, saturated, preempting or long-prefill sequence is ever wedged at any prefix', () => {
    const families = [
      seq(60, decoding),
      seq(60, (i) => ({ ...decoding(i), running: 8, waiting: 30 - (i % 5), kv: 0.99 })),
      seq(60, (i) => ({ ...decoding(i), preemptions: Math.floor(i / 3) })),
      seq(60, (i) => ({ running: 1, kv: 0.01 * i })),
    ];
    for (const f of families)
      for (let n = 1; n <= f.length; n++) {
        const r = judge(f.slice(0, n));
        expect(r.verdict).not.toBe('wedged');
        expect(r.wantProbe).toBe(false);
      }
  });
});

describe('the window the evidence sets', () => {
  it('is the floor without evidence, twice the slowest TTFT bucket, twice a quiet spell that ended in progress, and capped', () => {
    expect(windowOf(seq(3, decoding), DEFAULT_POLICY).windowS).toBe(20);
    expect(
      windowOf(
        seq(3, () => ({ ttftMaxS: 40 })),
        DEFAULT_POLICY,
      ).windowS,
    ).toBe(80);
    // above the top finite bucket (2560 s): at least twice it, then the cap
    const capped = windowOf(
      seq(3, () => ({ ttftMaxS: Infinity, ttftAtLeastS: 2560 })),
      DEFAULT_POLICY,
    );
    expect(capped.windowS).toBe(600);
    expect(capped.because.map((b) => b.signal)).toContain('window cap');
    const gap = seq(12, (i) => ({ running: 1, generation: i < 9 ? 100 : 100 + i }));
    // quiet from 0 s to 45 s, then moving: twice 45 s
    expect(windowOf(gap, DEFAULT_POLICY).windowS).toBe(90);
  });
});

describe('engineNumbers: what /metrics says', () => {
  const real = readFileSync(new URL('../fixtures/captures/vllm-0.27.2/metrics.txt', import.meta.url), 'utf8');
  it('reads the real vLLM 0.27.2 answer', () => {
    const n = engineNumbers(real);
    expect(n).toMatchObject({
      running: 0,
      waiting: 0,
      kv: 0,
      prompt: 2757,
      generation: 23,
      iterations: 23,
      awake: 1,
      ttftMaxS: 2.5,
    });
    expect(n.prefills).toBeGreaterThan(0);
  });
  it('reads the old KV name, leaves absent families undefined, refuses impossible values', () => {
    const n = engineNumbers(
      'vllm:gpu_cache_usage_perc{engine="0"} 0.5\nvllm:num_requests_running 3\nvllm:num_requests_waiting -1\nvllm:generation_tokens_total NaN\ngarbage line\n',
    );
    expect(n.kv).toBe(0.5);
    expect(n.running).toBe(3);
    expect(n.waiting).toBeUndefined();
    expect(n.generation).toBeUndefined();
    expect(n.prompt).toBeUndefined();
    expect(engineNumbers('vllm:kv_cache_usage_perc 7\n').kv).toBeUndefined();
  });
  it('TTFT above every finite bucket: Infinity with the top finite bound', () => {
    const n = engineNumbers(
      'vllm:time_to_first_token_seconds_bucket{le="1.0"} 1\nvllm:time_to_first_token_seconds_bucket{le="2560.0"} 1\nvllm:time_to_first_token_seconds_bucket{le="+Inf"} 2\n',
    );
    expect(n.ttftMaxS).toBe(Infinity);
    expect(n.ttftAtLeastS).toBe(2560);
  });
  it('moved: only keys both readings have, and that differ', () => {
    expect(moved({ generation: 1, kv: 0.1 }, { generation: 1, kv: 0.2 })).toEqual(['kv']);
    expect(moved({ generation: 1 }, { prompt: 5 })).toEqual([]);
  });
});
