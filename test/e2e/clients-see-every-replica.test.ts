// Pointing clients at the right thing when a profile runs several replicas without a router:
// client-env points at replica 0 and names every other one with its address (stderr, so eval of its
// stdout stays clean); bench PROFILE says it loads one replica of four, which, and how to pick another.
// On the simulator: one serve of four replicas for both.
import { describe, it, expect, beforeAll } from 'vitest';
import { cli, isolated, freePortRange } from '../helpers.js';

const t = isolated({
  prefix: 'sparkctl-clients-replicas-',
  per: 'suite',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_TIME_FACTOR: '0' },
});
const P = 'qwen3.5-9b';
let base: number;

describe('four replicas without a router', { timeout: 120_000 }, () => {
  beforeAll(async () => {
    base = await freePortRange(4);
    const r = await cli(
      ['serve', P, '--engine', 'sim', '--no-prewarm', '--set', `server.port=${base}`, '--set', 'server.host=127.0.0.1'],
      { env: t.env(), timeout: 90_000 },
    );
    expect(r.exitCode, r.stderr).toBe(0);
  }, 100_000);

  it('client-env points at replica 0 and lists all four, each with its address', async () => {
    const r = await cli(['client-env', P, '--openai'], { env: t.env() });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain(`export OPENAI_BASE_URL=http://127.0.0.1:${base}/v1`);
    expect(r.stderr).toContain(`${P} runs 4 replicas without a router: this points at ${P}-0; the others: `);
    for (let i = 1; i < 4; i++) expect(r.stderr).toContain(`${P}-${i} http://127.0.0.1:${base + i}`);
    expect(r.stderr).toContain('serve --router puts one endpoint in front of them');
    expect(r.stdout).not.toContain(`${P}-1`);
  });

  it('bench PROFILE says it loads replica 0 of four, names them, and how to load another', async () => {
    const r = await cli(
      ['bench', P, '--requests', '2', '--warmup', '0', '--input-len', '8', '--output-len', '4', '--json'],
      { env: t.env() },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toContain(
      `bench ${P}: loads ${P}-0 only (4 replicas run without a router: ${P}-0, ${P}-1, ${P}-2, ${P}-3); bench ${P}-1 picks another`,
    );
    expect(JSON.parse(r.stdout)).toMatchObject({ version: 1, kind: 'bench' });
    const one = await cli(
      ['bench', `${P}-2`, '--requests', '2', '--warmup', '0', '--input-len', '8', '--output-len', '4', '--json'],
      { env: t.env() },
    );
    expect(one.exitCode, one.stderr + one.stdout.slice(0, 2000)).toBe(0);
    expect(one.stderr).not.toContain('loads');
    expect(JSON.parse(one.stdout)).toMatchObject({ version: 1, kind: 'bench' });
  });
});
