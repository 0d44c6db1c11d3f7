// serve --no-prewarm probes a server that has generated nothing yet: its first token is cold (the
// simulator's --sim-cold-ms, as a real vLLM compiles and allocates on its first request), and a cold
// first token slower than the probe's 5 s step deadline is no hung engine. Simulator only.
import { describe, expect, it } from 'vitest';
import { cli, freePort, isolated } from '../helpers.js';

const t = isolated({
  prefix: 'sparkctl-cold-probe-',
  per: 'suite',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_COLD_MS: '6500' },
});

describe('serve without prewarm', () => {
  it('a cold first token slower than the probe step deadline is healthy, not "the engine is hung"', async () => {
    const port = await freePort();
    const sets = ['--set', `server.port=${port}`, '--set', 'server.host=127.0.0.1', '--set', 'parallel.replicas=1'];
    const r = await cli(
      ['serve', 'qwen3.5-9b', '--engine', 'sim', '--no-prewarm', '--skip-preflight', ...sets, '--json'],
      { env: t.env(), timeout: 90_000 },
    );
    try {
      expect(r.exitCode, r.stdout + r.stderr).toBe(0);
      const j = JSON.parse(r.stdout);
      expect(j.status).toBe('healthy');
      const inference = j.replicas[0].probe.steps.find((c: { step: string }) => c.step === 'inference');
      expect(inference.status).toBe('pass');
      expect(inference.ms).toBeGreaterThan(5000);
    } finally {
      await cli(['stop', '--all'], { env: t.env(), timeout: 60_000 });
    }
  }, 120_000);
});
