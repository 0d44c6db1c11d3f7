// Past one machine with the real thing: Ray 2.58 from the project's .venv-ray on four test nodes that
// behave like hosts (own network, PID and mount namespaces, sshd), 8 logical GPUs each. sparkctl
// starts the cluster over ssh, waits for 32 GPUs as Ray reports them, runs the simulator as the
// head's engine (which asks Ray for its placement group as vLLM does), and stops it all.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import { cli, freePort, processesMarked, tempDir, rmrf } from '../helpers.js';
import { makeCluster, realRayUnavailable, type Cluster } from '../cluster.js';

const why = realRayUnavailable();
if (why) console.warn(`real-Ray suite skipped: ${why}; the scripted-ray suite (test/e2e/multinode.test.ts) covers the same paths`);

describe.skipIf(!!why)('real Ray: serve --nodes on four namespaced hosts', () => {
  let cl: Cluster;
  let state: string;
  const marker = randomUUID();
  const run = (args: string[], timeout = 240_000) => cli(args, { env: { SPARKCTL_STATE_DIR: state, SPARKCTL_TEST_CASE: marker, ...cl.env }, timeout });
  const leftovers = () => [0, 1, 2, 3].flatMap((i) => cl.processes(i).map((p) => `n${i}: ${p}`));

  beforeAll(async () => {
    state = tempDir('sparkctl-ray-state-');
    cl = await makeCluster('netns', marker, { ray: 'real' });
  }, 60_000);
  afterAll(() => {
    if (!cl) return;
    cl.teardown();
    for (const p of processesMarked(marker)) process.kill(p, 'SIGKILL');
    rmrf(state);
  }, 60_000);

  it('head + 3 workers, 32 GPUs from Ray, the simulator on the head: ready, prewarm, probe, status; stop --nodes leaves nothing', async () => {
    const port = await freePort();
    const r = await run(['serve', 'qwen3-200b', '--engine', 'sim', '--nodes', cl.nodesFile, '--set', `server.port=${port}`]);
    expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stderr).toContain('ray cluster: 4 nodes, 32 GPUs');
    expect(r.stdout).toMatch(/ready: qwen3-200b over 4 nodes \(32 GPUs\)/);
    expect(r.stdout).toMatch(/prewarm: warm after/);
    expect(r.stdout).toMatch(/probe: healthy/);
    // Every node runs its own raylet; only the head runs the GCS and the engine.
    for (const i of [0, 1, 2, 3]) expect(cl.processes(i).some((p) => /raylet/.test(p)), `n${i}: ${cl.processes(i).join('\n')}`).toBe(true);
    expect(cl.processes(0).some((p) => /gcs_server/.test(p))).toBe(true);
    expect(cl.processes(1).some((p) => /gcs_server/.test(p))).toBe(false);
    const pr = await run(['probe', 'qwen3-200b']);
    expect(pr.exitCode, pr.stdout).toBe(0);
    const st = await run(['status']);
    expect(st.exitCode, st.stderr).toBe(0);
    expect(st.stdout).toMatch(/qwen3-200b\s+head n0/);
    const stop = await run(['stop', 'qwen3-200b', '--nodes', cl.nodesFile]);
    expect(stop.exitCode, `${stop.stdout}\n${stop.stderr}`).toBe(0);
    for (const i of [0, 1, 2, 3]) expect(stop.stdout).toContain(`ray on n${i}: stopped`);
    expect(leftovers()).toEqual([]);
  }, 300_000);
});
