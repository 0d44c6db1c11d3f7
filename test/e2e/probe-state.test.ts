// The probe state is shared by every probe that runs (cron overlap, one cron line per target):
// real concurrent processes keep every entry and send every alert once; an alert the webhook
// refuses is kept, retried by the next run, and arrives exactly once; the failed delivery shows
// in the exit code and the textfile.
import { describe, it, expect, afterAll } from 'vitest';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, rmrf } from '../helpers.js';

const servers: Server[] = [];
const dirs: string[] = [];
afterAll(() => {
  for (const s of servers) s.close();
  for (const d of dirs) rmrf(d);
});

const json = (res: ServerResponse, status: number, v: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(v));
};

/** A vLLM stand-in serving model "m"; `health.ok = false` makes its inference fail (unhealthy). */
async function fakeVllm(): Promise<{ url: string; health: { ok: boolean } }> {
  const health = { ok: true };
  const s = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0];
      if (path === '/health') return json(res, 200, {});
      if (path === '/v1/models')
        return json(res, 200, { object: 'list', data: [{ id: 'm', object: 'model', max_model_len: 4096 }] });
      if (path === '/v1/completions')
        return health.ok
          ? json(res, 200, {
              choices: [{ text: 'x', index: 0, finish_reason: 'length' }],
              usage: { prompt_tokens: 1, completion_tokens: 1 },
            })
          : json(res, 500, { error: 'boom' });
      if (path === '/metrics') return res.end('');
      json(res, 404, {});
    });
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const a = s.address();
  return { url: `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`, health };
}

/** A webhook that answers `status.code` and records every alert it accepted. */
async function webhook(): Promise<{ url: string; status: { code: number }; accepted: any[]; attempts: number[] }> {
  const status = { code: 200 };
  const accepted: any[] = [];
  const attempts: number[] = [];
  const s = createServer((req, res) => {
    let b = '';
    req.on('data', (d) => (b += d));
    req.on('end', () => {
      const body = JSON.parse(b);
      attempts.push(body.changes.length);
      if (status.code < 300) accepted.push(...body.changes);
      res.statusCode = status.code;
      res.end();
    });
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const a = s.address();
  return { url: `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}/hook`, status, accepted, attempts };
}

const stateOf = (d: string) => JSON.parse(readFileSync(join(d, 'probe-state.json'), 'utf8'));
const gauge = (file: string, name: string) =>
  Number(readFileSync(file, 'utf8').match(new RegExp(`^${name} (\\S+)$`, 'm'))?.[1]);

describe('probe state under concurrency and failure', { timeout: 240_000 }, () => {
  it('10 probes at once, one state file: every entry kept, every alert sent exactly once', async () => {
    const d = tempDir('sparkctl-pstate-');
    dirs.push(d);
    const targets = await Promise.all(Array.from({ length: 10 }, () => fakeVllm()));
    for (const t of targets) t.health.ok = false; // each first seen unhealthy: one alert each
    const hook = await webhook();
    const runs = await Promise.all(
      targets.map((t) =>
        cli(['probe', '--url', t.url, '--step-timeout', '5s', '--alert-webhook', hook.url, '--no-history'], {
          env: { SPARKCTL_STATE_DIR: d },
          timeout: 120_000,
        }),
      ),
    );
    for (const r of runs) expect(r.exitCode, r.stderr).toBe(1);
    const st = stateOf(d);
    expect(Object.keys(st.targets).sort()).toEqual(targets.map((t) => t.url).sort());
    expect(st.pending).toEqual([]);
    expect(hook.accepted.map((a) => a.url).sort()).toEqual(targets.map((t) => t.url).sort());
    expect(new Set(hook.accepted.map((a) => a.id)).size).toBe(10);
    expect(readdirSync(d).filter((f) => f.includes('lock'))).toEqual([]);
  });

  it('a webhook that fails, then works: the alerts arrive once, in order; the failure is exit 1 and in the textfile', async () => {
    const d = tempDir('sparkctl-pstate-');
    dirs.push(d);
    const t = await fakeVllm();
    const hook = await webhook();
    const prom = join(d, 'sparkctl.prom');
    const probe = () =>
      cli(
        [
          'probe',
          '--url',
          t.url,
          '--step-timeout',
          '5s',
          '--alert-webhook',
          hook.url,
          '--prometheus',
          prom,
          '--no-history',
        ],
        { env: { SPARKCTL_STATE_DIR: d }, timeout: 60_000 },
      );

    expect((await probe()).exitCode).toBe(0); // first sight, healthy: nothing to say
    expect(hook.attempts).toEqual([]);

    hook.status.code = 500;
    t.health.ok = false;
    const down = await probe();
    expect(down.exitCode).toBe(1);
    expect(down.stderr).toMatch(/alert webhook: HTTP 500; 1 alert\(s\) not delivered, 1 kept for the next run/);
    expect(gauge(prom, 'sparkctl_probe_alert_delivery_ok')).toBe(0);
    expect(gauge(prom, 'sparkctl_probe_alerts_pending')).toBe(1);

    t.health.ok = true;
    const backUp = await probe(); // healthy, but two alerts still undelivered: exit 1 all the same
    expect(backUp.exitCode, backUp.stdout).toBe(1);
    expect(backUp.stdout).toMatch(/healthy/);
    expect(gauge(prom, 'sparkctl_probe_alerts_pending')).toBe(2);
    expect(hook.accepted).toEqual([]);

    hook.status.code = 204;
    const ok = await probe();
    expect(ok.exitCode, ok.stderr).toBe(0);
    expect(gauge(prom, 'sparkctl_probe_alert_delivery_ok')).toBe(1);
    expect(gauge(prom, 'sparkctl_probe_alerts_pending')).toBe(0);
    expect(hook.accepted.map((a) => `${a.from}->${a.to}`)).toEqual(['healthy->unhealthy', 'unhealthy->healthy']);

    expect((await probe()).exitCode).toBe(0);
    expect(hook.accepted).toHaveLength(2); // never again
    expect(hook.attempts).toEqual([1, 2, 2]);
  });
});
