// serve places a second profile on a GPU another server uses when the co-location rule's sum fits,
// and says so; refuses a third with the sum (simulated GPUs: the dgx-a100-os6 baseline's 80 GB A100s).
import { describe, it, expect, beforeAll } from 'vitest';
import { cli, isolated, freePortRange } from '../helpers.js';
import { simServe } from '../../scripts/lib/serve-args.mjs';

const t = isolated({
  prefix: 'sparkctl-colocate-',
  per: 'suite',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', QWEN_PROD_API_KEY: 'sk-colocate-test' },
});
let base: number;
const serve = (profile: string, port: number, share: number) =>
  cli(['serve', profile, '--skip-preflight', ...simServe({ port, replicas: 1, gpu: 4, tensor: 2, share })], {
    env: t.env(),
    timeout: 60_000,
  });

describe('several servers on one GPU when the plan says they fit', () => {
  beforeAll(async () => {
    base = await freePortRange(4);
  });
  it('0.45 + 0.45 share GPUs 4-5 (said, with the sum); a third at 0.45 is refused with the sum and the largest share that fits', async () => {
    const a = await serve('qwen3.5-9b', base, 0.45);
    expect(a.exitCode, a.stderr).toBe(0);
    const b = await serve('qwen-dev', base + 1, 0.45);
    expect(b.exitCode, b.stderr).toBe(0);
    expect(b.stderr).toMatch(
      /qwen-dev-0: shares GPU 4 with qwen3\.5-9b-0: qwen3\.5-9b-0 36\.2 GiB \+ qwen-dev-0 36\.2 GiB = 72\.5 GiB of 79\.4 GiB/,
    );
    const c = await serve('qwen-prod', base + 2, 0.45);
    expect(c.exitCode).toBe(2);
    expect(c.stderr).toMatch(/= 108\.7 GiB, more than the 79\.4 GiB this GPU has for them/);
    // 0.08 x 79.4 GiB would not hold qwen-prod's own weights and reserve: that share was a fix that changed nothing
    expect(c.stderr).toMatch(
      /no share of this GPU holds qwen-prod-0.s weights beside them; fix: sparkctl stop qwen-dev, then sparkctl stop qwen3\.5-9b/,
    );
    expect(c.stderr).not.toMatch(/gpuMemoryUtilization=0\.0/);
  }, 90_000);
});
