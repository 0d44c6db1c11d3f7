// Issue 42 item 12 (every failure to start is named), the router's case: a port HAProxy is about to
// bind that another process holds ends the launch naming the port, the holder (pid and name, read
// from /proc) and the fix, with exit 4 and nothing left running. Before, the router's failure was
// HAProxy's whole banner ("haproxy exited with code 1: ... [NOTICE] ... [ALERT] ...") with no
// holder and no fix. Real HAProxy, simulator replicas, a real foreign listener (a node process
// started by the test, holding the port); preflight is skipped so the launch itself meets the port.
import { describe, it, expect, afterAll } from 'vitest';
import { existsSync } from 'node:fs';
import { execa } from 'execa';
import { cli, freePortRange, tempDirs } from '../helpers.js';
import { bindTrial, holdersInWords } from '../../src/engine/runtime/socket-owner.js';

const why = existsSync('/usr/sbin/haproxy') ? undefined : 'no /usr/sbin/haproxy (apt-get install haproxy)';
if (why) console.warn(`router-port-taken suite skipped: ${why}`);
const dirs = tempDirs('sparkctl-router-port-');
const held: Array<ReturnType<typeof execa>> = [];
afterAll(() => {
  for (const h of held) h.kill('SIGKILL');
});

/** A process of the test's own that listens on `port` until killed; resolves once it listens. */
async function holdPort(port: number) {
  const child = execa(process.execPath, ['-e', `require('node:net').createServer().listen(${port}, '127.0.0.1', () => console.log('listening'))`], { reject: false });
  held.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => String(d).includes('listening') && resolve());
    setTimeout(() => reject(new Error('the holder did not listen in 10 s')), 10_000);
  });
  return child;
}

describe.skipIf(!!why)("the router's ports, tried before HAProxy binds them", () => {
  it('bindTrial: a free port is free; a held one names its holder (pid and comm from /proc)', async () => {
    const port = await freePortRange(1);
    expect(await bindTrial('127.0.0.1', port)).toBeUndefined();
    const h = await holdPort(port);
    const taken = await bindTrial('127.0.0.1', port);
    expect(taken?.code).toBe('EADDRINUSE');
    expect(taken?.holders.map((x) => x.pid)).toContain(h.pid);
    expect(holdersInWords(taken!.holders)).toMatch(new RegExp(`pid ${h.pid} \\("node"\\)`));
    expect(holdersInWords([])).toMatch(/cannot be read here/);
  });

  for (const which of ['public', 'stats'] as const) {
    it(`serve --router with the router's ${which} port held by another process: exit 4 naming the port, the holder and the fix; nothing left`, async () => {
      const state = dirs();
      const base = await freePortRange(8);
      // replicas take base+1.. (qwen3.5-9b: 4 replicas on the simulated 8-GPU host), stats after the last
      const port = which === 'public' ? base : base + 6;
      const h = await holdPort(port);
      const sets = ['--set', `server.port=${base}`, '--set', `router.statsPort=${base + 6}`];
      const r = await cli(['serve', 'qwen3.5-9b', '--engine', 'sim', '--router', '--skip-preflight', '--no-prewarm', '--sim-load', '0.2', ...sets], { stateDir: state, timeout: 90_000 });
      const out = `${r.stdout}\n${r.stderr}`;
      expect(r.exitCode, out).toBe(4);
      expect(out).toContain(`127.0.0.1:${port} is taken by pid ${h.pid} ("node")`);
      expect(out).toMatch(which === 'public' ? /--set server\.port=N/ : /--set router\.statsPort=N/);
      expect(out).not.toMatch(/\[NOTICE\]|internal error/);
      // the replicas it started were stopped; the foreign holder lives
      const st = await cli(['status', '--json'], { stateDir: state });
      expect(JSON.parse(st.stdout).instances ?? []).toEqual([]);
      expect(h.exitCode).toBeUndefined();
      const j = await cli(['serve', 'qwen3.5-9b', '--engine', 'sim', '--router', '--skip-preflight', '--no-prewarm', '--sim-load', '0.2', '--json', ...sets], { stateDir: state, timeout: 90_000 });
      expect(j.exitCode).toBe(4);
      const env = JSON.parse(j.stdout.trim().split('\n').pop()!);
      expect(env.router?.failure ?? JSON.stringify(env)).toContain(`is taken by pid ${h.pid}`);
    }, 120_000);
  }
});
