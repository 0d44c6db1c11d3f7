// `sparkctl preflight --nodes sparks.yaml --profile openai/gpt-oss-120b`, as docs/two-sparks.md gives
// it: a model id has no profile on the nodes (its profile is generated on the head from the config.json
// pull fetched). Before, each node was handed `--profile openai/gpt-oss-120b`, answered "unknown
// profile" (exit 2), and both Sparks were shown as unreachable with "is it installed there?". Two nodes
// over the harness's fake ssh (test/cluster.ts; no root needed), each answering preflight from a
// support bundle of the simulator's GB10 host (test/sim-bundle.ts: no GB10 capture exists here).
// The same two nodes then serve the model id (simulator ranks): their logins have no HF_HUB_CACHE of
// their own (each node's HOME is its own folder), so a rank finds the model only where serve --nodes
// says this host's cache is (src/engine/cluster/model-env.ts). Before, a rank's env held only its
// address and NIC: each rank looked in its login's ~/.cache and played the profile's numbers instead.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { cli, tempDir, rmrf, processesMarked, cachedConfig, freePort } from '../helpers.js';
import { makeCluster, type Cluster } from '../cluster.js';
import { simBundle } from '../sim-bundle.js';

const dir = tempDir('sparkctl-2sparks-pf-');
const hub = join(dir, 'hub');
const repo = cachedConfig(hub, 'openai/gpt-oss-120b', 'gpt-oss-120b');
const marker = randomUUID();
let cl: Cluster;

describe('preflight --nodes of a model id on two Sparks', { timeout: 60_000 }, () => {
  beforeAll(async () => {
    await simBundle('dgx-spark-gb10', join(dir, 'gb10'));
    // the nodes' logins know nothing of this host's cache: only what serve --nodes sends tells them
    cl = await makeCluster('fake-ssh', marker, { nodes: 2, gpusPerNode: 1, bundle: join(dir, 'gb10') });
  }, 60_000);
  afterAll(() => {
    for (const p of processesMarked(marker)) process.kill(p, 'SIGKILL');
    cl?.teardown();
    rmrf(dir);
  });

  it('every node answers its own preflight, for the Spark platform, and the cross-node checks use the generated profile', async () => {
    const env = { ...cl.env, HF_HUB_CACHE: hub, SPARKCTL_STATE_DIR: join(dir, 'state'), SPARKCTL_TEST_CASE: marker };
    const r = await cli(['preflight', '--nodes', cl.nodesFile, '--profile', 'openai/gpt-oss-120b', '--json'], { env });
    const j = JSON.parse(r.stdout);
    expect(
      j.nodes.map(
        (n: { node: string; reached: boolean; error?: string }) =>
          `${n.node}:${n.reached}${n.error ? ` ${n.error}` : ''}`,
      ),
    ).toEqual(['n0:true', 'n1:true']);
    expect(
      j.nodes.map((n: { report?: { platform?: string } }) => JSON.stringify(n).includes('dgx-spark-gb10')),
    ).toEqual([true, true]);
    const cross = Object.fromEntries(j.cross.map((x: { id: string }) => [x.id, x]));
    // TP 2 over one GB10 each: the generated profile's GPUs, counted across the nodes
    expect(cross['nodes.gpus']).toMatchObject({ status: 'pass', observed: '2 GPUs over 2 nodes (needs 2)' });
    const text = await cli(['preflight', '--nodes', cl.nodesFile, '--profile', 'openai/gpt-oss-120b'], { env });
    expect(text.stderr).toContain(
      "each node's own preflight runs for platform dgx-spark-gb10, without a profile: openai/gpt-oss-120b has none of its own",
    );
    expect(text.stdout).not.toContain('unreachable');
  });

  it('a relative model.path is checked on every node at the absolute path the ranks are given', async () => {
    const env = { ...cl.env, SPARKCTL_STATE_DIR: join(dir, 'state'), SPARKCTL_TEST_CASE: marker };
    const pdir = join(dir, 'rel-profiles');
    mkdirSync(pdir, { recursive: true });
    writeFileSync(
      join(pdir, 'oss-rel.yaml'),
      'name: oss-rel\nplatform: dgx-spark-gb10\nmodel: { path: weights/oss, parameters: 1.2e11, layers: 36, attentionHeads: 64, kvHeads: 8, headDim: 64, maxContext: 131072 }\nengine: { gpuMemoryUtilization: 0.8 }\nparallel: { tensor: 2, nodes: 2 }\n',
    );
    const r = await cli(['preflight', '--nodes', cl.nodesFile, '--profile', 'oss-rel', '--profiles', pdir, '--json'], {
      env,
      cwd: dir,
    });
    const cross = Object.fromEntries(JSON.parse(r.stdout).cross.map((x: { id: string }) => [x.id, x]));
    expect(cross['nodes.model-path']).toMatchObject({
      status: 'fail',
      observed: `${join(dir, 'weights', 'oss')}/config.json missing on n0, n1`,
    });
  });

  it("serve MODEL --nodes: every rank reads the model from this host's cache path (HF_HUB_CACHE sent to each node)", async () => {
    const env = { ...cl.env, HF_HUB_CACHE: hub, SPARKCTL_STATE_DIR: join(dir, 'state'), SPARKCTL_TEST_CASE: marker };
    const port = await freePort();
    const r = await cli(
      [
        'serve',
        'openai/gpt-oss-120b',
        '--nodes',
        cl.nodesFile,
        '--engine',
        'sim',
        '--no-prewarm',
        '--set',
        `server.port=${port}`,
      ],
      { env, timeout: 90_000 },
    );
    try {
      expect(r.exitCode, r.stderr + r.stdout).toBe(0);
      for (const rank of [0, 1]) {
        // each node's own home (test/cluster.ts): where the rank's log is
        const logs = join(cl.dir, `n${rank}`, 'home', '.local', 'state', 'sparkctl', 'logs');
        const file = readdirSync(logs).find((f) => f.endsWith(`-rank${rank}.log`));
        expect(file, readdirSync(logs).join(' ')).toBeDefined();
        const log = readFileSync(join(logs, file!), 'utf8');
        expect(log, `rank ${rank}`).toContain(`from ${join(repo, 'snapshots')}`);
      }
    } finally {
      const s = await cli(['stop', 'gpt-oss-120b', '--nodes', cl.nodesFile], { env, timeout: 60_000 });
      expect(s.exitCode, s.stderr).toBe(0);
    }
  }, 120_000);
});
