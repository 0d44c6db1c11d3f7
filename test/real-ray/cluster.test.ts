// Past one machine with the real thing: Ray 2.58 from the project's .venv-ray on four test nodes that
// behave like hosts (own network, PID and mount namespaces, sshd), 8 logical GPUs each. sparkctl
// starts the cluster over ssh, waits for 32 GPUs as Ray reports them, runs the simulator as the
// head's engine (which asks Ray for its placement group as vLLM does), and stops it all. Then the
// faults seen on real Ray, one by one, on the same four nodes.
import { describe, it, expect, beforeAll, afterAll, afterEach } from 'vitest';
import { randomUUID } from 'node:crypto';
import { writeFileSync, readFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, freePort, processesMarked, tempDir, rmrf, waitFor } from '../helpers.js';
import { makeCluster, realRayUnavailable, RAY_VENV, type Cluster } from '../cluster.js';

const why = realRayUnavailable();
if (why)
  console.warn(
    `real-Ray suite skipped: ${why}; the scripted-ray suite (test/e2e/multinode.test.ts) covers the same paths`,
  );

describe.skipIf(!!why)('real Ray: serve --nodes on four namespaced hosts', () => {
  let cl: Cluster;
  let state: string;
  const marker = randomUUID();
  const run = (args: string[], timeout = 240_000) =>
    cli(args, { env: { SPARKCTL_STATE_DIR: state, SPARKCTL_TEST_CASE: marker, ...cl.env }, timeout });
  const serve = async () =>
    run([
      'serve',
      'qwen3-200b',
      '--engine',
      'sim',
      '--nodes',
      cl.nodesFile,
      '--no-prewarm',
      '--set',
      `server.port=${await freePort()}`,
    ]);
  const leftovers = () => [0, 1, 2, 3].flatMap((i) => cl.processes(i).map((p) => `n${i}: ${p}`));
  const rayOn = (i: number) => cl.processes(i).some((p) => /raylet/.test(p));

  beforeAll(async () => {
    state = tempDir('sparkctl-ray-state-');
    cl = await makeCluster('netns', marker, { ray: 'real' });
  }, 60_000);
  afterEach(() => {
    // Each fault test starts from four idle nodes: stop whatever the test left, on its own nodes only.
    for (const i of [0, 1, 2, 3]) {
      if (cl.processes(i).length) cl.exec(i, 'ray stop --force >/dev/null 2>&1; true', 90_000);
      // What a failed test left (an engine, its placement holder): processes of that node's own PID namespace.
      for (const p of cl.processes(i)) {
        try {
          process.kill(Number(p.split(' ')[0]), 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    }
    rmrf(join(cl.dir, 'n1', 'bin', 'ray'));
    rmrf(state);
    state = tempDir('sparkctl-ray-state-');
  }, 120_000);
  afterAll(() => {
    if (!cl) return;
    cl.teardown();
    for (const p of processesMarked(marker)) process.kill(p, 'SIGKILL');
    rmrf(state);
  }, 60_000);

  it('head + 3 workers, 32 GPUs from Ray, the simulator on the head: ready, prewarm, probe, status; a second serve is refused; stop --nodes leaves nothing', async () => {
    const port = await freePort();
    const r = await run([
      'serve',
      'qwen3-200b',
      '--engine',
      'sim',
      '--nodes',
      cl.nodesFile,
      '--set',
      `server.port=${port}`,
    ]);
    expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stderr).toContain('ray cluster: 4 nodes, 32 GPUs');
    expect(r.stdout).toMatch(/ready: qwen3-200b over 4 nodes \(32 GPUs\)/);
    expect(r.stdout).toMatch(/prewarm: warm after/);
    expect(r.stdout).toMatch(/probe: healthy/);
    // Every node runs its own raylet; only the head runs the GCS and the engine.
    for (const i of [0, 1, 2, 3]) expect(rayOn(i), `n${i}: ${cl.processes(i).join('\n')}`).toBe(true);
    expect(cl.processes(0).some((p) => /gcs_server/.test(p))).toBe(true);
    expect(cl.processes(1).some((p) => /gcs_server/.test(p))).toBe(false);
    // The engine asked Ray for its GPUs as vLLM does, and holds the placement group.
    const log = cl.exec(0, 'cat "$HOME"/.local/state/sparkctl/logs/*.log').stdout;
    expect(log).toContain('No current placement group found. Creating a new placement group.');
    const st0 = cl.exec(0, 'ray status').stdout;
    expect(st0).toMatch(/\/32\.0 GPU/);
    if (process.env.SPARKCTL_CAPTURE_RAY) {
      mkdirSync(process.env.SPARKCTL_CAPTURE_RAY, { recursive: true });
      writeFileSync(join(process.env.SPARKCTL_CAPTURE_RAY, 'status-2.58-v1-4nodes-busy.txt'), st0);
      writeFileSync(
        join(process.env.SPARKCTL_CAPTURE_RAY, 'status-2.58-v2-4nodes-busy.txt'),
        cl.exec(0, 'RAY_enable_autoscaler_v2=1 ray status').stdout,
      );
    }
    const pr = await run(['probe', 'qwen3-200b']);
    expect(pr.exitCode, pr.stdout).toBe(0);
    const st = await run(['status']);
    expect(st.exitCode, st.stderr).toBe(0);
    expect(st.stdout).toMatch(/qwen3-200b\s+cluster healthy\s+head n0\s+server healthy/);
    for (const i of [0, 1, 2, 3])
      expect(st.stdout).toMatch(new RegExp(`n${i}\\s+${i ? 'worker' : 'head'}\\s+\\S+\\s+ray up\\s+8 GPUs`));
    // A second serve on the same nodes is refused, and Ray keeps running everywhere.
    const again = await serve();
    expect(again.exitCode).toBe(4);
    expect(again.stderr).toMatch(/refused: qwen3-200b is already served on these nodes/);
    for (const i of [0, 1, 2, 3]) expect(rayOn(i)).toBe(true);
    expect((await run(['probe', 'qwen3-200b'])).exitCode).toBe(0);
    const stop = await run(['stop', 'qwen3-200b', '--nodes', cl.nodesFile]);
    expect(stop.exitCode, `${stop.stdout}\n${stop.stderr}`).toBe(0);
    for (const i of [0, 1, 2, 3]) expect(stop.stdout).toContain(`ray on n${i}: stopped`);
    await waitFor(() => leftovers().length === 0, 20_000, 250);
    expect(leftovers()).toEqual([]);
  }, 400_000);

  it('a worker whose Ray does not start is named within seconds, not after the 120 s wait; Ray stopped where it was started', async () => {
    // n1's `ray start` says it started and does nothing (a wrapper in front of the real ray).
    writeFileSync(
      join(cl.dir, 'n1', 'bin', 'ray'),
      `#!/bin/bash\nif [ "$1" = start ]; then echo "Ray runtime started."; exit 0; fi\nexec ${join(RAY_VENV, 'bin', 'ray')} "$@"\n`,
      { mode: 0o755 },
    );
    const t0 = Date.now();
    const r = await serve();
    const took = Date.now() - t0;
    expect(r.exitCode, r.stderr).toBe(4);
    expect(r.stderr).toMatch(
      /the Ray cluster has 3 node\(s\) with 24 GPUs; the nodes file declares 4 with 32; missing: n1 \([\d.]+\) \(unchanged for \d+ s\)/,
    );
    expect(r.stderr).toContain('ray status on n0:');
    expect(took).toBeLessThan(120_000);
    await waitFor(() => leftovers().length === 0, 20_000, 250);
    expect(leftovers()).toEqual([]);
  }, 300_000);

  it('a worker with no route to the head: its join fails or times out naming it, and no ray start is left running there', async () => {
    const head = cl.addresses[0]!;
    expect(cl.exec(2, `ip route add unreachable ${head}/32`).status).toBe(0);
    try {
      const r = await cli(
        [
          'serve',
          'qwen3-200b',
          '--engine',
          'sim',
          '--nodes',
          cl.nodesFile,
          '--no-prewarm',
          '--set',
          `server.port=${await freePort()}`,
        ],
        {
          // The join deadline (90 s by default) at 40: Ray itself gives up on an unreachable head later than that
          // (the case took 93 s at 75), so it ends by sparkctl's deadline either way; 40 s still leaves the head's own
          // `ray start` (the same deadline) room on a loaded CI host.
          env: { SPARKCTL_STATE_DIR: state, SPARKCTL_TEST_CASE: marker, SPARKCTL_RAY_JOIN_TIMEOUT_S: '40', ...cl.env },
          timeout: 300_000,
        },
      );
      expect(r.exitCode, r.stderr).toBe(4);
      expect(r.stderr).toMatch(/node n2 \([\d.]+\) failed to join the Ray cluster/);
      writeFileSync(join(cl.dir, 'no-route.txt'), r.stderr);
      await waitFor(() => leftovers().length === 0, 30_000, 250);
      expect(leftovers()).toEqual([]);
    } finally {
      cl.exec(2, `ip route del unreachable ${head}/32`);
    }
  }, 300_000);

  it('the head dying after ready: probe says unreachable (exit 3), status names the cluster degraded', async () => {
    const r = await serve();
    expect(r.exitCode, r.stderr).toBe(0);
    // The head host dies: every process of node 0 (its sshd too) is killed.
    cl.exec(0, 'kill -KILL -1');
    const pr = await run(['probe', 'qwen3-200b']);
    expect(pr.exitCode, pr.stdout).toBe(3);
    expect(pr.stdout).toMatch(/unreachable/i);
    const st = await run(['status']);
    expect(st.stdout).toMatch(/qwen3-200b\s+cluster (degraded|down)\s+head n0\s+server unreachable/);
    expect(readFileSync(cl.nodesFile, 'utf8')).toContain('n0');
  }, 300_000);
});
