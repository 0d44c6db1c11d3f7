// Making room for an on-demand start, pure (src/gateway/room.ts): the least recently used first,
// never a pinned one, one with requests in flight, or one the gateway could not start again; only as
// many as the plan needs; sleep frees less than stop (and on a Spark a level-1 sleep keeps the weights).
import { describe, it, expect } from 'vitest';
import { planRoom, heldBytes, roomOf, type Holder, type Budget } from '../../src/gateway/room.js';
import { CONTEXT_BYTES, DEFAULT_DRIVER_BYTES } from '../../src/profiles/colocate.js';

const GiB = 2 ** 30;
const gpu: Budget = { totalBytes: 80 * GiB, unified: false };
const spark: Budget = { totalBytes: 128 * GiB, unified: true };
const h = (profile: string, needGiB: number, o: Partial<Holder> = {}): Holder => ({
  profile,
  needBytes: needGiB * GiB,
  weightsBytes: (needGiB / 2) * GiB,
  state: 'running',
  pinned: false,
  inFlight: 0,
  lastUsedMs: 1000,
  onDemand: true,
  ...o,
});
const now = 100_000;

describe('the room', () => {
  it('a GPU: its memory less the driver part; a Spark: 0.8 of its unified memory', () => {
    expect(roomOf(gpu)).toBe(80 * GiB - DEFAULT_DRIVER_BYTES);
    expect(roomOf(spark)).toBeCloseTo(0.8 * 128 * GiB);
  });
  it.each<[Holder['state'], Budget, number]>([
    ['running', gpu, 40 * GiB],
    ['sleeping2', gpu, CONTEXT_BYTES],
    ['sleeping1', gpu, CONTEXT_BYTES],
    // a Spark: the weights a level-1 sleep moves to host memory are the same memory
    ['sleeping1', spark, CONTEXT_BYTES + 20 * GiB],
    ['sleeping2', spark, CONTEXT_BYTES],
  ])('%s on %j holds', (state, b, want) => expect(heldBytes(h('a', 40, { state }), b)).toBe(want));
});

describe('planRoom', () => {
  const cases: Array<
    [string, Budget, Holder[], number, 'stop' | 'sleep1' | 'sleep2', { fits: boolean; evict: string[] }]
  > = [
    ['fits beside what runs: nothing evicted', gpu, [h('a', 30)], 30, 'stop', { fits: true, evict: [] }],
    [
      'the least recently used goes first, and only as many as needed',
      gpu,
      [h('a', 30, { lastUsedMs: 5000 }), h('b', 30, { lastUsedMs: 2000 })],
      30,
      'stop',
      { fits: true, evict: ['b'] },
    ],
    [
      'two needed: both, oldest first',
      gpu,
      [h('a', 30, { lastUsedMs: 5000 }), h('b', 30, { lastUsedMs: 2000 })],
      70,
      'stop',
      { fits: true, evict: ['b', 'a'] },
    ],
    [
      'a pinned one is passed over for a newer one',
      gpu,
      [h('a', 30, { lastUsedMs: 5000 }), h('b', 30, { lastUsedMs: 2000, pinned: true })],
      30,
      'stop',
      { fits: true, evict: ['a'] },
    ],
    [
      'one with a request in flight is passed over',
      gpu,
      [h('a', 30, { lastUsedMs: 5000 }), h('b', 30, { lastUsedMs: 2000, inFlight: 1 })],
      30,
      'stop',
      { fits: true, evict: ['a'] },
    ],
    [
      'one outside the on-demand set is never evicted (nothing would bring it back)',
      gpu,
      [h('a', 30, { onDemand: false }), h('b', 30, { lastUsedMs: 9000 })],
      30,
      'stop',
      { fits: true, evict: ['b'] },
    ],
    // CI: a loaded host held HAProxy's `show stat` past its deadline; the count read as 0 stopped a model mid-stream
    [
      'one whose requests in flight could not be read is passed over (unknown is not none)',
      gpu,
      [h('a', 30, { lastUsedMs: 5000 }), h('b', 30, { lastUsedMs: 2000, inFlight: 'unknown' })],
      30,
      'stop',
      { fits: true, evict: ['a'] },
    ],
    [
      'every count unread: nothing is evicted',
      gpu,
      [h('a', 30, { inFlight: 'unknown' }), h('b', 30, { inFlight: 'unknown' })],
      30,
      'stop',
      { fits: false, evict: [] },
    ],
    [
      'all pinned or busy: it does not fit, nothing is evicted',
      gpu,
      [h('a', 40, { pinned: true }), h('b', 30, { inFlight: 2 })],
      30,
      'stop',
      { fits: false, evict: [] },
    ],
    [
      'bigger than the room at all: refused without evicting',
      gpu,
      [h('a', 10)],
      90,
      'stop',
      { fits: false, evict: [] },
    ],
    [
      'sleep (level 2) frees all but the context',
      gpu,
      [h('a', 30, { lastUsedMs: 5000 }), h('b', 30, { lastUsedMs: 2000 })],
      30,
      'sleep2',
      { fits: true, evict: ['b'] },
    ],
    [
      'a Spark, level 1: the weights stay in the unified memory, so a second one is needed',
      spark,
      [h('a', 40, { lastUsedMs: 5000 }), h('b', 40, { lastUsedMs: 2000 })],
      45,
      'sleep1',
      { fits: true, evict: ['b', 'a'] },
    ],
    [
      'a Spark, level 2 frees enough with one',
      spark,
      [h('a', 40, { lastUsedMs: 5000 }), h('b', 40, { lastUsedMs: 2000 })],
      45,
      'sleep2',
      { fits: true, evict: ['b'] },
    ],
    [
      'one already asleep frees nothing more by sleep: the running one is slept',
      gpu,
      [h('a', 30, { lastUsedMs: 1, state: 'sleeping2' }), h('b', 40, { lastUsedMs: 2000 })],
      40,
      'sleep2',
      { fits: true, evict: ['b'] },
    ],
    [
      'the newcomer itself (asleep): not its own victim, and what it holds asleep is part of its need, not counted twice',
      gpu,
      [h('n', 30, { state: 'sleeping2', lastUsedMs: 1 }), h('b', 49.5, { lastUsedMs: 2000 })],
      30,
      'stop',
      { fits: true, evict: ['b'] },
    ],
  ];
  it.each(cases)('%s', (_, b, holders, need, how, want) => {
    const r = planRoom(b, holders, { profile: 'n', needBytes: need * GiB }, how, now);
    expect({ fits: r.fits, evict: r.evict.map((e) => e.profile) }).toEqual(want);
    if (r.fits) expect(r.heldBytes + need * GiB).toBeLessThanOrEqual(r.roomBytes);
    for (const e of r.evict) expect(e.how).toBe(how);
  });
  it('says why it cannot: the numbers and each holder passed over', () => {
    const r = planRoom(
      gpu,
      [h('a', 40, { pinned: true }), h('b', 30, { inFlight: 2 })],
      { profile: 'n', needBytes: 30 * GiB },
      'stop',
      now,
    );
    expect(r.reason).toMatch(
      /n needs 30\.0 GiB and only .* can be freed now \(a pinned, b has 2 request\(s\) in flight\)/,
    );
    const u = planRoom(gpu, [h('b', 60, { inFlight: 'unknown' })], { profile: 'n', needBytes: 30 * GiB }, 'stop', now);
    expect(u.reason).toContain("b's requests in flight could not be read");
  });
});
