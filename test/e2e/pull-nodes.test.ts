// pull --nodes: the snapshot pulled once here (from the Hub stand-in, test/hub-server.ts) copied to
// the four network-namespace nodes of test/cluster.ts over real ssh. Each node mounts its own /tmp,
// so a cache under /tmp is really per node. A second pull copies nothing; a node that lost a blob
// gets only that blob.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { symlinkSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { cli, tempDir, rmrf, ROOT, processesMarked } from '../helpers.js';
import { makeCluster, netnsUnavailable, type Cluster } from '../cluster.js';
import { startHub, type HubHandle } from '../hub-server.js';

const why = netnsUnavailable();
if (why) console.warn(`pull --nodes suite skipped: ${why}`);

describe.skipIf(Boolean(why))('pull --nodes over real ssh to network-namespace nodes', { timeout: 180_000 }, () => {
  let cl: Cluster;
  let hub: HubHandle;
  let cache: string;
  let commit: string;
  let shardSha: string;
  const marker = randomUUID();
  beforeAll(async () => {
    hub = await startHub();
    const r = hub.addRepo('nodes/m', {
      files: {
        'config.json': Buffer.from('{"model_type": "qwen3"}'),
        'model.safetensors': randomBytes(3 * 1024 * 1024),
        'tokenizer.json': Buffer.from('{}'),
      },
    });
    commit = r.commit;
    shardSha = r.files.find((f) => f.path === 'model.safetensors')!.sha256;
    cache = join(tempDir('sparkctl-pull-nodes-'), 'hub');
    cl = await makeCluster('netns', marker);
  }, 90_000);
  afterAll(async () => {
    for (const p of processesMarked(marker)) process.kill(p, 'SIGKILL');
    cl?.teardown();
    await hub?.close();
    rmrf(join(cache, '..'));
  });
  const pull = (args: string[]) =>
    cli(['pull', 'nodes/m', '--nodes', cl.nodesFile, ...args], {
      cwd: ROOT,
      env: { ...cl.env, HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache, SPARKCTL_TEST_CASE: marker },
      timeout: 120_000,
    });
  const snapshotOn = (i: number) =>
    cl.exec(
      i,
      `sha256sum ${join(cache, 'models--nodes--m', 'snapshots', commit, 'model.safetensors')}; cat ${join(cache, 'models--nodes--m', 'refs', 'main')}`,
    );

  it('copies to every node, then a second pull copies nothing, then only what a node lost', async () => {
    const first = await pull(['--json']);
    expect(first.exitCode, first.stderr).toBe(0);
    const body = JSON.parse(first.stdout);
    expect(body.nodes.map((n: { status: string }) => n.status)).toEqual(['copied', 'copied', 'copied', 'copied']);
    expect(body.nodes.every((n: { bytes: number }) => n.bytes >= 3 * 1024 * 1024)).toBe(true);
    for (let i = 0; i < 4; i++) {
      const s = snapshotOn(i);
      expect(s.status, s.stderr).toBe(0);
      expect(s.stdout).toContain(shardSha);
      expect(s.stdout.trim().endsWith(commit)).toBe(true);
    }
    const second = await pull([]);
    expect(second.exitCode, second.stderr).toBe(0);
    expect(second.stderr.match(/already holds .*nothing copied/g)?.length).toBe(4);
    // node2 loses the shard's blob: only it gets a copy, of that blob only.
    expect(cl.exec(2, `rm ${join(cache, 'models--nodes--m', 'blobs', shardSha)}`).status).toBe(0);
    const third = await pull(['--json']);
    expect(third.exitCode, third.stderr).toBe(0);
    const n = JSON.parse(third.stdout).nodes;
    expect(n.map((x: { status: string }) => x.status)).toEqual(['matched', 'matched', 'copied', 'matched']);
    expect(n[2]).toMatchObject({ blobs: 1, bytes: 3 * 1024 * 1024 });
    expect(snapshotOn(2).stdout).toContain(shardSha);
    expect(n[2].via).toBe('rsync');
  });

  it('without rsync here, tar over ssh: blobs staged and moved in, then the links', async () => {
    expect(cl.exec(1, `rm -rf ${join(cache, 'models--nodes--m')}`).status).toBe(0);
    // A PATH with ssh and tar but no rsync.
    const bin = tempDir('sparkctl-norsync-');
    for (const b of ['ssh', 'tar', 'sh'])
      symlinkSync(
        execFileSync('sh', ['-c', `command -v ${b}`])
          .toString()
          .trim(),
        join(bin, b),
      );
    const r = await cli(['pull', 'nodes/m', '--nodes', cl.nodesFile, '--json'], {
      cwd: ROOT,
      env: { ...cl.env, PATH: bin, HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache, SPARKCTL_TEST_CASE: marker },
      timeout: 120_000,
    });
    rmrf(bin);
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    const n = JSON.parse(r.stdout).nodes;
    expect(n[1]).toMatchObject({ status: 'copied', via: 'tar' });
    const s = snapshotOn(1);
    expect(s.stdout).toContain(shardSha);
    expect(
      cl
        .exec(1, `ls -A ${join(cache, 'models--nodes--m')}`)
        .stdout.split('\n')
        .filter(Boolean)
        .sort(),
    ).toEqual(['blobs', 'refs', 'snapshots', 'trees']);
  });
});
