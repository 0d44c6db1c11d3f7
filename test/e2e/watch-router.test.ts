// sparkctl watch with a router: real HAProxy in front of three simulator replicas, one of which is
// wedged (the sim's zombie-if switch, its own by {port}: /health 200, its held request counted as
// running, nothing moving) while clients send a steady load through the router. The watcher calls it
// wedged and restarts it alone (restart --rolling --replica): HAProxy has it in drain (out of
// rotation) before its process is stopped, the other two replicas serve throughout, and every client
// failure is one HAProxy logged against the wedged replica (clients of the other replicas: 0).
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { Registry } from '../../src/engine/registry.js';
import { showStat, serverState } from '../../src/router/api.js';
import { isAlive } from '../../src/util/pid.js';
import { cli, freePortRange, isolated, sleep, waitFor } from '../helpers.js';
import { watcher, type WatchEvent } from '../watcher.js';

const HAPROXY = '/usr/sbin/haproxy';
const haveHaproxy = existsSync(HAPROXY);
if (!haveHaproxy)
  console.warn(
    `watch-router e2e skipped: ${HAPROXY} is not installed (apt-get install haproxy; .ci/run installs it where it can)`,
  );

const t = isolated({
  prefix: 'sparkctl-watch-router-',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_COLD_MS: '20' },
});

interface Ev extends WatchEvent {
  why?: string;
}

describe.skipIf(!haveHaproxy)('sparkctl watch behind the router (real HAProxy, simulator replicas)', () => {
  it('a wedged replica is drained out of rotation before it is stopped, restarted alone, and the clients of the other replicas see 0 failures', async () => {
    const base = await freePortRange(6);
    const wedge = join(t.state, 'wedge-{port}');
    const r = await cli(
      [
        'serve',
        'qwen3.5-9b',
        '--engine',
        'sim',
        '--router',
        '--no-prewarm',
        '--set',
        `server.port=${base}`,
        '--set',
        'server.host=127.0.0.1',
        '--set',
        'parallel.replicas=3',
        '--set',
        'router.checkIntervalMs=500',
        '--set',
        `env.SPARKCTL_SIM_FAULT=zombie-if:${wedge}`,
      ],
      { env: t.env(), timeout: 90_000 },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    const reg = new Registry(t.state);
    const router = reg.list().find((e) => e.inst.role === 'router')!.inst.router!;
    const victim = reg.list().find((e) => e.inst.name === 'qwen3.5-9b-1')!.inst;
    const others = ['qwen3.5-9b-0', 'qwen3.5-9b-2'];

    const w = watcher<Ev>(['--all', '--interval', '1s', '--window', '5s', '--probe-timeout', '2s'], { env: t.env() });
    const { events } = w;

    // the router's view of the victim and the victim's process, every 50 ms: which came first
    let drainedAt: number | undefined;
    let goneAt: number | undefined;
    let watching = true;
    const observer = (async () => {
      while (watching) {
        const st = await showStat(router.socket, 1000).catch(() => []);
        const s = st.find((x) => x.server === victim.name);
        if (!drainedAt && s && (serverState(s) === 'drain' || serverState(s) === 'maint')) drainedAt = Date.now();
        if (!goneAt && !isAlive(victim.pid, victim.startTime)) goneAt = Date.now();
        await sleep(50);
      }
    })();

    // clients: 6 at a time through the router, short requests, each with a deadline
    let ok = 0;
    const failures: string[] = [];
    let load = true;
    const client = async (i: number) => {
      while (load) {
        try {
          const res = await fetch(`http://127.0.0.1:${base}/v1/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'Qwen/Qwen3.5-9B', prompt: `client ${i}`, max_tokens: 4 }),
            signal: AbortSignal.timeout(60_000),
          });
          await res.text();
          if (res.status === 200) ok++;
          else failures.push(`HTTP ${res.status}`);
        } catch (e) {
          failures.push((e as Error).message);
        }
        await sleep(100);
      }
    };
    try {
      expect(await waitFor(() => events.filter((e) => e.verdict === 'healthy').length >= 3, 20_000), w.err()).toBe(
        true,
      );
      const clients = Array.from({ length: 6 }, (_, i) => client(i));
      await sleep(1500);
      // the simulator's {port}: on a socket (vLLM --uds behind the router, the default) the socket's name
      const own = victim.uds ? basename(victim.uds, '.sock') : String(victim.port);
      writeFileSync(wedge.replace('{port}', own), '');
      expect(
        await waitFor(() => events.some((e) => e.target === victim.name && e.verdict === 'wedged'), 30_000),
        JSON.stringify(events) + w.err(),
      ).toBe(true);
      rmSync(wedge.replace('{port}', own));
      expect(
        await waitFor(() => events.some((e) => e.action === 'restarted' || e.action === 'restart-failed'), 90_000),
        JSON.stringify(events) + w.err(),
      ).toBe(true);
      const done = events.find((e) => e.action === 'restarted' || e.action === 'restart-failed')!;
      expect(done.action, done.why).toBe('restarted');
      expect(done.why).toContain(`--rolling --replica ${victim.name}`);
      // back in rotation and serving: the load goes on a little with all three
      expect(
        await waitFor(
          async () =>
            serverState((await showStat(router.socket, 1000)).find((x) => x.server === victim.name)!) === 'up',
          15_000,
        ),
        'the restarted replica back in rotation',
      ).toBe(true);
      await sleep(2000);
      load = false;
      await Promise.all(clients);
    } finally {
      load = false;
      watching = false;
      await observer;
      await w.stop();
    }
    // only the wedged replica was restarted, and it was out of rotation before its process ended
    expect(events.filter((e) => e.action === 'restart').map((e) => e.target)).toEqual([victim.name]);
    expect(drainedAt, 'HAProxy had the wedged replica in drain').toBeDefined();
    expect(goneAt, 'the wedged replica was stopped').toBeDefined();
    expect(drainedAt!).toBeLessThan(goneAt!);
    const after = new Registry(t.state).list();
    for (const name of others) expect(after.find((e) => e.inst.name === name)!.alive).toBe(true);
    // every abnormal request HAProxy logged (dontlog-normal: only those) was on the wedged replica,
    // and each client failure is one of them: the other replicas' clients saw none
    const log = readFileSync(reg.list().find((e) => e.inst.role === 'router')!.inst.logFile, 'utf8');
    // httplog: `IP:PORT [date] public replicas/SERVER Tq/Tw/Tc/Tr/Ta STATUS BYTES ...`
    const abnormal = log
      .split('\n')
      .map((l) => / public [\w.-]+\/([\w.-]+) [\d/+-]+ (-?\d+) /.exec(l))
      .filter((m): m is RegExpExecArray => Boolean(m))
      .map((m) => ({ server: m[1]!, status: Number(m[2]) }));
    expect(
      abnormal.filter((a) => a.server !== victim.name),
      'abnormal requests on the replicas that were not wedged',
    ).toEqual([]);
    expect(
      failures.length,
      `client failures: ${failures.join('; ')}; HAProxy: ${JSON.stringify(abnormal)}`,
    ).toBeLessThanOrEqual(abnormal.length);
    expect(ok).toBeGreaterThan(50);
    console.info(
      `[watch-router] ${ok} answered, ${failures.length} failed (all on ${victim.name}); drained ${((goneAt! - drainedAt!) / 1000).toFixed(1)} s before its process ended`,
    );
  }, 180_000);
});
