// `sparkctl preflight` for a profile that runs vLLM in a container: the runtime's answers go through
// the Host (a replayed bundle without them skips them), judged with saw/expected/fix like every check. The
// host is the real 2 x H200 capture; only the container runtime's answers are canned here (the real
// podman answers in test/e2e/podman-preflight.test.ts).
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { ReplayHost } from '../../src/host/replay.js';
import { RecordingHost, type Host, type CmdResult } from '../../src/host/host.js';
import { runPreflight } from '../../src/preflight/run.js';
import { loadProfile } from '../../src/profiles/load.js';
import { FIXTURES } from '../helpers.js';

const H200 = join(FIXTURES, 'bundles', 'h200x2-driver580-cuda13');
const ID = 'a8d4bdad4836e9a6340063ffea1c94dfe2f5f946ef3e0d469fa6f24f4b879113';
type Canned = Partial<CmdResult> & { exitCode: number | null };
const ok = (stdout: string): Canned => ({ exitCode: 0, stdout });
const notFound: Canned = { exitCode: null, error: 'not-found' };

/** The H200 capture, with the container runtime's answers given by the first word that names the call. */
class ContainerHost implements Host {
  readonly kind = 'replay' as const;
  readonly name = 'h200-with-podman';
  private inner = new ReplayHost(H200);
  constructor(private answers: Record<string, Canned>) {}
  async run(argv: string[]): Promise<CmdResult> {
    const k =
      argv[0] === 'nvidia-ctk'
        ? argv.includes('list')
          ? 'cdi-list'
          : 'ctk'
        : argv[0] === 'sh' && argv[2]?.includes('/etc/cdi')
          ? 'cdi-files'
          : ['podman', 'docker'].includes(argv[0]!)
            ? `${argv[0]} ${['version', 'info', 'inspect'].find((w) => argv.includes(w))}`
            : undefined;
    if (!k) return this.inner.run(argv);
    const a =
      this.answers[k] ?? (k.startsWith('docker') ? notFound : { exitCode: 1, stderr: `no canned answer for ${k}` });
    return { argv, stdout: '', stderr: '', durationMs: 1, ...a };
  }
  hasFile(p: string) {
    return this.inner.hasFile(p);
  }
  readFile(p: string) {
    return this.inner.readFile(p);
  }
  env() {
    return this.inner.env();
  }
}

const GOOD: Record<string, Canned> = {
  'podman version': ok('4.9.3\n'),
  'podman info': ok('crun /usr/bin/crun\n'),
  'podman inspect': ok(`${ID} {"com.nvidia.vllm.version":"0.10.2+9dd9ca32"} ["/opt/nvidia/nvidia_entrypoint.sh"]\n`),
  ctk: ok('NVIDIA Container Toolkit CLI version 1.17.8\n'),
  'cdi-list': ok('nvidia.com/gpu=0\nnvidia.com/gpu=1\nnvidia.com/gpu=all\n'),
  'cdi-files': ok('/var/run/cdi/nvidia.yaml\n'),
};

async function preflight(answers: Record<string, Canned>, sets: string[] = C) {
  const rec = new RecordingHost(new ContainerHost(answers));
  const profile = loadProfile('qwen3.5-9b', { sets }).profile;
  const rep = await runPreflight(rec, { profile });
  const byId = Object.fromEntries(rep.checks.map((c) => [c.id, c]));
  return { rep, byId, argv: rec.commands.map((c) => c.argv) };
}
// the 2 x H200 capture is detected as a Hopper host, whose default image is vllm/vllm-openai:v<version>: pinned here
const C = ['engine.runtime=container', 'container.image=nvcr.io/nvidia/vllm:25.10-py3'];
const CONTAINER = [
  'container.cli',
  'container.oci-runtime',
  'container.image',
  'container.toolkit',
  'container.cdi',
  'container.toolkit.docker',
];

describe('preflight: the container runtime', () => {
  it("all there (podman): the profile's image is the one asked about; the host's vLLM/PyTorch/NCCL checks skip, saying why", async () => {
    const { byId, argv } = await preflight(GOOD);
    expect(CONTAINER.map((id) => [id, byId[id]!.status])).toEqual([
      ['container.cli', 'pass'],
      ['container.oci-runtime', 'pass'],
      ['container.image', 'pass'],
      ['container.toolkit', 'pass'],
      ['container.cdi', 'pass'],
      ['container.toolkit.docker', 'skip'],
    ]);
    expect(byId['container.image']!.observed).toBe(
      'nvcr.io/nvidia/vllm:25.10-py3 is present (a8d4bdad4836, vLLM 0.10.2+9dd9ca32 by its label)',
    );
    expect(argv.find((a) => a.includes('inspect'))!.at(-1)).toBe('nvcr.io/nvidia/vllm:25.10-py3');
    expect(byId['container.oci-runtime']!.observed).toBe('crun (/usr/bin/crun)');
    expect(byId['container.cdi']).toMatchObject({ expected: 'CDI devices nvidia.com/gpu=0, nvidia.com/gpu=1' });
    for (const id of ['vllm.installed', 'torch.build', 'nccl.version', 'cudnn.version'])
      expect(byId[id], id).toMatchObject({
        status: 'skip',
        observed: expect.stringContaining('engine.runtime: container'),
      });
    // the driver still matters: the container uses the host's
    expect(byId['driver.version']!.status).toBe('pass');
  });

  it('container.gpus none (a CPU build of vLLM): the host driver, CUDA and GPU checks skip saying why, the container toolkit and CDI too; the runtime and image are still checked', async () => {
    const { rep, byId, argv } = await preflight(GOOD, [...C, 'container.gpus=none']);
    const why = /^container\.gpus is none/;
    for (const id of [
      'driver.version',
      'driver.cuda-support',
      'cuda.toolkit',
      'gpu.count',
      'gpu.memory',
      'gpu.processes',
      'firmware.gpu',
    ])
      expect(byId[id], id).toMatchObject({ status: 'skip', observed: expect.stringMatching(why) });
    expect(byId['container.toolkit']).toMatchObject({ status: 'skip', observed: expect.stringMatching(why) });
    expect(byId['container.cdi']).toMatchObject({ status: 'skip', observed: expect.stringMatching(why) });
    expect(['container.cli', 'container.oci-runtime', 'container.image'].map((id) => byId[id]!.status)).toEqual([
      'pass',
      'pass',
      'pass',
    ]);
    expect(argv.some((a) => a[0] === 'nvidia-ctk')).toBe(false);
    // the host checks that still apply are still judged
    const host = rep.checks.filter((c) => c.area === 'host');
    expect(host.length).toBeGreaterThan(0);
    for (const c of host) expect(c.observed, c.id).not.toMatch(why);
    // and with GPUs (auto) the same host's driver is judged: the skip comes from the setting
    const auto = await preflight(GOOD);
    expect(auto.byId['driver.version']!.status).toBe('pass');
    expect(rep.checks.length).toBe(auto.rep.checks.length);
  });

  it('a CDI spec without a GPU the replicas use (TP 2 on GPUs 0,1; the spec has only 0): fail naming it, with the fix', async () => {
    const { byId } = await preflight({ ...GOOD, 'cdi-list': ok('nvidia.com/gpu=0\nnvidia.com/gpu=all\n') }, [
      ...C,
      'parallel.tensor=2',
    ]);
    expect(byId['container.cdi']).toMatchObject({
      status: 'fail',
      observed: 'the CDI spec has no nvidia.com/gpu=1 (it has 0, all)',
      expected: 'CDI devices nvidia.com/gpu=0, nvidia.com/gpu=1',
      fix: expect.stringContaining('nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml'),
    });
  });

  it('the image is not here, nvidia-ctk is not installed: each fails with its fix; the report fails', async () => {
    const { rep, byId } = await preflight({
      ...GOOD,
      'podman inspect': { exitCode: 125, stderr: 'Error: nvcr.io/nvidia/vllm:25.10-py3: image not known' },
      ctk: notFound,
      'cdi-list': notFound,
      'cdi-files': ok(''),
    });
    expect(byId['container.image']).toMatchObject({
      status: 'fail',
      fix: 'podman pull nvcr.io/nvidia/vllm:25.10-py3 (or serve --pull; offline: podman load -i FILE)',
    });
    expect(byId['container.toolkit']).toMatchObject({
      status: 'fail',
      fix: "install nvidia-container-toolkit (NVIDIA's apt repository)",
    });
    expect(byId['container.cdi']).toMatchObject({
      status: 'fail',
      observed: expect.stringContaining('no CDI spec under /etc/cdi or /var/run/cdi'),
    });
    expect(rep.summary.fail).toBeGreaterThanOrEqual(3);
  });

  it('no podman on this host and no container.cli: docker is asked (its daemon, its nvidia runtime)', async () => {
    const { byId, argv } = await preflight({
      ...GOOD,
      'podman version': notFound,
      'docker version': ok('28.1.1\n'),
      'docker info': ok('runc {"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}\n'),
      'docker inspect': ok(`sha256:${ID} {} null\n`),
    });
    expect(CONTAINER.map((id) => [id, byId[id]!.status])).toEqual([
      ['container.cli', 'pass'],
      ['container.oci-runtime', 'pass'],
      ['container.image', 'pass'],
      ['container.toolkit', 'pass'],
      ['container.cdi', 'skip'],
      ['container.toolkit.docker', 'pass'],
    ]);
    expect(argv.some((a) => a[0] === 'nvidia-ctk' && a.includes('list'))).toBe(false);
  });

  it('neither CLI installed: container.cli fails with the install fix, the rest say why they were not asked', async () => {
    const { byId } = await preflight({ ...GOOD, 'podman version': notFound });
    expect(byId['container.cli']).toMatchObject({
      status: 'fail',
      observed: 'podman is not installed (not on PATH)',
      fix: expect.stringContaining('apt-get install podman runc'),
    });
    for (const id of CONTAINER.slice(1))
      expect(byId[id], id).toMatchObject({ status: 'skip', observed: 'podman does not answer (container.cli)' });
  });

  it('no image for the profile (vLLM auto on a non-DGX host): container.image fails with the fix, the others say why', async () => {
    const { rep, byId } = await preflight(GOOD, ['engine.runtime=container']);
    expect(rep.platform).not.toMatch(/^dgx-/);
    expect(byId['container.image']).toMatchObject({
      status: 'fail',
      observed: expect.stringContaining('no image to run: no container image for vLLM "auto"'),
      fix: expect.stringContaining('--set container.image=REPO:TAG'),
    });
    expect(byId['container.cli']).toMatchObject({
      status: 'skip',
      observed: 'no image to check against (container.image)',
    });
  });

  it('a profile that runs vLLM on the host: every container check skips, and no container CLI is run', async () => {
    const { byId, argv } = await preflight(GOOD, []);
    for (const id of CONTAINER)
      expect(byId[id], id).toMatchObject({
        status: 'skip',
        observed: 'the profile runs vLLM on the host (engine.runtime: host)',
      });
    expect(argv.some((a) => ['podman', 'docker', 'nvidia-ctk'].includes(a[0]!))).toBe(false);
    expect(byId['vllm.installed']!.status).not.toBe('skip');
  });

  it('a replayed bundle that did not ask the runtime: the container checks skip as not collected, never a guess', async () => {
    const profile = loadProfile('qwen3.5-9b', { sets: C }).profile;
    const rep = await runPreflight(new ReplayHost(H200), { profile });
    for (const id of CONTAINER)
      expect(
        rep.checks.find((c) => c.id === id),
        id,
      ).toMatchObject({ status: 'skip', observed: expect.stringContaining('not in the bundle') });
  });
});
