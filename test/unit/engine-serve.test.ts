// A worker rank's log is followed on its node (engine/start.ts startFollowing: a read over ssh every
// 1.5 s) only while its serve runs: serve's one loop (engine/serve.ts servePlaced) stops it on every
// end, a throw or a cancellation after the launch included, and a stop ends it at once: no read and
// no timer of it is left after the stop resolves (an earlier fix unref'd the timer instead; that let a
// process awaiting the loop exit mid-await, and the multinode e2e failed). The node's log is a stand-in:
// RemoteView.poll is counted here (nothing is sent anywhere); time is vitest's fake clock, so a loop
// left running is seen by moving the clock, not by waiting.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StartRecord } from '../../src/engine/start.js';
import { RemoteView } from '../../src/engine/cluster/remote-view.js';
import { servePlaced, type Placed } from '../../src/engine/serve.js';
import type { NodesFile, NodeEntry } from '../../src/profiles/schema.js';
import type { ServeOutcome } from '../../src/engine/events.js';

const node = { name: 'spark-b', address: '192.0.2.11', sshUser: 'root', sshPort: 22, gpus: 1 } as unknown as NodeEntry;
const nf = {
  head: { ...node, name: 'spark-a' },
  workers: [node],
  ssh: { connectTimeoutSeconds: 5, options: [] },
} as unknown as NodesFile;

let reads = 0;
/** while set, a read waits for `release` (a read under way) */
let hold = false;
let release: (() => void) | undefined;

beforeEach(() => {
  vi.useFakeTimers();
  reads = 0;
  hold = false;
  release = undefined;
  vi.spyOn(RemoteView.prototype, 'poll').mockImplementation(async () => {
    reads++;
    if (hold) await new Promise<void>((r) => (release = r));
    return [];
  });
});
afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

/** microtasks run out (fake time stands still) */
const settle = async () => {
  for (let i = 0; i < 50; i++) await Promise.resolve();
};

/** A record following one worker's log, as native.ts's watch begins it. */
function follow(s: StartRecord): void {
  s.launched({ index: 1, server: 'x', node: 'spark-b', ready: false });
  s.follow(1, nf, node, (n) => `tail -n ${n} /log`);
  s.startFollowing();
}

/** How many reads the next 30 s of (fake) time would make: 0 when nothing follows any more. */
async function readsLater(): Promise<number> {
  const n = reads;
  await vi.advanceTimersByTimeAsync(30_000);
  return reads - n;
}

describe('StartRecord: following a node log stops', () => {
  it('reads every ~1.5 s while it follows; stop() during the wait: no read after it, no timer left', async () => {
    const s = new StartRecord();
    follow(s);
    await settle();
    expect(reads).toBe(1);
    await vi.advanceTimersByTimeAsync(1600);
    expect(reads).toBe(2);
    await s.stop();
    // nothing of the loop holds the process (its wait's timer cleared), and nothing reads again
    expect(vi.getTimerCount()).toBe(0);
    expect(await readsLater()).toBe(0);
    // a second stop, and a start after a stop, do nothing
    await s.stop();
    s.startFollowing();
    expect(await readsLater()).toBe(0);
  });

  it('reports() while a read is under way: following ends with that read (no 1.5 s wait after it), then one last read', async () => {
    const s = new StartRecord();
    hold = true;
    follow(s);
    await settle();
    expect(reads).toBe(1);
    let done = false;
    const r = s.reports().then((x) => {
      done = true;
      return x;
    });
    await settle();
    expect(done).toBe(false); // the read under way is waited for (never two reads of one log at once)
    hold = false;
    release!();
    await settle();
    // no clock moved: the old loop slept 1.55 s here before it saw the stop
    expect(done).toBe(true);
    expect(reads).toBe(2); // the read under way, and reports()' own last read
    expect((await r).map((g) => g.group)).toEqual([1]);
    expect(vi.getTimerCount()).toBe(0);
    expect(await readsLater()).toBe(0);
  });
});

describe("servePlaced: every end of serve's loop stops following", () => {
  const outcome = {
    profile: 'x',
    engine: 'sim',
    replicas: [],
    status: 'healthy',
    stoppedAll: false,
  } as unknown as ServeOutcome;
  const boom = (): never => {
    throw new Error('boom');
  };
  const cancelled = () => {
    const c = new AbortController();
    c.abort();
    return c.signal;
  };
  // each placement begins following when the watch begins (native.ts nativeWatch, from endpoints()); none of these ends
  // takes the reports
  const cases: Array<[string, Partial<Placed<unknown>>, 'throws' | 'resolves']> = [
    ['endpoints() throws after following began', { endpoints: (_hs) => boom() }, 'throws'],
    ['ready() throws (after the watch)', { ready: async () => boom() }, 'throws'],
    [
      'the outcome throws (a record write after the probe)',
      { ready: async () => ({ endpoints: [], outcome: async () => boom() }) },
      'throws',
    ],
    [
      'cancelled (Ctrl-C) during the watch, and the failure read throws',
      { cancel: cancelled(), notReady: async () => boom() },
      'throws',
    ],
    ['cancelled (Ctrl-C) during the watch: the interrupted outcome', { cancel: cancelled() }, 'resolves'],
    ['a normal end', {}, 'resolves'],
  ];
  it.each(cases)('%s', async (_, over, want) => {
    const s = new StartRecord();
    const p: Placed<unknown> = {
      groups: [],
      start: s,
      refuse: async () => undefined,
      before: async () => undefined,
      launch: async () => ({ ref: 1 }),
      launched: () => {},
      record: () => {},
      endpoints: () => {
        follow(s);
        return [];
      },
      failed: async () => outcome,
      notReady: async () => outcome,
      ready: async () => ({ endpoints: [], outcome: async () => outcome }),
      abandon: async () => {},
      ...over,
    };
    if (over.endpoints)
      p.endpoints = (hs) => {
        follow(s);
        return over.endpoints!(hs);
      };
    const plan = { prewarm: false, probe: {} } as never;
    const r = servePlaced(plan, p, {}, () => {});
    if (want === 'throws') await expect(r).rejects.toThrow('boom');
    else await expect(r).resolves.toBe(outcome);
    expect(reads).toBeGreaterThan(0); // it did follow
    expect(vi.getTimerCount()).toBe(0);
    expect(await readsLater()).toBe(0);
  });
});
