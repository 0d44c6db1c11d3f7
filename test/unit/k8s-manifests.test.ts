// The pure pieces of sparkctl k8s that follow the container runtime: the pod's command for an
// image's entrypoint, /dev/shm's size, the version a cluster manifest is rendered for, what a pod
// cannot carry, and the volumes from the container settings.
import { describe, it, expect } from 'vitest';
import { clusterVersion, podCommand, shmQuantity, volumes } from '../../src/k8s/manifests.js';
import { podLimits } from '../../src/engine/runtime/container.js';
import { imageStart } from '../../src/engine/runtime/container.js';
import { loadProfile, loadPlatform } from '../../src/profiles/load.js';
import { FACT_VERSIONS } from '../../src/profiles/vllm-flags.js';
import { UsageError } from '../../src/errors.js';

const ARGV = ['vllm', 'serve', 'Qwen/Qwen3.5-9B', '--port', '8000'];
const NEWEST = FACT_VERSIONS[FACT_VERSIONS.length - 1]!;

describe('podCommand: command replaces the ENTRYPOINT, args the CMD', () => {
  it.each([
    // an image reference as k8s sees it (nothing read): the repository decides, as for a systemd unit
    ['vllm/vllm-openai:v0.25.0', { command: ['vllm', 'serve'], args: ['Qwen/Qwen3.5-9B', '--port', '8000'] }],
    [
      `docker.io/vllm/vllm-openai@sha256:${'a'.repeat(64)}`,
      { command: ['vllm', 'serve'], args: ['Qwen/Qwen3.5-9B', '--port', '8000'] },
    ],
    ['nvcr.io/nvidia/vllm:25.09-py3', { args: ARGV }],
    ['registry.local:5000/team/vllm:1', { args: ARGV }],
    // a name that only ends like vLLM's repository is not it
    ['example.com/myvllm/vllm-openai-fork:1', { args: ARGV }],
  ])('%s', (image, want) => {
    expect(podCommand(imageStart(image), ARGV)).toEqual(want);
  });

  it.each([
    [['vllm', 'serve'] as string[], 'args' as const, { command: ['vllm', 'serve'], args: ARGV.slice(2) }],
    [
      ['python3', '-m', 'vllm.entrypoints.openai.api_server'],
      'entrypoint-vllm' as const,
      { command: ['vllm', 'serve'], args: ARGV.slice(2) },
    ],
    [['/opt/nvidia/nvidia_entrypoint.sh'], 'command' as const, { args: ARGV }],
    [[] as string[], 'command' as const, { args: ARGV }],
  ])('a read entrypoint %j -> %s', (entrypoint, start, want) => {
    expect(imageStart('any/image:1', entrypoint)).toBe(start);
    expect(podCommand(start, ARGV)).toEqual(want);
  });
});

describe('shmQuantity: docker/podman sizes (binary units) as Kubernetes quantities', () => {
  it.each([
    ['16g', '16Gi'],
    ['16G', '16Gi'],
    ['512m', '512Mi'],
    ['64k', '64Ki'],
    ['1073741824', '1073741824'],
  ])('%s -> %s', (size, q) => expect(shmQuantity(size)).toBe(q));
  it('refuses what the schema would not pass', () => expect(() => shmQuantity('10.24g')).toThrow(/not a size/));
});

describe('clusterVersion', () => {
  it('a pin is rendered as is, nothing said', () => {
    expect(clusterVersion('p', '0.25.0', { ref: 'x/y:1', derived: false })).toEqual({ version: '0.25.0' });
  });
  it.each([
    // [image, read on this host, version, what the note says]
    [
      'vllm/vllm-openai:v0.11.0',
      undefined,
      '0.11.0',
      /rendered for vLLM 0\.11\.0, as the tag vllm\/vllm-openai:v0\.11\.0 states/,
    ],
    [`vllm/vllm-openai:v0.11.0@sha256:${'0'.repeat(64)}`, undefined, '0.11.0', /as the tag .* states/],
    ['nvcr.io/nvidia/vllm:26.03-py3', undefined, '0.17.1', /NVIDIA's release notes for the NGC release 26\.03/],
    ['nvcr.io/nvidia/vllm:25.10-py3', undefined, '0.10.2', /NGC release 25\.10/],
    // the reference says nothing, the same image here was read
    [
      'nvcr.io/nvidia/vllm:25.09-py3',
      { bin: 'podman', version: '0.10.1', source: 'label' as const },
      '0.10.1',
      /read from the image nvcr\.io\/nvidia\/vllm:25\.09-py3 on this host/,
    ],
  ])('auto, %s: the version it states or was read, never the newest table', (ref, read, version, note) => {
    const v = clusterVersion('qwen', 'auto', { ref, derived: false, read });
    expect(v.version).toBe(version);
    expect(v.note).toMatch(note);
  });
  it.each([['nvcr.io/nvidia/vllm:25.09-py3'], ['registry.example/team/vllm:prod'], ['vllm/vllm-openai:latest']])(
    'auto, %s, not read here: refused (exit 2) naming the fields and the fixes',
    (ref) => {
      let err: unknown;
      try {
        clusterVersion('qwen', 'auto', { ref, derived: false, read: { bin: 'podman', why: 'image not known' } });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(UsageError);
      const e = err as UsageError;
      expect(e.exitCode).toBe(2);
      expect(e.message).toContain(
        `engine.vllmVersion is auto, but the vLLM version of container.image ${ref} is not known`,
      );
      expect(e.message).toContain('image not known');
      expect(e.details.join('\n')).toMatch(/--set engine\.vllmVersion=X\.Y\.Z[\s\S]*a host that has the image/);
    },
  );
  it('auto with no image: the image is tagged with the version the flags follow', () => {
    const v = clusterVersion('qwen', 'auto', { derived: true });
    expect(v.version).toBe(NEWEST);
    expect(v.note).toContain(`rendered vllm/vllm-openai:v${NEWEST} and its flags`);
  });
});

describe('podLimits and volumes from the container settings', () => {
  const A100 = loadPlatform('dgx-a100-os6');
  const prof = (sets: string[]) => loadProfile('qwen3.5-9b', { sets }).profile;

  it.each([
    [[], []],
    [['engine.runtime=container'], ['ulimits memlock=-1 stack=67108864']],
    [['container.ulimits={}'], []],
    [['container.ulimits={"nofile":"65536:65536"}'], ['ulimits nofile=65536:65536']],
  ])('%j -> %j', (sets, starts) => {
    const got = podLimits(prof(sets));
    expect(got.map((l) => l.split(': a pod spec')[0])).toEqual(starts);
  });

  it.each([
    [[], '16Gi', { name: 'hf-cache', hostPath: { path: '/var/cache/huggingface', type: 'DirectoryOrCreate' } }],
    [
      ['container.shmSize="8g"', 'container.hfCache="/data/hf"'],
      '8Gi',
      { name: 'hf-cache', hostPath: { path: '/data/hf', type: 'DirectoryOrCreate' } },
    ],
    [['model.path="/models/q"'], '16Gi', { name: 'model', hostPath: { path: '/models/q', type: 'Directory' } }],
  ])('%j: /dev/shm %s, model volume', (sets, shm, model) => {
    const v = volumes(prof(sets), A100);
    expect(v.volumes[0]).toEqual({ name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: shm } });
    expect(v.volumes[1]).toEqual(model);
    // the model by path is read-only; the cache is written on a fresh node
    expect(v.mounts[1]).toEqual(
      model.name === 'model'
        ? { name: 'model', mountPath: '/models/q', readOnly: true }
        : { name: 'hf-cache', mountPath: '/root/.cache/huggingface' },
    );
  });
});
