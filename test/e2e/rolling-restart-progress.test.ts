// A rolling restart is never silent: each replica's steps as lines (drain, stop, start, the start's own
// phases from its log, ready, prewarm, probe, back in rotation with where the time went); off a
// terminal one line per phase (not per percent), on a terminal (script(1) gives it one) a live line
// redrawn in place. On the simulator, behind real HAProxy.
import { describe, it, expect } from 'vitest';
import { existsSync } from 'node:fs';
import { execa } from 'execa';
import { cli, isolated, freePortRange, BIN, RUN_MARK } from '../helpers.js';

const haveHaproxy = existsSync('/usr/sbin/haproxy');
const haveScript = existsSync('/usr/bin/script');
if (!haveHaproxy)
  console.warn('rolling-restart-progress e2e skipped: /usr/sbin/haproxy is not installed (apt-get install haproxy)');

const t = isolated({
  prefix: 'sparkctl-rolling-progress-',
  per: 'suite',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '1', SPARKCTL_SIM_COLD_MS: '200' },
});
const P = 'qwen3.5-9b';

describe.skipIf(!haveHaproxy)('restart --rolling says what each replica is doing', () => {
  it('off a terminal: every step and start phase as a line, in order, once per phase; the time per step at the end', async () => {
    const base = await freePortRange(4);
    const sets = [
      '--set',
      `server.port=${base}`,
      '--set',
      'server.host=127.0.0.1',
      '--set',
      'parallel.replicas=2',
      '--set',
      'router.checkIntervalMs=500',
      '--set',
      'prewarm.maxRounds=2',
    ];
    const served = await cli(['serve', P, '--engine', 'sim', '--router', '--no-prewarm', ...sets], {
      env: t.env(),
      timeout: 60_000,
    });
    expect(served.exitCode, served.stderr).toBe(0);

    const r = await cli(['restart', P, '--rolling'], { env: t.env(), timeout: 90_000 });
    expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stderr).not.toContain('\r');
    for (const rep of [`${P}-0`, `${P}-1`]) {
      const mine = `${r.stderr}\n${r.stdout}`
        .split('\n')
        .filter((l) => l.includes(`${rep}:`))
        .map((l) => l.replace(/^\[[\d.]+s\] /, ''));
      const at = (re: RegExp) => mine.findIndex((l) => re.test(l));
      const steps = [
        /: draining/,
        /: drained in/,
        /: stopped in/,
        /: started, pid \d+ \(argv unchanged\); waiting until it is ready/,
        /: loading weights/,
        /: API up/,
        /: ready in/,
        /: prewarm: warming up \(round 1,/,
        /: prewarm /,
        /: probe healthy; back in rotation once HAProxy sees it UP/,
        /: back in rotation/,
      ];
      const where = steps.map(at);
      expect(
        where.every((i) => i >= 0),
        `${rep}: ${JSON.stringify(mine, null, 1)}`,
      ).toBe(true);
      expect([...where].sort((a, b) => a - b)).toEqual(where);
      // one line per phase, not one per percent
      expect(mine.filter((l) => /loading weights/.test(l))).toHaveLength(1);
      expect(mine.filter((l) => /prewarm: warming up/.test(l))).toHaveLength(1);
      // where the time went, by step
      expect(mine.at(-1)).toMatch(
        /back in rotation \(out of it for [\d.]+ m?s: stop [\d.]+ m?s, start [\d.]+ m?s, prewarm [\d.]+ m?s, probe [\d.]+ m?s, HAProxy's checks [\d.]+ m?s; drained in [\d.]+ m?s before\)/,
      );
    }
    expect(r.stdout).toMatch(/restarted qwen3\.5-9b: 2 replica\(s\), one at a time/);

    // on a terminal: the live line is redrawn in place (carriage return + erase line), the steps stay lines
    if (!haveScript) return;
    const tty = await execa('script', ['-qec', `${process.execPath} ${BIN} restart ${P} --rolling`, '/dev/null'], {
      reject: false,
      timeout: 90_000,
      env: { ...t.env(), SPARKCTL_TEST_RUN: RUN_MARK, CI: '' },
    });
    const out = String(tty.stdout);
    expect(tty.exitCode, out).toBe(0);
    const redraws =
      out.match(/\r\x1b\[2K(?:\x1b\[\d+m)*\[[\d.]+s\](?:\x1b\[\d+m)* qwen3\.5-9b-[01]: loading weights \d+%/g) ?? [];
    expect(redraws.length).toBeGreaterThan(2);
    expect(out).toMatch(/\r\x1b\[2K(?:\x1b\[\d+m)*\[[\d.]+s\](?:\x1b\[\d+m)* prewarm qwen3\.5-9b-0: round 1, /);
    expect(out.match(/back in rotation \(out of it/g)).toHaveLength(2);
  }, 200_000);
});
