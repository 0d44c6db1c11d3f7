// One meaning per flag name: the renamed flags, and their old spellings kept for one release (a
// warning on stderr, the same effect, absent from --help). The CLI's logic only: driven in-process
// through main(argv), so the machine's load does not make it slow.
import { describe, it, expect, afterAll } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
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
    ['serve', '--sim-load', '--sim-load-seconds'],
    // --out is a file (profiles init/import); a folder is --out-dir
    ['collect', '--out-dir', '--out'],
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
    const held = await runMain(
      ['cost', 'http://127.0.0.1:9', '--gpu-hour-price', '2', '--gpus-held', '2', '--json'],
      env,
    );
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

  it('serve --sim-load takes a duration; the old --sim-load-seconds the same seconds, with a warning', async () => {
    const env = { env: { SPARKCTL_STATE_DIR: state } };
    const dry = ['serve', 'qwen3.5-9b', '--engine', 'sim', '--dry-run', '--json', '--gpus', '2'];
    const now = await runMain([...dry, '--sim-load', '300ms'], env);
    const bare = await runMain([...dry, '--sim-load', '0.3'], env);
    const old = await runMain([...dry, '--sim-load-seconds', '0.3'], env);
    expect(now.exitCode, now.stderr).toBe(0);
    const argv = (r: { stdout: string }) =>
      JSON.stringify(JSON.parse(r.stdout)).match(/"--sim-load-seconds","([^"]*)"/)?.[1];
    expect(argv(now)).toBe('0.3'); // the simulator's own flag, in seconds
    expect(bare.stdout).toBe(now.stdout);
    expect(old.stdout).toBe(now.stdout);
    expect(now.stderr).not.toMatch(/deprecated/);
    expect(old.stderr).toMatch(/--sim-load-seconds is deprecated here: use --sim-load/);
  });

  it('collect --out-dir is the folder; the old --out still is, with a warning, and the same checks', async () => {
    const env = { env: { SPARKCTL_STATE_DIR: state } };
    const full = tempDir();
    writeFileSync(join(full, 'x'), 'not a bundle');
    const now = await runMain(['collect', '--out-dir', full], env);
    const old = await runMain(['collect', '--out', full], env);
    expect(now.exitCode).toBe(2);
    expect(now.stderr).toContain(`--out-dir ${full}: the folder is not empty`);
    expect(old.exitCode).toBe(2);
    expect(old.stderr).toMatch(/--out is deprecated here: use --out-dir/);
    expect(old.stderr).toContain(`--out-dir ${full}: the folder is not empty`);
    const none = await runMain(['collect'], env);
    expect(none.exitCode).toBe(2);
    expect(none.stderr).toContain('--out-dir is required');
    rmrf(full);
  });

  it('a bad value under the old spelling names the flag as typed', async () => {
    const r = await runMain(['probe', '--url', 'http://127.0.0.1:9', '--timeout', 'soon'], {
      env: { SPARKCTL_STATE_DIR: state },
    });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/--timeout: "soon" is not a duration/);
  });
});
