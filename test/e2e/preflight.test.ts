import { describe, it, expect } from 'vitest';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, FIXTURES, tempDir, rmrf } from '../helpers.js';

const H200 = join(FIXTURES, 'bundles', 'h200x2-driver580-cuda13');
const noGpuHere = !existsSync('/proc/driver/nvidia/version');

describe('sparkctl preflight through the built CLI', () => {
  it('--from a real bundle: the JSON envelope shape is pinned, exit 1 for the failed check', async () => {
    const r = await cli(['preflight', '--from', H200, '--profile', 'qwen3.5-9b', '--json']);
    expect(r.exitCode).toBe(1);
    const j = JSON.parse(r.stdout);
    expect(Object.keys(j)).toEqual([
      'version',
      'kind',
      'host',
      'platform',
      'platformReason',
      'summary',
      'versions',
      'gpus',
      'system',
      'wallMs',
      'checks',
    ]);
    expect(j.gpus).toHaveLength(2);
    expect(Object.keys(j.gpus[0])).toEqual([
      'index',
      'name',
      'uuid',
      'busId',
      'memoryTotalMiB',
      'memoryFreeMiB',
      'computeCapability',
      'processes',
    ]);
    expect(j).toMatchObject({ version: 1, kind: 'preflight', platform: 'hopper-cuda13' });
    expect(Object.keys(j.checks[0])).toEqual(['id', 'status', 'observed', 'expected', 'fix', 'durationMs']);
    const ids = j.checks.map((c: { id: string }) => c.id);
    for (const id of [
      'driver.version',
      'driver.cuda-support',
      'cuda.toolkit',
      'cuda.path-hygiene',
      'torch.build',
      'nccl.version',
      'cudnn.version',
      'vllm.installed',
      'firmware.gpu',
      'firmware.bmc',
      'gpu.count',
      'gpu.model',
      'gpu.memory',
      'gpu.processes',
      'gpu.ecc',
      'gpu.throttle',
      'gpu.power-limit',
      'gpu.persistence',
      'gpu.mig',
      'gpu.topology',
      'gpu.fabric',
      'gpu.xid',
      'host.shm',
      'host.memlock',
      'host.nofile',
      'host.conntrack',
      'host.port',
      'host.disk',
      'model.files',
    ]) {
      expect(ids).toContain(id);
    }
    for (const c of j.checks) if (c.status === 'skip') expect(c.observed, c.id).toBeTruthy();
  });

  it('--only passes -> exit 0; --strict makes warnings fail', async () => {
    const ok = await cli(['preflight', '--from', H200, '--only', 'driver.,gpu.ecc']);
    expect(ok.exitCode).toBe(0);
    expect(ok.stdout).toMatch(/0 failed, 0 warnings, 3 passed/);
    const strict = await cli(['preflight', '--from', H200, '--only', 'host.nofile', '--strict']);
    expect(strict.exitCode).toBe(1);
  });

  it('bad input: unknown check id, missing bundle, unknown platform -> exit 2', async () => {
    expect((await cli(['preflight', '--from', H200, '--only', 'gpu.nope'])).exitCode).toBe(2);
    expect((await cli(['preflight', '--from', '/nonexistent'])).exitCode).toBe(2);
    expect((await cli(['preflight', '--from', H200, '--platform', 'dgx-9000'])).exitCode).toBe(2);
  });

  it.skipIf(!noGpuHere)('on this machine (no GPU): a clean report, exit 1, no stack trace', async () => {
    const r = await cli(['preflight']);
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toMatch(/FAIL\s+driver\.version\s+no NVIDIA driver is loaded/);
    expect(r.stdout).toMatch(/SKIP\s+gpu\.ecc\s+no NVIDIA driver is loaded/);
    expect(r.stderr).not.toMatch(/\bat .+:\d+:\d+/);
  });

  it('a plain preflight (its probes started before the CLI loads) reports what one with a flag spelled out does', async () => {
    const shape = (out: string) => {
      const j = JSON.parse(out);
      return {
        platform: j.platform,
        checks: j.checks.map((c: { id: string; status: string; expected: string }) => [c.id, c.status, c.expected]),
      };
    };
    const plain = await cli(['preflight', '--json']);
    const spelled = await cli(['preflight', '--json', '--probe-timeout', '5s']);
    expect(plain.exitCode).toBe(spelled.exitCode);
    expect(shape(plain.stdout)).toEqual(shape(spelled.stdout));
    expect(plain.stderr).toBe('');
  });

  it('collect writes bundle v1 without secrets, and preflight --from it gives the same verdicts', async () => {
    const dir = tempDir();
    const out = join(dir, 'bundle');
    try {
      const env = { MY_API_KEY: 'sk-leak-me-not-1', HF_TOKEN: 'hf_leak_me_not_2', NCCL_DEBUG: 'WARN' };
      // Generous probe deadlines: on a loaded machine python3 alone can take seconds, and a probe that
      // times out in one run and not the other would differ for a reason that is not the replay's.
      const c = await cli(['collect', '--out-dir', out, '--probe-timeout', '30000'], { env });
      expect(c.exitCode).toBe(0);
      const m = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
      expect(m).toMatchObject({ version: 1 });
      expect(m.commands.length).toBeGreaterThan(10);
      expect(m.env.NCCL_DEBUG).toBe('WARN');
      const everything =
        readdirSync(join(out, 'out'))
          .map((f) => readFileSync(join(out, 'out', f), 'utf8'))
          .join('\n') + JSON.stringify(m);
      expect(everything).not.toContain('sk-leak-me-not-1');
      expect(everything).not.toContain('hf_leak_me_not_2');
      const live = await cli(['preflight', '--json', '--probe-timeout', '30000'], { env });
      const replay = await cli(['preflight', '--json', '--from', out]);
      const verdicts = (s: string) =>
        JSON.parse(s).checks.map((x: { id: string; status: string }) => `${x.id}=${x.status}`);
      expect(verdicts(replay.stdout)).toEqual(verdicts(live.stdout));
      expect((await cli(['collect', '--out-dir', out])).exitCode).toBe(2); // never over another bundle
    } finally {
      rmrf(dir);
    }
  }, 120_000); // four CLI runs with 30 s probe deadlines on a loaded machine
});

describe('model.files on this machine, with --verify', () => {
  it('config and weights present; SHA-256 checked against SHA256SUMS; a damaged file fails', async () => {
    const { writeFileSync, mkdirSync } = await import('node:fs');
    const { createHash } = await import('node:crypto');
    const dir = tempDir();
    try {
      const model = join(dir, 'model');
      mkdirSync(model);
      const files: Record<string, string> = {
        'config.json': '{"model_type":"qwen3"}',
        'model-00001-of-00001.safetensors': 'x'.repeat(4096),
      };
      for (const [f, c] of Object.entries(files)) writeFileSync(join(model, f), c);
      writeFileSync(
        join(model, 'SHA256SUMS'),
        Object.entries(files)
          .map(([f, c]) => `${createHash('sha256').update(c).digest('hex')}  ${f}`)
          .join('\n') + '\n',
      );
      const profiles = join(dir, 'profiles');
      mkdirSync(profiles);
      writeFileSync(
        join(profiles, 'local.yaml'),
        `model: { path: ${model}, parameters: 1.0e6, layers: 2, attentionHeads: 4, kvHeads: 2, headDim: 64, maxContext: 4096 }\nparallel: { tensor: 1 }\n`,
      );
      const args = ['preflight', '--profiles', profiles, '--profile', 'local', '--only', 'model.files', '--verify'];
      const ok = await cli(args);
      expect(ok.exitCode, ok.stdout).toBe(0);
      expect(ok.stdout).toMatch(/config\.json and 1 weight file\(s\).*2 file\(s\) match/);
      writeFileSync(join(model, 'model-00001-of-00001.safetensors'), 'y'.repeat(4096));
      const bad = await cli(args);
      expect(bad.exitCode).toBe(1);
      expect(bad.stdout).toContain('SHA-256 mismatch: model-00001-of-00001.safetensors');
    } finally {
      rmrf(dir);
    }
  });
});
