// The watcher and a multi-node server: it follows the registry's cluster records (the record is
// what names a rank's process on its node), reads every rank through the hand the verb gives (in the
// verb: the record's executor over ssh, as `sparkctl status` does; here a stand-in returning what a
// node would, since ssh into network-namespace nodes is the heavy multinode suite's), reads the head's
// API (a real simulator), and judges. A rank gone: dead, alerted with how to relaunch, never
// restarted (sparkctl restart refuses a multi-node server). A wedged head (requests frozen, probe
// unanswered): wedged. Ranks unknown (a nodes file unreadable): not dead on that alone.
import { afterAll, describe, expect, it } from 'vitest';
import { Registry, type ClusterRecord } from '../../src/engine/registry.js';
import { DEFAULT_WATCH, Watcher, type WatchEvent } from '../../src/watch/supervisor.js';
import type { RankReading } from '../../src/watch/read.js';
import { rmrf, startSim, tempDir, type SimHandle } from '../helpers.js';

const dirs: string[] = [];
const sims: SimHandle[] = [];
afterAll(async () => {
  for (const s of sims) await s.stop();
  for (const d of dirs) rmrf(d);
});

function setup(url: string, ranks: () => RankReading, probeOk = true) {
  const dir = tempDir('sparkctl-watch-cluster-');
  dirs.push(dir);
  const reg = new Registry(dir);
  const rec: ClusterRecord = {
    version: 1,
    profile: 'big',
    nodesFile: '/etc/sparkctl/nodes.yaml',
    head: 'spark-a',
    pid: 4242,
    port: Number(new URL(url).port),
    url,
    servedName: 'Qwen/Qwen3.5-9B',
    logFile: '/var/log/x',
    startedAt: new Date().toISOString(),
    startTime: 1,
    executor: 'native',
    ranks: [],
  };
  reg.write('nodes', rec);
  const events: WatchEvent[] = [];
  const restarts: string[] = [];
  let rankReads = 0;
  // the watcher's clock: 300 ms a tick, whatever the host's load (ticks() moves it)
  const clock = { t: Date.now() };
  const w = new Watcher({
    now: () => clock.t,
    registry: reg,
    ranksEveryMs: 1000,
    names: [],
    intervalMs: 200,
    dryRun: false,
    readTimeoutMs: 2000,
    hands: {
      restart: async (h) => {
        restarts.push(h.entry.inst.name);
        return { ok: true, detail: '' };
      },
      probe: async () => ({ ok: probeOk, ms: 5, detail: probeOk ? '1 token' : 'no token within 1000 ms' }),
      ranks: async () => {
        rankReads++;
        return ranks();
      },
      policyOf: () => ({ ...DEFAULT_WATCH, windowSeconds: 2, deadAfterSeconds: 1 }),
      emit: (e) => events.push(e),
    },
  });
  return { w, events, restarts, rankReads: () => rankReads, dir, clock };
}
const verdicts = (evs: WatchEvent[]) =>
  evs.filter((e) => e.kind === 'verdict').map((e) => (e as { verdict: string }).verdict);
const ticks = async (x: { w: Watcher; clock: { t: number } }, n: number) => {
  for (let i = 0; i < n; i++) {
    await x.w.tick();
    x.clock.t += 300;
  }
};

describe('watch: multi-node servers by their cluster records', () => {
  it('every rank alive and the head serving: healthy; a rank gone: dead, alerted with the relaunch, never restarted', async () => {
    const sim = await startSim([]);
    sims.push(sim);
    let ranks: RankReading = { alive: 2, total: 2 };
    const x = setup(sim.url, () => ranks);
    await ticks(x, 2);
    expect(verdicts(x.events)).toEqual(['healthy']);
    expect(x.events.find((e) => e.kind === 'verdict')).toMatchObject({ target: 'big (multi-node)', profile: 'big' });
    ranks = { alive: 1, total: 2, detail: 'rank 1 on spark-b gone' };
    await ticks(x, 5);
    expect(verdicts(x.events)).toEqual(['healthy', 'dead']);
    const dead = x.events.find((e) => e.kind === 'verdict' && e.verdict === 'dead') as Extract<
      WatchEvent,
      { kind: 'verdict' }
    >;
    expect(dead.why).toBe('1 of 2 ranks gone');
    expect(dead.evidence[0]).toMatchObject({ signal: 'ranks', value: '1/2', note: 'rank 1 on spark-b gone' });
    const alerts = x.events.filter((e) => e.kind === 'action');
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toMatchObject({ action: 'alert' });
    expect((alerts[0] as { why: string }).why).toContain(
      'sparkctl stop big && sparkctl serve big --nodes /etc/sparkctl/nodes.yaml',
    );
    expect(x.restarts).toEqual([]);
    // 7 ticks 300 ms apart (0 to 1.8 s); the ranks (an ssh per node) read at most once a second here (ranksEveryMs): at
    // 0 and 1.2 s
    expect(x.rankReads()).toBe(2);
  });

  it('a wedged head (a held request frozen, the probe unanswered): wedged; ranks unknown alone: not dead', async () => {
    const sim = await startSim(['--sim-fault', 'zombie-after:0']);
    sims.push(sim);
    const x = setup(sim.url, () => undefined, false);
    // a request the wedged engine holds, counted as running
    const ac = new AbortController();
    const held = fetch(`${sim.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'Qwen/Qwen3.5-9B', prompt: 'hi', max_tokens: 50 }),
      signal: ac.signal,
    }).catch(() => undefined);
    await ticks(x, 14);
    expect(verdicts(x.events)).not.toContain('dead');
    expect(verdicts(x.events)).toContain('wedged');
    expect(x.restarts).toEqual([]);
    ac.abort();
    await held;
  }, 30_000);
});
