// pull --nodes against nodes that planted symbolic links in their cache (issue 42, item 3): real
// network-namespace nodes with sshd (test/cluster.ts), the snapshot from the Hub stand-in
// (test/hub-server.ts). Node 1 has no rsync (its rsync hidden by a bind mount in its own mount
// namespace: the copy goes by tar), node 2 has rsync (the copy goes by rsync), node 3's repository
// folder itself is a link. Each link points at a folder outside the cache holding a file the copy
// would overwrite; after the pull that folder is exactly as it was, the node is reported failed with
// the path and the fix, and once the links are gone the same pull copies to every node.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { mkdirSync, mkdtempSync, writeFileSync, readdirSync, readFileSync, lstatSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import { cli, tempDir, rmrf, ROOT, processesMarked } from '../helpers.js';
import { makeCluster, netnsUnavailable, type Cluster } from '../cluster.js';
import { startHub, type HubHandle } from '../hub-server.js';

const why = netnsUnavailable();
if (why) console.warn(`pull --nodes planted-links suite skipped: ${why}`);

describe.skipIf(Boolean(why))('pull --nodes never writes through a link a node planted', { timeout: 240_000 }, () => {
  let cl: Cluster;
  let hub: HubHandle;
  let cache: string;
  let commit: string;
  let victims: string;
  const marker = randomUUID();
  beforeAll(async () => {
    hub = await startHub();
    commit = hub.addRepo('links/m', {
      files: {
        'config.json': Buffer.from('{"model_type": "qwen3"}'),
        'model.safetensors': randomBytes(256 * 1024),
        'tokenizer.json': Buffer.from('{}'),
      },
    }).commit;
    cache = join(tempDir('sparkctl-pull-links-'), 'hub');
    // outside every node's own /tmp: the same folder seen from here and from the nodes
    victims = mkdtempSync('/var/tmp/sparkctl-victim-');
    cl = await makeCluster('netns', marker);
  }, 90_000);
  afterAll(async () => {
    for (const p of processesMarked(marker)) process.kill(p, 'SIGKILL');
    cl?.teardown();
    await hub?.close();
    rmrf(join(cache, '..'));
    rmrf(victims);
  });
  const R = () => join(cache, 'models--links--m');
  const pull = (env: Record<string, string> = {}) =>
    cli(['pull', 'links/m', '--nodes', cl.nodesFile, '--json'], {
      cwd: ROOT,
      env: { ...cl.env, HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache, SPARKCTL_TEST_CASE: marker, ...env },
      timeout: 180_000,
    });
  const victim = (name: string) => {
    const d = join(victims, name);
    mkdirSync(d);
    writeFileSync(join(d, 'config.json'), 'precious');
    writeFileSync(join(d, 'tokenizer.json'), 'precious');
    return d;
  };
  const contents = (d: string) =>
    readdirSync(d)
      .sort()
      .map((f) => `${f} ${lstatSync(join(d, f)).isSymbolicLink() ? 'LINK' : readFileSync(join(d, f), 'utf8')}`);

  it('tar (no rsync on the node), rsync, and a linked repository folder: refused, the planted targets untouched', async () => {
    const sh = (i: number, cmd: string) => {
      const r = cl.exec(i, cmd);
      expect(r.status, r.stderr).toBe(0);
      return r.stdout;
    };
    // node 1: its rsync does not run (a script that exits 127 bound over it), so tar is used
    writeFileSync(join(victims, 'no-rsync'), '#!/bin/sh\necho "rsync: not here" >&2; exit 127\n', { mode: 0o755 });
    sh(1, `mount --bind '${join(victims, 'no-rsync')}' "$(command -v rsync)"; ! rsync --version`);
    const v1 = victim('n1');
    const v2 = victim('n2');
    const v3 = victim('n3');
    sh(1, `mkdir -p '${R()}/snapshots' && ln -s '${v1}' '${R()}/snapshots/${commit}'`);
    sh(2, `mkdir -p '${R()}/snapshots' && ln -s '${v2}' '${R()}/snapshots/${commit}'`);
    sh(3, `mkdir -p '${cache}' && ln -s '${v3}' '${R()}'`);
    const before = [v1, v2, v3].map(contents);
    const r = await pull();
    expect(r.exitCode, r.stderr).toBe(1);
    const nodes = JSON.parse(r.stdout).nodes;
    expect(nodes.map((n: { status: string }) => n.status)).toEqual(['copied', 'failed', 'failed', 'failed']);
    expect(nodes[1].why).toContain(`${R()}/snapshots/${commit} is a symbolic link sparkctl did not make`);
    expect(nodes[1].via).toBe('tar');
    expect(nodes[2].why).toContain(`${R()}/snapshots/${commit} is a symbolic link sparkctl did not make`);
    expect(nodes[2].via).toBe('rsync');
    expect(nodes[3].why).toContain(`${R()} is a symbolic link sparkctl did not make`);
    expect([v1, v2, v3].map(contents)).toEqual(before);
    expect(contents(v1)).toEqual(['config.json precious', 'tokenizer.json precious']);
    // nothing half-done left on the refused nodes: no staging folder
    expect(
      sh(1, `ls -A '${R()}'`)
        .split('\n')
        .filter((f) => f.startsWith('.sparkctl-incoming')),
    ).toEqual([]);
    expect(
      sh(2, `ls -A '${R()}'`)
        .split('\n')
        .filter((f) => f.startsWith('.sparkctl-incoming')),
    ).toEqual([]);

    // the links removed: the same pull copies to the three nodes, by tar and by rsync
    sh(1, `rm '${R()}/snapshots/${commit}'`);
    sh(2, `rm '${R()}/snapshots/${commit}'`);
    sh(3, `rm '${R()}'`);
    const again = await pull();
    expect(again.exitCode, again.stderr).toBe(0);
    const n2 = JSON.parse(again.stdout).nodes;
    expect(n2.map((n: { status: string }) => n.status)).toEqual(['matched', 'copied', 'copied', 'copied']);
    expect(n2[1].via).toBe('tar');
    expect(n2[2].via).toBe('rsync');
    for (const i of [1, 2, 3])
      expect(sh(i, `cat '${R()}/snapshots/${commit}/config.json'`)).toBe('{"model_type": "qwen3"}');
    expect([v1, v2, v3].map(contents)).toEqual(before);
  });

  it('no rsync here: tar to every node, and links planted in snapshots/, refs/ and at the repository folder are refused', async () => {
    const sh = (i: number, cmd: string) => {
      const r = cl.exec(i, cmd);
      expect(r.status, r.stderr).toBe(0);
      return r.stdout;
    };
    // a PATH with ssh and tar but no rsync
    const bin = tempDir('sparkctl-norsync-');
    for (const b of ['ssh', 'tar', 'sh'])
      symlinkSync(
        execFileSync('sh', ['-c', `command -v ${b}`])
          .toString()
          .trim(),
        join(bin, b),
      );
    const [a, b, c] = [victim('t1'), victim('t2'), victim('t3')];
    for (const i of [1, 2, 3]) sh(i, `rm -rf '${R()}'`);
    sh(1, `mkdir -p '${R()}/snapshots' && ln -s '${a}' '${R()}/snapshots/${commit}'`);
    sh(2, `mkdir -p '${R()}' && ln -s '${b}' '${R()}/refs'`);
    sh(3, `mkdir -p '${cache}' && ln -s '${c}' '${R()}'`);
    const before = [a, b, c].map(contents);
    const r = await pull({ PATH: bin });
    rmrf(bin);
    expect(r.exitCode, r.stderr).toBe(1);
    const nodes = JSON.parse(r.stdout).nodes;
    expect(nodes.map((n: { status: string }) => n.status)).toEqual(['matched', 'failed', 'failed', 'failed']);
    expect(nodes[1]).toMatchObject({ via: 'tar' });
    expect(nodes[1].why).toContain(`${R()}/snapshots/${commit} is a symbolic link`);
    expect(nodes[2].why).toContain(`${R()}/refs is a symbolic link`);
    expect(nodes[3].why).toContain(`${R()} is a symbolic link`);
    expect([a, b, c].map(contents)).toEqual(before);
  });
});
