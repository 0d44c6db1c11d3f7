// Admission through the real HAProxy (2.6), on the config the gateway writes (renderFiles): a model
// with 1 server taking 2 requests at once and a queue of 3, a burst of 12 at once: 2 run, 3 wait
// and are answered, the rest get a 429 with Retry-After and an OpenAI-shaped body at once, and
// nothing hangs. The server is a plain Node one that holds each answer (admission is HAProxy's
// doing; a simulator behind it would decide nothing here).
import { describe, it, expect } from 'vitest';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { GatewaySettings, planGateway } from '../../src/gateway/plan.js';
import { renderFiles } from '../../src/gateway/keeper.js';
import { freePort, waitFor, portOpen } from '../helpers.js';
import { endedAfterAll } from '../gateway-harness.js';
import { tempDir } from '../temp-dirs.js';

const HAPROXY = '/usr/sbin/haproxy';
const have = existsSync(HAPROXY);
if (!have) console.warn(`gateway admission e2e skipped: ${HAPROXY} is not installed (apt-get install haproxy)`);

const { dirs, procs, servers } = endedAfterAll();

describe.skipIf(!have)('admission through the real HAProxy', () => {
  it('a burst past concurrency + queue: the excess gets 429 + Retry-After at once, the admitted ones are all answered, the server never holds more than its limit', async () => {
    let active = 0;
    let peak = 0;
    const port = await freePort();
    const srv = createServer((req, res) => {
      if (req.url === '/health') return res.end('ok');
      active++;
      peak = Math.max(peak, active);
      req.resume();
      req.on('end', () =>
        setTimeout(() => {
          active--;
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('{"choices":[{"text":"ok"}]}');
        }, 2000),
      );
    });
    servers.push(srv);
    await new Promise<void>((r) => srv.listen(port, '127.0.0.1', () => r()));
    const gwPort = await freePort();
    const state = tempDir('sparkctl-admission-');
    dirs.push(state);
    const s = GatewaySettings.parse({
      port: gwPort,
      statsPort: await freePort(),
      wakerPort: await freePort(),
      checkIntervalMs: 500,
      retryAfterSeconds: 3,
      models: { a: { concurrency: 2, queue: 3 } },
    });
    const plan = planGateway(
      s,
      [{ name: 'a-0', profile: 'a', servedName: 'model-a', host: '127.0.0.1', port, argv: [] }],
      state,
    );
    mkdirSync(plan.dir, { recursive: true });
    const f = renderFiles(plan);
    writeFileSync(plan.files.config, f.config);
    writeFileSync(plan.files.models, f.models);
    writeFileSync(plan.files.map, f.map);
    writeFileSync(plan.files.aliasMap, f.aliases);
    writeFileSync(plan.files.unknown, f.unknown);
    const h = spawn(HAPROXY, ['-db', '-f', plan.files.config], { stdio: 'ignore' });
    procs.push(h);
    expect(await waitFor(() => portOpen(gwPort), 10_000)).toBe(true);
    // the server UP by its checks before the burst
    await new Promise((r) => setTimeout(r, 1500));

    const burst = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        // one at a time into HAProxy, so that the queue has filled when the later ones arrive
        await new Promise((r) => setTimeout(r, i * 30));
        const sent = Date.now();
        const r = await fetch(`http://127.0.0.1:${gwPort}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'model-a', prompt: `p${i}` }),
          signal: AbortSignal.timeout(20_000),
        });
        return {
          status: r.status,
          retryAfter: r.headers.get('retry-after'),
          body: await r.text(),
          ms: Date.now() - sent,
        };
      }),
    );
    const ok = burst.filter((b) => b.status === 200);
    const limited = burst.filter((b) => b.status === 429);
    expect(ok.length + limited.length, JSON.stringify(burst)).toBe(12);
    // 2 running + 3 waiting are admitted; the rest are refused
    expect(ok.length).toBe(5);
    expect(limited.length).toBe(7);
    for (const l of limited) {
      expect(l.retryAfter).toBe('3');
      expect(JSON.parse(l.body)).toMatchObject({ error: { type: 'RateLimitError', code: 429 } });
      // refused without waiting for a slot: a slot frees only when an answer held 2 s ends
      expect(l.ms).toBeLessThan(1500);
    }
    expect(peak).toBe(2);
  }, 60_000);
});
