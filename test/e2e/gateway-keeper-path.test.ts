// Requests the keeper passes on (an alias's here; a started or woken model's waiting requests take
// the same way) go back into HAProxy (its keeper_return door) to the model's backend, so the prefix
// hash and the admission limit hold for them as for a request by the served name. Before, the keeper
// sent them straight to the replica with the fewest of its own requests: a repeated prefix
// alternated between replicas, and no maxconn held them (every one of a burst reached a server).
// Real HAProxy, the simulator on two replicas (each server's own request counter says which served).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, isolated, freePortRange } from '../helpers.js';

const HAPROXY = '/usr/sbin/haproxy';
const have = existsSync(HAPROXY);
if (!have) console.warn(`gateway keeper-path e2e skipped: ${HAPROXY} is not installed (apt-get install haproxy)`);

const t = isolated({
  prefix: 'sparkctl-kpath-',
  per: 'suite',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_COLD_MS: '20' },
});
let base: number;

/** requests each replica finished, from its own /metrics */
async function served(): Promise<number[]> {
  return Promise.all(
    [base + 3, base + 4].map(async (port) => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      return text
        .split('\n')
        .filter((l) => l.startsWith('vllm:request_success_total{'))
        .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
    }),
  );
}

const post = (body: Record<string, unknown>) =>
  fetch(`http://127.0.0.1:${base}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'dev', ignore_eos: true, ...body }),
    signal: AbortSignal.timeout(60_000),
  });

describe.skipIf(!have)('gateway: what the keeper passes on gets the prefix hash and the admission limit', () => {
  beforeAll(async () => {
    base = await freePortRange(8);
    const s = await cli(
      [
        'serve',
        'qwen-dev',
        '--engine',
        'sim',
        '--no-prewarm',
        '--set',
        `server.port=${base + 3}`,
        '--set',
        'server.host=127.0.0.1',
        '--set',
        'parallel.replicas=2',
        '--set',
        'parallel.tensor=1',
      ],
      { env: t.env(), timeout: 90_000 },
    );
    expect(s.exitCode, s.stderr + s.stdout).toBe(0);
    const cfg = join(t.state, 'gateway.yaml');
    // each replica runs one request at once, one more waits; 'dev' is an alias: the keeper renames it
    writeFileSync(
      cfg,
      JSON.stringify({
        gateway: {
          port: base,
          checkIntervalMs: 500,
          aliases: { dev: 'qwen-dev' },
          models: { 'qwen-dev': { onDemand: false, concurrency: 1, queue: 1 } },
        },
      }),
    );
    const up = await cli(['gateway', 'up', '--config', cfg], { env: t.env() });
    expect(up.exitCode, up.stderr + up.stdout).toBe(0);
  }, 120_000);
  afterAll(async () => {
    await cli(['gateway', 'down'], { env: t.env() });
    await cli(['stop', '--all'], { env: t.env(), timeout: 60_000 });
  }, 90_000);

  it('one long prefix by the alias, six times in a row: all six on one replica (the keeper alone alternated them)', async () => {
    const before = await served();
    const doc = `${'A long shared document. '.repeat(60)}Question`;
    for (let i = 0; i < 6; i++) {
      const r = await post({ prompt: `${doc} ${i}`, max_tokens: 2 });
      expect(r.status, await r.text()).toBe(200);
    }
    const after = await served();
    const added = after.map((n, i) => n - before[i]!).sort();
    expect(added).toEqual([0, 6]);
    // and gateway status counts them: six answers with their tokens (the client's side, where the keeper
    // was their server), and where each went (keeper_return's route line): 1 new, then 5 hits. Before,
    // the client-side line took the keeper for a replica (its "hits" were the keeper's), and no line said
    // which replica the keeper's requests reached
    type U = {
      requests: number;
      withUsage: number;
      completion: number;
      prefix: { hit: number; spill: number; new: number };
    };
    let u: U | undefined;
    const until = Date.now() + 15_000;
    while (Date.now() < until) {
      const st = await cli(['gateway', 'status', '--json'], { env: t.env() });
      expect(st.exitCode, st.stderr).toBe(0);
      u = (JSON.parse(String(st.stdout)) as { models: Array<{ profile: string; usage?: U }> }).models.find(
        (m) => m.profile === 'qwen-dev',
      )?.usage;
      if (u && u.requests >= 6 && u.prefix.hit + u.prefix.new + u.prefix.spill >= 6) break;
      await new Promise((r) => setTimeout(r, 300));
    }
    expect(u).toMatchObject({ requests: 6, withUsage: 6, completion: 12, prefix: { new: 1, hit: 5, spill: 0 } });
  }, 60_000);

  it('a burst by the alias past 2 running + 1 waiting: the rest get 429 with Retry-After, the admitted ones are answered', async () => {
    const burst = await Promise.all(
      Array.from({ length: 7 }, async (_, i) => {
        await new Promise((r) => setTimeout(r, i * 40));
        const r = await post({ prompt: `burst ${i} ${'z'.repeat(i * 50)}`, max_tokens: 400 });
        return { status: r.status, retryAfter: r.headers.get('retry-after'), body: await r.text() };
      }),
    );
    const ok = burst.filter((b) => b.status === 200);
    const limited = burst.filter((b) => b.status === 429);
    expect(ok.length + limited.length, JSON.stringify(burst.map((b) => [b.status, b.body.slice(0, 120)]))).toBe(7);
    expect(ok.length).toBe(3);
    for (const l of limited) {
      expect(l.retryAfter).toBe('2');
      expect(JSON.parse(l.body)).toMatchObject({ error: { type: 'RateLimitError', code: 429 } });
    }
  }, 120_000);
});
