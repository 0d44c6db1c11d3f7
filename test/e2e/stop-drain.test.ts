// stop with a stream in flight, through the built CLI and the simulator (which shuts down as vLLM
// 0.27 does): what stop says happened to the request is what happened to it.
import { describe, it, expect, beforeEach } from 'vitest';
import { cli, isolated, freePort, portOpen, streamCompletion } from '../helpers.js';

let port: number;
const t = isolated({
  prefix: 'sparkctl-drain-',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.3', SPARKCTL_SIM_COLD_MS: '0' },
  stopArgs: ['--grace', '1'],
});
const env = t.env;
const serve = (sets: string[]) =>
  cli(
    [
      'serve',
      'qwen3.5-9b',
      '--engine',
      'sim',
      '--no-prewarm',
      '--set',
      `server.port=${port}`,
      '--set',
      'server.host=127.0.0.1',
      '--set',
      'parallel.replicas=1',
      ...sets.flatMap((s) => ['--set', s]),
    ],
    {
      env: env(),
    },
  );

beforeEach(async () => {
  port = await freePort();
});

const stream = (maxTokens: number) => streamCompletion(port, maxTokens);

// The 9B on the A100 baseline decodes in about 8 ms a token (more on a loaded host: a timer a
// token): 800 tokens take about 6.5 s, inside the drain's 20 s, and are still streaming when stop's
// SIGTERM comes on a loaded host (400 tokens, 3 s, had ended before it there: "aborted 0"). Where
// the stream need not finish, 5000.
const LONG = 800;
const ENDLESS = 5000;

describe('stop drains, aborts or cuts off, and says which from evidence', { timeout: 120_000 }, () => {
  it('drain (vLLM 0.25, server.shutdownTimeoutSeconds 20): the stream finishes with finish_reason length; stop says drained 1, within the grace', async () => {
    const r = await serve(['engine.vllmVersion=0.25.0', 'server.shutdownTimeoutSeconds=20']);
    expect(r.exitCode, r.stderr).toBe(0);
    const s = await stream(LONG);
    const t0 = performance.now();
    const stop = await cli(['stop', 'qwen3.5-9b', '--json'], { env: env() });
    const took = performance.now() - t0;
    expect(stop.exitCode, stop.stderr).toBe(0);
    const o = JSON.parse(stop.stdout).stopped[0];
    expect(o).toMatchObject({
      result: 'stopped',
      requests: { kind: 'drained', count: 1 },
      graceMs: 35_000,
      portFree: true,
      removed: true,
    });
    expect(o.inFlightBefore).toBe(1);
    expect(o.evidence).toEqual(
      expect.arrayContaining([
        expect.stringContaining('mode=drain timeout=20s'),
        expect.stringContaining('draining in-flight requests count=1'),
      ]),
    );
    const end = await s.ended;
    expect(end).toMatchObject({ finish: 'length', done: true });
    expect(end.tokens).toBeGreaterThanOrEqual(LONG);
    expect(took).toBeLessThan(20_000);
    expect(await portOpen(port)).toBe(false);
  });

  it('abort (server.shutdownTimeoutSeconds 0): the stream is cut without a finish; stop says aborted 1 and how to drain', async () => {
    const r = await serve(['engine.vllmVersion=0.25.0', 'server.shutdownTimeoutSeconds=0']);
    expect(r.exitCode, r.stderr).toBe(0);
    const s = await stream(ENDLESS);
    const stop = await cli(['stop', 'qwen3.5-9b'], { env: env() });
    expect(stop.exitCode, stop.stderr).toBe(0);
    expect(stop.stdout).toMatch(
      /qwen3\.5-9b-0: stopped \(SIGTERM\) in [\d.]+ s: aborted 1 in-flight request \(vLLM aborts on SIGTERM unless .*shutdownTimeoutSeconds\); port free/,
    );
    const end = await s.ended;
    expect(end.finish).toBeUndefined();
    expect(end.done).toBe(false);
  });

  it('a drain longer than stop --grace: SIGKILL, and stop says it cut the request off (not drained)', async () => {
    const r = await serve(['engine.vllmVersion=0.28.0', 'server.shutdownTimeoutSeconds=60']);
    expect(r.exitCode, r.stderr).toBe(0);
    const s = await stream(ENDLESS);
    const stop = await cli(['stop', 'qwen3.5-9b', '--grace', '1'], { env: env() });
    expect(stop.exitCode, stop.stderr).toBe(0);
    expect(stop.stdout).toMatch(
      /qwen3\.5-9b-0: did not stop within 1\.0 s: killed \(SIGKILL\): SIGKILL cut off 1 in-flight request; port free/,
    );
    expect(stop.stdout).not.toContain('drained');
    expect((await s.ended).done).toBe(false);
  });

  it('a vLLM whose table lacks --shutdown-timeout (0.17): nothing rendered, and stop claims nothing it cannot see', async () => {
    const r = await serve(['engine.vllmVersion=0.17.0', 'server.shutdownTimeoutSeconds=20']);
    expect(r.exitCode, r.stderr).toBe(0);
    const s = await stream(ENDLESS);
    const stop = await cli(['stop', 'qwen3.5-9b'], { env: env() });
    expect(stop.exitCode, stop.stderr).toBe(0);
    expect(stop.stdout).toMatch(
      /stopped \(SIGTERM\) in [\d.]+ s: 1 request was in flight; vLLM logged no shutdown mode, so how it ended is not known; port free/,
    );
    expect(stop.stderr).toContain('SIGKILL after 30 s');
    await s.ended;
  });
});

describe('the grace follows the drain into systemd and k8s', () => {
  it.each([
    ['0.25.0', 20, 'TimeoutStopSec=50', 45],
    ['0.25.0', 0, 'TimeoutStopSec=45', 40],
    ['0.17.0', 20, 'TimeoutStopSec=45', 40],
    ['0.28.0', 120, 'TimeoutStopSec=150', 145],
  ])('vLLM %s, shutdownTimeoutSeconds %d: %s, terminationGracePeriodSeconds %d', async (v, s, unit, grace) => {
    const sets = ['--set', `engine.vllmVersion=${v}`, '--set', `server.shutdownTimeoutSeconds=${s}`];
    const sd = await cli(['systemd', 'qwen3.5-9b', ...sets]);
    expect(sd.exitCode, sd.stderr).toBe(0);
    expect(sd.stdout).toContain(`\n${unit}\n`);
    const k = await cli(['k8s', 'qwen3.5-9b', ...sets]);
    expect(k.exitCode, k.stderr).toBe(0);
    expect(k.stdout).toContain(`terminationGracePeriodSeconds: ${grace}\n`);
    expect(k.stdout.includes(`--shutdown-timeout`)).toBe(v !== '0.17.0' && s > 0);
  });
});
