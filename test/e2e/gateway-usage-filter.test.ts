// The usage filter (src/gateway/usage.ts) in the real HAProxy, on the config the gateway writes
// (renderFiles with usage on), against real vLLM answers: the bytes of the 0.27.2 CPU build's
// captures (test/fixtures/captures/vllm-0.27.2, SOURCE.md there) replayed by a plain server, cut
// into small pieces so that a usage object falls across two of them. Each answer must give one
// filter line with the usage the answer carried, a stream without usage (the same capture with its
// usage chunk taken out, as vLLM sends it when the client does not ask) none, but its chunks; and the
// answer must reach the client byte for byte (the filter reads, never changes or holds).
import { describe, it, expect } from 'vitest';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { GatewaySettings, planGateway, GATEWAY_KEY_VAR } from '../../src/gateway/plan.js';
import { renderFiles } from '../../src/gateway/keeper.js';
import { USAGE_LUA, parseUsageLine, type UsageLine } from '../../src/gateway/usage.js';
import { freePort, waitFor, portOpen } from '../helpers.js';
import { endedAfterAll } from '../gateway-harness.js';
import { tempDir } from '../temp-dirs.js';

const HAPROXY = '/usr/sbin/haproxy';
const have = existsSync(HAPROXY);
if (!have) console.warn(`gateway usage filter e2e skipped: ${HAPROXY} is not installed (apt-get install haproxy)`);

const CAP = join(__dirname, '..', 'fixtures', 'captures', 'vllm-0.27.2');
const cap = (f: string) => readFileSync(join(CAP, f), 'utf8');
const chatStream = cap('chat-stream.sse');
// as vLLM streams when the client did not ask for usage: no `choices: []` usage chunk. Its 3 events
// (the role, then two with text) for 3 completion tokens: the chunk count is an estimate, said so
const chatStreamBare = chatStream
  .split('\n\n')
  .filter((e) => !e.includes('"choices":[],"usage"'))
  .join('\n\n');

const { dirs, procs, servers } = endedAfterAll();

/**
 * The gateway's HAProxy on the files renderFiles writes with the usage filter on (its lines on fd 3,
 * parsed into `lines`), in a fresh state folder; resolved once its port answers and its first health
 * checks have run.
 */
async function gatewayHaproxy(
  settings: object,
  replicas: Parameters<typeof planGateway>[1],
  env: Record<string, string> = {},
) {
  const gwPort = await freePort();
  const state = tempDir('sparkctl-usage-filter-');
  dirs.push(state);
  const plan = planGateway(
    GatewaySettings.parse({ port: gwPort, statsPort: await freePort(), checkIntervalMs: 500, ...settings }),
    replicas,
    state,
  );
  mkdirSync(plan.dir, { recursive: true });
  const lua = join(plan.dir, 'usage.lua');
  writeFileSync(lua, USAGE_LUA);
  const f = renderFiles(plan, { lua, logFd: 3 });
  writeFileSync(plan.files.config, f.config);
  writeFileSync(plan.files.models, f.models);
  writeFileSync(plan.files.map, f.map);
  writeFileSync(plan.files.aliasMap, f.aliases);
  writeFileSync(plan.files.unknown, f.unknown);
  const h = spawn(HAPROXY, ['-q', '-db', '-f', plan.files.config], {
    stdio: ['ignore', 'ignore', 'inherit', 'pipe'],
    env: { ...process.env, ...env },
  });
  procs.push(h);
  const lines: UsageLine[] = [];
  createInterface({ input: h.stdio[3] as NodeJS.ReadableStream }).on('line', (l) => {
    const u = parseUsageLine(l);
    if (u) lines.push(u);
  });
  expect(await waitFor(() => portOpen(gwPort), 10_000)).toBe(true);
  await new Promise((r) => setTimeout(r, 1200));
  return { plan, gwPort, lines };
}

const cases: Array<{ name: string; body: string; sse: boolean; want: Partial<UsageLine> }> = [
  {
    name: 'completion.json',
    body: cap('completion.json'),
    sse: false,
    want: { prompt: 141, completion: 3, stream: false },
  },
  { name: 'chat.json', body: cap('chat.json'), sse: false, want: { prompt: 14, completion: 3, stream: false } },
  {
    name: 'chat-stream.sse (include_usage)',
    body: chatStream,
    sse: true,
    want: { prompt: 14, completion: 3, stream: true },
  },
  {
    name: 'chat-stream.sse without its usage chunk',
    body: chatStreamBare,
    sse: true,
    want: { prompt: undefined, completion: undefined, stream: true, chunks: 3 },
  },
  { name: 'messages.json', body: cap('messages.json'), sse: false, want: { prompt: 14, completion: 2, stream: false } },
  {
    name: 'messages-stream.sse',
    body: cap('messages-stream.sse'),
    sse: true,
    want: { prompt: 14, completion: 2, stream: true },
  },
  {
    name: 'a 500 (no usage)',
    body: cap('messages-error-500.json'),
    sse: false,
    want: { prompt: undefined, stream: false, status: 500 },
  },
];

describe.skipIf(!have)('the usage filter in the real HAProxy, on real vLLM answers', () => {
  it('each answer: one line with the usage it carried (none where it carried none), the answer unchanged', async () => {
    let current = cases[0]!;
    const port = await freePort();
    const srv = createServer((req, res) => {
      if (req.url === '/health') return res.end('ok');
      req.resume();
      req.on('end', async () => {
        const c = current;
        res.writeHead(c.name.includes('500') ? 500 : 200, {
          'content-type': c.sse ? 'text/event-stream' : 'application/json',
        });
        // 37-byte pieces, each written on its own: a usage object is cut between two of them
        const b = Buffer.from(c.body);
        for (let i = 0; i < b.length; i += 37) {
          res.write(b.subarray(i, i + 37));
          await new Promise((r) => setImmediate(r));
        }
        res.end();
      });
    });
    servers.push(srv);
    await new Promise<void>((r) => srv.listen(port, '127.0.0.1', () => r()));
    const { plan, gwPort, lines } = await gatewayHaproxy({}, [
      { name: 'a-0', profile: 'a', servedName: 'tiny/qwen3-code', host: '127.0.0.1', port, argv: [] },
    ]);
    for (const c of cases) {
      current = c;
      const n = lines.length;
      const r = await fetch(`http://127.0.0.1:${gwPort}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny/qwen3-code', messages: [{ role: 'user', content: 'hi' }] }),
        signal: AbortSignal.timeout(10_000),
      });
      expect(await r.text(), c.name).toBe(c.body);
      expect(await waitFor(async () => lines.length > n, 5000), `${c.name}: no filter line`).toBe(true);
      const u = lines[n]!;
      expect(u, c.name).toMatchObject({
        backend: plan.models[0]!.backend,
        server: 'a-0',
        status: c.want.status ?? 200,
        ...c.want,
      });
    }
    expect(lines.length).toBe(cases.length);
  }, 60_000);
});

// HAProxy's own answers (an unknown model's 404, the 429 of a full queue, a missing key's 401, a
// request naming no model's 400) pass no data filter: before they were in no count, so a gateway that
// refused half its requests showed only the half it passed. Each now gives one line (server "-", no
// usage); the 429's carries its model's backend, so `gateway status`, `cost` and `report` count it.
describe.skipIf(!have)("HAProxy's own answers in the real HAProxy", () => {
  it('a 401, a 404 of an unknown model, a 400 naming no model and a 429 each give one line, none from the server', async () => {
    let served = 0;
    const ports = [await freePort(), await freePort()];
    for (const port of ports) {
      const srv = createServer((req, res) => {
        if (req.url === '/health') return res.end('ok');
        served++;
        req.resume();
        req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(cap('completion.json')));
      });
      servers.push(srv);
      await new Promise<void>((r) => srv.listen(port, '127.0.0.1', () => r()));
    }
    const KEY = 'k-own-answers';
    // model b takes no waiting request: a queue of 0, so `queue(b) ge 0` refuses every request with 429
    const { plan, gwPort, lines } = await gatewayHaproxy(
      { apiKeyEnv: 'GW_KEY', models: { b: { queue: 0 } } },
      [
        { name: 'a-0', profile: 'a', servedName: 'model-a', host: '127.0.0.1', port: ports[0]!, argv: [] },
        { name: 'b-0', profile: 'b', servedName: 'model-b', host: '127.0.0.1', port: ports[1]!, argv: [] },
      ],
      { [GATEWAY_KEY_VAR]: KEY },
    );
    const post = (body: object, key: string | null = KEY) =>
      fetch(`http://127.0.0.1:${gwPort}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      });
    const bA = plan.models.find((m) => m.name === 'model-a')!.backend;
    const bB = plan.models.find((m) => m.name === 'model-b')!.backend;
    const steps: Array<{ name: string; send: () => Promise<Response>; status: number; line: Partial<UsageLine> }> = [
      {
        name: 'no key: 401',
        send: () => post({ model: 'model-a', prompt: 'x' }, null),
        status: 401,
        line: { backend: '-', server: '-', status: 401 },
      },
      {
        name: 'unknown model: 404',
        send: () => post({ model: 'nope', prompt: 'x' }),
        status: 404,
        line: { backend: '-', server: '-', status: 404 },
      },
      {
        name: 'no model named: 400',
        send: () => post({ prompt: 'x' }),
        status: 400,
        line: { backend: '-', server: '-', status: 400 },
      },
      {
        name: "model b's queue is full: 429",
        send: () => post({ model: 'model-b', prompt: 'x' }),
        status: 429,
        line: { backend: bB, server: '-', status: 429 },
      },
      {
        name: 'model a answers: 200',
        send: () => post({ model: 'model-a', prompt: 'x' }),
        status: 200,
        line: { backend: bA, server: 'a-0', status: 200, prompt: 141 },
      },
    ];
    for (const st of steps) {
      const n = lines.length;
      const r = await st.send();
      await r.text();
      expect(r.status, st.name).toBe(st.status);
      expect(await waitFor(async () => lines.length > n, 5000), `${st.name}: no line`).toBe(true);
      expect(lines[n], st.name).toMatchObject({
        stream: false,
        ...st.line,
        ...(st.status === 200 ? {} : { route: '-', prompt: undefined, completion: undefined }),
      });
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(lines.length, JSON.stringify(lines)).toBe(steps.length);
    expect(served).toBe(1);
  }, 60_000);
});
