import { describe, it, expect } from 'vitest';
import { cli } from '../helpers.js';
import { tempDir } from '../temp-dirs.js';

describe('sparkctl CLI: foundation verbs through the built binary', () => {
  it('--version and --help', async () => {
    const v = await cli(['--version']);
    expect(v.exitCode).toBe(0);
    expect(v.stdout).toMatch(/^\d+\.\d+\.\d+$/);
    const h = await cli(['--help']);
    expect(h.exitCode).toBe(0);
    for (const verb of [
      'serve',
      'plan',
      'profiles',
      'preflight',
      'collect',
      'status',
      'logs',
      'stop',
      'prewarm',
      'probe',
      'systemd',
      'k8s',
      'client-env',
    ]) {
      expect(h.stdout).toContain(verb);
    }
    expect(h.stdout).toContain('Exit codes');
  });

  it('serve --dry-run prints a copy-pasteable command, and says the GPU count was assumed', async () => {
    const r = await cli(['serve', 'qwen3.5-9b', '--dry-run']);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain('CUDA_VISIBLE_DEVICES=0,1 vllm serve Qwen/Qwen3.5-9B');
    expect(r.stdout).toContain('--port 8003');
    expect(r.stderr).toMatch(/assuming the 8 x NVIDIA A100/);
  });

  it('serve --dry-run --json has the pinned envelope shape', async () => {
    const r = await cli(['serve', 'qwen-prod', '--dry-run', '--json', '--gpus', '8']);
    expect(r.exitCode).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(Object.keys(j)).toEqual([
      'version',
      'kind',
      'profile',
      'engine',
      'vllmVersion',
      'servedName',
      'platform',
      'host',
      'runtime',
      'replicas',
      'router',
      'memory',
      'caches',
      'loader',
      'warnings',
    ]);
    expect(j.runtime).toBe('host');
    // no router: in the profile and no --router: null (with one: its bind, servers, stats, config)
    expect(j.router).toBeNull();
    expect(j).toMatchObject({
      version: 1,
      kind: 'launch-plan',
      profile: 'qwen-prod',
      host: { gpus: 8, source: 'flag' },
    });
    expect(Object.keys(j.replicas[0])).toEqual(['name', 'argv', 'env', 'port', 'gpus', 'logFile']);
    expect(j.replicas[0].argv[0]).toBe('vllm');
    // vLLM's start caches point into sparkctl's folder for this profile and vLLM version (engine/caches.ts)
    const {
      VLLM_CACHE_ROOT,
      TRITON_CACHE_DIR,
      FLASHINFER_WORKSPACE_BASE,
      CUDA_CACHE_PATH,
      TORCHINDUCTOR_CACHE_DIR,
      ...rest
    } = j.replicas[0].env;
    expect(rest).toEqual({ CUDA_VISIBLE_DEVICES: '0,1,2,3', VLLM_API_KEY: '$QWEN_PROD_API_KEY' });
    for (const v of [
      VLLM_CACHE_ROOT,
      TRITON_CACHE_DIR,
      FLASHINFER_WORKSPACE_BASE,
      CUDA_CACHE_PATH,
      TORCHINDUCTOR_CACHE_DIR,
    ])
      expect(v.startsWith(`${j.caches.dir}/`)).toBe(true);
    expect(j.caches.dir).toMatch(/\/vllm\/qwen-prod\/[^/]+$/);
  });

  it('serve --dry-run --json --runtime container: each replica carries its container run argv, the key by name', async () => {
    const r = await cli(
      [
        'serve',
        'qwen-prod',
        '--dry-run',
        '--json',
        '--gpus',
        '8',
        '--runtime',
        'container',
        '--set',
        'container.cli="docker"',
      ],
      {
        env: { QWEN_PROD_API_KEY: 'sk-very-secret-123' },
      },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.runtime).toBe('container');
    const argv: string[] = j.replicas[0].container.argv;
    expect(argv.slice(0, 3)).toEqual(['docker', 'run', '--detach']);
    expect(argv[argv.indexOf('--gpus') + 1]).toBe('"device=0,1,2,3"');
    expect(argv).toContain('VLLM_API_KEY');
    expect(r.stdout + r.stderr).not.toContain('sk-very-secret-123');
  });

  it('the key value never appears, even when the variable is set', async () => {
    const r = await cli(['serve', 'qwen-prod', '--dry-run', '--json'], {
      env: { QWEN_PROD_API_KEY: 'sk-very-secret-123' },
    });
    expect(r.stdout + r.stderr).not.toContain('sk-very-secret-123');
  });

  it('bad input: exit 2, every problem named with its fix', async () => {
    const r = await cli([
      'serve',
      'qwen3.5-9b',
      '--dry-run',
      '--set',
      'parallel.tensor=3',
      '--set',
      'engine.maxModelLen=999999',
    ]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('parallel.tensor: 3 does not divide 16 attention heads');
    expect(r.stderr).toContain('engine.maxModelLen: 999999 is above');
    expect(r.stderr).not.toMatch(/at .*\.js:\d+/); // no stack trace
  });

  it('unknown profile and unknown flag are bad input', async () => {
    const a = await cli(['serve', 'nope', '--dry-run']);
    expect(a.exitCode).toBe(2);
    expect(a.stderr).toContain('unknown profile "nope"');
    const b = await cli(['serve', 'qwen3.5-9b', '--bogus']);
    expect(b.exitCode).toBe(2);
  });

  it('the 200B profile on one host is refused with the multi-node plan', async () => {
    const r = await cli(['serve', 'qwen3-200b', '--dry-run']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(
      'needs 32 GPUs (TP 8 x PP 4); this host has 8; it runs over 4 nodes (a nodes file: sparkctl plan qwen3-200b --nodes FILE plans it there)',
    );
  });

  it('plan: fits and the vLLM numbers; too long a context exits 2 with the largest that fits', async () => {
    const ok = await cli(['plan', 'qwen3.5-9b', '--json']);
    expect(ok.exitCode).toBe(0);
    const j = JSON.parse(ok.stdout);
    expect(j.kind).toBe('memory-plan');
    expect(j.plan.fits).toBe(true);
    expect(j.plan.kvTokens).toBeGreaterThan(1_000_000);
    const bad = await cli(['plan', 'qwen3.5-9b', '--gpu-memory', '12GiB', '--set', 'engine.maxModelLen=262144']);
    expect(bad.exitCode).toBe(2);
    expect(bad.stdout).toMatch(/largest max model len that fits is \d+/);
  });

  it('profiles list/show/validate/schema', async () => {
    const l = await cli(['profiles', 'list', '--json']);
    expect(JSON.parse(l.stdout).profiles.map((p: { name: string }) => p.name)).toContain('qwen3.5-9b-spark');
    const s = await cli(['profiles', 'show', 'qwen-dev']);
    expect(s.stdout).toContain('firstGpu: 4');
    const sch = await cli(['profiles', 'schema']);
    expect(JSON.parse(sch.stdout).properties.engine).toBeDefined();
  });

  it('a user profile folder via --profiles and SPARKCTL_PROFILES; validate a broken file', async () => {
    const { writeFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const dir = tempDir('sparkctl-prof-');
    writeFileSync(
      join(dir, 'mine.yaml'),
      'model: { id: org/m, parameters: 1.0e9, layers: 16, attentionHeads: 16, kvHeads: 4, headDim: 64, maxContext: 8192 }\nparallel: { tensor: 1 }\nserver: { port: 9100 }\n',
    );
    writeFileSync(
      join(dir, 'broken.yaml'),
      'model: { id: org/m, parameters: 1.0e9, layers: 16, attentionHeads: 16, kvHeads: 4, headDim: 64, maxContext: 8192 }\nparallel: { tensor: 5, pipeline: 20 }\nengine: { gpuMemoryUtilization: 1.2 }\n',
    );
    const a = await cli(['serve', 'mine', '--dry-run', '--profiles', dir, '--gpus', '1']);
    expect(a.exitCode).toBe(0);
    expect(a.stdout).toContain('vllm serve org/m');
    const b = await cli(['serve', 'mine', '--dry-run', '--gpus', '1'], { env: { SPARKCTL_PROFILES: dir } });
    expect(b.exitCode).toBe(0);
    const v = await cli(['profiles', 'validate', join(dir, 'broken.yaml'), '--gpus', '8']);
    expect(v.exitCode).toBe(2);
    expect(v.stdout).toContain('parallel.tensor: 5 does not divide 16 attention heads');
    expect(v.stdout).toContain('parallel.pipeline: 20 stages for 16 layers');
    expect(v.stdout).toContain('engine.gpuMemoryUtilization: 1.2 is not in (0, 1]');
  });
});
