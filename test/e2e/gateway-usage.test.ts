// Token usage per model and prefix-routing hits, counted at the gateway (HAProxy's Lua filter,
// src/gateway/usage.ts), with the real HAProxy and the simulator (its answers carry usage as vLLM's
// do: a JSON answer always, a stream only when the client asks with stream_options.include_usage,
// src/sim/server.ts). Two models, one of them on two replicas balanced by prefix. The counts the
// gateway shows must equal what the clients were told, per model; a stream that carried no usage is
// counted apart (its chunks, an estimate), never as tokens; a reload (a profile served while the
// gateway runs) loses nothing; `gateway down` writes usage.jsonl, which `cost` and `report` read.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, fetch as oneFetch } from 'undici';
import { simServe } from '../../scripts/lib/serve-args.mjs';
import { cli, isolated, freePortRange, waitFor } from '../helpers.js';

// Every request goes over one connection: HAProxy reads the next request of a connection only once
// the stream before it has ended. Over a pool the next could reach HAProxy while the last was still
// counted on its replica, and the bounded load rightly spills a repeat of the prefix to the other one
// (test/e2e/prefix-routing.test.ts saw it on a loaded host), which `spill 0` below would call a bug.
const one = new Agent({ connections: 1 });

const HAPROXY = '/usr/sbin/haproxy';
const have = existsSync(HAPROXY);
if (!have) console.warn(`gateway usage e2e skipped: ${HAPROXY} is not installed (apt-get install haproxy)`);

const t = isolated({
  prefix: 'sparkctl-usage-',
  per: 'suite',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_COLD_MS: '20' },
});
let base: number;
const gw = () => `http://127.0.0.1:${base}`;

const serve = (profile: string, port: number, replicas: number, gpu: number) =>
  cli(['serve', profile, ...simServe({ port, replicas, tensor: 1, gpu })], { env: t.env(), timeout: 90_000 });

interface Told {
  prompt: number;
  completion: number;
}

/** A request through the gateway; what usage the client itself was told (or undefined), and a stream's data chunks. */
async function ask(
  model: string,
  o: { path?: string; stream?: boolean; includeUsage?: boolean; prompt?: string; maxTokens?: number } = {},
) {
  const path = o.path ?? '/v1/completions';
  const body: Record<string, unknown> =
    path === '/v1/chat/completions'
      ? { model, messages: [{ role: 'user', content: o.prompt ?? 'hello there' }] }
      : path === '/v1/messages'
        ? { model, messages: [{ role: 'user', content: o.prompt ?? 'hello there' }] }
        : { model, prompt: o.prompt ?? 'hello there' };
  Object.assign(body, { max_tokens: o.maxTokens ?? 5, ignore_eos: true, stream: Boolean(o.stream) });
  if (o.includeUsage) body.stream_options = { include_usage: true };
  const r = await oneFetch(`${gw()}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
    dispatcher: one,
  });
  const text = await r.text();
  expect(r.status, text).toBe(200);
  let told: Told | undefined;
  let chunks = 0;
  if (o.stream) {
    for (const line of text.split('\n')) {
      if (!line.startsWith('data:') || line.includes('[DONE]')) continue;
      chunks++;
      const j = JSON.parse(line.slice(5));
      if (j.message?.usage) j.usage = j.message.usage;
      if (j.usage?.prompt_tokens !== undefined)
        told = { prompt: j.usage.prompt_tokens, completion: j.usage.completion_tokens };
      if (j.usage?.input_tokens !== undefined)
        told = { prompt: j.usage.input_tokens, completion: told?.completion ?? 0 };
      if (j.usage?.output_tokens !== undefined && told) told.completion = j.usage.output_tokens;
    }
  } else {
    const j = JSON.parse(text);
    told =
      j.usage.prompt_tokens !== undefined
        ? { prompt: j.usage.prompt_tokens, completion: j.usage.completion_tokens }
        : { prompt: j.usage.input_tokens, completion: j.usage.output_tokens };
  }
  return { told, chunks };
}

interface Counts {
  requests: number;
  withUsage: number;
  prompt: number;
  completion: number;
  streamsWithoutUsage: number;
  chunksWithoutUsage: number;
  otherWithoutUsage: number;
  prefix: { hit: number; spill: number; new: number };
}
const status = async () => {
  const r = await cli(['gateway', 'status', '--json'], { env: t.env() });
  expect(r.exitCode, r.stderr).toBe(0);
  return JSON.parse(String(r.stdout)) as {
    usageRecorded: boolean;
    unattributed?: number;
    models: Array<{ name: string; profile: string; usage?: Counts }>;
  };
};
/** the model's counts once the gateway has seen `n` answers (the keeper's record follows each second) */
async function countsOnce(name: string, n: number): Promise<Counts> {
  const until = Date.now() + 15_000;
  let last: Counts | undefined;
  while (Date.now() < until) {
    last = (await status()).models.find((m) => m.name === name)?.usage;
    if (last && last.requests >= n) return last;
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error(`${name}: ${JSON.stringify(last)} after 15 s, wanted ${n} requests`);
}

describe.skipIf(!have)('gateway: token usage per model and prefix hits, from the answers', () => {
  beforeAll(async () => {
    base = await freePortRange(8);
    const a = await serve('qwen-dev', base + 3, 2, 0);
    expect(a.exitCode, a.stderr + a.stdout).toBe(0);
    const up = await cli(['gateway', 'up', '--port', String(base), '--json'], { env: t.env() });
    expect(up.exitCode, up.stderr + up.stdout).toBe(0);
    // the keeper's first record (the one gateway up waits for) already says usage is counted: a status
    // read at once must not say "not counted" (it did on a loaded host when only the keeper's 1 s
    // refresh added the usage to the record)
    expect(JSON.parse(String(up.stdout)).usage, up.stdout).toEqual({ models: {}, unattributed: 0 });
  }, 120_000);
  afterAll(async () => {
    await cli(['gateway', 'down'], { env: t.env() });
    await cli(['stop', '--all'], { env: t.env(), timeout: 60_000 });
    await one.close();
  }, 90_000);

  it('counts per model equal what the clients were told; a stream without usage is counted apart by its chunks; prefix repeats are hits', async () => {
    const st0 = await status();
    expect(st0.usageRecorded).toBe(true);
    const model = st0.models[0]!.name;
    const told: Told[] = [];
    const add = (x: { told?: Told }) => x.told && told.push(x.told);
    add(await ask(model));
    add(await ask(model, { path: '/v1/chat/completions', maxTokens: 7 }));
    add(await ask(model, { stream: true, includeUsage: true, maxTokens: 6 }));
    add(await ask(model, { path: '/v1/chat/completions', stream: true, includeUsage: true, maxTokens: 3 }));
    add(await ask(model, { path: '/v1/messages', maxTokens: 4 }));
    add(await ask(model, { path: '/v1/messages', stream: true, maxTokens: 4 }));
    // a stream the client asked no usage for: the gateway must not invent tokens for it
    const bare = await ask(model, { stream: true, maxTokens: 9 });
    expect(bare.told).toBeUndefined();
    // one long shared prefix, four times in a row (one at a time: the bounded load never spills), then two others
    const doc = `${'The same long document. '.repeat(80)}Question`;
    for (let i = 0; i < 4; i++) add(await ask(model, { prompt: `${doc} ${i}` }));
    add(await ask(model, { prompt: `another document ${'x'.repeat(2000)}` }));
    add(await ask(model, { prompt: `a third document ${'y'.repeat(2000)}` }));
    const n = told.length + 1;
    const c = await countsOnce(model, n);
    expect(c.requests).toBe(n);
    expect(c.withUsage).toBe(told.length);
    expect(c.prompt).toBe(told.reduce((s, x) => s + x.prompt, 0));
    expect(c.completion).toBe(told.reduce((s, x) => s + x.completion, 0));
    expect(c.streamsWithoutUsage).toBe(1);
    expect(c.chunksWithoutUsage).toBe(bare.chunks);
    expect(c.otherWithoutUsage).toBe(0);
    // every answer came from one of the two replicas; the repeats of the shared prefix all hit
    expect(c.prefix.hit + c.prefix.spill + c.prefix.new).toBe(n);
    expect(c.prefix.hit).toBeGreaterThanOrEqual(3);
    expect(c.prefix.spill).toBe(0);

    // a stream whose client leaves after three chunks (an editor's Esc): HAProxy never reaches the answer's
    // end (no http_end), and it is still one request, a stream without usage, with the chunks that passed
    const r = await fetch(`${gw()}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, prompt: 'left mid-stream', max_tokens: 2000, ignore_eos: true, stream: true }),
      signal: AbortSignal.timeout(60_000),
    });
    const reader = (r.body as ReadableStream<Uint8Array>).getReader();
    let got = '';
    while ((got.match(/^data: \{/gm) ?? []).length < 3) {
      const { done, value } = await reader.read();
      if (done) break;
      got += new TextDecoder().decode(value);
    }
    await reader.cancel();
    expect(got, 'the client left before the end').not.toContain('[DONE]');
    const cut = await countsOnce(model, n + 1);
    expect({ requests: cut.requests, withUsage: cut.withUsage, streamsWithoutUsage: cut.streamsWithoutUsage }).toEqual({
      requests: n + 1,
      withUsage: told.length,
      streamsWithoutUsage: 2,
    });
    expect(cut.chunksWithoutUsage).toBeGreaterThanOrEqual(bare.chunks + 3);
    expect(cut.prompt).toBe(c.prompt);

    // HAProxy's own answer (an unknown model's 404) passes no filter: the rule's own line counts it, for no model
    const u0 = (await status()).unattributed;
    expect(u0).toBeTypeOf('number');
    const nf = await fetch(`${gw()}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'no-such-model', prompt: 'x' }),
      signal: AbortSignal.timeout(10_000),
    });
    expect(nf.status).toBe(404);
    await nf.text();
    expect(await waitFor(async () => (await status()).unattributed === u0! + 1, 15_000), 'the 404 is counted').toBe(
      true,
    );
    expect((await countsOnce(model, n + 1)).requests).toBe(n + 1);
  }, 120_000);

  it('a reload (a second model served while the gateway runs) loses no count; each model is counted apart; gateway down writes usage.jsonl; cost and report show it per model', async () => {
    const before = (await status()).models[0]!;
    const b = await serve('qwen3.5-9b', base + 6, 1, 4);
    expect(b.exitCode, b.stderr + b.stdout).toBe(0);
    // the gateway follows the registry: the second model appears after a reload
    let second: string | undefined;
    const until = Date.now() + 20_000;
    while (!second && Date.now() < until) {
      second = (await status()).models.find((m) => m.profile === 'qwen3.5-9b')?.name;
      if (!second) await new Promise((r) => setTimeout(r, 300));
    }
    expect(second).toBeDefined();
    const x = await ask(before.name, { maxTokens: 2 });
    const y = await ask(second!, { maxTokens: 3 });
    const c1 = await countsOnce(before.name, before.usage!.requests + 1);
    expect(c1.prompt).toBe(before.usage!.prompt + x.told!.prompt);
    expect(c1.completion).toBe(before.usage!.completion + 2);
    const c2 = await countsOnce(second!, 1);
    expect({ requests: c2.requests, prompt: c2.prompt, completion: c2.completion }).toEqual({
      requests: 1,
      prompt: y.told!.prompt,
      completion: 3,
    });

    const down = await cli(['gateway', 'down'], { env: t.env() });
    expect(down.exitCode, down.stderr).toBe(0);
    const file = join(t.state, 'gateway', 'usage.jsonl');
    const rows = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Counts & { profile: string; model: string });
    const sum = (p: string, k: 'prompt' | 'completion' | 'requests') =>
      rows.filter((r) => r.profile === p).reduce((s, r) => s + r[k], 0);
    expect(sum('qwen-dev', 'prompt')).toBe(c1.prompt);
    expect(sum('qwen-dev', 'completion')).toBe(c1.completion);
    expect(sum('qwen-dev', 'requests')).toBe(c1.requests);
    expect(sum('qwen3.5-9b', 'completion')).toBe(3);

    // cost and report read the probe's history (two probes) and add the gateway's part
    for (let i = 0; i < 2; i++) expect((await cli(['probe', 'qwen-dev'], { env: t.env() })).exitCode).toBe(0);
    for (const verb of ['report', 'cost']) {
      const r = await cli([verb, 'qwen-dev', '--json', '--gpu-hour-price', '2'], { env: t.env() });
      const j = JSON.parse(String(r.stdout));
      // the stream without usage is the first case's; this case checks that cost and report carry what the gateway
      // counted
      expect(j.gateway, `${verb}: ${r.stdout}${r.stderr}`).toMatchObject({
        requests: c1.requests,
        prompt: c1.prompt,
        completion: c1.completion,
        streamsWithoutUsage: c1.streamsWithoutUsage,
      });
    }
    expect(existsSync(file)).toBe(true);
  }, 120_000);
});
