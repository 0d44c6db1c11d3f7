// The gateway with real HAProxy (2.6) in front of three simulator profiles: routing by the body's
// model, /v1/models, an alias, the OpenAI-shaped 404, per-model keys passing through, a profile
// stopped and served again while another model streams and takes a fixed-rate load (0 failed, by a
// reload, not a restart), the idle timer putting a sleep-mode model to sleep, and its wake on demand
// under 8 concurrent requests (every one answered 200). Sleep mode runs on the simulator (the CPU
// build of vLLM has none); HAProxy and the processes are real.
import { describe, it, expect, beforeAll, afterEach } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { cli, isolated, freePortRange, waitFor, sleep } from '../helpers.js';

const HAPROXY = '/usr/sbin/haproxy';
const have = existsSync(HAPROXY);
if (!have) console.warn(`gateway e2e skipped: ${HAPROXY} is not installed (apt-get install haproxy)`);

const PROD_KEY = 'sk-prod-test-4242';
const GW_KEY = 'sk-gateway-test-7171';
const t = isolated({
  prefix: 'sparkctl-gateway-',
  per: 'suite',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.3', SPARKCTL_SIM_COLD_MS: '20', QWEN_PROD_API_KEY: PROD_KEY, GW_KEY },
});

let base: number;
const gw = () => `http://127.0.0.1:${base}`;
const serve = (profile: string, port: number, extra: string[] = []) =>
  cli(
    [
      'serve',
      profile,
      '--engine',
      'sim',
      '--no-prewarm',
      '--set',
      `server.port=${port}`,
      '--set',
      'server.host=127.0.0.1',
      '--set',
      'parallel.replicas=1',
      ...extra,
    ],
    {
      env: t.env(),
      timeout: 90_000,
    },
  );
const post = (body: object, key?: string, signal?: AbortSignal) =>
  fetch(`${gw()}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(body),
    signal,
  });

async function stream(model: string, maxTokens: number) {
  const res = await post({ model, prompt: 'hello', max_tokens: maxTokens, ignore_eos: true, stream: true });
  expect(res.status).toBe(200);
  const text = await res.text();
  return { done: text.includes('data: [DONE]'), tokens: [...text.matchAll(/^data: \{/gm)].length };
}

/** A stream read as it comes, until it ends or `signal` aborts it: whether it is still running, and its chunks. */
function openStream(model: string, maxTokens: number, signal: AbortSignal) {
  const st = { running: true, chunks: 0, status: 0 };
  const done = post(
    { model, prompt: 'hello', max_tokens: maxTokens, ignore_eos: true, stream: true },
    undefined,
    signal,
  )
    .then(async (res) => {
      st.status = res.status;
      for await (const c of res.body as unknown as AsyncIterable<Uint8Array>)
        st.chunks += (
          Buffer.from(c)
            .toString()
            .match(/^data: \{/gm) ?? []
        ).length;
    })
    .catch(() => undefined)
    .finally(() => (st.running = false));
  return { st, done };
}

/**
 * n requests a second for ms, each checked: how many got a 200 with a completion, and when each was
 * sent. The k-th request is due at start + k/n s and sent as soon as it is due: a timer that wakes
 * late on a loaded host (CI: 47 of 90 sent by a `sleep(100)` loop) sends what fell due, so the rate
 * is the client's schedule, not how often this process got a turn.
 */
async function load(model: string, perSecond: number, ms: number) {
  const all: Promise<number>[] = [];
  const sentAt: number[] = [];
  const start = Date.now();
  const due = Math.floor((ms * perSecond) / 1000);
  while (all.length < due) {
    while (all.length < due && start + (all.length * 1000) / perSecond <= Date.now()) {
      sentAt.push(Date.now());
      all.push(
        post({ model, prompt: 'hi there', max_tokens: 4 })
          .then(async (r) =>
            r.status === 200 && ((await r.json()) as { choices?: unknown[] }).choices?.length === 1 ? 200 : r.status,
          )
          .catch(() => -1),
      );
    }
    await sleep(Math.max(1, start + (all.length * 1000) / perSecond - Date.now()));
  }
  const codes = await Promise.all(all);
  return { ok: codes.filter((c) => c === 200).length, failed: codes.filter((c) => c !== 200), sentAt };
}

describe.skipIf(!have)('gateway: one HAProxy for every profile of the host', () => {
  // a case that failed with the gateway up must not fail the next one ("a gateway already runs")
  afterEach(async () => {
    await cli(['gateway', 'down'], { env: t.env() });
  });

  beforeAll(async () => {
    base = await freePortRange(8);
    const a = await serve('qwen3.5-9b', base + 3, ['--set', 'server.sleepMode=true', '--set', 'parallel.firstGpu=6']);
    expect(a.exitCode, a.stderr).toBe(0);
    const b = await serve('qwen-dev', base + 4);
    expect(b.exitCode, b.stderr).toBe(0);
    const c = await serve('qwen-prod', base + 5);
    expect(c.exitCode, c.stderr).toBe(0);
  }, 240_000);

  it('routes by model, lists every model, answers an unknown one; stop/serve of one profile while another streams: 0 failed; idle sleep; wake on demand under load', async () => {
    const up = await cli(
      ['gateway', 'up', '--port', String(base), '--alias', 'coder=Qwen/Qwen3.5-9B', '--idle-sleep', '4s', '--json'],
      { env: t.env() },
    );
    const upAt = Date.now();
    expect(up.exitCode, up.stderr + up.stdout).toBe(0);
    expect(JSON.parse(up.stdout)).toMatchObject({ kind: 'gateway', state: 'running', port: base });

    // /v1/models: the three served names and the alias
    const models = (await (await fetch(`${gw()}/v1/models`)).json()) as { data: Array<{ id: string; root: string }> };
    expect(models.data.map((m) => m.id).sort()).toEqual(['Qwen/Qwen3.5-9B', 'coder', 'qwen-dev', 'qwen-prod']);
    expect(models.data.find((m) => m.id === 'coder')!.root).toBe('Qwen/Qwen3.5-9B');
    // each model answered by its own server (the sim answers with its served name)
    for (const name of ['Qwen/Qwen3.5-9B', 'qwen-dev']) {
      const r = await post({ model: name, prompt: 'hi', max_tokens: 2 });
      expect(r.status).toBe(200);
      expect(((await r.json()) as { model: string }).model).toBe(name);
    }
    // an alias: the keeper renames it to the served name vLLM answers to
    const al = await post({ model: 'coder', prompt: 'hi', max_tokens: 2 });
    expect(al.status).toBe(200);
    expect(((await al.json()) as { model: string }).model).toBe('Qwen/Qwen3.5-9B');
    // qwen-prod's own key passes through the gateway (no gateway key set)
    expect((await post({ model: 'qwen-prod', prompt: 'hi', max_tokens: 2 })).status).toBe(401);
    expect((await post({ model: 'qwen-prod', prompt: 'hi', max_tokens: 2 }, PROD_KEY)).status).toBe(200);
    // unknown: vLLM's 404, the name JSON-escaped, the served names listed
    const unk = await post({ model: 'no"such', prompt: 'hi' });
    expect(unk.status).toBe(404);
    const ue = ((await unk.json()) as { error: { message: string; type: string; param: string } }).error;
    expect(ue).toMatchObject({ type: 'NotFoundError', param: 'model' });
    expect(ue.message).toBe(
      'The model `no"such` does not exist. Models served here: qwen-dev, qwen-prod, Qwen/Qwen3.5-9B, coder',
    );
    // several models and none named: 400 naming them
    expect((await post({ prompt: 'hi' })).status).toBe(400);
    // no key in any file the gateway wrote
    const dir = join(t.state, 'gateway');
    for (const f of ['haproxy.cfg', 'models.map', 'models.json', 'gateway.json'])
      expect(readFileSync(join(dir, f), 'utf8')).not.toContain(PROD_KEY);
    expect(readFileSync(join(dir, 'haproxy.cfg'), 'utf8')).toContain("req.body,json_query('$.model')");

    // qwen-prod stopped and served again while qwen-dev streams and takes 10 req/s: a reload each time
    const haproxyPid = JSON.parse(readFileSync(join(dir, 'gateway.json'), 'utf8')).haproxyPid;
    const longStream = stream('qwen-dev', 400);
    const during = load('qwen-dev', 10, 9000);
    // and one on the sleep-mode model (idle sleep 4 s), read until the check below: the reload leaves
    // it on the old worker, and the new one counts nothing in flight and no request yet for the model
    const ac9b = new AbortController();
    const s9b = openStream('Qwen/Qwen3.5-9B', 8000, ac9b.signal);
    // an idle keep-alive connection (clients reuse them) across the reload: the old worker keeps it
    // and answers its next request, never closing it under a request that is being sent
    // (idle-close-on-response: the old worker answers the next request on it, then closes it: what a
    // client must never see is a request of its own left without an answer)
    const idle = connect(base, '127.0.0.1');
    let idleText = '';
    let sent = 0;
    let answeredAtClose: number | undefined;
    const answered = () => (idleText.match(/\r\n\r\nok/g) ?? []).length;
    const ask = () => {
      // as an HTTP client does: nothing more on a connection that is closed or was answered "connection: close"
      if (answeredAtClose !== undefined || /\r\nconnection: close\r\n/i.test(idleText)) return;
      sent++;
      idle.write('GET /health HTTP/1.1\r\nHost: gw\r\n\r\n');
    };
    idle.on('data', (d) => (idleText += d.toString()));
    idle.on('close', () => (answeredAtClose = answered()));
    ask();
    expect(await waitFor(() => answered() === 1, 5000, 20)).toBe(true);
    await sleep(500);
    // one request on it every 2 s until the reload: HAProxy's keep-alive timeout (5 s) would close it
    // otherwise when the stop and the reload take longer than that (a loaded host); between two, it is idle
    const keepUp = setInterval(ask, 2000);
    // the keeper up longer than the idle sleep: a model it saw no request for in the new worker would be idle that long
    await sleep(Math.max(0, upAt + 5000 - Date.now()));
    const stopAt = Date.now();
    expect((await cli(['stop', 'qwen-prod'], { env: t.env() })).exitCode).toBe(0);
    const keeperLog = join(t.state, 'logs', 'gateway-keeper.log');
    expect(await waitFor(() => /reloaded .*1 gone/.test(readFileSync(keeperLog, 'utf8')), 10_000, 50)).toBe(true);
    const reloadedAt = Date.now();
    clearInterval(keepUp);
    await sleep(300);
    // still open (no request on it since the reload): one more is answered by the old worker
    if (answeredAtClose === undefined) {
      ask();
      expect(await waitFor(() => answered() === sent, 5000, 20), 'the old worker answers the idle connection').toBe(
        true,
      );
    }
    // closed or not: every request sent on it was answered (CI: a keep-up request after the reload was
    // answered by the old worker, which then closed the connection, as the option makes it)
    expect(await waitFor(() => answered() === sent || answeredAtClose !== undefined, 5000, 20)).toBe(true);
    expect(answeredAtClose ?? answered(), 'a request on the kept connection got no answer').toBe(sent);
    idle.destroy();
    // the keeper has looked (every second) at least twice since the reload: the model streaming on the
    // old worker is awake, out of no idle timer's reach (it was put to sleep here when only the new
    // worker's count was read)
    await sleep(Math.max(0, reloadedAt + 2500 - Date.now()));
    const mid = JSON.parse((await cli(['gateway', 'status', '--json'], { env: t.env() })).stdout);
    expect(
      s9b.st.running,
      `the stream on the sleep-mode model still runs (${s9b.st.chunks} chunks, status ${s9b.st.status})`,
    ).toBe(true);
    const m9b = mid.models.find((m: { name: string }) => m.name === 'Qwen/Qwen3.5-9B');
    expect(m9b).toMatchObject({ asleep: false });
    // and gateway status counts it: the old worker's count, over HAProxy's master CLI
    expect(
      m9b.servers.reduce((n: number, sv: { inFlight: number }) => n + sv.inFlight, 0),
      JSON.stringify(m9b.servers),
    ).toBe(1);
    ac9b.abort();
    await s9b.done;
    expect(
      await waitFor(
        async () => (await post({ model: 'qwen-prod', prompt: 'hi' }, PROD_KEY)).status === 404,
        10_000,
        200,
      ),
    ).toBe(true);
    const again = await serve('qwen-prod', base + 5);
    expect(again.exitCode, again.stderr).toBe(0);
    expect(
      await waitFor(
        async () => (await post({ model: 'qwen-prod', prompt: 'hi', max_tokens: 2 }, PROD_KEY)).status === 200,
        15_000,
        200,
      ),
    ).toBe(true);
    const s = await longStream;
    const l = await during;
    console.log(
      `gateway: qwen-prod stopped and served again while qwen-dev streamed (${s.tokens} chunks) and took ${l.ok} requests at 10 req/s: ${l.failed.length} failed`,
    );
    expect(s.done).toBe(true);
    expect(l.failed).toEqual([]);
    // every request of the schedule sent and answered, some of them while the stop and its reload ran
    expect(l.ok).toBe(90);
    expect(
      l.sentAt.filter((at) => at >= stopAt && at <= reloadedAt).length,
      'requests sent between the stop and the reload',
    ).toBeGreaterThan(0);
    // HAProxy's master is the same process: reloads, not restarts
    expect(JSON.parse(readFileSync(join(dir, 'gateway.json'), 'utf8')).haproxyPid).toBe(haproxyPid);
    expect(readFileSync(join(t.state, 'logs', 'gateway-keeper.log'), 'utf8')).toMatch(/reloaded .*1 gone/);

    // the idle timer: no request to Qwen/Qwen3.5-9B for 4 s puts it to sleep
    const url9b = `http://127.0.0.1:${base + 3}`;
    expect(
      await waitFor(
        async () => ((await (await fetch(`${url9b}/is_sleeping`)).json()) as { is_sleeping: boolean }).is_sleeping,
        15_000,
        250,
      ),
    ).toBe(true);
    const st = JSON.parse((await cli(['gateway', 'status', '--json'], { env: t.env() })).stdout);
    expect(st.models.find((m: { name: string }) => m.name === 'Qwen/Qwen3.5-9B')).toMatchObject({
      asleep: true,
      sleepMode: true,
    });
    // wake on demand under load: 8 at once, by name and by alias, every one answered
    const t0 = Date.now();
    const burst = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        post({ model: i % 2 ? 'coder' : 'Qwen/Qwen3.5-9B', prompt: 'wake up', max_tokens: 3 }),
      ),
    );
    const wakeMs = Date.now() - t0;
    console.log(
      `gateway: 8 requests to a sleeping model (idle sleep 4 s): ${burst.filter((r) => r.status === 200).length} x 200 in ${wakeMs} ms (the wake included)`,
    );
    expect(burst.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(((await (await fetch(`${url9b}/is_sleeping`)).json()) as { is_sleeping: boolean }).is_sleeping).toBe(false);
    expect(
      readFileSync(join(t.state, 'logs', 'gateway-keeper.log'), 'utf8').match(/Qwen\/Qwen3\.5-9B: woken in/g),
    ).toHaveLength(1);

    // client-env points a client at the gateway while it runs
    const ce = await cli(['client-env', 'qwen-dev', '--openai'], { env: t.env() });
    expect(ce.exitCode, ce.stderr).toBe(0);
    expect(ce.stdout).toContain(`OPENAI_BASE_URL=http://127.0.0.1:${base}/v1`);

    const down = await cli(['gateway', 'down'], { env: t.env() });
    expect(down.exitCode, down.stderr).toBe(0);
    expect(down.stdout).toMatch(/gateway: stopped in/);
    expect((await cli(['gateway', 'status'], { env: t.env() })).exitCode).toBe(1);
  }, 180_000);

  it('one key at the gateway: a request without it is 401; with it, each model gets its own key from the gateway; the keys are in no file', async () => {
    const up = await cli(['gateway', 'up', '--port', String(base), '--api-key-env', 'GW_KEY'], { env: t.env() });
    expect(up.exitCode, up.stderr + up.stdout).toBe(0);
    try {
      expect((await post({ model: 'qwen-dev', prompt: 'hi', max_tokens: 2 })).status).toBe(401);
      expect((await post({ model: 'qwen-prod', prompt: 'hi', max_tokens: 2 }, PROD_KEY)).status).toBe(401);
      expect((await post({ model: 'qwen-prod', prompt: 'hi', max_tokens: 2 }, GW_KEY)).status).toBe(200);
      expect((await post({ model: 'qwen-dev', prompt: 'hi', max_tokens: 2 }, GW_KEY)).status).toBe(200);
      const cfg = readFileSync(join(t.state, 'gateway', 'haproxy.cfg'), 'utf8');
      expect(cfg).not.toContain(GW_KEY);
      expect(cfg).not.toContain(PROD_KEY);
      expect(cfg).toContain('${SPARKCTL_GATEWAY_KEY}');
    } finally {
      expect((await cli(['gateway', 'down'], { env: t.env() })).exitCode).toBe(0);
    }
  }, 60_000);
});
