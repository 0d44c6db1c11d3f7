// Issue 42 item 12 (every failure to start is named), the router's case: a port HAProxy is about to
// bind that another process holds ends the launch naming the port, the holder (pid and name, read
// from /proc) and the fix, with exit 4, before any replica is launched (no model load spent), and
// nothing left running. Before, the replicas loaded first and the router's failure was HAProxy's
// whole banner ("haproxy exited with code 1: ... [NOTICE] ... [ALERT] ...") with no holder and no
// fix; a config `haproxy -c` refused was a plain Error after the load. Real HAProxy, a real foreign
// listener (a node process started by the test); preflight is skipped so the launch meets the port.
import { describe, it, expect, afterAll } from 'vitest';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { cli, freePortRange, tempDirs } from '../helpers.js';
import { bindTrial, holdersInWords } from '../../src/engine/runtime/socket-owner.js';
import { haproxyWhy } from '../../src/router/process.js';

const why = existsSync('/usr/sbin/haproxy') ? undefined : 'no /usr/sbin/haproxy (apt-get install haproxy)';
if (why) console.warn(`router-port-taken suite skipped: ${why}`);
const dirs = tempDirs('sparkctl-router-port-');
const held: Array<ReturnType<typeof execa>> = [];
afterAll(() => {
  for (const h of held) h.kill('SIGKILL');
});

/**
 * A process of the test's own that listens on `port` until killed; resolves once it listens, to its
 * pid and a way to ask whether it still runs. Never to the execa child itself: that is a promise of
 * the child's END, so an async function returning it waits for a holder that never exits (this file
 * hung that way once, vitest silent until its timeout).
 */
async function holdPort(port: number): Promise<{ pid: number; alive: () => boolean }> {
  const child = execa(
    process.execPath,
    ['-e', `require('node:net').createServer().listen(${port}, '127.0.0.1', () => console.log('listening'))`],
    { reject: false },
  );
  held.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => String(d).includes('listening') && resolve());
    setTimeout(() => reject(new Error('the holder did not listen in 10 s')), 10_000).unref();
  });
  return { pid: child.pid!, alive: () => child.exitCode === null && !child.killed };
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
    it(`serve --router with the router's ${which} port held by another process: exit 4 naming the port, the holder and the fix, before any replica is launched`, async () => {
      const state = dirs();
      const base = await freePortRange(8);
      // replicas take base+1.. (qwen3.5-9b: 4 replicas on the simulated 8-GPU host), stats after the last
      const port = which === 'public' ? base : base + 6;
      const h = await holdPort(port);
      const sets = ['--set', `server.port=${base}`, '--set', `router.statsPort=${base + 6}`];
      const r = await cli(
        [
          'serve',
          'qwen3.5-9b',
          '--engine',
          'sim',
          '--router',
          '--skip-preflight',
          '--no-prewarm',
          ...(which === 'stats' ? ['--json'] : []),
          ...sets,
        ],
        {
          stateDir: state,
          timeout: 60_000,
        },
      );
      const out = `${r.stdout}\n${r.stderr}`;
      expect(r.exitCode, out).toBe(4);
      // text: said on stderr; --json: the serve envelope, launch-failed, with the router's failure
      const said = which === 'stats' ? JSON.parse(r.stdout) : undefined;
      if (said) expect(said).toMatchObject({ kind: 'serve', status: 'launch-failed', exitCode: 4, replicas: [] });
      const failure = said ? String(said.router?.failure) : r.stderr;
      expect(failure).toContain(`127.0.0.1:${port} is taken by pid ${h.pid} ("node")`);
      expect(failure).toMatch(which === 'public' ? /--set server\.port=N/ : /--set router\.statsPort=N/);
      expect(failure).toContain(`ss -ltnp 'sport = :${port}'`);
      expect(out).not.toMatch(/\[NOTICE\]|internal error/);
      // no model load was spent on a router that could not start: no replica was launched
      expect(r.stderr).not.toMatch(/qwen3\.5-9b-\d: |\bready\b/);
      const st = await cli(['status', '--json'], { stateDir: state });
      expect(JSON.parse(st.stdout).instances ?? []).toEqual([]);
      expect(h.alive()).toBe(true);
    }, 60_000);
  }

  it('a config HAProxy refuses is a launch failure (exit 4) with only its ALERT lines and the fix, before any replica is launched', async () => {
    const state = dirs();
    const base = await freePortRange(8);
    // An HAProxy that refuses what it reads, as an older one refuses a newer keyword: the real
    // haproxy given one more config file, with a keyword no HAProxy knows (its own refusal, its own words).
    const extra = join(state, 'extra.cfg');
    writeFileSync(extra, 'global\n    tune.sparkctl-test-unknown-keyword 1\n');
    const bin = join(state, 'haproxy-refuses');
    writeFileSync(bin, `#!/bin/sh\nexec /usr/sbin/haproxy "$@" -f ${extra}\n`, { mode: 0o755 });
    const r = await cli(
      [
        'serve',
        'qwen3.5-9b',
        '--engine',
        'sim',
        '--router',
        '--skip-preflight',
        '--no-prewarm',
        '--set',
        `server.port=${base}`,
        '--set',
        `router.bin=${bin}`,
      ],
      {
        stateDir: state,
        timeout: 60_000,
      },
    );
    const out = `${r.stdout}\n${r.stderr}`;
    expect(r.exitCode, out).toBe(4);
    expect(r.stderr).toContain("-c refused the router's config");
    expect(r.stderr).toMatch(/unknown keyword 'tune\.sparkctl-test-unknown-keyword'/);
    expect(r.stderr).toMatch(/sparkctl router config <profile> prints the config/);
    expect(out).not.toMatch(/\[NOTICE\]|internal error|qwen3\.5-9b-\d: |\bready\b/);
    const st = await cli(['status', '--json'], { stateDir: state });
    expect(JSON.parse(st.stdout).instances ?? []).toEqual([]);
  });

  it("a router that exits shows HAProxy's ALERT lines, not its banner", () => {
    // real HAProxy 2.6 output for a port another process holds (captured here, haproxy -db)
    const tail = [
      '[NOTICE]   (3657) : haproxy version is 2.6.12-1+deb12u3',
      '[NOTICE]   (3657) : path to executable is /usr/sbin/haproxy',
      '[ALERT]    (3657) : Binding [/tmp/x/haproxy.cfg:30] for frontend router: cannot bind socket (Address already in use) for [127.0.0.1:23460]',
      '[ALERT]    (3657) : [/usr/sbin/haproxy.main()] Some protocols failed to start their listeners! Exiting.',
    ].join('\n');
    expect(haproxyWhy(tail)).toEqual([
      'Binding [/tmp/x/haproxy.cfg:30] for frontend router: cannot bind socket (Address already in use) for [127.0.0.1:23460]',
      '[/usr/sbin/haproxy.main()] Some protocols failed to start their listeners! Exiting.',
    ]);
    // no ALERT: the last lines, not the whole log
    expect(haproxyWhy(Array.from({ length: 20 }, (_, i) => `line ${i}`).join('\n'), 3)).toEqual([
      'line 17',
      'line 18',
      'line 19',
    ]);
  });
});
