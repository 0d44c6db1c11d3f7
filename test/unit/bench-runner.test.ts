// One bench request against a server that answers in every wrong way a real one (or a hostile
// one) can: each case is a real HTTP server on 127.0.0.1 (a free port), and the request must end
// classified, with its deadline, never with a throw or a hang.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { makePool, sendOne, type RunConfig } from '../../src/bench/runner.js';
import { freePort } from '../helpers.js';

type Behaviour = (res: ServerResponse) => void;
const sse = (res: ServerResponse, ...events: string[]) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const e of events) res.write(`data: ${e}\n\n`);
  res.end();
};
const chunk = (text: string, usage?: object) =>
  JSON.stringify({ choices: [{ index: 0, text }], ...(usage ? { usage } : {}) });

const behaviours: Record<string, Behaviour> = {
  ok: (res) =>
    sse(
      res,
      chunk('a'),
      chunk('b'),
      chunk('c'),
      JSON.stringify({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 3 } }),
      '[DONE]',
    ),
  'not-json': (res) => sse(res, 'oops'),
  'error-mid-stream': (res) => sse(res, chunk('a'), JSON.stringify({ error: { message: 'boom', code: 500 } })),
  'no-token': (res) => sse(res, JSON.stringify({ choices: [] }), '[DONE]'),
  'http-503': (res) => {
    res.writeHead(503, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: 'overloaded, try later' }));
  },
  reset: (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(`data: ${chunk('a')}\n\n`);
    setTimeout(() => res.socket?.destroy(), 20);
  },
  hang: () => {},
  // a message that never ends: 5 MiB without a blank line
  endless: (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: ');
    const piece = 'x'.repeat(64 * 1024);
    let n = 0;
    const more = () => {
      while (n < 80) {
        n++;
        if (!res.write(piece)) return void res.once('drain', more);
      }
      res.end();
    };
    more();
  },
  'json-ok': (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ choices: [{ text: 'hello' }], usage: { prompt_tokens: 5, completion_tokens: 1 } }));
  },
  'json-no-choices': (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ data: 'oops' }));
  },
  'json-huge': (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(`{"choices":[{"text":"${'y'.repeat(9 * 1024 * 1024)}"}]}`);
  },
};

let server: Server;
let url: string;
let behaviour: Behaviour = behaviours.ok!;
beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => behaviour(res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const config = (over: Partial<RunConfig> = {}): RunConfig => ({
  url,
  model: 'm',
  endpoint: 'completions',
  stream: true,
  dataset: [{ prompt: 'hi', promptLen: 1, outputLen: 3 }],
  rate: Infinity,
  burstiness: 1,
  seed: 0,
  warmup: 0,
  requestTimeoutMs: 2000,
  ignoreEos: true,
  continuousUsage: false,
  ...over,
});

async function one(name: string, over: Partial<RunConfig> = {}) {
  behaviour = behaviours[name]!;
  const cfg = config(over);
  const pool = makePool(cfg.url);
  try {
    return await sendOne(pool, cfg, cfg.dataset[0]!, 0);
  } finally {
    await pool.destroy();
  }
}

describe('one request against a hostile or broken server', () => {
  it('a good stream: TTFT, two gaps, tokens from usage, the text', async () => {
    const o = await one('ok');
    expect(o.success).toBe(true);
    expect(o.outputTokens).toBe(3);
    expect(o.promptLen).toBe(7);
    expect(o.itl).toHaveLength(2);
    expect(o.ttft).toBeGreaterThan(0);
    expect(o.latency).toBeGreaterThanOrEqual(o.ttft);
    expect(o.generatedText).toBe('abc');
  });

  it.each([
    ['not-json', 'bad_stream', /not JSON: oops/],
    ['error-mid-stream', 'bad_stream', /error mid-stream.*boom/],
    ['no-token', 'no_token', /Never received a valid chunk/],
    ['http-503', 'http_5xx', /HTTP 503: .*overloaded/],
    ['reset', 'reset', /./],
    ['endless', 'bad_stream', /grew past/],
  ] as const)('%s -> %s', async (name, kind, message) => {
    // The endless stream is judged by its size, not its speed: on a loaded host 5 MiB can take
    // longer than the usual 2 s deadline to arrive, which would make it a timeout instead.
    const o = await one(name, name === 'endless' ? { requestTimeoutMs: 30_000 } : {});
    expect(o.success).toBe(false);
    expect(o.failure).toBe(kind);
    expect(o.error).toMatch(message);
  });

  it('a server that never answers: the request ends at its own deadline', async () => {
    const t = performance.now();
    const o = await one('hang', { requestTimeoutMs: 300 });
    expect(o.failure).toBe('timeout');
    expect(o.error).toMatch(/within the request deadline \(300 ms\)/);
    // without its deadline it would hang to the test's own limit; the margin is for a loaded CI host
    expect(performance.now() - t).toBeLessThan(5000);
  }, 15_000);

  it("the run's abort (a second Ctrl-C) ends a request in flight as aborted, not as a timeout", async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const o = await one('hang', { abort: ac.signal, requestTimeoutMs: 10_000 });
    expect(o.failure).toBe('aborted');
    expect(o.error).toBe('aborted (interrupted)');
  });

  it('nothing listening: refused', async () => {
    const port = await freePort();
    const o = await one('ok', { url: `http://127.0.0.1:${port}` });
    expect(o.failure).toBe('refused');
  });

  it.each([
    ['json-ok', true, undefined],
    ['json-no-choices', false, 'bad_stream'],
    ['json-huge', false, 'bad_stream'],
  ] as const)('not streamed, %s', async (name, success, kind) => {
    const o = await one(name, { stream: false });
    expect(o.success).toBe(success);
    expect(o.failure).toBe(kind);
    if (success) {
      expect(o.outputTokens).toBe(1);
      expect(o.ttft).toBe(o.latency);
    }
  });
});

describe('the warm-up', () => {
  const seen: string[] = [];
  let rec: Server;
  let recUrl: string;
  beforeAll(async () => {
    rec = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        seen.push(JSON.parse(body).prompt);
        sse(res, chunk('a', { completion_tokens: 1 }), '[DONE]');
      });
    });
    await new Promise<void>((r) => rec.listen(0, '127.0.0.1', r));
    recUrl = `http://127.0.0.1:${(rec.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    rec.closeAllConnections();
    await new Promise((r) => rec.close(r));
  });
  const dataset = ['alpha one', 'beta two', 'gamma three'].map((prompt) => ({ prompt, promptLen: 2, outputLen: 1 }));

  it('with a rate it runs at that rate for its minimum time, tagged prompts only, and nothing of it is counted', async () => {
    const { runBench } = await import('../../src/bench/runner.js');
    seen.length = 0;
    const r = await runBench(
      config({ url: recUrl, dataset, rate: 100, warmup: 2, warmupS: 0.4, maxRequests: 6, scrapeIntervalMs: 0 }),
    );
    expect(r.outputs).toHaveLength(6);
    expect(r.outputs.every((o) => o.success)).toBe(true);
    // 0.4 s at 100 req/s: about 40 warm-up requests (Poisson, so loosely), never just the 2 asked
    expect(r.client.warmupRequests).toBeGreaterThan(15);
    expect(r.client.warmupS).toBeGreaterThanOrEqual(0.4);
    const warm = seen.slice(0, r.client.warmupRequests);
    expect(warm.every((p) => /^warm-up \d+\. /.test(p))).toBe(true);
    // the measured prompts are the dataset's own, and no warm-up prompt shares their start
    expect(seen.slice(r.client.warmupRequests!).sort()).toEqual([...dataset, ...dataset].map((d) => d.prompt).sort());
  });

  it('all at once (rate inf, no cap): exactly N requests, as vLLM warms up, whatever the minimum time', async () => {
    const { runBench } = await import('../../src/bench/runner.js');
    seen.length = 0;
    const r = await runBench(
      config({ url: recUrl, dataset, warmup: 4, warmupS: 5, maxRequests: 3, scrapeIntervalMs: 0 }),
    );
    expect(r.client.warmupRequests).toBe(4);
    expect(r.client.warmupS!).toBeLessThan(2);
    expect(seen).toHaveLength(7);
  });

  it('--warmup 0 sends none', async () => {
    const { runBench } = await import('../../src/bench/runner.js');
    seen.length = 0;
    const r = await runBench(
      config({ url: recUrl, dataset, rate: 100, warmup: 0, maxRequests: 3, scrapeIntervalMs: 0 }),
    );
    expect(r.client.warmupRequests).toBe(0);
    expect(seen).toHaveLength(3);
  });
});

describe('closed loop: when each request was meant to leave', () => {
  let slow: Server;
  let slowUrl: string;
  beforeAll(async () => {
    slow = createServer((req, res) => {
      req.resume();
      req.on('end', () => setTimeout(() => sse(res, chunk('a', { completion_tokens: 1 }), '[DONE]'), 40));
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    slow.closeAllConnections();
    await new Promise((r) => slow.close(r));
  });

  it('rate inf with a cap: the moment a slot frees, never the start of the run (send lag and "from schedule" stay near 0)', async () => {
    const { runBench } = await import('../../src/bench/runner.js');
    // 12 requests, 2 at a time, 40 ms each: the last ones leave about 200 ms after the start
    const r = await runBench(config({ url: slowUrl, concurrency: 2, warmup: 0, maxRequests: 12, scrapeIntervalMs: 0 }));
    expect(r.outputs).toHaveLength(12);
    const late = r.outputs.map((o) => (o.startTime - o.scheduledTime) * 1000);
    expect(Math.max(...late)).toBeLessThan(30);
    expect(r.client.sendLagP99Ms).toBeLessThan(30);
    expect(Math.max(...r.outputs.map((o) => o.startTime - r.startedAt))).toBeGreaterThan(0.15);
  });
});
