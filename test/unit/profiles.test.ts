import { describe, it, expect } from 'vitest';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  loadProfile,
  parseProfile,
  applySet,
  listProfiles,
  listPlatforms,
  readPlatformFiles,
  platformDir,
} from '../../src/profiles/load.js';
import { SHIPPED_PLATFORMS } from '../../src/profiles/shipped-platforms.js';
import { tempDir, rmrf } from '../helpers.js';
import { validateProfile, hostFromPlatform, resolveReplicas, type HostShape } from '../../src/profiles/validate.js';
import { renderReplicas, engineArgs, parallelArgs, modelArgs, servedName } from '../../src/profiles/render.js';
import { planMemory, GIB } from '../../src/profiles/planner.js';
import { loadPlatform } from '../../src/profiles/load.js';
import { UsageError } from '../../src/errors.js';

const a100 = hostFromPlatform(loadPlatform('dgx-a100-os6'));
const h200x2: HostShape = {
  gpus: 2,
  gpusSource: 'detected',
  gpuMemoryBytes: 143771 * 1024 ** 2,
  computeCapability: '9.0',
  gpuName: 'NVIDIA H200',
};
const load = (name: string, sets: string[] = []) => loadProfile(name, { sets }).profile;
const errors = (name: string, sets: string[], host: HostShape = a100) =>
  validateProfile(load(name, sets), host).filter((p) => p.severity === 'error');
const warnings = (name: string, sets: string[], host: HostShape = a100) =>
  validateProfile(load(name, sets), host).filter((p) => p.severity === 'warning');

describe('shipped profiles and baselines', () => {
  it('all parse, and every shipped profile names a shipped platform', () => {
    const platforms = listPlatforms().map((p) => p.name);
    expect(platforms).toEqual(expect.arrayContaining(['dgx-a100-os6', 'dgx-spark-gb10', 'hopper-cuda13']));
    const names = listProfiles().map((p) => p.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'qwen3.5-9b',
        'qwen3.5-9b-fp8',
        'qwen3-200b',
        'qwen-prod',
        'qwen-dev',
        'qwen3.5-9b-spark',
      ]),
    );
    for (const n of names) expect(platforms).toContain(load(n).platform);
  });

  it('the precompiled baselines are the YAML sources parsed and validated (regenerate: node scripts/gen-platforms.mjs)', () => {
    expect(listPlatforms()).toBe(SHIPPED_PLATFORMS);
    expect(JSON.parse(JSON.stringify(SHIPPED_PLATFORMS))).toStrictEqual(readPlatformFiles());
    // ... and the comparison sees an edit of a source: a changed minimum is a difference
    const dir = tempDir('platforms-');
    try {
      cpSync(platformDir(), dir, { recursive: true });
      const f = join(dir, 'hopper-cuda13.yaml');
      writeFileSync(f, readFileSync(f, 'utf8').replace('min: 580.65.06', 'min: 580.65.07'));
      expect(JSON.parse(JSON.stringify(SHIPPED_PLATFORMS))).not.toStrictEqual(readPlatformFiles(dir));
    } finally {
      rmrf(dir);
    }
  });

  it('the documents baseline keeps the documents numbers', () => {
    const p = loadPlatform('dgx-a100-os6');
    expect(p.driver).toEqual({ exact: '535.129.03' });
    expect(p.cuda).toEqual({ oneOf: ['12.1', '12.3'] });
    expect(p.torch).toEqual({ exact: '2.1.2+cu121' });
    expect(p.gpu.minPowerLimitW).toBe(300);
    expect(loadPlatform('dgx-spark-gb10').arch).toBe('aarch64');
  });

  it.each(['qwen3.5-9b', 'qwen3.5-9b-fp8', 'qwen-prod', 'qwen-dev', 'qwen3.5-9b-spark'])(
    '%s is valid on its own platform',
    (name) => {
      const p = load(name);
      expect(
        validateProfile(p, hostFromPlatform(loadPlatform(p.platform!))).filter((x) => x.severity === 'error'),
      ).toEqual([]);
    },
  );
});

describe('rendering', () => {
  it('qwen3.5-9b renders the first document command, four replicas on an 8-GPU DGX', () => {
    const p = load('qwen3.5-9b');
    const reps = renderReplicas(p, a100, { executable: ['vllm'], stateDir: '/s' });
    expect(reps).toHaveLength(4);
    expect(reps[0]!.argv).toEqual([
      'vllm',
      'serve',
      'Qwen/Qwen3.5-9B',
      '--tensor-parallel-size',
      '2',
      '--pipeline-parallel-size',
      '1',
      '--dtype',
      'bfloat16',
      '--max-model-len',
      '16384',
      '--enforce-eager',
      '--gpu-memory-utilization',
      '0.92',
      '--port',
      '8000',
      '--host',
      '127.0.0.1', // the write-up says 0.0.0.0; sparkctl's default is loopback (issue 42 item 14)
    ]);
    expect(reps.map((r) => r.port)).toEqual([8000, 8001, 8002, 8003]);
    expect(reps.map((r) => r.env.CUDA_VISIBLE_DEVICES)).toEqual(['0,1', '2,3', '4,5', '6,7']);
    expect(reps[3]!.logFile).toBe('/s/logs/qwen3.5-9b-3.log');
  });

  it('qwen3.5-9b on a 2-GPU host gives one replica', () => {
    expect(resolveReplicas(load('qwen3.5-9b'), h200x2)).toBe(1);
  });

  it('fp8 profile adds the two FP8 flags', () => {
    const args = engineArgs(load('qwen3.5-9b-fp8'));
    expect(args).toEqual(expect.arrayContaining(['--kv-cache-dtype', 'fp8', '--quantization', 'fp8']));
  });

  it('qwen-prod and qwen-dev: served names, ports, disjoint GPUs, key by reference', () => {
    const prod = renderReplicas(load('qwen-prod'), a100, { executable: ['vllm'], stateDir: '/s' })[0]!;
    const dev = renderReplicas(load('qwen-dev'), a100, { executable: ['vllm'], stateDir: '/s' })[0]!;
    expect(prod.argv).toEqual(
      expect.arrayContaining(['--served-model-name', 'qwen-prod', '--tensor-parallel-size', '4', '--port', '8001']),
    );
    expect(dev.argv).toEqual(
      expect.arrayContaining(['--served-model-name', 'qwen-dev', '--tensor-parallel-size', '2', '--port', '8002']),
    );
    expect(prod.gpus).toEqual([0, 1, 2, 3]);
    expect(dev.gpus).toEqual([4, 5]);
    expect(prod.envFrom).toEqual({ VLLM_API_KEY: 'QWEN_PROD_API_KEY' });
    expect(prod.argv.join(' ')).not.toMatch(/api-key/);
  });

  it.each([
    // [vllmVersion, logRequests, expected flag present, flag absent]
    // vLLM's source: requests logged unless --disable-log-requests before 0.10.1; off by default
    // and --enable-log-requests from 0.10.1 (--disable-log-requests deprecated until 0.16)
    ['0.10.0', false, '--disable-log-requests', '--enable-log-requests'],
    ['0.10.0', true, null, '--enable-log-requests'],
    ['0.10.1', true, '--enable-log-requests', '--disable-log-requests'],
    ['0.11.0', true, '--enable-log-requests', '--disable-log-requests'],
    ['0.11.0', false, null, '--disable-log-requests'],
    ['0.12.0', false, null, '--disable-log-requests'],
    ['0.17.0', true, '--enable-log-requests', '--disable-log-requests'],
    ['0.4.2', true, null, '--disable-log-requests'],
  ] as const)('vLLM %s with logRequests=%s', (v, log, present, absent) => {
    const args = engineArgs(load('qwen3.5-9b', [`engine.vllmVersion="${v}"`, `engine.logRequests=${log}`]));
    if (present) expect(args).toContain(present);
    expect(args).not.toContain(absent);
  });

  it.each([
    ['0.17.0', false, ['--no-enable-prefix-caching']],
    ['0.17.0', true, ['--enable-prefix-caching']],
    // --no-enable-prefix-caching exists from 0.7 (0.9 in the tables): a false is said, not dropped
    ['0.9.0', false, ['--no-enable-prefix-caching']],
    ['0.7.0', false, ['--no-enable-prefix-caching']],
    ['0.6.0', false, []],
  ] as const)('prefix caching on vLLM %s = %s', (v, on, want) => {
    const args = engineArgs(load('qwen3.5-9b', [`engine.vllmVersion="${v}"`, `engine.enablePrefixCaching=${on}`]));
    expect(args.filter((a) => a.includes('prefix-caching'))).toEqual(want);
  });

  it('reasoning parser needs --enable-reasoning before vLLM 0.9 (deprecated in 0.9, gone in 0.10)', () => {
    expect(engineArgs(load('qwen3.5-9b-spark', ['engine.vllmVersion="0.9.0"']))).not.toContain('--enable-reasoning');
    expect(engineArgs(load('qwen3.5-9b-spark'))).toEqual(
      expect.arrayContaining([
        '--reasoning-parser',
        'qwen3',
        '--enable-auto-tool-choice',
        '--tool-call-parser',
        'qwen3_coder',
      ]),
    );
    expect(engineArgs(load('qwen3.5-9b-spark', ['engine.vllmVersion="0.8.0"']))).toContain('--enable-reasoning');
  });

  it('ray executor for the 200B profile', () => {
    const p = load('qwen3-200b');
    expect(parallelArgs(p)).toEqual([
      '--tensor-parallel-size',
      '8',
      '--pipeline-parallel-size',
      '4',
      '--distributed-executor-backend',
      'ray',
    ]);
    expect(modelArgs(p)).toEqual(['--served-model-name', 'qwen3-200b']);
    expect(servedName(p)).toBe('qwen3-200b');
  });
});

describe('validation: every problem at once, each naming field, value and fix', () => {
  it('TP that does not divide the heads', () => {
    const e = errors('qwen3.5-9b', ['parallel.tensor=3']);
    expect(e[0]).toMatchObject({ path: 'parallel.tensor', message: '3 does not divide 16 attention heads' });
    expect(e[0]!.fix).toContain('1, 2, 4, 8, 16');
  });

  it('TP above the KV heads warns about replication', () => {
    const w = warnings('qwen3.5-9b', ['parallel.tensor=8', 'parallel.replicas=1']);
    expect(w.find((x) => x.path === 'parallel.tensor')?.message).toMatch(/above the 4 KV heads.*replicates/);
  });

  it.each([
    [['parallel.pipeline=40', 'parallel.replicas=1'], 'parallel.pipeline'],
    [['engine.maxModelLen=300000'], 'engine.maxModelLen'],
    [['engine.gpuMemoryUtilization=1.5'], 'engine.gpuMemoryUtilization'],
    [['engine.gpuMemoryUtilization=0'], 'engine.gpuMemoryUtilization'],
    [['parallel.replicas=5'], 'parallel.replicas'],
    [['env.HF_TOKEN=abc'], 'env.HF_TOKEN'],
    [['engine.extraArgs=["--api-key=x"]'], 'engine.extraArgs'],
  ])('%j -> error at %s', (sets, path) => {
    expect(errors('qwen3.5-9b', sets).map((e) => e.path)).toContain(path);
  });

  it.each([['engine.extraArgs=["--hf-token=hf_abcdef123456"]'], ['engine.extraArgs=["--hf-token","hf_abcdef123456"]']])(
    '%j: a Hub token in extraArgs is refused (argv, state and restart diff would hold it), and the error never shows it',
    (set) => {
      const e = errors('qwen3.5-9b', [set]).filter((x) => x.path === 'engine.extraArgs');
      expect(e).toHaveLength(1);
      expect(e[0]!.message).toContain('--hf-token');
      expect(JSON.stringify(e)).not.toContain('hf_abcdef123456');
    },
  );

  it('an option that only ends in "tokens" is no secret: --max-num-batched-tokens is not refused', () => {
    expect(
      errors('qwen3.5-9b', ['engine.extraArgs=["--max-num-batched-tokens=8192"]']).filter(
        (x) => x.path === 'engine.extraArgs',
      ),
    ).toEqual([]);
  });

  it('reports several problems together', () => {
    const e = errors('qwen3.5-9b', ['parallel.tensor=3', 'engine.maxModelLen=300000', 'engine.gpuMemoryUtilization=2']);
    expect(e.map((x) => x.path)).toEqual(
      expect.arrayContaining(['parallel.tensor', 'engine.maxModelLen', 'engine.gpuMemoryUtilization']),
    );
  });

  it('the 200B profile on one 8-GPU host: needs 32 GPUs, run it over 4 nodes with Ray', () => {
    const e = errors('qwen3-200b', [], hostFromPlatform(loadPlatform('hopper-cuda13')));
    expect(e).toHaveLength(1);
    expect(e[0]!.message).toBe(
      'needs 32 GPUs (TP 8 x PP 4); this host has 8; it runs over 4 nodes (a nodes file: sparkctl plan qwen3-200b --nodes FILE plans it there)',
    );
    expect(e[0]!.fix).toContain('--nodes FILE');
  });

  it('fp8 on A100 warns with the real story, not on H200', () => {
    const w = warnings('qwen3.5-9b-fp8', []);
    expect(w.map((x) => x.message).join(' ')).toMatch(/weight-only.*Marlin.*storage only/);
    expect(warnings('qwen3.5-9b-fp8', [], h200x2).filter((x) => /FP8/.test(x.message))).toEqual([]);
  });

  it('a max model len whose KV cache does not fit names the largest that does', () => {
    const tiny: HostShape = { ...a100, gpuMemoryBytes: 12 * GIB };
    const e = errors('qwen3.5-9b', ['engine.maxModelLen=262144'], tiny);
    const kv = e.find((x) => x.path === 'engine.maxModelLen');
    expect(kv?.fix).toMatch(/^--set engine\.maxModelLen=\d+$/);
  });

  it('zod phase: unknown keys and wrong types are all named', () => {
    try {
      parseProfile(
        {
          name: 'x',
          model: {
            id: 'a',
            parameters: 1,
            layers: 1,
            attentionHeads: 1,
            kvHeads: 1,
            headDim: 1,
            maxContext: 1,
            colour: 'red',
          },
          engine: { dtype: 'fp9' },
        },
        'x.yaml',
      );
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(UsageError);
      const d = (e as UsageError).details.join('\n');
      expect(d).toContain('model.colour: unknown field');
      expect(d).toContain('engine.dtype');
    }
  });

  // review s7 F2: a name the records cannot hold (NAME-canary's cluster record caps at 200) read back as corrupt
  it.each([
    ['64 characters: accepted', 'a'.repeat(64), true],
    ['65 characters: refused, the field, the limit and the fix named', 'a'.repeat(65), false],
    ['194 characters (its -canary would pass the record limit): refused', 'b'.repeat(194), false],
  ])('profile name of %s', (_, name, ok) => {
    const p = load('qwen3.5-9b');
    const go = () => parseProfile({ ...p, name }, 'x.yaml');
    if (ok) expect(go().name).toBe(name);
    else {
      try {
        go();
        expect.unreachable();
      } catch (e) {
        expect(e).toBeInstanceOf(UsageError);
        expect((e as UsageError).exitCode).toBe(2);
        expect((e as UsageError).details.join('\n')).toMatch(/name.*at most 64 characters.*--set name=SHORTER/);
      }
    }
  });

  it('--set reads values as YAML and refuses non-blocks', () => {
    const raw: Record<string, unknown> = { engine: { x: 1 } };
    applySet(raw, 'engine.maxModelLen=8192');
    applySet(raw, 'engine.enforceEager=false');
    expect(raw.engine).toEqual({ x: 1, maxModelLen: 8192, enforceEager: false });
    expect(() => applySet(raw, 'engine.x.y=1')).toThrow(/not a block/);
    expect(() => applySet(raw, 'nothing')).toThrow(/FIELD=VALUE/);
  });
});

describe('memory planner', () => {
  it('qwen3.5-9b TP 2 on A100-80GB: GQA, hybrid layers, the numbers vLLM logs', () => {
    const plan = planMemory(load('qwen3.5-9b'), 80 * GIB);
    // 2 (K and V) x 8 KV layers x (4 KV heads / TP 2) x 256 head dim x 2 bytes
    expect(plan.kvBytesPerToken).toBe(2 * 8 * 2 * 256 * 2);
    expect(plan.weightsPerGpuBytes).toBeCloseTo((9e9 * 2) / 2, 0);
    expect(plan.kvTokens % 16).toBe(0);
    expect(plan.kvTokens).toBe(Math.floor((80 * GIB * 0.92 - 9e9 - plan.reserveBytes) / 16384 / 16) * 16);
    expect(plan.maxConcurrency).toBeCloseTo(plan.kvTokens / 16384, 5);
    expect(plan.fits).toBe(true);
  });

  it('fp8 halves weights and KV bytes', () => {
    const bf = planMemory(load('qwen3.5-9b'), 80 * GIB);
    const f8 = planMemory(load('qwen3.5-9b-fp8'), 80 * GIB);
    expect(f8.weightsPerGpuBytes).toBe(bf.weightsPerGpuBytes / 2);
    expect(f8.kvBytesPerToken).toBe(bf.kvBytesPerToken / 2);
  });

  it('TP above KV heads keeps one head per GPU', () => {
    const plan = planMemory(load('qwen3.5-9b', ['parallel.tensor=8', 'parallel.replicas=1']), 80 * GIB);
    expect(plan.kvHeadsPerGpu).toBe(1);
    expect(plan.kvHeadsReplicated).toBe(true);
  });

  it('PP splits the KV layers', () => {
    const plan = planMemory(load('qwen3-200b'), 140 * GIB);
    expect(plan.kvLayersPerGpu).toBe(24);
    expect(plan.kvHeadsPerGpu).toBe(1);
  });
});

describe('the probe: block defaults a probe uses without the schema', () => {
  it('are what the schema fills in for an empty block', async () => {
    const { ProbeBlock } = await import('../../src/profiles/probe-block.js');
    const { probeDefaults } = await import('../../src/profiles/probe-defaults.js');
    expect(probeDefaults()).toEqual(ProbeBlock.parse({}));
    expect(probeDefaults()).not.toBe(probeDefaults());
  });
});
