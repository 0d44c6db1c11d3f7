// One meaning per flag name: the renamed flags, and their old spellings kept for one release (a
// warning on stderr, the same effect, absent from --help). The CLI's logic only: driven in-process
// through main(argv), so the machine's load does not make it slow.
import { describe, it, expect, afterAll } from 'vitest';
import { runMain, tempDir, rmrf } from '../helpers.js';

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
    // --gpus is the host's GPU count (serve, plan, preflight, k8s, systemd, profiles, monitoring)
    ['cost', '--gpus-held', '--gpus'],
    ['report', '--gpus-held', '--gpus'],
    // --router is serve's switch (HAProxy in front of the replicas)
    ['monitoring', '--router-stats', '--router'],
    // every other time flag takes a duration
    ['bench', '--scrape-every', '--scrape-interval'],
  ])('%s --help names %s, not the old %s', async (verb, now, old) => {
    const h = await runMain([verb, '--help'], { env: { SPARKCTL_STATE_DIR: state } });
    expect(h.stdout).toContain(now);
    expect(h.stdout).not.toMatch(new RegExp(`^\\s+${old} `, 'm'));
  });

  it('an old spelling still works, with a warning that names the new one', async () => {
    const now = await runMain(['k8s', 'qwen3-200b', '--node-count', '4'], { env: { SPARKCTL_STATE_DIR: state } });
    const old = await runMain(['k8s', 'qwen3-200b', '--nodes', '4'], { env: { SPARKCTL_STATE_DIR: state } });
    expect(now.exitCode, now.stderr).toBe(0);
    expect(old.exitCode, old.stderr).toBe(0);
    expect(old.stdout).toBe(now.stdout);
    expect(now.stderr).not.toMatch(/deprecated/);
    expect(old.stderr).toMatch(/--nodes is deprecated here: use --node-count/);
    const stop = await runMain(['stop', '--all', '--timeout', '1', '--json'], { env: { SPARKCTL_STATE_DIR: state } });
    expect(stop.exitCode, stop.stderr).toBe(0);
    expect(JSON.parse(stop.stdout).kind).toBe('stop');
    expect(stop.stderr).toMatch(/--timeout is deprecated here: use --grace/);
  });

  it("--gpus in cost and report, --router in monitoring: the old spelling has the new one's effect, with a warning", async () => {
    const env = { env: { SPARKCTL_STATE_DIR: state } };
    const held = await runMain(['cost', 'http://127.0.0.1:9', '--gpu-hour-price', '2', '--gpus-held', '2', '--json'], env);
    const old = await runMain(['cost', 'http://127.0.0.1:9', '--gpu-hour-price', '2', '--gpus', '2', '--json'], env);
    expect(old.exitCode).toBe(held.exitCode);
    expect(old.stdout).toBe(held.stdout);
    expect(old.stderr.replace(/^sparkctl: --gpus is deprecated.*\n/m, '')).toBe(held.stderr);
    expect(old.stderr).toMatch(/--gpus is deprecated here: use --gpus-held/);
    const scrape = ['monitoring', 'scrape', 'qwen3.5-9b', '--host', '10.0.0.5'];
    const stats = await runMain([...scrape, '--router-stats', '10.0.0.5:8404'], env);
    const router = await runMain([...scrape, '--router', '10.0.0.5:8404'], env);
    expect(stats.exitCode, stats.stderr).toBe(0);
    expect(stats.stdout).toContain('10.0.0.5:8404');
    expect(router.stdout).toBe(stats.stdout);
    expect(router.stderr).toMatch(/--router is deprecated here: use --router-stats/);
    const bad = await runMain([...scrape, '--router-stats', 'nope'], env);
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain('--router-stats');
  });

  it('a bad value under the old spelling names the flag as typed', async () => {
    const r = await runMain(['probe', '--url', 'http://127.0.0.1:9', '--timeout', 'soon'], { env: { SPARKCTL_STATE_DIR: state } });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/--timeout: "soon" is not a duration/);
  });
});
