// upgrade --canary-gpus on the simulator (no router: the canary runs beside the replica, as a profile of
// its own): the canary is placed on the GPUs asked for, compared, and undone (--no-roll), the replica
// untouched; a list that is not a contiguous run, the wrong count, or with a router is bad input with the fix.
import { describe, it, expect } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, isolated, freePortRange } from '../helpers.js';

// The canary must pass its comparison with the replica (the same build): a ~200 ms first token (a 340
// tokens/s prefill) stands above a loaded host's scheduling noise, where the simulator's own ~3 ms made
// the TTFT ratio a ratio of noise (test/e2e/upgrade.test.ts saw an identical canary read 1.76x)
const t = isolated({
  prefix: 'sparkctl-upgrade-gpus-',
  per: 'suite',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.5', SPARKCTL_SIM_COLD_MS: '50', SPARKCTL_SIM_PREFILL_TPS: '340' },
});
const P = 'qwen3.5-9b';

/** Each registered server's name and GPUs (the registry's own record). */
function servers(): Record<string, number[]> {
  const dir = join(t.state, 'instances');
  return Object.fromEntries(
    readdirSync(dir)
      .filter((x) => x.endsWith('.json'))
      .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')))
      .map((i) => [i.name, i.gpus]),
  );
}

describe('upgrade --canary-gpus (simulator, the canary beside the replica)', () => {
  it('the canary runs on the GPUs asked for, is compared and undone; bad lists are exit 2 with the fix', async () => {
    const port = await freePortRange(2);
    const sets = [
      '--set',
      `server.port=${port}`,
      '--set',
      'server.host=127.0.0.1',
      '--set',
      'parallel.replicas=1',
      '--set',
      'prewarm.maxRounds=2',
      '--set',
      'prewarm.promptTokens=[64]',
    ];
    const served = await cli(['serve', P, '--engine', 'sim', '--no-prewarm', ...sets], {
      env: t.env(),
      timeout: 60_000,
    });
    expect(served.exitCode, served.stderr).toBe(0);
    expect(servers()).toEqual({ [`${P}-0`]: [0, 1] });

    const gaps = await cli(['upgrade', P, '--vllm', '0.17.1', '--canary-gpus', '4,6'], {
      env: t.env(),
      timeout: 30_000,
    });
    expect(gaps.exitCode).toBe(2);
    expect(gaps.stderr).toMatch(/--canary-gpus: 4,6 is not a contiguous run of GPUs/);
    const count = await cli(['upgrade', P, '--vllm', '0.17.1', '--canary-gpus', '4'], {
      env: t.env(),
      timeout: 30_000,
    });
    expect(count.exitCode).toBe(2);
    expect(count.stderr).toMatch(/--canary-gpus: 4 is 1 GPU\(s\); one replica of qwen3\.5-9b uses 2/);
    expect(count.stderr).toMatch(/--canary-gpus 4,5/);
    const junk = await cli(['upgrade', P, '--vllm', '0.17.1', '--canary-gpus', 'all'], {
      env: t.env(),
      timeout: 30_000,
    });
    expect(junk.exitCode).toBe(2);
    expect(junk.stderr).toMatch(/"all" is not a list of GPU indices/);

    const dry = await cli(['upgrade', P, '--vllm', '0.17.1', '--canary-gpus', '4,5', '--dry-run'], {
      env: t.env(),
      timeout: 30_000,
    });
    expect(dry.exitCode, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/canary: beside the replicas as qwen3\.5-9b-canary on a free port, on GPU 4,5/);

    const r = await cli(['upgrade', P, '--vllm', '0.17.1', '--canary-gpus', '4,5', '--no-roll', '--json'], {
      env: t.env(),
      timeout: 120_000,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({
      status: 'compared',
      where: 'beside',
      canary: { replica: `${P}-canary-0`, gpus: [4, 5] },
    });
    expect(out.canary.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    // the canary is gone, the replica as it was
    expect(servers()).toEqual({ [`${P}-0`]: [0, 1] });
  }, 180_000);
});
