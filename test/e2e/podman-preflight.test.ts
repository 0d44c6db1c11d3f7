// `sparkctl preflight` for a container profile, against the real podman (Debian's 4.3, as root,
// runc): the CLI, its OCI runtime and the image are asked for real; a missing image and a broken
// OCI runtime fail with their fixes; a host profile skips every container check.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, rmrf } from '../helpers.js';
import { PODMAN, podmanIn, podmanUnavailable, buildSimImage } from '../podman.js';

const work = tempDir('sparkctl-podman-preflight-');
const { env, podman, prepare } = podmanIn(work);
const why = podmanUnavailable();
if (why) console.warn(`podman preflight suite skipped: ${why}`);
let IMAGE = '';

function profileFile(container: Record<string, unknown>, runtime = 'container'): string {
  const dir = join(work, 'profiles');
  mkdirSync(dir, { recursive: true });
  const p = {
    name: 'pfc',
    model: {
      id: 'Qwen/Qwen3.5-9B',
      parameters: 9e9,
      layers: 32,
      kvHeads: 4,
      headDim: 256,
      attentionHeads: 16,
      hiddenSize: 4096,
      weightBytesPerParam: 2,
      maxContext: 32768,
    },
    engine: { vllmVersion: 'auto', runtime, maxModelLen: 4096 },
    container: { cli: 'podman', image: IMAGE, cliArgs: PODMAN, ulimits: {}, ...container },
  };
  const f = join(dir, `pfc-${Object.keys(container).join('-') || 'plain'}-${runtime}.yaml`);
  writeFileSync(f, JSON.stringify(p));
  return f;
}

async function preflight(file: string) {
  const r = await cli(['preflight', '--profile', file, '--only', 'container,vllm,torch', '--json'], {
    stateDir: join(work, 'state'),
    env,
    timeout: 120_000,
  });
  const rep = JSON.parse(r.stdout);
  const byId = Object.fromEntries(rep.checks.map((c: { id: string }) => [c.id, c])) as Record<
    string,
    { status: string; observed: string; expected: string; fix?: string }
  >;
  return { code: r.exitCode, byId };
}

describe.skipIf(Boolean(why))('preflight for a container profile, on the real podman', { timeout: 180_000 }, () => {
  beforeAll(async () => {
    prepare();
    IMAGE = await buildSimImage(podman, work);
  }, 150_000);
  afterAll(() => rmrf(work));

  it("the CLI, its OCI runtime and the image pass as podman reports them; the host's vLLM and PyTorch are not what runs", async () => {
    const { byId } = await preflight(profileFile({}));
    expect(byId['container.cli']).toMatchObject({
      status: 'pass',
      observed: expect.stringMatching(/^podman \d+\.\d+/),
    });
    expect(byId['container.oci-runtime']).toMatchObject({ status: 'pass', observed: 'runc (/usr/bin/runc)' });
    const id = (await podman(['image', 'inspect', '--format', '{{.Id}}', IMAGE])).stdout.trim();
    expect(byId['container.image']).toMatchObject({
      status: 'pass',
      observed: `${IMAGE} is present (${id.slice(0, 12)})`,
    });
    for (const c of ['vllm.installed', 'torch.build'])
      expect(byId[c], c).toMatchObject({
        status: 'skip',
        observed: expect.stringContaining('engine.runtime: container'),
      });
    // the toolkit is judged from what is installed here, with the fix where it is not
    const ctk = (process.env.PATH ?? '').split(':').some((d) => d && existsSync(join(d, 'nvidia-ctk')));
    expect(byId['container.toolkit']!.status).toBe(ctk ? 'pass' : 'fail');
    if (!ctk) expect(byId['container.toolkit']!.fix).toBe("install nvidia-container-toolkit (NVIDIA's apt repository)");
  });

  it('an image that is not here: fail with the pull fix, exit 1', async () => {
    const { code, byId } = await preflight(profileFile({ image: `localhost/sparkctl-absent-${process.pid}:none` }));
    expect(code).toBe(1);
    expect(byId['container.image']).toMatchObject({
      status: 'fail',
      observed: expect.stringContaining('is not present locally'),
      fix: `podman pull localhost/sparkctl-absent-${process.pid}:none (or serve --pull; offline: podman load -i FILE)`,
    });
  });

  it("an OCI runtime that is not there: podman's own error is what container.cli saw, with the fix", async () => {
    const { code, byId } = await preflight(
      profileFile({ cliArgs: ['--runtime', '/nonexistent/runc', '--cgroup-manager=cgroupfs'] }),
    );
    expect(code).toBe(1);
    expect(byId['container.cli']).toMatchObject({
      status: 'fail',
      observed: expect.stringContaining('no valid executable found for OCI runtime /nonexistent/runc'),
      fix: expect.stringContaining('apt-get install podman runc'),
    });
    expect(byId['container.image']!.status).toBe('skip');
  });

  it('a profile that runs vLLM on the host: every container check skips', async () => {
    const { byId } = await preflight(profileFile({}, 'host'));
    for (const id of [
      'container.cli',
      'container.oci-runtime',
      'container.image',
      'container.toolkit',
      'container.cdi',
      'container.toolkit.docker',
    ])
      expect(byId[id], id).toMatchObject({
        status: 'skip',
        observed: 'the profile runs vLLM on the host (engine.runtime: host)',
      });
    expect(byId['vllm.installed']!.status).not.toBe('skip');
  });
});
