// A replica's container argv, for both CLIs, from the same plan the host runtime spawns.
import { describe, it, expect } from 'vitest';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadProfile, loadPlatform } from '../../src/profiles/load.js';
import { renderReplicas } from '../../src/profiles/render.js';
import { hostFromPlatform } from '../../src/profiles/validate.js';
import { Profile } from '../../src/profiles/schema.js';
import {
  renderContainerRun,
  imageFor,
  detectCli,
  containerVllmArgs,
  MARKER_LABEL,
  type ContainerCli,
} from '../../src/engine/runtime/container.js';
import { tempDir } from '../temp-dirs.js';

const hf = tempDir('ctr-hf-');
const env = { HF_HOME: hf, HOME: '/nonexistent' };
const A100 = loadPlatform('dgx-a100-os6');
const HOPPER = loadPlatform('hopper-cuda13');

function render(
  sets: string[],
  cli: ContainerCli,
  o: { engine?: 'vllm' | 'sim'; replica?: number; platform?: typeof A100; cwd?: string } = {},
) {
  const p = loadProfile('qwen3.5-9b', { sets: ['engine.vllmVersion="0.17.0"', ...sets] }).profile;
  const platform = o.platform ?? A100;
  const reps = renderReplicas(p, hostFromPlatform(platform, 8), {
    executable: ['/opt/vllm/bin/vllm'],
    stateDir: '/tmp/st',
  });
  const replica = reps[o.replica ?? 0]!;
  return {
    p,
    replica,
    c: renderContainerRun({
      profile: p,
      platform,
      replica,
      engine: o.engine ?? 'vllm',
      marker: 'm-1234567890',
      stateDir: '/tmp/st',
      cli,
      env,
      executableLen: 1,
      stopTimeoutS: 45,
      cwd: o.cwd,
    }),
  };
}

/** An error's message and details, as the user reads them. */
function textOf(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    return [(e as Error).message, ...((e as { details?: string[] }).details ?? [])].join('\n');
  }
  return '(no error)';
}

/** The values following each occurrence of flag. */
const valuesOf = (argv: string[], flag: string) => argv.flatMap((a, i) => (a === flag ? [argv[i + 1]!] : []));

describe('container argv', () => {
  it.each([
    ['docker', ['--gpus'], ['"device=0,1"']],
    ['podman', ['--device', '--device'], ['nvidia.com/gpu=0', 'nvidia.com/gpu=1']],
  ] as const)(
    '%s: the replica GPUs in the CLI form (docker --gpus with the quotes in one element; podman CDI per GPU)',
    (cli, flags, values) => {
      const { c } = render(['parallel.tensor=2'], cli);
      expect(c.argv[0]).toBe(cli);
      expect(c.argv.slice(1, 4)).toEqual(['run', '--detach', '--pull=never']);
      expect(valuesOf(c.argv, flags[0])).toEqual(values);
      expect(c.argv).not.toContain(cli === 'docker' ? '--device' : '--gpus');
    },
  );

  it.each([
    // container.gpus, engine, CLI: the GPU flags rendered (none for a CPU build of vLLM, none for the simulator)
    ['auto', 'vllm', 'docker', ['--gpus', '"device=0,1"']],
    ['auto', 'vllm', 'podman', ['--device', 'nvidia.com/gpu=0', '--device', 'nvidia.com/gpu=1']],
    ['none', 'vllm', 'docker', []],
    ['none', 'vllm', 'podman', []],
    ['auto', 'sim', 'docker', []],
    ['none', 'sim', 'podman', []],
  ] as const)('container.gpus %s, engine %s, %s: GPU flags %j', (gpus, engine, cli, flags) => {
    const { c } = render(['parallel.tensor=2', `container.gpus=${gpus}`], cli, { engine });
    const rendered = c.argv.flatMap((a, i) =>
      a === '--gpus' || (a === '--device' && c.argv[i + 1]?.startsWith('nvidia.com/')) ? [a, c.argv[i + 1]!] : [],
    );
    expect(rendered).toEqual(flags);
    expect(c.argv.some((a) => a === '--gpus' || a.includes('nvidia.com/gpu'))).toBe(flags.length > 0);
    // the rest of the run line is the same either way
    expect(c.argv.slice(1, 4)).toEqual(['run', '--detach', '--pull=never']);
  });

  it.each([
    // container.gpus, engine, CLI, profile env: the NVIDIA_VISIBLE_DEVICES the container is given
    // (an image with NVIDIA_VISIBLE_DEVICES=all under nvidia as the default runtime gets every GPU without a GPU flag)
    ['none', 'vllm', 'docker', [], ['void']],
    ['none', 'vllm', 'podman', [], ['void']],
    ['none', 'sim', 'docker', [], ['void']],
    ['none', 'vllm', 'docker', ['env.NVIDIA_VISIBLE_DEVICES=none'], ['none']],
    ['auto', 'vllm', 'docker', [], []],
    ['auto', 'vllm', 'podman', [], []],
  ] as const)('container.gpus %s, engine %s, %s, %j: NVIDIA_VISIBLE_DEVICES %j', (gpus, engine, cli, sets, want) => {
    const { c } = render(['parallel.tensor=2', `container.gpus=${gpus}`, ...sets], cli, { engine });
    const vis = valuesOf(c.argv, '--env').filter((e) => e.startsWith('NVIDIA_VISIBLE_DEVICES='));
    expect(vis.map((e) => e.slice('NVIDIA_VISIBLE_DEVICES='.length))).toEqual(want);
    expect(c.spec.env.NVIDIA_VISIBLE_DEVICES).toBe(want[0]);
  });

  it('container.gpus takes auto or none only: another value names the field, the value and the choices', () => {
    const t = textOf(() => loadProfile('qwen3.5-9b', { sets: ['container.gpus=all'] }));
    expect(t).toMatch(/container\.gpus/);
    expect(t).toMatch(/all/);
    expect(t).toMatch(/auto/);
    expect(t).toMatch(/none/);
  });

  it('replica 1 gets its own GPUs and port; the host indices are not passed as CUDA_VISIBLE_DEVICES (the container sees 0..n-1)', () => {
    const { c } = render(['parallel.tensor=2'], 'podman', { replica: 1 });
    expect(valuesOf(c.argv, '--device')).toEqual(['nvidia.com/gpu=2', 'nvidia.com/gpu=3']);
    expect(valuesOf(c.argv, '--publish')).toEqual(['127.0.0.1:8001:8001']);
    expect(c.argv.join(' ')).not.toContain('CUDA_VISIBLE_DEVICES');
    expect(c.name).toBe('sparkctl-qwen3.5-9b-1');
  });

  it('the API key is passed by name only: -e VLLM_API_KEY, the value never in argv', () => {
    const { c } = render(['server.apiKeyEnv=MY_KEY'], 'docker');
    expect(valuesOf(c.argv, '--env')).toContain('VLLM_API_KEY');
    expect(c.argv.some((a) => a.startsWith('VLLM_API_KEY='))).toBe(false);
    expect(c.argv.some((a) => a.includes('MY_KEY'))).toBe(false);
    expect(c.envByName).toEqual(['VLLM_API_KEY']);
  });

  it('no key configured: no -e VLLM_API_KEY at all', () => {
    const { c } = render([], 'podman');
    expect(valuesOf(c.argv, '--env')).not.toContain('VLLM_API_KEY');
  });

  it('labels carry the marker, profile, replica and state folder; the name derives from the instance', () => {
    for (const cli of ['docker', 'podman'] as const) {
      const { c } = render([], cli);
      expect(valuesOf(c.argv, '--label')).toEqual([
        `${MARKER_LABEL}=m-1234567890`,
        'io.sparkctl.name=sparkctl-qwen3.5-9b-0',
        'io.sparkctl.profile=qwen3.5-9b',
        'io.sparkctl.state=/tmp/st',
      ]);
      expect(valuesOf(c.argv, '--name')).toEqual(['sparkctl-qwen3.5-9b-0']);
    }
  });

  it('mounts: the HF cache and model.path read-only; extra mounts as asked', () => {
    const model = tempDir('ctr-model-');
    mkdirSync(join(model, 'x'));
    const { c } = render(
      [`model.path="${model}"`, `container.mounts=[{"source":"${model}/x","target":"/data","readOnly":false}]`],
      'podman',
    );
    expect(valuesOf(c.argv, '--volume')).toEqual([
      `${hf}:/root/.cache/huggingface:ro`,
      `${model}:${model}:ro`,
      `${model}/x:/data`,
    ]);
  });

  it('--ipc=host by default, --shm-size when set; the ulimits NVIDIA uses, overridable', () => {
    const a = render([], 'docker').c.argv;
    expect(a).toContain('--ipc=host');
    expect(valuesOf(a, '--ulimit')).toEqual(['memlock=-1', 'stack=67108864']);
    const b = render(['container.shmSize="16g"', 'container.ulimits={}'], 'docker').c.argv;
    expect(b).not.toContain('--ipc=host');
    expect(valuesOf(b, '--shm-size')).toEqual(['16g']);
    expect(b).not.toContain('--ulimit');
  });

  it('the port is published on the profile host; vLLM inside listens on every interface of its namespace', () => {
    const { c } = render(['server.host="127.0.0.1"', 'server.port=9100'], 'podman');
    expect(valuesOf(c.argv, '--publish')).toEqual(['127.0.0.1:9100:9100']);
    expect(valuesOf(c.argv, '--host')).toEqual(['0.0.0.0']);
    expect(c.argv).not.toContain('--network');
  });

  it('Ray (or network: host): --network host, no publish, the host address kept', () => {
    for (const sets of [['parallel.executor="ray"'], ['container.network="host"', 'server.host="127.0.0.1"']]) {
      const { c } = render(sets, 'docker');
      expect(valuesOf(c.argv, '--network')).toEqual(['host']);
      expect(c.argv).not.toContain('--publish');
    }
    expect(
      valuesOf(render(['container.network="host"', 'server.host="127.0.0.1"'], 'docker').c.argv, '--host'),
    ).toEqual(['127.0.0.1']);
  });

  it('the image comes just before the vllm command, which is the host argv with the image`s vllm in front', () => {
    const { c, replica } = render([], 'podman');
    const i = c.argv.indexOf(c.image);
    // inside the container vLLM listens on 0.0.0.0 of the container (published on server.host, 127.0.0.1 by default)
    const inContainer = replica.argv.map((a, k, all) => (all[k - 1] === '--host' ? '0.0.0.0' : a));
    expect(c.argv.slice(i + 1)).toEqual(['vllm', ...inContainer.slice(1)]);
    expect(valuesOf(c.argv, '--stop-timeout')).toEqual(['45']);
    expect(c.argv.slice(i + 1, i + 3)).toEqual(['vllm', 'serve']);
  });

  it.each([
    // model.path as given, servedName, cwd: the mount and the model argument in the container, the name clients use
    ['models/tiny', undefined, '/srv/work', '/srv/work/models/tiny', ['models/tiny']],
    ['./models/tiny', 'tiny', '/srv/work', '/srv/work/models/tiny', ['tiny']],
    // absolute: as it was (vLLM serves it under its path)
    ['/data/models/tiny', undefined, '/srv/work', '/data/models/tiny', []],
  ])(
    'model.path %s (servedName %s, run from %s): mounted read-only at %s and passed by that path; --served-model-name %j',
    (path, served, cwd, abs, names) => {
      const { c } = render([`model.path=${path}`, ...(served ? [`model.servedName=${served}`] : [])], 'podman', {
        cwd,
      });
      expect(valuesOf(c.argv, '--volume')).toContain(`${abs}:${abs}:ro`);
      const i = c.argv.indexOf('serve');
      expect(c.argv[i + 1]).toBe(abs);
      // the name clients send is unchanged: the relative path stays only as that name
      expect(valuesOf(c.argv, '--served-model-name')).toEqual(names);
      expect(c.argv.slice(i + 2).filter((a) => a === path)).toEqual(names.includes(path) ? [path] : []);
    },
  );

  it('global CLI options (cliArgs) go before run', () => {
    const { c } = render(['container.cliArgs=["--runtime","runc","--cgroup-manager=cgroupfs"]'], 'podman');
    expect(c.argv.slice(0, 5)).toEqual(['podman', '--runtime', 'runc', '--cgroup-manager=cgroupfs', 'run']);
    expect(c.cliArgs).toEqual(['--runtime', 'runc', '--cgroup-manager=cgroupfs']);
  });

  it('the simulator: no GPU devices, CUDA_VISIBLE_DEVICES kept (it pretends the GPUs)', () => {
    const { c } = render([], 'docker', { engine: 'sim' });
    expect(c.argv).not.toContain('--gpus');
    expect(valuesOf(c.argv, '--env')).toContain('CUDA_VISIBLE_DEVICES=0,1');
  });

  it('detached: false (systemd runs it in the foreground): --rm instead of -d', () => {
    const p = loadProfile('qwen3.5-9b', { sets: ['engine.vllmVersion="0.17.0"'] }).profile;
    const replica = renderReplicas(p, hostFromPlatform(A100, 8), { executable: ['vllm'], stateDir: '/tmp/st' })[0]!;
    const c = renderContainerRun({
      profile: p,
      platform: A100,
      replica,
      engine: 'vllm',
      marker: 'm-1234567890',
      stateDir: '/tmp/st',
      cli: 'podman',
      env,
      executableLen: 1,
      stopTimeoutS: 45,
      detached: false,
    });
    expect(c.argv.slice(1, 3)).toEqual(['run', '--rm']);
  });
});

describe('image, CLI and command', () => {
  it.each([
    [[], A100, 'nvcr.io/nvidia/vllm:26.03-py3'],
    [[], loadPlatform('dgx-spark-gb10'), 'nvcr.io/nvidia/vllm:26.03-py3'],
    [[], HOPPER, 'vllm/vllm-openai:v0.17.0'],
    [
      [`container.image="vllm/vllm-openai@sha256:${'a'.repeat(64)}"`],
      HOPPER,
      `vllm/vllm-openai@sha256:${'a'.repeat(64)}`,
    ],
  ] as const)('%j on %s -> %s', (sets, platform, image) => {
    const p = loadProfile('qwen3.5-9b', { sets: ['engine.vllmVersion="0.17.0"', ...sets] }).profile;
    expect(imageFor(p, platform)).toBe(image);
  });

  it('a bad digest pin is refused by the schema, naming the field', () => {
    expect(textOf(() => loadProfile('qwen3.5-9b', { sets: ['container.image="x@sha256:abc"'] }))).toMatch(
      /container\.image[\s\S]*sha256/,
    );
    expect(textOf(() => loadProfile('qwen3.5-9b', { sets: ['container.image="Bad Image"'] }))).toMatch(
      /container\.image/,
    );
  });

  it('vLLM version auto off a DGX: no image can be named, the fix says how', () => {
    const p = loadProfile('qwen3.5-9b', { sets: ['engine.vllmVersion="auto"'] }).profile;
    expect(textOf(() => imageFor(p, HOPPER))).toMatch(/no container image for vLLM "auto"[\s\S]*container\.image=/);
  });

  it('CLI: the profile`s, else podman, else docker, else a usage error', () => {
    const none = Profile.parse({ name: 'x', model: { id: 'a/b' } });
    expect(detectCli({ container: { ...none.container!, cli: 'docker' } as never }, () => true)).toBe('docker');
    expect(detectCli(none, () => true)).toBe('podman');
    expect(detectCli(none, (b) => b === 'docker')).toBe('docker');
    expect(() => detectCli(none, () => false)).toThrow(/neither podman nor docker/);
  });

  it('the vLLM arguments keep --host on the host network, and listen on all of the namespace otherwise', () => {
    const r = { argv: ['/x/vllm', 'serve', 'm', '--host', '10.0.0.1'] };
    expect(containerVllmArgs(r, 1, true)).toEqual(['m', '--host', '10.0.0.1']);
    expect(containerVllmArgs(r, 1, false)).toEqual(['m', '--host', '0.0.0.0']);
    const sim = { argv: ['/usr/bin/node', '/x/sparkctl.js', 'sim', 'serve', 'm', '--host', '127.0.0.1'] };
    expect(containerVllmArgs(sim, 3, false)).toEqual(['m', '--host', '0.0.0.0']);
  });
});
