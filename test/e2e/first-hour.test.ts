// A newcomer's first hour on the simulator, as the behaviours they trip over: serve of what runs
// already, a wrong-case profile name, prewarm with no name, what "auth warn" means, a cost
// extrapolated from a handful of tokens. One simulated server (qwen3.5-9b-code, one replica) for all.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { cli, tempDir, rmrf, freePort } from '../helpers.js';

const state = tempDir('sparkctl-first-hour-');
const env = { SPARKCTL_STATE_DIR: state, SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_TIME_FACTOR: '0' };
const P = 'qwen3.5-9b-code';
let port: number;
let first: Awaited<ReturnType<typeof cli>>;
const serveArgs = () => [
  'serve',
  P,
  '--engine',
  'sim',
  '--set',
  `server.port=${port}`,
  '--set',
  'server.host=127.0.0.1',
];

describe('the first hour on the simulator', { timeout: 120_000 }, () => {
  beforeAll(async () => {
    port = await freePort();
    first = await cli(serveArgs(), { env });
    expect(first.exitCode, first.stderr).toBe(0);
  }, 90_000);
  afterAll(async () => {
    await cli(['stop', '--all'], { env });
    rmrf(state);
  });

  it('serve of a profile that already runs healthy says so, starts nothing, exit 0 (serve is idempotent)', async () => {
    const again = await cli(serveArgs(), { env });
    expect(again.exitCode, again.stderr).toBe(0);
    expect(again.stdout).toContain(`${P} is already running and healthy: ${P}-0 (port ${port}`);
    expect(again.stdout).toContain(`sparkctl restart ${P}`);
    expect(again.stderr).not.toMatch(/preflight|already listening/);
    const st = await cli(['status', '--json'], { env });
    const servers = JSON.parse(st.stdout).servers ?? JSON.parse(st.stdout).instances;
    expect(JSON.stringify(servers).match(new RegExp(`"${P}-0"`, 'g'))?.length).toBe(1);
    const json = await cli([...serveArgs(), '--json'], { env });
    expect(json.exitCode).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      version: 1,
      kind: 'serve',
      status: 'healthy',
      alreadyRunning: true,
      replicas: [{ name: `${P}-0`, port }],
    });
  });

  it('serve --foreground of a running profile refuses (exit 2) naming stop: it would not own those servers', async () => {
    const r = await cli([...serveArgs(), '--foreground'], { env });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`sparkctl stop ${P} first`);
  });

  it('a wrong-case profile name gets "did you mean" with the right one (exit 2)', async () => {
    const r = await cli(['plan', 'Qwen3.5-9B-Code'], { env });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('unknown profile "Qwen3.5-9B-Code": did you mean "qwen3.5-9b-code"?');
    const typo = await cli(['plan', 'qwen3.5-9b-cdoe'], { env });
    expect(typo.stderr).toContain('did you mean "qwen3.5-9b-code"?');
    const far = await cli(['plan', 'llama'], { env });
    expect(far.stderr).not.toContain('did you mean');
  });

  it('prewarm with no name (or a wrong one) lists what is running', async () => {
    const r = await cli(['prewarm'], { env });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`running: ${P} (${P}-0)`);
    const wrong = await cli(['prewarm', 'qwen-dev'], { env });
    expect(wrong.stderr).toContain(`running: ${P} (${P}-0)`);
    const none = await cli(['prewarm'], { env: { ...env, SPARKCTL_STATE_DIR: tempDir('sparkctl-empty-') } });
    expect(none.stderr).toContain('no server is running');
  });

  it('serve says what an "auth warn" means and how to fix it (server.apiKeyEnv)', () => {
    expect(first.stdout).toMatch(/auth warn/);
    expect(first.stdout).toMatch(/^ {2}auth warn: no API key configured: .*server\.apiKeyEnv/m);
    // the variable's NAME is no secret: the fix names it (it was redacted to server.apiKeyEnv=<redacted>)
    expect(first.stdout).toContain('--set server.apiKeyEnv=VLLM_API_KEY)');
    expect(first.stdout).not.toContain('apiKeyEnv=<redacted>');
  });

  it('off a terminal, serve prints one line per replica and phase, says when prewarm starts, and where the time went', () => {
    // the weights phase: its first line and its end (100 %), never each percent between
    const weights = first.stderr.match(/loading weights \d+%/g) ?? [];
    expect(weights.length).toBeLessThanOrEqual(2);
    if (weights.length === 2) expect(weights[1]).toBe('loading weights 100%');
    expect(first.stderr).toContain(`prewarm ${P}-0: warming up (round 1,`);
    expect(first.stderr).toMatch(
      /serve took [\d.]+ m?s: [\d.]+ m?s until every replica was ready, [\d.]+ m?s of prewarm and probe/,
    );
  });

  it("client-env of a profile that is not running gives that profile's own address and name, with a warning", async () => {
    const r = await cli(['client-env', 'qwen-dev', '--openai'], { env });
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain('export OPENAI_BASE_URL=http://127.0.0.1:8002/v1');
    expect(r.stderr).toContain('warning: qwen-dev is not running: this points at its own port 8002 and model qwen-dev');
    const running = await cli(['client-env', P, '--openai'], { env });
    expect(running.stdout).toContain(`:${port}/v1`);
    expect(running.stderr).not.toContain('is not running');
  });

  it('cost over a window of a few tokens warns that its price per 1M tokens is an extrapolation', async () => {
    for (let i = 0; i < 2; i++) expect((await cli(['probe', `${P}-0`, '--quiet'], { env })).exitCode).toBe(0);
    const r = await cli(['cost', `${P}-0`, '--since', '1h', '--gpu-hour-price', '2'], { env });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /warning: only \d+ token\(s\) in this window: the price per 1M tokens multiplies their cost by [\d,]+/,
    );
  });
});
