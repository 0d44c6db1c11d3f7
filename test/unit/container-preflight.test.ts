// The container runtime's preflight, from canned CLI answers: each failure names its fix, each check
// that does not apply says why.
import { describe, it, expect } from 'vitest';
import { containerPreflight, type ContainerPreflightInput } from '../../src/engine/runtime/preflight.js';

type Answer = { code: number | null; stdout: string; stderr: string; error?: string };
const ok = (stdout = ''): Answer => ({ code: 0, stdout, stderr: '' });
const ID = 'a8d4bdad4836e9a6340063ffea1c94dfe2f5f946ef3e0d469fa6f24f4b879113';
const CDI_LIST =
  'INFO[0000] Found 3 CDI devices\nnvidia.com/gpu=0\nnvidia.com/gpu=1\nnvidia.com/gpu=GPU-6f2c\nnvidia.com/gpu=all\n';

/**
 * Answers by the word that names the call: version, info, inspect, nvidia-ctk --version, cdi list, sh (the spec files).
 */
const DEFAULTS: Record<string, Answer> = {
  version: ok('4.3.1'),
  info: ok('runc /usr/bin/runc'),
  inspect: ok(`${ID} {"com.nvidia.vllm.version":"0.10.2+9dd9ca32"} ["/opt/nvidia/nvidia_entrypoint.sh"]`),
  ctk: ok('NVIDIA Container Toolkit CLI version 1.17.8\ncommit: f202b80a9b9d0db00d9b1d73c0128c8962c55f4d'),
  list: ok(CDI_LIST),
  sh: ok('/etc/cdi/nvidia.yaml\n'),
};
const keyOf = (argv: string[]) =>
  argv[0] === 'nvidia-ctk'
    ? argv.includes('list')
      ? 'list'
      : 'ctk'
    : argv[0] === 'sh'
      ? 'sh'
      : (['version', 'info', 'inspect'].find((k) => argv.includes(k)) ?? '?');

async function check(over: Partial<ContainerPreflightInput>, answers: Record<string, Answer> = {}) {
  const seen: string[][] = [];
  const res = await containerPreflight({
    cli: 'podman',
    cliArgs: ['--runtime', 'runc'],
    image: 'nvcr.io/nvidia/vllm:25.09-py3',
    engine: 'vllm',
    pull: false,
    gpus: [0, 1],
    run: async (argv) => {
      seen.push(argv);
      return { ...DEFAULTS, ...answers }[keyOf(argv)] ?? { code: 1, stdout: '', stderr: 'unexpected' };
    },
    ...over,
  });
  return { res, seen, byId: Object.fromEntries(res.map((x) => [x.id, x])) };
}
const statuses = (res: Array<{ id: string; status: string }>) => Object.fromEntries(res.map((x) => [x.id, x.status]));

describe('container preflight', () => {
  it("all there (podman): CLI, image (with its label's vLLM), OCI runtime, toolkit and the replicas' CDI devices pass; the global options go with every CLI call", async () => {
    const { res, seen, byId } = await check({});
    expect(statuses(res)).toEqual({
      'container.cli': 'pass',
      'container.image': 'pass',
      'container.oci-runtime': 'pass',
      'container.toolkit': 'pass',
      'container.cdi': 'pass',
      'container.toolkit.docker': 'skip',
    });
    expect(byId['container.image']!.detail).toBe(
      'nvcr.io/nvidia/vllm:25.09-py3 is present (a8d4bdad4836, vLLM 0.10.2+9dd9ca32 by its label)',
    );
    expect(byId['container.oci-runtime']!.detail).toBe('runc (/usr/bin/runc)');
    expect(byId['container.toolkit']!.detail).toBe('NVIDIA Container Toolkit CLI version 1.17.8');
    expect(byId['container.cdi']).toMatchObject({
      detail: 'nvidia-ctk cdi list: 4 nvidia.com/gpu device(s) in /etc/cdi/nvidia.yaml',
      expected: 'CDI devices nvidia.com/gpu=0, nvidia.com/gpu=1',
    });
    for (const a of seen.filter((x) => x[0] === 'podman'))
      expect(a.slice(0, 3)).toEqual(['podman', '--runtime', 'runc']);
  });

  it('container.gpus none (a CPU build of vLLM): the toolkit and CDI checks skip with that reason and nvidia-ctk is never asked', async () => {
    const why = 'container.gpus is none: the container gets no GPU device';
    const { res, seen, byId } = await check(
      { noGpu: why },
      {
        ctk: { code: null, stdout: '', stderr: '', error: 'nvidia-ctk is not installed' },
        list: { code: 1, stdout: '', stderr: 'no' },
      },
    );
    expect(statuses(res)).toEqual({
      'container.cli': 'pass',
      'container.image': 'pass',
      'container.oci-runtime': 'pass',
      'container.toolkit': 'skip',
      'container.cdi': 'skip',
      'container.toolkit.docker': 'skip',
    });
    for (const id of ['container.toolkit', 'container.cdi', 'container.toolkit.docker'])
      expect(byId[id]!.detail).toBe(why);
    expect(seen.filter((a) => a[0] === 'nvidia-ctk' || a[0] === 'sh')).toEqual([]);
    // the same answers with GPUs wanted fail the toolkit: the skip comes from the setting, not from luck
    const gpu = await check(
      {},
      {
        ctk: { code: null, stdout: '', stderr: '', error: 'nvidia-ctk is not installed' },
        list: { code: 1, stdout: '', stderr: 'no' },
      },
    );
    expect(gpu.byId['container.toolkit']!.status).toBe('fail');
  });

  it('the CLI does not answer: that fails with the install fix, and the rest say why they were not asked', async () => {
    const { res, seen } = await check(
      {},
      { version: { code: null, stdout: '', stderr: '', error: 'podman is not installed (not on PATH)' } },
    );
    expect(res[0]).toEqual({
      id: 'container.cli',
      status: 'fail',
      detail: 'podman is not installed (not on PATH)',
      expected: 'podman answers',
      fix: expect.stringContaining('apt-get install podman'),
    });
    expect(
      res.slice(1).every((x) => x.status === 'skip' && x.detail === 'podman does not answer (container.cli)'),
    ).toBe(true);
    expect(seen).toHaveLength(1);
  });

  it('docker without its daemon: the daemon error is the detail', async () => {
    const { byId } = await check(
      { cli: 'docker', cliArgs: [] },
      {
        version: {
          code: 1,
          stdout: '',
          stderr: 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n',
        },
      },
    );
    expect(byId['container.cli']).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('Cannot connect to the Docker daemon'),
    });
  });

  it('the image is not here: fail with the pull fix; --pull turns it into a warning', async () => {
    const missing = {
      inspect: { code: 125, stdout: '', stderr: 'Error: nvcr.io/nvidia/vllm:25.09-py3: image not known' },
    };
    expect((await check({}, missing)).byId['container.image']).toMatchObject({
      status: 'fail',
      fix: expect.stringContaining('podman pull nvcr.io/nvidia/vllm:25.09-py3'),
    });
    expect((await check({ pull: true }, missing)).byId['container.image']).toMatchObject({ status: 'warn' });
    // an answer that is not an image id is not "present"
    expect((await check({}, { inspect: ok('<no value>') })).byId['container.image']).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('not an image id'),
    });
  });

  it('podman with no OCI runtime: fail with the runc fix', async () => {
    const { byId } = await check(
      {},
      { info: { code: 125, stdout: '', stderr: 'Error: default OCI runtime "crun" not found: invalid argument' } },
    );
    expect(byId['container.oci-runtime']).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('"crun" not found'),
      fix: expect.stringContaining('apt-get install runc'),
    });
  });

  it('no toolkit, no CDI spec (podman): both fail with nvidia-ctk fixes', async () => {
    const gone = { code: null, stdout: '', stderr: '', error: 'nvidia-ctk is not installed (not on PATH)' };
    const { byId } = await check({}, { ctk: gone, list: gone, sh: ok('') });
    expect(byId['container.toolkit']).toMatchObject({
      status: 'fail',
      fix: expect.stringContaining('nvidia-container-toolkit'),
    });
    expect(byId['container.cdi']).toMatchObject({
      status: 'fail',
      fix: 'nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml',
    });
  });

  it('a CDI spec without a GPU the replicas use (a GPU added since it was generated): fail naming it', async () => {
    const { byId } = await check(
      { gpus: [0, 1, 2, 3] },
      { list: ok('nvidia.com/gpu=0\nnvidia.com/gpu=1\nnvidia.com/gpu=all\n') },
    );
    expect(byId['container.cdi']).toMatchObject({
      status: 'fail',
      detail: 'the CDI spec has no nvidia.com/gpu=2, nvidia.com/gpu=3 (it has 0, 1, all)',
      fix: expect.stringContaining('nvidia-ctk cdi generate'),
    });
  });

  it('a spec file but nvidia-ctk cdi list fails: a warning, not a pass', async () => {
    const { byId } = await check({}, { list: { code: 1, stdout: '', stderr: 'permission denied' } });
    expect(byId['container.cdi']).toMatchObject({
      status: 'warn',
      detail: expect.stringContaining('/etc/cdi/nvidia.yaml'),
    });
  });

  it('docker: its default runtime, and the nvidia runtime in docker info', async () => {
    const yes = await check(
      { cli: 'docker', cliArgs: [] },
      { info: ok('runc {"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}') },
    );
    expect(statuses(yes.res)).toMatchObject({
      'container.oci-runtime': 'pass',
      'container.toolkit.docker': 'pass',
      'container.cdi': 'skip',
    });
    expect(yes.seen.some((a) => a.includes('list'))).toBe(false);
    const no = await check({ cli: 'docker', cliArgs: [] }, { info: ok('runc {"runc":{"path":"runc"}}') });
    expect(no.byId['container.toolkit.docker']).toMatchObject({
      status: 'fail',
      fix: expect.stringContaining('nvidia-ctk runtime configure --runtime=docker'),
    });
  });

  it('the simulator needs no GPU toolkit: those checks skip, nvidia-ctk is not asked', async () => {
    const { res, seen } = await check({ engine: 'sim' });
    expect(statuses(res)).toMatchObject({
      'container.cli': 'pass',
      'container.image': 'pass',
      'container.oci-runtime': 'pass',
      'container.toolkit': 'skip',
      'container.cdi': 'skip',
    });
    expect(seen.some((a) => a[0] === 'nvidia-ctk')).toBe(false);
  });
});
