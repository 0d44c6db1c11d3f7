// Rendered flags checked against the target vLLM's table before launching, through the built CLI.
import { describe, it, expect, afterAll } from 'vitest';
import { cli, tempDir, rmrf } from '../helpers.js';

const state = tempDir();
afterAll(() => rmrf(state));

describe('serve checks every rendered flag against the target vLLM', () => {
  const old = ['--set', 'engine.vllmVersion="0.9.0"'];

  it('--dry-run warns with the flag, the version and the fix', async () => {
    const r = await cli(['serve', 'qwen3.5-9b-spark', '--dry-run', ...old], { stateDir: state });
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toMatch(
      /serve would refuse: --tool-call-parser qwen3_coder is not accepted by vLLM 0\.9\.0 .*fix: one of: .*hermes/,
    );
    expect(r.stdout).toContain('--tool-call-parser qwen3_coder');
  });

  it('--dry-run --json carries it in the warnings', async () => {
    const r = await cli(['serve', 'qwen3.5-9b-spark', '--dry-run', '--json', ...old], { stateDir: state });
    expect(r.exitCode).toBe(0);
    expect(JSON.parse(String(r.stdout)).warnings.join('\n')).toMatch(
      /serve would refuse: --tool-call-parser qwen3_coder/,
    );
  });

  it('serve refuses before launching anything (exit 2)', async () => {
    const r = await cli(['serve', 'qwen3.5-9b-spark', '--engine', 'sim', '--skip-preflight', '--no-prewarm', ...old], {
      stateDir: state,
    });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/vLLM 0\.9\.0 would refuse 1 rendered flag/);
    expect(r.stderr).toMatch(/--tool-call-parser qwen3_coder is not accepted by vLLM 0\.9\.0/);
  });

  it('a version that has everything: no flag warnings', async () => {
    const r = await cli(['serve', 'qwen3.5-9b-spark', '--dry-run', '--json', '--set', 'engine.vllmVersion="0.16.0"'], {
      stateDir: state,
    });
    expect(JSON.parse(String(r.stdout)).warnings.join('\n')).not.toMatch(/accepted by vLLM/);
  });
});
