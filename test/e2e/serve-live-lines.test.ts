// serve on a terminal draws one live line per replica (its start-up phase), redrawn in place: the
// cursor goes back up to the first replica's line and every replica's line is rewritten, so four
// replicas read as four lines, not one line of "a: ... | b: ...". script(1) gives serve a terminal.
// On the simulator.
import { describe, it, expect } from 'vitest';
import { existsSync } from 'node:fs';
import { execa } from 'execa';
import { cli, isolated, freePortRange, BIN, RUN_MARK } from '../helpers.js';

const haveScript = existsSync('/usr/bin/script');
if (!haveScript) console.warn('serve-live-lines e2e skipped: script(1) is not installed (util-linux)');

const t = isolated({
  prefix: 'sparkctl-live-lines-',
  per: 'suite',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '1.5', SPARKCTL_SIM_COLD_MS: '100' },
});

describe.skipIf(!haveScript)('serve on a terminal', () => {
  it('one live line per replica, each redrawn in place; off a terminal, one line per phase and no cursor moves', async () => {
    const base = await freePortRange(4);
    const sets = [
      '--set',
      `server.port=${base}`,
      '--set',
      'server.host=127.0.0.1',
      '--set',
      'parallel.replicas=3',
      '--set',
      'prewarm.maxRounds=1',
    ];
    const args = ['serve', 'qwen3.5-9b', '--engine', 'sim', '--skip-preflight', ...sets];
    try {
      const tty = await execa('script', ['-qec', [process.execPath, BIN, ...args].join(' '), '/dev/null'], {
        reject: false,
        timeout: 90_000,
        env: { ...t.env(), SPARKCTL_TEST_RUN: RUN_MARK, CI: '' },
      });
      const out = String(tty.stdout);
      expect(tty.exitCode, out).toBe(0);
      // a redraw of three rows: up two lines, then each replica on its own cleared line
      const row = (n: number) =>
        `\\x1b\\[2K(?:\\x1b\\[\\d+m)*\\[[\\d.]+s\\](?:\\x1b\\[\\d+m)* qwen3\\.5-9b-${n}: [^\\r\\n|]+`;
      const redraw = new RegExp(`\\x1b\\[2A\\r${row(0)}\\r?\\n${row(1)}\\r?\\n${row(2)}`, 'g');
      expect(out.match(redraw)?.length ?? 0, out).toBeGreaterThan(1);
      expect(out).not.toMatch(/qwen3\.5-9b-0: [^\r\n]* \| qwen3\.5-9b-1:/);
    } finally {
      await cli(['stop', '--all'], { env: t.env(), timeout: 60_000 });
    }
    // off a terminal: plain lines, each replica's phases as lines of their own
    const plain = await cli([...args, '--set', `server.port=${base}`], { env: t.env(), timeout: 90_000 });
    try {
      expect(plain.exitCode, plain.stderr).toBe(0);
      expect(plain.stderr).not.toMatch(/\x1b\[\d*A/);
      for (const n of [0, 1, 2]) expect(plain.stderr).toMatch(new RegExp(`\\] qwen3\\.5-9b-${n}: loading weights`));
    } finally {
      await cli(['stop', '--all'], { env: t.env(), timeout: 60_000 });
    }
  }, 200_000);
});
