// One container spec renders both CLIs; identity is proven by recorded id and marker label only.
import { describe, it, expect } from 'vitest';
import { classifyLog } from '../../src/engine/classify.js';
import {
  runArgv,
  inspectArgv,
  stopArgv,
  proveContainer,
  defaultImage,
  containerName,
  imageStart,
  MARKER_LABEL,
  type ContainerSpec,
} from '../../src/engine/runtime/container.js';
import { cliRun, cliRunAsync, failureLine } from '../../src/engine/runtime/ops.js';
import { ContainerBlock } from '../../src/profiles/schema.js';
import { endFollower } from '../../src/engine/runtime/launch-container.js';
import { processStartTime } from '../../src/util/pid.js';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

const spec = (over: Partial<ContainerSpec> = {}): ContainerSpec => ({
  cli: 'docker',
  image: 'nvcr.io/nvidia/vllm:26.01-py3',
  name: 'sparkctl-qwen3.5-9b-0',
  marker: 'm-1234abcd',
  gpus: [0, 1],
  network: { mode: 'publish', host: '127.0.0.1', port: 8000 },
  mounts: [
    { host: '/root/.cache/huggingface', container: '/root/.cache/huggingface', readOnly: true },
    { host: '/models/q', container: '/models/q', readOnly: true },
  ],
  ipc: 'host',
  env: { CUDA_DEVICE_ORDER: 'PCI_BUS_ID' },
  envByName: ['VLLM_API_KEY'],
  vllmArgs: [
    '/models/q',
    '--tensor-parallel-size',
    '2',
    '--port',
    '8000',
    '--host',
    '0.0.0.0',
    '--shutdown-timeout',
    '30',
  ],
  stopTimeoutS: 45,
  ...over,
});

const common = (cli: string, gpu: string[]) => [
  cli,
  'run',
  '--detach',
  '--pull=never',
  '--name',
  'sparkctl-qwen3.5-9b-0',
  '--label',
  `${MARKER_LABEL}=m-1234abcd`,
  '--label',
  'io.sparkctl.name=sparkctl-qwen3.5-9b-0',
  ...gpu,
  '--ipc=host',
  '--ulimit',
  'memlock=-1',
  '--ulimit',
  'stack=67108864',
  '--publish',
  '127.0.0.1:8000:8000',
  '--volume',
  '/root/.cache/huggingface:/root/.cache/huggingface:ro',
  '--volume',
  '/models/q:/models/q:ro',
  '--env',
  'VLLM_API_KEY',
  '--env',
  'CUDA_DEVICE_ORDER=PCI_BUS_ID',
  '--stop-timeout',
  '45',
  'nvcr.io/nvidia/vllm:26.01-py3',
  'vllm',
  'serve',
  '/models/q',
  '--tensor-parallel-size',
  '2',
  '--port',
  '8000',
  '--host',
  '0.0.0.0',
  '--shutdown-timeout',
  '30',
];

describe('runArgv: the same spec, both CLIs', () => {
  it.each([
    ['docker', ['--gpus', '"device=0,1"']],
    ['podman', ['--device', 'nvidia.com/gpu=0', '--device', 'nvidia.com/gpu=1']],
  ] as const)('%s', (cli, gpu) => {
    expect(runArgv(spec({ cli }))).toEqual(common(cli, gpu));
  });

  it('the API key goes by name only: no argument carries a value for it', () => {
    for (const cli of ['docker', 'podman'] as const) {
      const argv = runArgv(spec({ cli }));
      expect(argv.filter((a) => a.startsWith('VLLM_API_KEY'))).toEqual(['VLLM_API_KEY']);
    }
  });

  it.each([
    [{ network: { mode: 'host' } as const }, ['--network', 'host'], '--publish'],
    [{ network: { mode: 'publish', host: '0.0.0.0', port: 8001 } as const }, ['--publish', '8001:8001'], '--network'],
    [{ ipc: { shmSize: '10.24g' } }, ['--shm-size', '10.24g'], '--ipc=host'],
    [{ gpus: [] }, [], '--gpus'],
  ])('%o', (over, present, absent) => {
    const argv = runArgv(spec(over as Partial<ContainerSpec>));
    if (present.length) expect(argv.join(' ')).toContain(present.join(' '));
    expect(argv).not.toContain(absent);
  });
});

describe("the command after the image follows the image's entrypoint", () => {
  it.each([
    // vLLM's own images: ENTRYPOINT ["vllm", "serve"]; `vllm serve` again would be "unrecognized arguments: serve"
    ['vllm/vllm-openai:v0.11.0', ['vllm', 'serve'], 'args'],
    ['localhost/mine:1', ['/opt/venv/bin/vllm', 'serve'], 'args'],
    ['vllm/vllm-openai:v0.11.0', undefined, 'args'], // not read: known by its repository
    ['docker.io/vllm/vllm-openai@sha256:' + 'a'.repeat(64), undefined, 'args'],
    // NGC: a wrapper that sets up CUDA compatibility, then runs the command given
    ['nvcr.io/nvidia/vllm:25.10-py3', ['/opt/nvidia/nvidia_entrypoint.sh'], 'command'],
    ['nvcr.io/nvidia/vllm:25.10-py3', undefined, 'command'],
    ['localhost/sparkctl-sim:x', [], 'command'],
    ['localhost/mine:1', undefined, 'command'],
    // older images ran the api_server module: vllm is named as the entrypoint instead
    ['vllm/vllm-openai:v0.5.0', ['python3', '-m', 'vllm.entrypoints.openai.api_server'], 'entrypoint-vllm'],
    // a read entrypoint wins over the repository's name
    ['vllm/vllm-openai:custom', ['/bin/sh', '-c'], 'command'],
  ])('%s %j -> %s', (image, ep, want) => expect(imageStart(image, ep as string[] | undefined)).toBe(want));

  it('renders each: only the arguments, vllm as the entrypoint, or vllm serve as the command', () => {
    const tail = (s: Partial<ContainerSpec>) => runArgv(spec(s)).slice(runArgv(spec(s)).indexOf('--stop-timeout') + 2);
    expect(tail({ start: 'args' })).toEqual([
      'nvcr.io/nvidia/vllm:26.01-py3',
      '/models/q',
      '--tensor-parallel-size',
      '2',
      '--port',
      '8000',
      '--host',
      '0.0.0.0',
      '--shutdown-timeout',
      '30',
    ]);
    expect(tail({ start: 'command' }).slice(0, 4)).toEqual([
      'nvcr.io/nvidia/vllm:26.01-py3',
      'vllm',
      'serve',
      '/models/q',
    ]);
    expect(tail({}).slice(0, 3)).toEqual(['nvcr.io/nvidia/vllm:26.01-py3', 'vllm', 'serve']);
    const ep = runArgv(spec({ start: 'entrypoint-vllm' }));
    expect(ep.slice(ep.indexOf('--entrypoint'), ep.indexOf('--entrypoint') + 5)).toEqual([
      '--entrypoint',
      'vllm',
      'nvcr.io/nvidia/vllm:26.01-py3',
      'serve',
      '/models/q',
    ]);
  });
});

describe('images and names', () => {
  it.each([
    ['dgx-spark-gb10', '0.27.2', '26.01', 'nvcr.io/nvidia/vllm:26.01-py3'],
    ['dgx-a100-os6', '0.17.0', '25.09', 'nvcr.io/nvidia/vllm:25.09-py3'],
    ['dgx-a100-os6', '0.17.0', undefined, 'vllm/vllm-openai:v0.17.0'],
    ['hopper-cuda13', '0.27.2', '26.01', 'vllm/vllm-openai:v0.27.2'],
  ])('%s vLLM %s NGC %s -> %s', (platform, v, tag, image) => expect(defaultImage(platform, v, tag)).toBe(image));

  it.each([
    ['nvcr.io/nvidia/vllm:26.01-py3', true],
    ['vllm/vllm-openai:v0.27.2', true],
    [`vllm/vllm-openai@sha256:${'a'.repeat(64)}`, true],
    [`localhost:5000/sparkctl/sim:1@sha256:${'0'.repeat(64)}`, true],
    ['vllm/vllm-openai:v0.27.2; rm -rf /', false],
    ['Upper/case', false],
    [`x@sha256:${'a'.repeat(63)}`, false],
  ])('%s valid: %s (the profile schema: container.image)', (ref, ok) =>
    expect(ContainerBlock.safeParse({ image: ref }).success).toBe(ok),
  );

  it('names come from the instance', () => expect(containerName('qwen3.5-9b-0')).toBe('sparkctl-qwen3.5-9b-0'));
});

describe('proveContainer: by recorded id and marker label, never by name', () => {
  const id = 'c0ffee'.padEnd(64, '1');
  const rec = { containerId: id.slice(0, 12), marker: 'm-1234abcd' };
  it.each([
    ['ours, running', `${id} m-1234abcd true\n`, false, { state: 'alive', id }],
    ['ours, exited', `${id} m-1234abcd false`, false, { state: 'exited', id }],
    ['not there', '', true, { state: 'gone' }],
    [
      'same name, another container',
      `${'b'.repeat(64)} m-1234abcd true`,
      false,
      { state: 'unproven', code: 'id-differs' },
    ],
    ['no sparkctl label', `${id} <no value> true`, false, { state: 'unproven', code: 'no-label' }],
    ['another marker', `${id} m-other999 true`, false, { state: 'unproven', code: 'other-marker' }],
    ['hostile answer', 'Error: something\nwith lines', false, { state: 'unproven', code: 'unreadable' }],
  ])('%s', (_w, stdout, notFound, want) => expect(proveContainer(rec, { stdout, notFound })).toMatchObject(want));

  it('a record without an id or marker proves nothing', () => {
    expect(proveContainer({}, { stdout: `${id} m-1234abcd true`, notFound: false })).toMatchObject({
      state: 'unproven',
    });
    expect(proveContainer({ containerId: id }, { stdout: `${id} m-1234abcd true`, notFound: false })).toMatchObject({
      state: 'unproven',
      code: 'other-marker',
    });
  });

  it('inspect and stop argv', () => {
    expect(inspectArgv('podman', 'abc')).toEqual([
      'podman',
      'inspect',
      '--type',
      'container',
      '--format',
      `{{.Id}} {{index .Config.Labels "${MARKER_LABEL}"}} {{.State.Running}}`,
      'abc',
    ]);
    expect(stopArgv('docker', 'abc', 45)).toEqual(['docker', 'stop', '-t', '45', 'abc']);
    expect(stopArgv('podman', 'abc', 45)).toEqual(['podman', 'stop', '--time', '45', 'abc']);
  });
});

describe('container failures classified, each with its fix', () => {
  it.each([
    [
      'docker: Error response from daemon: No such image: nvcr.io/nvidia/vllm:26.01-py3.',
      'image-not-present',
      /docker pull nvcr\.io\/nvidia\/vllm:26\.01-py3 /,
    ],
    ['Error: localhost/sparkctl-sim:1: image not known', 'image-not-present', /pull localhost\/sparkctl-sim:1 /],
    [
      'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
      'container-no-gpu-driver',
      /nvidia-ctk runtime configure --runtime=docker/,
    ],
    [
      'Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=0',
      'cdi-device-not-found',
      /nvidia-ctk cdi generate/,
    ],
    [
      'docker: Error response from daemon: Conflict. The container name "/sparkctl-tiny-0" is already in use by container "8f1c". You have to remove (or rename) that container to be able to reuse that name.',
      'container-name-in-use',
      /docker ps -a --filter name=sparkctl-tiny-0/,
    ],
    [
      'Error: creating container storage: the container name "sparkctl-tiny-0" is already in use by 8f1c. You have to remove that container to be able to reuse that name: that name is already in use',
      'container-name-in-use',
      /sparkctl-tiny-0/,
    ],
    [
      'docker: Error response from daemon: driver failed programming external connectivity on endpoint x: Bind for 127.0.0.1:8000 failed: port is already allocated.',
      'port-in-use',
      /server\.port/,
    ],
    // docker.io 20.10 when a host process (not a container) holds the published port
    [
      'docker: Error response from daemon: driver failed programming external connectivity on endpoint sparkctl-x-0 (4821): Error starting userland proxy: listen tcp4 127.0.0.1:12393: bind: address already in use',
      'port-in-use',
      /server\.port/,
    ],
  ])('%s', (line, id, fix) => {
    const d = classifyLog(`starting\n${line}\n`);
    expect(d?.id).toBe(id);
    expect(d?.fix).toMatch(fix);
  });
});

describe('the container: defaults the runtime uses without the schema', () => {
  it('are what the schema fills in for an empty block', async () => {
    const { ContainerBlock } = await import('../../src/profiles/schema.js');
    const { CONTAINER_DEFAULTS } = await import('../../src/engine/runtime/container.js');
    expect(CONTAINER_DEFAULTS).toEqual(ContainerBlock.parse({}));
  });
});

describe('a container CLI that cannot be run, or does not answer: the same words from the blocking and the async runner', () => {
  it.each([
    ['cliRun', cliRun],
    ['cliRunAsync', cliRunAsync],
  ] as const)('%s', async (_n, run) => {
    expect((await run(['/nonexistent/podman', 'ps'])).error).toBe('/nonexistent/podman is not installed (not on PATH)');
    const slow = await run(['sleep', '5'], { timeoutMs: 1000 });
    expect(slow.error).toBe('sleep 5 did not answer within 1 s');
    // podman run, sent SIGTERM at the deadline, exits with a code of its own (126): still the deadline, not that exit
    // (a process of its own that exits 126 on SIGTERM: a shell's background sleep would outlive the test)
    const trap = 'process.on("SIGTERM", () => process.exit(126)); setTimeout(() => {}, 5000)';
    const trapped = await run([process.execPath, '-e', trap], { timeoutMs: 1000 });
    expect(trapped.error).toBe(`${process.execPath} -e ${trap} did not answer within 1 s`);
    expect((await run(['true'])).error).toBeUndefined();
    // past the 4 MiB read: said as that (it was said as a deadline missed), never read as an answer
    const big = await run(['head', '-c', String(5 * 1024 * 1024), '/dev/zero'], { timeoutMs: 20_000 });
    expect(big.error).toBe(`head -c ${5 * 1024 * 1024} wrote more than 4 MiB: cut off, not read`);
  });
});

describe("a failed CLI's reason: its error line, not the usage hint docker prints after it", () => {
  it.each([
    [
      "docker: Error response from daemon: No such image: x:1.\nSee 'docker run --help'.\n",
      'docker: Error response from daemon: No such image: x:1.',
    ],
    [
      "docker: Error response from daemon: Bind for 127.0.0.1:1 failed: port is already allocated.\n\nRun 'docker run --help' for more information\n",
      'docker: Error response from daemon: Bind for 127.0.0.1:1 failed: port is already allocated.',
    ],
    ['Error: x: image not known\n', 'Error: x: image not known'],
    ["Run 'docker run --help' for more information\n", undefined],
    ['', undefined],
  ])('%j', (stderr, line) => {
    expect(failureLine(stderr)).toBe(line);
  });
});

// podman's `logs -f` can miss its container's end under load and follow it forever (seen: a CI run
// left `podman ... logs -f ID` running after the suite). The stop ends a follower that outlives its
// container, proven by what sparkctl recorded at its launch (pid, start time) and its argv. A real
// process stands in for podman's follower: node with the follower's last arguments.
describe('endFollower: a log follower that outlived its container is ended, proven first', () => {
  const ID = 'a'.repeat(64);
  const follower = (id = ID) => {
    const c = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)', 'logs', '-f', id], {
      detached: true,
      stdio: 'ignore',
    });
    const start = processStartTime(c.pid!)!;
    return {
      c,
      rec: {
        cli: 'podman' as const,
        cliArgs: [],
        name: 'n',
        image: 'i',
        id: ID,
        follower: { pid: c.pid!, startTime: start },
      },
    };
  };
  const alive = (pid: number) =>
    processStartTime(pid) !== undefined && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');

  it('one still running after the moment it is given is ended', async () => {
    const { c, rec } = follower();
    const t0 = performance.now();
    expect(await endFollower(rec, 200)).toBe(true);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(150);
    await new Promise((r) => setTimeout(r, 50));
    expect(alive(c.pid!)).toBe(false);
  });

  it('a pid whose start time is not the recorded one (reused), or that follows another container, is not ours: left running', async () => {
    const a = follower();
    const b = follower('b'.repeat(64));
    try {
      await endFollower({ ...a.rec, follower: { pid: a.c.pid!, startTime: a.rec.follower.startTime + 1 } }, 50);
      await endFollower(b.rec, 50);
      expect(alive(a.c.pid!)).toBe(true);
      expect(alive(b.c.pid!)).toBe(true);
    } finally {
      a.c.kill('SIGKILL');
      b.c.kill('SIGKILL');
    }
  });

  it('no follower recorded (an older record): only the moment, nothing signalled', async () => {
    expect(await endFollower({ cli: 'docker', cliArgs: [], name: 'n', image: 'i' }, 10)).toBe(true);
  });
});
