// Containers on every node: what serve --nodes renders per node (both executors), read back by the
// real podman's own parser (podman create of the very line, on this machine), and the same-image
// rule on real image IDs (podman image inspect of two real images). The launch itself over the
// nodes is the native executor's (multinode suite); here: the lines and the refusal.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { cli, tempDir, rmrf, FIXTURES } from '../helpers.js';
import { PODMAN, podmanIn, podmanUnavailable, buildSimImage, derivedImage } from '../podman.js';
import { imageMismatch, imageIdLine, parseImageId } from '../../src/engine/cluster/containers.js';

const nodes4 = join(FIXTURES, 'nodes-4.yaml');
const plan = async (extra: string[]) => {
  const r = await cli([
    'serve',
    'qwen3-200b',
    '--nodes',
    nodes4,
    '--dry-run',
    '--json',
    '--set',
    'engine.runtime=container',
    '--set',
    'container.image=vllm/vllm-openai:v0.17.0',
    ...extra,
  ]);
  expect(r.exitCode, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
};
const flagValue = (a: string[], f: string) => a.flatMap((x, i) => (x === f ? [a[i + 1]!] : []));

describe('containers over nodes, rendered', () => {
  it("native: one container per node, host network, that node's GPUs, /dev/infiniband, memlock, --ipc=host, the same image, its rank", async () => {
    const j = await plan(['--set', 'parallel.executor=mp']);
    expect(j.executor).toBe('native');
    for (const [i, s] of j.steps.entries()) {
      const a: string[] = s.argv[0];
      expect(s.argv).toHaveLength(1);
      expect(a.slice(0, 3)).toEqual(['docker', 'run', '--detach']);
      expect(a).toEqual(
        expect.arrayContaining([
          '--network',
          'host',
          '--ipc=host',
          '--device',
          '/dev/infiniband',
          '--gpus',
          '"device=0,1,2,3,4,5,6,7"',
        ]),
      );
      expect(flagValue(a, '--ulimit')).toEqual(['memlock=-1', 'stack=67108864']);
      expect(flagValue(a, '--env')).toEqual([
        `VLLM_HOST_IP=10.0.0.1${i}`,
        'NCCL_SOCKET_IFNAME=ens1f0',
        'GLOO_SOCKET_IFNAME=ens1f0',
      ]);
      expect(a).toContain(`--volume`);
      expect(flagValue(a, '--volume')).toEqual([
        '/home/ubuntu/.cache/huggingface:/root/.cache/huggingface:ro',
        '/models/qwen3-200b:/models/qwen3-200b:ro',
      ]);
      // vLLM's image starts `vllm serve` itself: only the arguments follow it, this node's rank among them
      const img = a.indexOf('vllm/vllm-openai:v0.17.0');
      expect(a.slice(img + 1, img + 2)).toEqual(['/models/qwen3-200b']);
      expect(a.slice(a.indexOf('--nnodes'))).toEqual([
        '--nnodes',
        '4',
        '--node-rank',
        String(i),
        '--master-addr',
        '10.0.0.10',
        '--master-port',
        '29501',
        ...(i ? ['--headless'] : []),
      ]);
      expect(s.container).toMatchObject({
        cli: 'docker',
        image: 'vllm/vllm-openai:v0.17.0',
        name: `sparkctl-qwen3-200b-rank${i}`,
      });
    }
  });

  it("Ray, as vLLM's run_cluster.sh: every container runs ray start --block, vLLM is exec'd in the head's", async () => {
    const j = await plan([]);
    expect(j.executor).toBe('ray');
    const head: string[][] = j.steps[0].argv;
    expect(head).toHaveLength(2);
    expect(head[0]!.slice(-5)).toEqual([
      '--entrypoint',
      '/bin/bash',
      'vllm/vllm-openai:v0.17.0',
      '-c',
      'ray start --block --head --port 6379 --node-ip-address 10.0.0.10 --num-gpus 8',
    ]);
    // exec'd through the image's shell: vLLM's pid kept for the stop, its output into the container's own log
    expect(head[1]!.slice(0, 10)).toEqual([
      'docker',
      'exec',
      '--detach',
      'sparkctl-qwen3-200b-rank0',
      '/bin/sh',
      '-c',
      'echo $$ > /tmp/sparkctl-vllm.pid; exec "$@" > /proc/1/fd/1 2>&1',
      'sh',
      'vllm',
      'serve',
    ]);
    expect(head[1]).toEqual(expect.arrayContaining(['--distributed-executor-backend', 'ray']));
    expect(j.steps[3].argv).toHaveLength(1);
    expect(j.steps[3].argv[0].at(-1)).toBe(
      'ray start --block --address 10.0.0.10:6379 --node-ip-address 10.0.0.13 --num-gpus 8',
    );
    expect(j.steps[3].argv[0]).toEqual(
      expect.arrayContaining(['--network', 'host', '--device', '/dev/infiniband', '--ipc=host']),
    );
  });
});

const work = tempDir('sparkctl-cluster-containers-');
const { env, podman, prepare } = podmanIn(work);
const why = podmanUnavailable();
if (why) console.warn(`podman parts of the cluster-containers suite skipped: ${why}`);

describe.skipIf(!!why)('containers over nodes, against the real podman', () => {
  let sim = '';
  let other = '';
  const made: string[] = [];
  beforeAll(async () => {
    prepare();
    sim = await buildSimImage(podman, work);
    other = await derivedImage(
      podman,
      work,
      sim,
      ['LABEL io.sparkctl.test=other-build'],
      `localhost/sparkctl-cluster-other-${process.pid}:1`,
    );
  }, 180_000);
  afterAll(async () => {
    for (const n of made) await podman(['rm', '-f', n]);
    if (other) await podman(['rmi', other]);
    rmrf(work);
  });

  it.each(['mp', 'ray'])(
    "podman's own parser takes every node's line (executor %s): it stops only at this machine's missing /dev/infiniband; without the node's devices and folders the container is created as rendered",
    async (executor) => {
      const j = await plan([
        '--set',
        `parallel.executor=${executor}`,
        '--set',
        'container.cli=podman',
        '--set',
        `container.image=${sim}`,
        '--engine',
        'sim',
      ]);
      for (const s of j.steps) {
        // run -> create (nothing starts), this machine's podman settings before the subcommand
        const a: string[] = s.argv[0]
          .slice(1)
          .filter((x: string) => x !== '--detach')
          .map((x: string) => x.replace('<marker>', 'test'));
        a[0] = 'create';
        const r = await podman(a);
        expect(r.stderr).toContain('stat /dev/infiniband: no such file or directory');
        // the same line without what this machine lacks: the RDMA devices, the model and cache folders of a node
        const drop = new Set(a.flatMap((x, i) => (x === '--device' || x === '--volume' ? [i, i + 1] : [])));
        const ok = await podman(a.filter((_, i) => !drop.has(i)));
        expect(ok.exitCode, ok.stderr).toBe(0);
        made.push(s.container.name);
        const c = JSON.parse((await podman(['container', 'inspect', s.container.name])).stdout)[0];
        const hc = c.HostConfig;
        expect(hc.NetworkMode).toBe('host');
        // podman 4.3's inspect reports IpcMode "shareable" for a created container whatever was asked; its record of
        // the command holds it
        expect(c.Config.CreateCommand).toContain('--ipc=host');
        expect(hc.Ulimits.find((u: { Name: string }) => u.Name === 'RLIMIT_MEMLOCK')).toMatchObject({
          Soft: -1,
          Hard: -1,
        });
        // Ray: run_cluster.sh's shape, as podman read it: bash runs `ray start --block` (podman 4.3 reports the
        // entrypoint as one string)
        if (executor === 'ray')
          expect([c.Config.Entrypoint, c.Config.Cmd].flat().slice(0, 3)).toEqual(['/bin/bash', '-c', s.argv[0].at(-1)]);
        await podman(['rm', '-f', s.container.name]);
      }
    },
    120_000,
  );

  it('the same image everywhere, by ID read with the runtime: two real images differ, named by node with both IDs', async () => {
    const id = (image: string) => {
      try {
        return parseImageId(
          execFileSync('sh', ['-c', imageIdLine({ cli: 'podman', cliArgs: PODMAN, image })], {
            env: { ...process.env, ...env },
            encoding: 'utf8',
            stdio: ['ignore', 'pipe', 'ignore'],
          }),
        );
      } catch {
        return undefined;
      }
    };
    const [a, b] = [id(sim), id(other)];
    expect(a).toMatch(/^[a-f0-9]{64}$/);
    expect(b).toMatch(/^[a-f0-9]{64}$/);
    expect(a).not.toBe(b);
    expect(
      imageMismatch(sim, [
        { node: 'n0', id: a },
        { node: 'n1', id: a },
        { node: 'n2', id: a },
      ]),
    ).toBeUndefined();
    expect(
      imageMismatch(sim, [
        { node: 'n0', id: a },
        { node: 'n1', id: a },
        { node: 'n2', id: b },
      ]),
    ).toBe(`${sim} differs between the nodes: n0, n1 ${a!.slice(0, 12)}; n2 ${b!.slice(0, 12)}`);
    expect(id('localhost/sparkctl-no-such-image:x')).toBeUndefined();
    expect(
      imageMismatch(sim, [
        { node: 'n0', id: a },
        { node: 'n3', error: 'Error: localhost/x: image not known' },
      ]),
    ).toBe(`${sim} is not on n3 (Error: localhost/x: image not known)`);
  }, 60_000);
});
