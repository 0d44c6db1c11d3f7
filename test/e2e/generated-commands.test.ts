// Generated files that run clean: every sparkctl command line sparkctl writes into a systemd unit
// (and the cron script's probe line) is run, as written, by the built CLI: no deprecation warning, no
// bad-input exit. (A unit lives for years; an old spelling that "goes in the next release" breaks it.)
import { describe, it, expect, afterAll, beforeAll } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, rmrf, freePort, ROOT, BIN } from '../helpers.js';

const state = tempDir('sparkctl-gencmd-');
const env = { SPARKCTL_STATE_DIR: state, SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_TIME_FACTOR: '0' };
// One profile runs for real (on the simulator), so its unit's prewarm line runs to the end.
const RUNNING = 'qwen3.5-9b-code';
beforeAll(async () => {
  const port = await freePort();
  const r = await cli(
    [
      'serve',
      RUNNING,
      '--engine',
      'sim',
      '--no-prewarm',
      '--set',
      `server.port=${port}`,
      '--set',
      'server.host=127.0.0.1',
    ],
    { env },
  );
  expect(r.exitCode, r.stderr).toBe(0);
}, 90_000);
afterAll(async () => {
  await cli(['stop', '--all'], { env });
  rmrf(state);
});

/** The argv of one ExecStart*= line (systemd's quoting: "..." with C escapes, %% and $$ doubled). */
function execArgv(value: string): string[] {
  const out: string[] = [];
  for (const m of value.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g))
    out.push((m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2]!).replace(/%%/g, '%').replace(/\$\$/g, '$'));
  return out;
}

/** The sparkctl arguments of every Exec*= line of a unit that runs sparkctl. */
function sparkctlLines(unit: string): string[][] {
  return unit
    .split('\n')
    .filter((l) => /^Exec\w*=/.test(l))
    .map((l) => execArgv(l.slice(l.indexOf('=') + 1)))
    .filter((a) => a[1] === BIN)
    .map((a) => a.slice(2));
}

/** Run a generated command line without starting another server: serve only plans. */
function runnable(args: string[]): string[] {
  return args[0] === 'serve' ? [...args, '--dry-run'] : args;
}

describe('generated command lines run clean on this version', { timeout: 120_000 }, () => {
  it.each(['qwen3.5-9b', 'qwen-prod', 'qwen3.5-9b-code'])(
    'systemd %s: ExecStart and ExecStartPost run without a deprecation warning',
    async (profile) => {
      const unit = await cli(['systemd', profile], { env });
      expect(unit.exitCode, unit.stderr).toBe(0);
      const lines = sparkctlLines(unit.stdout);
      expect(lines.map((l) => l[0])).toEqual(expect.arrayContaining(['serve', 'prewarm']));
      for (const args of lines) {
        const r = await cli(runnable(args), { env });
        expect(r.stderr, args.join(' ')).not.toMatch(/deprecated|unknown option|goes in the next release/i);
        if (args[1] === RUNNING || args[0] === 'serve') expect(r.exitCode, `${args.join(' ')}\n${r.stderr}`).toBe(0);
        // not running here: the flags parsed, and the one refusal is that no server runs under that name
        else
          expect(r.exitCode === 0 || /no running server/.test(r.stderr), `${args.join(' ')}\n${r.stderr}`).toBe(true);
      }
    },
  );

  it("the cron script's probe line runs without a deprecation warning", async () => {
    const script = readFileSync(join(ROOT, 'scripts', 'cron-probe.sh'), 'utf8');
    const line = /^args=\((.*)\)$/m.exec(script)![1]!;
    const args = [...line.matchAll(/"\$\{\w+:-([^}]*)\}"|(\S+)/g)].map((m) => m[1] ?? m[2]!);
    expect(args[0]).toBe('probe');
    const r = await cli(args, { env });
    expect(r.stderr).not.toMatch(/deprecated/i);
    expect(r.exitCode, r.stderr).toBe(0);
  });
});
