// The serve boundary: every input is validated before anything is spawned; the engine reports an
// outcome the command renders; Ctrl-C always ends sparkctl after stopping what it started.
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { cli, tempDir, rmrf, freePortRange, processesMarked, FIXTURES } from '../helpers.js';

let state: string;
let marker: string;
let base: number;
const env = (extra: Record<string, string> = {}) => ({ SPARKCTL_STATE_DIR: state, SPARKCTL_TEST_CASE: marker, SPARKCTL_SIM_LOAD_SECONDS: '0.3', ...extra });
const at = (port: number, replicas = 1) => ['--set', `server.port=${port}`, '--set', 'server.host=127.0.0.1', '--set', `parallel.replicas=${replicas}`];

beforeEach(async () => {
  state = tempDir('sparkctl-state-');
  marker = randomUUID();
  base = await freePortRange(4);
});
afterEach(async () => {
  await cli(['stop', '--all', '--timeout', '2'], { env: env() });
  const left = processesMarked(marker);
  for (const p of left) process.kill(p, 'SIGKILL');
  rmrf(state);
  expect(left, 'processes left by the test').toEqual([]);
});

describe('a bad flag launches nothing and exits 2 at once', () => {
  it.each(['bogus', '-5', '0'])('serve --ready-timeout %s', async (value) => {
    const r = await cli(['serve', 'qwen3.5-9b', '--engine', 'sim', ...at(base, 4), '--ready-timeout', value], { env: env(), timeout: 20_000 });
    expect(r.timedOut).toBeFalsy();
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('--ready-timeout');
    expect(r.stderr).toMatch(/500ms, 30s, 15m or 1h/);
    // not one simulator was started, not even briefly: no log, no registry entry, no process
    expect(processesMarked(marker)).toEqual([]);
    expect(r.stdout).toBe('');
  });

  it('serve --nodes --ready-timeout bogus: exit 2 (not an internal error)', async () => {
    const r = await cli(['serve', 'qwen3-200b', '--engine', 'sim', '--nodes', join(FIXTURES, 'nodes-4.yaml'), '--ready-timeout', 'bogus'], { env: env(), timeout: 20_000 });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('--ready-timeout: "bogus" is not a duration');
    expect(r.stderr).not.toContain('internal error');
  });

  it.each([
    [['stop', '--all', '--timeout', '10x']],
    [['preflight', '--timeout', 'soon']],
    [['probe', '--all', '--timeout', '-1']],
    [['prewarm', '--url', 'http://127.0.0.1:9', '--timeout', 'later']],
  ])('%j', async (args) => {
    const r = await cli(args, { env: env(), timeout: 20_000 });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/--timeout: ".*" is not a duration/);
  });
});
