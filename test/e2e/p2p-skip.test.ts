// serve skips vLLM's P2P check only on its preflight's evidence (the gpu.topology check read this
// host's `nvidia-smi topo -m` and every TP pair is on NVLink), says so, and the server's environment
// carries VLLM_SKIP_P2P_CHECK=1; with --skip-preflight the check is left to vLLM, said why. Simulator
// (its host answers nvidia-smi topo -m in the real format, src/sim/host.ts).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cli, freePort, isolated } from '../helpers.js';

const t = isolated({ prefix: 'sparkctl-p2p-', per: 'test', env: { SPARKCTL_SIM_LOAD_SECONDS: '0.3' } });
const serve = async (extra: string[]) => {
  const port = await freePort();
  const sets = [
    '--set',
    `server.port=${port}`,
    '--set',
    'server.host=127.0.0.1',
    '--set',
    'parallel.replicas=1',
    '--set',
    'parallel.tensor=2',
  ];
  return cli(['serve', 'qwen3.5-9b', '--engine', 'sim', '--no-prewarm', ...sets, ...extra], {
    env: t.env(),
    timeout: 90_000,
  });
};
const envOf = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');

describe("vLLM's P2P check and preflight's topology", () => {
  it('preflight read NVLink between the TP pair: skipped, said, in the server environment', async () => {
    const r = await serve([]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toMatch(
      /P2P check skipped \(VLLM_SKIP_P2P_CHECK=1\): preflight read the topology, every TP pair on NVLink \(GPU0-GPU1 NV\d+\)/,
    );
    const inst = JSON.parse((await cli(['status', '--json'], { env: t.env() })).stdout).instances[0];
    expect(envOf(inst.pid)).toContain('VLLM_SKIP_P2P_CHECK=1');
  }, 120_000);
  it('--skip-preflight: nothing read, so the check is left to vLLM, and said why', async () => {
    const r = await serve(['--skip-preflight']);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toMatch(/P2P check left to vLLM: preflight did not read the topology/);
    const inst = JSON.parse((await cli(['status', '--json'], { env: t.env() })).stdout).instances[0];
    expect(envOf(inst.pid).some((v) => v.startsWith('VLLM_SKIP_P2P_CHECK='))).toBe(false);
  }, 120_000);
});
