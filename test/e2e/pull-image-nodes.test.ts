// pull --nodes, the container image: `podman save IMAGE | ssh NODE podman load` to the four
// network-namespace nodes of test/cluster.ts over real sshd, with the real podman on both ends. Each
// node mounts its own /tmp, so a podman storage root under /tmp (--root/--runroot) is really per node
// (and here, on this host, another one again). The copy lands the same image ID on every node; a
// second run copies nothing; a node that lost the image gets it back alone.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { cli, ROOT, rmrf, processesMarked } from '../helpers.js';
import { startHub } from '../hub-server.js';
import { makeCluster, netnsUnavailable, type Cluster } from '../cluster.js';
import { PODMAN, podmanUnavailable } from '../podman.js';
import { loadNodesFile } from '../../src/profiles/load.js';
import {
  localImage,
  syncImage,
  imageProbeCommand,
  parseImageProbe,
  loadCommand,
  saveArgv,
} from '../../src/engine/cluster/image-sync.js';

const why = netnsUnavailable() ?? podmanUnavailable();
if (why) console.warn(`pull --nodes image suite skipped: ${why}`);

describe('the image copy, rendered and read (pure)', () => {
  const r = { cli: 'podman' as const, cliArgs: ['--root', '/tmp/a b'], image: "reg.example/x:1'; rm -rf /" };
  it('quotes the image reference as one word of the remote shell, and saves it as one argv element', () => {
    const probe = imageProbeCommand(r);
    expect(probe).toContain(`'reg.example/x:1'\\''; rm -rf /'`);
    expect(probe).toContain(`'/tmp/a b'`);
    expect(probe).not.toMatch(/[^']reg\.example\/x:1'; rm/);
    expect(saveArgv(r)).toEqual(['podman', '--root', '/tmp/a b', 'save', "reg.example/x:1'; rm -rf /"]);
    expect(loadCommand(r, 700)).toBe(`timeout -k 5 700 sh -c 'podman --root '\\''/tmp/a b'\\'' load'`);
    expect(imageProbeCommand({ ...r, cli: 'docker' })).toContain('{{.DockerRootDir}}');
  });
  it.each([
    [`id sha256:${'a'.repeat(64)}\nfree 100 /var/lib/containers`, 'a'.repeat(64), 102400],
    [`id ${'b'.repeat(64)}\nfree 1 /`, 'b'.repeat(64), 1024],
    [`id \nfree 5 /x`, undefined, 5120],
    [`id sha256:${'a'.repeat(63)}\nfree 5 /x`, undefined, 5120],
    [`id sha256:${'A'.repeat(64)}`, undefined, undefined],
    [`id ${'a'.repeat(64)}; rm -rf /\nfree 99999999999999999 /`, undefined, undefined],
    [`id ${'a'.repeat(64)} extra\nfree -1 /`, undefined, undefined],
    [`free 5 relative`, undefined, undefined],
  ])('a node printing %j: id %s, free %s', (out, id, free) => {
    const h = parseImageProbe(out);
    expect(h.id).toBe(id);
    expect(h.freeBytes).toBe(free);
  });
});

describe.skipIf(Boolean(why))(
  'pull --nodes: the image to network-namespace nodes with real podman',
  { timeout: 120_000 },
  () => {
    let cl: Cluster;
    const marker = randomUUID();
    // under /tmp: the nodes' /tmp is their own, so each has its own storage with these same args. Its
    // own --tmpdir too: podman's default one (/run/libpod) is shared by this host, its nodes (they
    // share /run) and every other podman suite running beside this one
    const T = `/tmp/sparkctl-imgsync-${process.pid}`;
    const cliArgs = [
      ...PODMAN,
      '--root',
      `${T}/root`,
      '--runroot',
      `${T}/run`,
      '--tmpdir',
      `${T}/tmp`,
      '--storage-driver',
      'vfs',
    ];
    const image = `localhost/sparkctl-imgsync-${process.pid}:1`;
    const req = { cli: 'podman' as const, cliArgs, image };
    const onNode = (i: number) =>
      cl.exec(i, `podman ${cliArgs.join(' ')} image inspect --format '{{.Id}}' ${image}`, 30_000);
    let work: string;
    beforeAll(async () => {
      work = mkdtempSync('/var/tmp/sparkctl-imgsync-');
      mkdirSync(join(work, 'fs'));
      writeFileSync(join(work, 'fs', 'hello'), `image of ${marker}\n`);
      await execa('tar', ['-C', join(work, 'fs'), '-cf', join(work, 'fs.tar'), '.']);
      const imp = await execa('podman', [...cliArgs, 'import', join(work, 'fs.tar'), image], {
        reject: false,
        timeout: 60_000,
      });
      expect(imp.exitCode, imp.stderr).toBe(0);
      cl = await makeCluster('netns', marker);
      Object.assign(process.env, cl.env);
    }, 90_000);
    afterAll(async () => {
      for (const p of processesMarked(marker)) process.kill(p, 'SIGKILL');
      // never `podman system reset`: it removes podman's tmpdir and every network of the host, shared
      // with the suites running beside this one (it took /run/libpod from under them: CI, stop 8). This
      // suite runs no container; its storage is vfs (plain folders, no mounts): removing T is enough.
      for (let i = 0; i < 4; i++) cl?.exec(i, `rm -rf ${T}`, 30_000);
      cl?.teardown();
      rmrf(T);
      if (work) rmrf(work);
    }, 90_000);

    it('copies to every node, a second run copies nothing, then only the node that lost it', async () => {
      const here = await localImage(req);
      if ('error' in here) throw new Error(here.error);
      expect(here.id).toMatch(/^[0-9a-f]{64}$/);
      expect(here.size).toBeGreaterThan(0);
      const nf = loadNodesFile(cl.nodesFile);
      expect(onNode(1).status).not.toBe(0); // the node's storage really is its own: the image is not there yet
      const first = await syncImage(nf, here, req);
      expect(first.map((n) => [n.status, n.why])).toEqual([0, 1, 2, 3].map(() => ['copied', undefined]));
      expect(first.every((n) => n.bytes > 0)).toBe(true);
      for (let i = 0; i < 4; i++)
        expect(
          onNode(i)
            .stdout.trim()
            .replace(/^sha256:/, ''),
        ).toBe(here.id);
      const second = await syncImage(nf, here, req);
      expect(second.map((n) => [n.status, n.bytes])).toEqual([0, 1, 2, 3].map(() => ['matched', 0]));
      expect(cl.exec(2, `podman ${cliArgs.join(' ')} rmi -f ${image}`, 30_000).status).toBe(0);
      const third = await syncImage(nf, here, req);
      expect(third.map((n) => n.status)).toEqual(['matched', 'matched', 'copied', 'matched']);
      expect(
        onNode(2)
          .stdout.trim()
          .replace(/^sha256:/, ''),
      ).toBe(here.id);
      // n3 holds ANOTHER build under the same reference (its own storage): it gets the bytes here, and the ID it held
      // is said
      mkdirSync(join(work, 'fs2'), { recursive: true });
      writeFileSync(join(work, 'fs2', 'hello'), `another build of ${marker}\n`);
      await execa('tar', ['-C', join(work, 'fs2'), '-cf', join(work, 'fs2.tar'), '.']);
      expect(
        cl.exec(3, `podman ${cliArgs.join(' ')} import ${join(work, 'fs2.tar')} ${image} >/dev/null`, 60_000).status,
      ).toBe(0);
      const otherId = onNode(3)
        .stdout.trim()
        .replace(/^sha256:/, '');
      expect(otherId).toMatch(/^[0-9a-f]{64}$/);
      expect(otherId).not.toBe(here.id);
      const fourth = await syncImage(nf, here, req);
      expect(fourth.map((n) => n.status)).toEqual(['matched', 'matched', 'matched', 'copied']);
      expect(fourth[3]).toMatchObject({ had: otherId, id: here.id });
      expect(fourth[3]!.bytes).toBeGreaterThan(0);
      expect(fourth.slice(0, 3).every((n) => n.had === undefined)).toBe(true);
      expect(
        onNode(3)
          .stdout.trim()
          .replace(/^sha256:/, ''),
      ).toBe(here.id);
    });

    it('the verb: pull PROFILE --nodes copies the snapshot and the image, per node in --json', async () => {
      const hub = await startHub();
      try {
        hub.addRepo('nodes/img', { files: { 'config.json': Buffer.from('{"model_type": "qwen3"}') } });
        const profiles = join(work, 'profiles');
        mkdirSync(profiles, { recursive: true });
        writeFileSync(
          join(profiles, 'img-box.yaml'),
          [
            'name: img-box',
            'model: { id: nodes/img }',
            'engine: { vllmVersion: "0.17.0", runtime: container }',
            `container: { cli: podman, image: ${image}, cliArgs: [${cliArgs.map((x) => `"${x}"`).join(', ')}] }`,
            '',
          ].join('\n'),
        );
        expect(cl.exec(1, `podman ${cliArgs.join(' ')} rmi -f ${image}`, 30_000).status).toBe(0);
        const env = { ...cl.env, HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(T, 'hub'), SPARKCTL_TEST_CASE: marker };
        const r = await cli(['pull', 'img-box', '--profiles', profiles, '--nodes', cl.nodesFile, '--json'], {
          cwd: ROOT,
          env,
          timeout: 90_000,
        });
        expect(r.exitCode, r.stderr + r.stdout).toBe(0);
        const body = JSON.parse(r.stdout);
        expect(body.image.ref).toBe(image);
        expect(body.image.nodes.map((n: { status: string }) => n.status)).toEqual([
          'matched',
          'copied',
          'matched',
          'matched',
        ]);
        const text = await cli(['pull', 'img-box', '--profiles', profiles, '--nodes', cl.nodesFile], {
          cwd: ROOT,
          env,
          timeout: 90_000,
        });
        expect(text.exitCode, text.stderr).toBe(0);
        expect(text.stderr.match(/image .* already [0-9a-f]{12}, nothing copied/g)?.length).toBe(4);
      } finally {
        await hub.close();
      }
    });

    it('refuses a node whose disk is short of the image, before streaming a byte', async () => {
      const here = await localImage(req);
      if ('error' in here) throw new Error(here.error);
      expect(cl.exec(3, `podman ${cliArgs.join(' ')} rmi -f ${image}`, 30_000).status).toBe(0);
      const r = await syncImage(loadNodesFile(cl.nodesFile), { ...here, size: 2 ** 52 }, req);
      expect(r[3]).toMatchObject({ status: 'failed', bytes: 0 });
      expect(r[3]!.why).toMatch(/not enough disk space in \/\S*: the image needs 4503599627370496 bytes, \d+ free/);
      expect(onNode(3).status).not.toBe(0);
    });
  },
);
