// The serve plan: pure, from a resolved profile and validated flags. Table-tested.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { loadProfile, loadPlatform } from '../../src/profiles/load.js';
import { resolveLoaded, hostShapeFromGpus } from '../../src/profiles/resolve.js';
import { buildServePlan, readSecrets, type PlanInputs } from '../../src/engine/plan.js';
import type { GpuFact } from '../../src/host/gpu-facts.js';
import { UsageError } from '../../src/errors.js';
import { validateServeFlags } from '../../src/verbs/serve/options.js';
import { runPreflight } from '../../src/preflight/run.js';
import { ReplayHost } from '../../src/host/replay.js';
import { FIXTURES } from '../helpers.js';

const MIB = 1024 ** 2;
const GIB = 1024 ** 3;
const hopper = loadPlatform('hopper-cuda13');
const h200 = (index: number, totalMiB?: number, freeMiB?: number): GpuFact => ({
  index,
  name: 'NVIDIA H200',
  computeCapability: '9.0',
  memoryTotalMiB: totalMiB,
  memoryFreeMiB: freeMiB,
  processes: [],
});
const inputs = (over: Partial<PlanInputs> = {}): PlanInputs => ({
  engine: 'vllm',
  vllmBin: 'vllm',
  prewarm: true,
  stateDir: '/state',
  ...over,
});
const plan = (
  name: string,
  sets: string[],
  host?: Parameters<typeof resolveLoaded>[1],
  over: Partial<PlanInputs> = {},
) => buildServePlan(resolveLoaded(loadProfile(name, { sets }), host), inputs(over));

describe('hostShapeFromGpus: the host shape from typed GPU facts', () => {
  it.each<
    [string, GpuFact[], number | undefined, { gpus: number; source: string; memBytes: number; cc: string } | undefined]
  >([
    [
      '2 x H200 as nvidia-smi reports them',
      [h200(0, 143771, 143156), h200(1, 143771, 143156)],
      undefined,
      { gpus: 2, source: 'detected', memBytes: 143771 * MIB, cc: '9.0' },
    ],
    [
      'the smallest GPU bounds the plan',
      [h200(0, 143771), h200(1, 81559)],
      undefined,
      { gpus: 2, source: 'detected', memBytes: 81559 * MIB, cc: '9.0' },
    ],
    [
      '--gpus wins over the count read',
      [h200(0, 143771)],
      1,
      { gpus: 1, source: 'flag', memBytes: 143771 * MIB, cc: '9.0' },
    ],
    [
      'GB10: memory not reported -> the platform figure',
      [{ index: 0, name: 'NVIDIA GB10', processes: [] }],
      undefined,
      { gpus: 1, source: 'detected', memBytes: hopper.gpu.memoryGiB * GIB, cc: hopper.gpu.computeCapability },
    ],
    ['no GPU read -> no shape (the caller uses the platform)', [], undefined, undefined],
  ])('%s', (_, gpus, flag, want) => {
    const shape = hostShapeFromGpus(gpus, hopper, flag);
    if (!want) return expect(shape).toBeUndefined();
    expect(shape).toMatchObject({
      gpus: want.gpus,
      gpusSource: want.source,
      gpuMemoryBytes: want.memBytes,
      computeCapability: want.cc,
    });
  });
});

describe('buildServePlan', () => {
  it.each<
    [
      string,
      string,
      string[],
      Partial<PlanInputs>,
      { replicas: number; ports: number[]; gpus: number[][]; exe0: string },
    ]
  >([
    [
      '4 replicas of TP 2 on 8 GPUs',
      'qwen3.5-9b',
      ['server.port=9000', 'parallel.replicas=auto'],
      {},
      {
        replicas: 4,
        ports: [9000, 9001, 9002, 9003],
        gpus: [
          [0, 1],
          [2, 3],
          [4, 5],
          [6, 7],
        ],
        exe0: 'vllm',
      },
    ],
    [
      '--ready-timeout overrides the profile',
      'qwen3.5-9b',
      ['server.port=9000', 'parallel.replicas=1'],
      { readyTimeout: 1500 },
      { replicas: 1, ports: [9000], gpus: [[0, 1]], exe0: 'vllm' },
    ],
    [
      'firstGpu shifts the GPUs',
      'qwen3.5-9b',
      ['server.port=9000', 'parallel.replicas=1', 'parallel.firstGpu=4'],
      {},
      { replicas: 1, ports: [9000], gpus: [[4, 5]], exe0: 'vllm' },
    ],
    [
      'the simulator is node running sparkctl sim',
      'qwen3.5-9b',
      ['server.port=9000', 'parallel.replicas=1'],
      { engine: 'sim', simLoadSeconds: '0.5' },
      { replicas: 1, ports: [9000], gpus: [[0, 1]], exe0: process.execPath },
    ],
  ])('%s', (_, name, sets, over, want) => {
    const p = plan(name, sets, { gpus: 8 }, over);
    expect(p.replicas).toHaveLength(want.replicas);
    expect(p.replicas.map((r) => r.port)).toEqual(want.ports);
    expect(p.replicas.map((r) => r.gpus)).toEqual(want.gpus);
    expect(p.replicas[0]!.argv[0]).toBe(want.exe0);
    expect(p.replicas.map((r) => r.env.CUDA_VISIBLE_DEVICES)).toEqual(want.gpus.map((g) => g.join(',')));
    expect(p.replicas[0]!.logFile).toBe(join('/state', 'logs', `${p.profile.name}-0.log`));
    expect(p.readyTimeoutMs).toBe(over.readyTimeout ?? p.profile.server.readyTimeoutSeconds * 1000);
    expect(p.stallTimeoutMs).toBe(p.profile.server.stallTimeoutSeconds * 1000);
    if (over.engine === 'sim')
      expect(p.replicas[0]!.argv.slice(-8)).toEqual([
        '--sim-profile',
        p.file,
        '--sim-platform',
        p.platform.name,
        '--sim-vllm-version',
        p.profile.engine.vllmVersion,
        '--sim-load-seconds',
        '0.5',
      ]);
  });

  it('the real per-GPU memory reaches the plan (not the platform figure)', () => {
    const host = hostShapeFromGpus([h200(0, 143771), h200(1, 143771)], hopper)!;
    const p = plan('qwen3.5-9b', ['parallel.replicas=1'], { platform: 'hopper-cuda13', host });
    expect(p.host.gpuMemoryBytes).toBe(143771 * MIB);
    expect(p.host.gpuMemoryBytes).not.toBe(hopper.gpu.memoryGiB * GIB);
    expect(p.host.gpus).toBe(2);
  });

  it('a profile error is exit 2 before any plan exists', () => {
    expect(() => plan('qwen3.5-9b', ['parallel.tensor=3'], { gpus: 8 })).toThrow(UsageError);
  });

  // issue 41 item 3: the flags' spelling is the verb's (verbs/serve/options.ts); the engine takes settled inputs
  it.each<[string, { engine: 'vllm' | 'sim'; vllmBin: string; simLoadSeconds?: string }, RegExp | undefined]>([
    [
      'a bad --sim-load-seconds',
      { engine: 'sim', vllmBin: 'vllm', simLoadSeconds: 'soon' },
      /--sim-load-seconds: "soon" is not a number of seconds/,
    ],
    ['an empty --vllm-bin', { engine: 'vllm', vllmBin: '  ' }, /--vllm-bin: "" is not an executable/],
    ['an empty --vllm-bin with the simulator: not used, fine', { engine: 'sim', vllmBin: '' }, undefined],
    ['0.5 seconds', { engine: 'sim', vllmBin: 'vllm', simLoadSeconds: '0.5' }, undefined],
  ])("serve's flags, checked by the verb: %s", (_, flags, err) => {
    if (err) expect(() => validateServeFlags(flags)).toThrow(err);
    else expect(() => validateServeFlags(flags)).not.toThrow();
  });

  it('the API key comes from the variable the profile names, or the plan is refused', () => {
    const p = plan('qwen-prod', [], { gpus: 8 });
    expect(readSecrets(p.profile, { QWEN_PROD_API_KEY: 'k' })).toEqual({ VLLM_API_KEY: 'k' });
    expect(() => readSecrets(p.profile, {})).toThrow(/server\.apiKeyEnv names QWEN_PROD_API_KEY, which is not set/);
    expect(JSON.stringify(p)).not.toContain('"k"');
  });
});

describe("regression: the 2 x H200 host's real per-GPU memory reaches the plan (replayed bundle)", async () => {
  const bundle = join(FIXTURES, 'bundles', 'h200x2-device-collect');
  const profile = loadProfile('qwen3.5-9b', { sets: ['parallel.tensor=1', 'parallel.replicas=auto'] });
  const rep = await runPreflight(new ReplayHost(bundle), {
    profile: profile.profile,
    platform: 'auto',
    blocking: true,
  });
  const gpus = rep.gpus;
  it('GPU0 139.8 GiB free, GPU1 139.8 GiB free -> 2 GPUs of 143771 MiB in the plan', () => {
    expect(rep.checks.find((c) => c.id === 'gpu.memory')?.observed).toMatch(
      /GPU0 [\d.]+ GiB free, GPU1 [\d.]+ GiB free/,
    );
    const host = hostShapeFromGpus(gpus!, loadPlatform(rep.platform));
    const p = buildServePlan(resolveLoaded(profile, { platform: rep.platform, host }), inputs());
    expect(p.host.gpus).toBe(2);
    expect(p.host.gpusSource).toBe('detected');
    expect(p.host.gpuMemoryBytes).toBe(143771 * MIB);
    expect(p.replicas).toHaveLength(2);
  });
});
