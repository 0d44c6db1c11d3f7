// Ray in containers, launched for real over the four network-namespace nodes (real sshd, the real
// podman on each, host network = that node's namespace), as vLLM's run_cluster.sh does it: a container
// per node running `ray start --block` (the head's first, the workers once the head's Ray answers in
// its container), vLLM exec'd in the head's container. The image is the simulator's plus a stand-in
// for Ray (this machine's images have no Ray: test/podman.ts rayStandInImage; the real Ray over these
// nodes is test/real-ray's). What is real here: the runtime's run/exec/inspect/logs/stop/rm on every
// node over ssh, the containers' IDs, the order, the readiness and the stop.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, freePort, rmrf } from '../helpers.js';
import { netnsUnavailable, type Cluster } from '../cluster.js';
import { PODMAN, podmanIn, podmanUnavailable, buildSimImage, rayStandInImage } from '../podman.js';
import { podmanNodes, writeNodesProfile } from '../podman-nodes.js';

const why = netnsUnavailable() ?? podmanUnavailable();
if (why) console.warn(`Ray in containers over nodes skipped: ${why}`);

describe.skipIf(!!why)('Ray in podman containers on the netns nodes', () => {
  // the nodes mount their own /tmp: what they must see lives in /var/tmp
  // made in beforeAll: a skipped suite leaves no folder behind
  const work = join('/var/tmp', `sparkctl-ray-containers-${process.pid}-${randomUUID().slice(0, 8)}`);
  const { env, podman, prepare } = podmanIn(work);
  const marker = randomUUID();
  const rayDir = join(work, 'rayfake');
  let cl: Cluster;
  let state: string;
  let image = '';
  const profiles = join(work, 'profiles');
  const run = (args: string[]) =>
    cli(args, {
      env: {
        SPARKCTL_STATE_DIR: state,
        SPARKCTL_TEST_CASE: marker,
        SPARKCTL_RAY_JOIN_TIMEOUT_S: '30',
        ...env,
        ...cl.env,
      },
      timeout: 150_000,
    });
  const ours = async () =>
    (await podman(['ps', '-a', '--filter', 'label=io.sparkctl.profile=rc-box', '--format', '{{.Names}}'])).stdout
      .split('\n')
      .filter(Boolean);
  const calls = () =>
    existsSync(join(rayDir, 'calls.log')) ? readFileSync(join(rayDir, 'calls.log'), 'utf8').trim().split('\n') : [];
  const clearRay = () => {
    rmSync(rayDir, { recursive: true, force: true });
    mkdirSync(rayDir, { recursive: true });
  };
  let canRun: string | undefined;

  beforeAll(async () => {
    mkdirSync(work, { recursive: true });
    prepare();
    // what a killed or failed earlier run left (its containers keep the names this run needs)
    for (const n of await ours()) await podman(['rm', '-f', '-t', '0', n]);
    image = await rayStandInImage(podman, work, await buildSimImage(podman, work));
    state = join(work, 'state');
    clearRay();
    writeNodesProfile(work, 'rc-box', image, {
      parallel: 'executor: ray',
      server: 'shutdownTimeoutSeconds: 10',
      container: `mounts: [{ source: ${rayDir}, target: /rayfake, readOnly: false }]`,
    });
    cl = await podmanNodes(marker, env.CONTAINERS_CONF);
    // runc inside the test nodes may be refused here (rlimits): then the launch cases say so and skip
    const probe = cl.exec(
      0,
      `podman ${PODMAN.join(' ')} run --rm --network host ${image} /bin/sh -c 'exit 0' 2>&1`,
      60_000,
    );
    if (probe.status !== 0) canRun = probe.stdout.trim().split('\n').pop();
  }, 300_000);

  afterAll(async () => {
    // a container is removed inside the node that runs it (from outside, podman cannot end what lives in the node's
    // namespaces)
    if (cl)
      for (const i of [0, 1, 2, 3])
        cl.exec(i, `podman ${PODMAN.join(' ')} rm -f -t 0 sparkctl-rc-box-rank${i} >/dev/null 2>&1`, 60_000);
    for (const n of await ours()) await podman(['rm', '-f', '-t', '0', n]);
    if (image) await podman(['rmi', image]);
    cl?.teardown();
    rmrf(work);
  }, 60_000);

  it("serve: the head's Ray container first, then the workers', vLLM exec'd in the head's; ready; status; stop removes every container by its ID and leaves a look-alike", async (ctx) => {
    if (canRun) {
      console.warn(`podman cannot start a container inside the test nodes here, the launch case is skipped: ${canRun}`);
      ctx.skip();
    }
    const port = await freePort();
    const r = await run([
      'serve',
      'rc-box',
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
    expect(r.stderr).toContain('ray head started on n0');
    expect(r.stderr).toContain('ray workers joined: n1, n2, n3');
    expect(r.stderr).toContain('ray cluster: 4 nodes, 4 GPUs');
    expect(r.stderr).toMatch(/vLLM started on n0 \(pid 0, log podman logs [a-f0-9]{12}\)/);
    expect(r.stdout).toMatch(/probe: healthy/);
    // start order: the head's ray start before any worker's, each in its own container with --block
    const starts = calls().filter((l) => / ray start /.test(l));
    expect(starts).toHaveLength(4);
    expect(starts[0]).toMatch(
      new RegExp(`^${cl.addresses[0]!.replaceAll('.', '\\.')} ray start --block --head --port 6379`),
    );
    for (const l of starts.slice(1)) expect(l).toContain(`--block --address ${cl.addresses[0]}:6379`);
    expect((await ours()).sort()).toEqual([0, 1, 2, 3].map((i) => `sparkctl-rc-box-rank${i}`));
    // vLLM runs in the head's container (its output in the container's own log)
    const headLog = await podman(['logs', 'sparkctl-rc-box-rank0']);
    expect(headLog.stdout + headLog.stderr).toMatch(/Ray runtime started[\s\S]*Application startup complete/);
    const st = await run(['status']);
    for (const i of [0, 1, 2, 3])
      expect(st.stdout).toMatch(new RegExp(`n${i}\\s+${i ? 'worker' : 'head'}\\s+\\S+\\s+ray up\\s+1 GPUs`));
    // the record keeps what proves vLLM ours (status --json shows the record): its process on the head's host, found
    // through the container's pid namespace right after the exec, by its pid and start time there; that process is
    // vLLM, leading its group
    const sj = JSON.parse((await run(['status', '--json'])).stdout);
    const inHead = sj.clusters.find((x: { profile: string }) => x.profile === 'rc-box').inHead;
    expect(inHead).toEqual({ pid: expect.any(Number), startTime: expect.any(Number) });
    const seen = cl.exec(
      0,
      `tr '\\0' ' ' < /proc/${inHead.pid}/cmdline; echo; cut -d' ' -f5 /proc/${inHead.pid}/stat`,
      15_000,
    );
    expect(seen.stdout).toMatch(/vllm serve [\s\S]*\n(\d+)\s*$/);
    expect(Number(/(\d+)\s*$/.exec(seen.stdout)![1])).toBe(inHead.pid);

    // n3's container ends, and another container takes its name and labels: not the recorded ID, so never stopped
    const real3 = (await podman(['inspect', '--format', '{{.Id}}', 'sparkctl-rc-box-rank3'])).stdout.trim();
    const gone = cl.exec(3, `podman ${PODMAN.join(' ')} rm -f -t 0 ${real3} 2>&1`, 60_000);
    expect(gone.status, gone.stdout).toBe(0);
    const labels = JSON.parse(
      (await podman(['inspect', '--format', '{{json .Config.Labels}}', 'sparkctl-rc-box-rank0'])).stdout,
    );
    const look = await podman([
      'create',
      '--name',
      'sparkctl-rc-box-rank3',
      ...Object.entries(labels).flatMap(([k, v]) => ['--label', `${k}=${v}`]),
      image,
      '/bin/sh',
      '-c',
      'exit 0',
    ]);
    expect(look.exitCode, look.stderr).toBe(0);
    const stop = await run(['stop', 'rc-box', '--nodes', cl.nodesFile]);
    try {
      expect(stop.exitCode, stop.stdout + stop.stderr).toBe(0);
      expect(stop.stdout).toContain('vLLM on n0: stopped (SIGTERM)');
      for (const i of [0, 1, 2]) expect(stop.stdout).toContain(`ray on n${i}: stopped`);
      // each Ray node left as `ray start --block` does on the runtime's SIGTERM (n3's was killed outright above)
      expect(readdirNodes(rayDir)).toEqual([`node-${cl.addresses[3]}`]);
      expect(await ours()).toEqual(['sparkctl-rc-box-rank3']);
      expect((await podman(['inspect', '--format', '{{.Id}}', 'sparkctl-rc-box-rank3'])).stdout.trim()).not.toBe(real3);
      expect((await run(['status'])).stdout).not.toContain('rc-box');
    } finally {
      await podman(['rm', '-f', 'sparkctl-rc-box-rank3']);
    }
  }, 300_000);

  it('a worker whose Ray cannot join: exit 4 naming the node and what its container said; every container removed', async (ctx) => {
    if (canRun) ctx.skip();
    clearRay();
    writeFileSync(join(rayDir, `fail-${cl.addresses[2]}`), '');
    const r = await run([
      'serve',
      'rc-box',
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
    expect(r.stderr).toMatch(
      /launch failed: the Ray container on n2 \([\d.]+\) ended \(container [a-f0-9]{12}, exited, exit code 1\): ConnectionError: could not connect to the GCS/,
    );
    // the fix names the nodes file (not a node), and no worker is said to have joined a Ray it never reached
    expect(r.stderr).toContain(`sparkctl preflight --nodes ${cl.nodesFile}`);
    expect(r.stderr).not.toContain('ray workers joined');
    expect(r.stderr).toMatch(/cleanup: n0: container removed/);
    expect(await ours(), r.stderr).toEqual([]);
  }, 200_000);
});

const readdirNodes = (dir: string) => readdirSync(dir).filter((f) => f.startsWith('node-'));
