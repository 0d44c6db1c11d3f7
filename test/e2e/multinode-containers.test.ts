// Containers on every node, for real: the native executor over the four network-namespace nodes
// (real sshd), each node's rank in a podman container (the real podman, host network = that node's
// namespace) of the simulator's image. Ready only once every rank joined; stop leaves no container;
// a node whose image differs is refused before anything starts, naming it and both IDs.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, freePort, rmrf } from '../helpers.js';
import { netnsUnavailable, type Cluster } from '../cluster.js';
import { PODMAN, podmanIn, podmanUnavailable, buildSimImage, derivedImage } from '../podman.js';
import { podmanNodes, writeNodesProfile } from '../podman-nodes.js';

const why = netnsUnavailable() ?? podmanUnavailable();
if (why) console.warn(`containers over nodes skipped: ${why}`);

describe.skipIf(!!why)('native multi-node in podman containers on the netns nodes', () => {
  // the nodes mount their own /tmp: what they must see (podman's settings, the mounted folders) lives in /var/tmp
  const work = mkdtempSync('/var/tmp/sparkctl-mn-containers-');
  const { env, podman, prepare } = podmanIn(work);
  const marker = randomUUID();
  let cl: Cluster;
  let state: string;
  let image = '';
  let other = '';
  const profiles = join(work, 'profiles');
  const run = (args: string[]) =>
    cli(args, { env: { SPARKCTL_STATE_DIR: state, SPARKCTL_TEST_CASE: marker, ...env, ...cl.env }, timeout: 120_000 });
  const ours = async () =>
    (await podman(['ps', '-a', '--filter', 'label=io.sparkctl.profile=mn-box', '--format', '{{.Names}}'])).stdout
      .split('\n')
      .filter(Boolean);

  beforeAll(async () => {
    prepare();
    // what a killed or failed earlier run left (its containers keep the names this run needs)
    for (const n of await ours()) await podman(['rm', '-f', '-t', '0', n]);
    image = await buildSimImage(podman, work);
    other = await derivedImage(
      podman,
      work,
      image,
      ['LABEL io.sparkctl.test=another-build'],
      `localhost/sparkctl-mn-other-${process.pid}:1`,
    );
    state = join(work, 'state');
    writeNodesProfile(work, 'mn-box', image);
    cl = await podmanNodes(marker, env.CONTAINERS_CONF, await freePort());
  }, 240_000);

  afterAll(async () => {
    // a container is removed inside the node that runs it (from outside, podman cannot end what lives in the node's
    // namespaces)
    if (cl)
      for (const i of [0, 1, 2, 3])
        cl.exec(i, `podman ${PODMAN.join(' ')} rm -f -t 0 sparkctl-mn-box-rank${i} >/dev/null 2>&1`, 60_000);
    for (const n of await ours()) await podman(['rm', '-f', '-t', '0', n]);
    if (other) await podman(['rmi', other]);
    cl?.teardown();
    rmrf(work);
  }, 60_000);

  it('four ranks, one container each, ready once all joined; status per rank; upgrade --image in place over every node (refused where one node differs); stop removes every container', async (ctx) => {
    // Inside the test nodes (ip netns exec + unshare) runc may not be allowed to set a container's
    // rlimits on this machine ("error setting rlimit type N: operation not permitted"): then this
    // case cannot run here, and says so.
    const probe = cl.exec(
      0,
      `podman ${PODMAN.join(' ')} run --rm --network host ${image} /usr/local/bin/node -e 0 2>&1`,
      60_000,
    );
    if (probe.status !== 0) {
      console.warn(
        `podman cannot start a container inside the test nodes here, the launch case is skipped: ${probe.stdout.trim().split('\n').pop()}`,
      );
      ctx.skip();
    }
    const port = await freePort();
    const r = await run([
      'serve',
      'mn-box',
      '--profiles',
      profiles,
      '--engine',
      'sim',
      '--nodes',
      cl.nodesFile,
      '--no-prewarm',
      '--set',
      `server.port=${port}`,
    ]);
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    for (const i of [0, 1, 2, 3])
      expect(r.stderr).toMatch(new RegExp(`vLLM rank ${i} started on n${i} \\(pid 0, log podman logs [a-f0-9]{12}\\)`));
    expect(r.stdout).toMatch(/probe: healthy/);
    expect((await ours()).sort()).toEqual([0, 1, 2, 3].map((i) => `sparkctl-mn-box-rank${i}`));
    const st = await run(['status']);
    for (const i of [0, 1, 2, 3])
      expect(st.stdout).toMatch(new RegExp(`n${i}\\s+${i ? 'worker' : 'head'}\\s+\\S+\\s+rank ${i} running`));
    expect(st.stderr).not.toContain('not on its pin');
    // the pin moves on while this server runs (a later serve --repin or upgrade pinned another build):
    // status names every rank on another image, each read on its node from its own container
    const pinFile = join(state, 'pins', 'mn-box.json');
    const pin = JSON.parse(readFileSync(pinFile, 'utf8'));
    const a = pin.current.imageId as string;
    expect(a).toMatch(/^[a-f0-9]{64}$/);
    const b = (await podman(['image', 'inspect', '--format', '{{.Id}}', other])).stdout.trim();
    writeFileSync(
      pinFile,
      JSON.stringify({
        ...pin,
        current: { ...pin.current, imageId: b, imagePinned: b, sets: [`container.image=${b}`] },
      }),
    );
    const moved = await run(['status']);
    for (const i of [0, 1, 2, 3])
      expect(moved.stderr).toMatch(
        new RegExp(
          `not on its pin: mn-box: node n${i} \\(rank ${i}\\) runs image ${a.slice(0, 12)}, not the pin ${b} \\(from [^)]+\\) \\(image ${b.slice(0, 12)}\\)`,
        ),
      );
    const mj = JSON.parse((await run(['status', '--json'])).stdout);
    expect(
      mj.drift.map((d: { name: string; runs: string; pinned: string }) => [d.name, d.runs, d.pinned]).sort(),
    ).toEqual([0, 1, 2, 3].map((i) => [`mn-box on n${i}`, a, b]));
    // upgrade over the nodes, by image, in place (src/verbs/upgrade/nodes.ts): the pin as serve wrote it again
    writeFileSync(pinFile, JSON.stringify(pin));
    const rankIds = async () =>
      Promise.all(
        [0, 1, 2, 3].map(async (i) =>
          (await podman(['inspect', '--format', '{{.Id}} {{.Image}}', `sparkctl-mn-box-rank${i}`])).stdout.trim(),
        ),
      );
    const idsBefore = await rankIds();
    expect(idsBefore.map((x) => x.split(' ')[1])).toEqual([a, a, a, a]);
    // n2's copy of the candidate's tag is another build. The upgrade gives n2 the candidate's bytes
    // (podman save here | ssh n2 podman load) and reads it back; n2's podman still answers the other
    // build (the nodes share one store here: a wrapper on n2 answers for the tag, as a node whose load
    // did not take would): refused, naming n2 and both IDs, before anything stops. --no-pull copies
    // nothing: refused naming the nodes that differ (exit 2).
    const tag = `localhost/sparkctl-mn-cand-${process.pid}:x`;
    await podman(['tag', image, tag]);
    const n2 = join(cl.dir, 'n2', 'bin', 'podman');
    try {
      writeFileSync(
        n2,
        `#!/bin/bash\nargs=(); for x in "$@"; do [ "$x" = ${tag} ] && x=${other}; args+=("$x"); done\nexec /usr/bin/podman "\${args[@]}"\n`,
        { mode: 0o755 },
      );
      const t0 = Date.now();
      const refused = await run(['upgrade', 'mn-box', '--image', tag]);
      console.log(`upgrade --image over nodes, the copy to n2 then the refusal: ${Date.now() - t0} ms`);
      expect(refused.exitCode, refused.stderr).toBe(4);
      expect(refused.stderr).toContain(`--image ${tag}: 1 of 4 node(s) do not hold it; nothing was stopped`);
      expect(refused.stderr).toContain(
        `n2 (${cl.addresses[2]}): after the load the node's ${tag} is ${b.slice(0, 12)}, not ${a.slice(0, 12)}`,
      );
      // the copy went to n2 only (the others already held the candidate's ID)
      expect(refused.stderr).toMatch(/n2 \([^)]+\): FAILED: after the load/);
      for (const i of [0, 1, 3]) expect(refused.stderr).toContain(`n${i} (${cl.addresses[i]}): already holds it`);
      const noPull = await run(['upgrade', 'mn-box', '--image', tag, '--no-pull']);
      expect(noPull.exitCode, noPull.stderr).toBe(2);
      expect(noPull.stderr).toContain(
        `--image ${tag}: ${tag} differs between the nodes: n0, n1, n3 ${a.slice(0, 12)}; n2 ${b.slice(0, 12)}; nothing was stopped`,
      );
    } finally {
      rmrf(n2);
      await podman(['rmi', tag]);
    }
    expect(await rankIds()).toEqual(idsBefore);
    // the other build on every node: the running cluster measured, stopped, the candidate served over all four nodes
    // (its image ID), compared (the same simulator: every exact check identical), kept and pinned (a cluster serve
    // more: with SPARKCTL_E2E_UPGRADE_NODES=1; CI runs the refusal above and the simulator's upgrade in
    // multinode.test.ts)
    if (process.env.SPARKCTL_E2E_UPGRADE_NODES === '1') {
      const loose = [
        '--set',
        'upgrade.ttftRatio=4',
        '--set',
        'upgrade.tpotRatio=4',
        '--set',
        'upgrade.throughputRatio=0.25',
      ];
      const up = await run(['upgrade', 'mn-box', '--image', other, ...loose, '--json']);
      expect(up.exitCode, up.stdout + up.stderr).toBe(0);
      expect(JSON.parse(up.stdout)).toMatchObject({
        status: 'rolled',
        where: 'nodes',
        serving: 'candidate',
        image: b,
        previousImage: a,
        verdict: { pass: true },
      });
      const after = await rankIds();
      expect(after.map((x) => x.split(' ')[1])).toEqual([b, b, b, b]);
      expect(after.map((x) => x.split(' ')[0])).not.toContain(idsBefore[0]!.split(' ')[0]);
      const pinned = JSON.parse(readFileSync(pinFile, 'utf8'));
      expect([pinned.current.imageId, pinned.current.imagePinned, pinned.previous[0].imageId]).toEqual([b, b, a]);
      expect((await run(['status'])).stderr).not.toContain('not on its pin');
    }
    const stop = await run(['stop', 'mn-box', '--nodes', cl.nodesFile]);
    expect(stop.exitCode, stop.stdout + stop.stderr).toBe(0);
    for (const i of [0, 1, 2, 3]) expect(stop.stdout).toContain(`vLLM rank ${i} on n${i}: stopped (SIGTERM)`);
    expect(await ours()).toEqual([]);
  }, 300_000);

  it('an image whose ID differs on one node: refused before anything starts, naming the nodes and both IDs', async () => {
    // n2's copy of the tag is another build (the nodes share this machine's image store: the tag is moved there for the
    // test)
    const id = async (i: string) => (await podman(['image', 'inspect', '--format', '{{.Id}}', i])).stdout.trim();
    const [a, b] = [await id(image), await id(other)];
    const tag = `localhost/sparkctl-mn-pinned-${process.pid}:x`;
    await podman(['tag', image, tag]);
    try {
      // the nodes see one store; what differs per node is what their runtime answers: a wrapper on n2 answers for the
      // other build
      const n2 = join(cl.dir, 'n2', 'bin', 'podman');
      writeFileSync(
        n2,
        `#!/bin/bash\nargs=(); for a in "$@"; do [ "$a" = ${tag} ] && a=${other}; args+=("$a"); done\nexec /usr/bin/podman "\${args[@]}"\n`,
        { mode: 0o755 },
      );
      writeFileSync(
        join(profiles, 'mn-box.yaml'),
        (await import('node:fs'))
          .readFileSync(join(profiles, 'mn-box.yaml'), 'utf8')
          .replace(`image: ${image}`, `image: ${tag}`),
      );
      // preflight names it first
      const pf = JSON.parse(
        (await run(['preflight', '--nodes', cl.nodesFile, '--profile', 'mn-box', '--profiles', profiles, '--json']))
          .stdout,
      );
      expect(pf.cross.find((x: { id: string }) => x.id === 'nodes.same-image')).toMatchObject({
        status: 'fail',
        observed: `${tag} differs between the nodes: n0, n1, n3 ${a.slice(0, 12)}; n2 ${b.slice(0, 12)}`,
      });
      const r = await run([
        'serve',
        'mn-box',
        '--profiles',
        profiles,
        '--engine',
        'sim',
        '--nodes',
        cl.nodesFile,
        '--no-prewarm',
        '--set',
        `server.port=${await freePort()}`,
      ]);
      expect(r.exitCode).toBe(4);
      expect(r.stderr).toContain(
        `refused: ${tag} differs between the nodes: n0, n1, n3 ${a.slice(0, 12)}; n2 ${b.slice(0, 12)}`,
      );
      expect(await ours()).toEqual([]);
    } finally {
      rmrf(join(cl.dir, 'n2', 'bin', 'podman'));
      await podman(['rmi', tag]);
    }
  }, 120_000);

  it('pinned: every node runs the pin, never its copy of the tag; one node left on another build (it lacks the pinned image) is named by preflight --nodes as the pin and refused at serve', async () => {
    const id = async (i: string) => (await podman(['image', 'inspect', '--format', '{{.Id}}', i])).stdout.trim();
    const [a, b] = [await id(image), await id(other)];
    const tag = `localhost/sparkctl-mn-pin-${process.pid}:x`;
    await podman(['tag', image, tag]);
    const profileFile = join(profiles, 'mn-box.yaml');
    const profileBefore = readFileSync(profileFile, 'utf8');
    const pinFile = join(state, 'pins', 'mn-box.json');
    const n2 = join(cl.dir, 'n2', 'bin', 'podman');
    try {
      writeFileSync(profileFile, profileBefore.replace(/image: \S+,/, `image: ${tag},`));
      // the pin a healthy serve --nodes wrote for this tag (case 1 shows serve writing it): image a, by ID
      mkdirSync(join(state, 'pins'), { recursive: true });
      const pin = {
        at: '2026-12-01T00:00:00.000Z',
        vllmVersion: '0.17.0',
        image: tag,
        imagePinned: a,
        imageId: a,
        sets: [`container.image=${a}`],
      };
      writeFileSync(pinFile, JSON.stringify({ version: 1, profile: 'mn-box', current: pin, previous: [] }));
      // n2 was left behind: its copy of the tag is another build, and it does not hold the pinned image (the nodes
      // share one store here: n2's podman answers as such a node's would, for these two names only)
      writeFileSync(
        n2,
        `#!/bin/bash\nargs=(); for x in "$@"; do\n  [ "$x" = ${a} ] && { echo "Error: ${a}: image not known" >&2; exit 125; }\n  [ "$x" = ${tag} ] && x=${other}; args+=("$x"); done\nexec /usr/bin/podman "\${args[@]}"\n`,
        { mode: 0o755 },
      );
      const pf = await run([
        'preflight',
        '--nodes',
        cl.nodesFile,
        '--profile',
        'mn-box',
        '--profiles',
        profiles,
        '--json',
      ]);
      const same = JSON.parse(pf.stdout).cross.find((x: { id: string }) => x.id === 'nodes.same-image');
      // the pin's ID was asked on every node (not the tag, which n2 would have answered with b)
      expect(same).toMatchObject({
        status: 'fail',
        observed: expect.stringMatching(
          new RegExp(`^${a} is not on n2 \\(.*image not known.*\\) \\(the pin of ${tag}, 2026-12-01T00:00:00.000Z\\)$`),
        ),
      });
      expect(same.observed).not.toContain(b.slice(0, 12));
      expect(same.fix).toContain(`load the pinned image on those nodes (podman save ${a} | ssh NODE podman load)`);
      expect(pf.exitCode).toBe(1);
      const r = await run([
        'serve',
        'mn-box',
        '--profiles',
        profiles,
        '--engine',
        'sim',
        '--nodes',
        cl.nodesFile,
        '--no-prewarm',
        '--set',
        `server.port=${await freePort()}`,
      ]);
      expect(r.exitCode, r.stderr).toBe(4);
      expect(r.stderr).toContain(`image ${tag}: every node runs the pin ${a}`);
      expect(r.stderr).toMatch(new RegExp(`refused: ${a} is not on n2 \\(`));
      // already pinned: the fix is to load that image there, not to pin it by digest
      expect(r.stderr).toContain(
        `load that very image on those nodes (podman save ${a} | ssh NODE podman load, or sparkctl pull --nodes)`,
      );
      expect(await ours()).toEqual([]);
      // the pin is as it was: a refused serve pins nothing
      expect(JSON.parse(readFileSync(pinFile, 'utf8')).current).toEqual(pin);
    } finally {
      rmrf(n2);
      writeFileSync(profileFile, profileBefore);
      rmrf(pinFile);
      await podman(['rmi', tag]);
    }
  }, 120_000);
});
