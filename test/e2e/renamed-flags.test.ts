// One meaning per flag name: the renamed flags, and their old spellings kept for one release (a
// warning on stderr, the same effect, absent from --help).
import { describe, it, expect, afterAll } from 'vitest';
import { cli, tempDir, rmrf } from '../helpers.js';

const state = tempDir();
afterAll(() => rmrf(state));

describe('renamed flags', () => {
  it.each([
    ['stop', '--grace', '--timeout'],
    ['restart', '--grace', '--timeout'],
    ['preflight', '--probe-timeout', '--timeout'],
    ['collect', '--probe-timeout', '--timeout'],
    ['prewarm', '--deadline', '--timeout'],
    ['probe', '--step-timeout', '--timeout'],
    ['k8s', '--node-count', '--nodes'],
  ])('%s --help names %s, not the old %s', async (verb, now, old) => {
    const h = await cli([verb, '--help'], { stateDir: state });
    expect(h.stdout).toContain(now);
    expect(h.stdout).not.toMatch(new RegExp(`^\\s+${old} `, 'm'));
  });

  it('an old spelling still works, with a warning that names the new one', async () => {
    const now = await cli(['k8s', 'qwen3-200b', '--node-count', '4'], { stateDir: state });
    const old = await cli(['k8s', 'qwen3-200b', '--nodes', '4'], { stateDir: state });
    expect(now.exitCode, now.stderr).toBe(0);
    expect(old.exitCode, old.stderr).toBe(0);
    expect(old.stdout).toBe(now.stdout);
    expect(now.stderr).not.toMatch(/deprecated/);
    expect(old.stderr).toMatch(/--nodes is deprecated here: use --node-count/);
    const stop = await cli(['stop', '--all', '--timeout', '1', '--json'], { stateDir: state });
    expect(stop.exitCode, stop.stderr).toBe(0);
    expect(JSON.parse(stop.stdout).kind).toBe('stop');
    expect(stop.stderr).toMatch(/--timeout is deprecated here: use --grace/);
  });

  it('a bad value under the old spelling names the flag as typed', async () => {
    const r = await cli(['probe', '--url', 'http://127.0.0.1:9', '--timeout', 'soon'], { stateDir: state });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/--timeout: "soon" is not a duration/);
  });
});
