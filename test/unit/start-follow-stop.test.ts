// A worker rank's log is followed on its node (engine/start.ts startFollowing: an ssh every 1.5 s)
// only while its serve runs: serve's one loop (engine/serve.ts servePlaced) stops it on every end,
// a throw after the launch included (then what started is stopped: abandon), and its timer never
// keeps a process alive. The node is a stand-in: SPARKCTL_SSH is a script that counts each "ssh"
// and prints one log line (no real node or sshd is needed to count the reads).
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StartRecord } from '../../src/engine/start.js';
import { servePlaced, type Placed } from '../../src/engine/serve.js';
import type { NodesFile, NodeEntry } from '../../src/profiles/schema.js';
import type { ServeOutcome } from '../../src/engine/events.js';

let dir: string;
let count: string;
const prevSsh = process.env.SPARKCTL_SSH;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'sparkctl-follow-'));
  const script = join(dir, 'ssh');
  // each test counts in its own file (a loop an earlier test left running cannot count in this one's)
  writeFileSync(script, `#!/bin/sh\necho x >> "$SPARKCTL_TEST_READS"\necho 'INFO Loading weights took 1.00 GiB'\n`);
  chmodSync(script, 0o755);
  process.env.SPARKCTL_SSH = script;
});
let n = 0;
beforeEach(() => {
  count = join(dir, `reads-${n++}`);
  process.env.SPARKCTL_TEST_READS = count;
});
afterAll(() => {
  if (prevSsh === undefined) delete process.env.SPARKCTL_SSH;
  else process.env.SPARKCTL_SSH = prevSsh;
  delete process.env.SPARKCTL_TEST_READS;
  rmSync(dir, { recursive: true, force: true });
});

const node = { name: 'spark-b', address: '192.0.2.11', sshUser: 'root', sshPort: 22, gpus: 1 } as unknown as NodeEntry;
const nf = { head: { ...node, name: 'spark-a' }, workers: [node], ssh: { connectTimeoutSeconds: 5, options: [] } } as unknown as NodesFile;
const reads = () => (existsSync(count) ? readFileSync(count, 'utf8').split('\n').filter(Boolean).length : 0);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A record following one worker's log, as native.ts's watch begins it; resolves once it has read once. */
async function following(): Promise<StartRecord> {
  const s = new StartRecord();
  s.launched({ index: 1, server: 'x', node: 'spark-b', ready: false });
  s.follow(1, nf, node, (n) => `tail -n ${n} /log`);
  const before = reads();
  s.startFollowing();
  for (let i = 0; i < 100 && reads() === before; i++) await sleep(20);
  expect(reads()).toBeGreaterThan(before);
  return s;
}

/** Still read after `ms`? (a read every ~1.55 s while it follows) */
async function readsOn(ms = 2000): Promise<boolean> {
  const n = reads();
  await sleep(ms);
  return reads() > n;
}

describe('StartRecord: following a node log stops', () => {
  it('stop(): no read after it', async () => {
    const s = await following();
    await s.stop();
    expect(await readsOn()).toBe(false);
  });

  it("the wait between reads never holds the process open (its timer is unref'd)", async () => {
    const spy = vi.spyOn(globalThis, 'setTimeout');
    const s = await following();
    try {
      const waits = () => spy.mock.calls.flatMap((c, i) => (c[1] === 1550 ? [spy.mock.results[i]?.value as NodeJS.Timeout] : []));
      for (let i = 0; i < 150 && !waits().length; i++) await sleep(20);
      expect(waits().length).toBeGreaterThan(0);
      for (const t of waits()) expect(t.hasRef()).toBe(false);
    } finally {
      spy.mockRestore();
      await s.stop();
    }
  });
});

describe("servePlaced: every end of serve's loop stops following; a throw after the launch stops what started", () => {
  const outcome = { profile: 'x', engine: 'sim', replicas: [], status: 'healthy', stoppedAll: false } as unknown as ServeOutcome;
  const boom = () => {
    throw new Error('boom');
  };
  const cases: Array<[string, Partial<Placed<unknown>>, 'throws' | 'healthy']> = [
    ['endpoints() throws (the watch could not begin)', { endpoints: boom }, 'throws'],
    ['ready() throws', { ready: async () => boom() }, 'throws'],
    ['the outcome throws (a record write after the probe)', { ready: async () => ({ endpoints: [], outcome: async () => boom() }) }, 'throws'],
    ['a normal end', {}, 'healthy'],
  ];
  it.each(cases)('%s', async (_, over, want) => {
    const s = new StartRecord();
    let abandoned = 0;
    const p: Placed<unknown> = {
      groups: [],
      start: s,
      refuse: async () => undefined,
      before: async () => undefined,
      launch: async () => ({ ref: 1 }),
      launched: () => {},
      // the record written: the nodes' watch begins following each worker's log (native.ts nativeWatch)
      record: () => {
        s.launched({ index: 1, server: 'x', node: 'spark-b', ready: false });
        s.follow(1, nf, node, (n) => `tail -n ${n} /log`);
        s.startFollowing();
      },
      endpoints: () => [],
      failed: async () => outcome,
      notReady: async () => outcome,
      ready: async () => ({ endpoints: [], outcome: async () => outcome }),
      abandon: async () => {
        abandoned++;
      },
      ...over,
    };
    const plan = { prewarm: false, probe: {} } as never;
    const r = servePlaced(plan, p, {}, () => {});
    if (want === 'throws') await expect(r).rejects.toThrow('boom');
    else await expect(r).resolves.toBe(outcome);
    expect(abandoned).toBe(want === 'throws' ? 1 : 0);
    expect(await readsOn()).toBe(false);
  });
});
