// Issue 42, hostile bytes from peers: what `watch` reads of a server (GET /health, GET /metrics) is
// hostile. Real node:http servers that lie (NaN, infinite and negative counters, a KV share past 1, an
// HTML page, an exposition past the size bound, escape sequences in label values, a slow drip, a
// /health that never ends) are read by the watcher's own reader (readApi, what readServer and
// readCluster use) and judged by its verdict: a lie is never "healthy", each read ends at its
// deadline or its bound, and what the verdict says carries no control character.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readApi } from '../../src/watch/read.js';
import { judge } from '../../src/watch/verdict.js';

const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/;
const E = '\u001b[2J\u001b]0;pwned\u0007\u009b1;1H\u2028\r\u007f';

/** vLLM's families with the values given, as its /metrics writes them (labels as vLLM's). */
const exposition = (v: { running?: string; waiting?: string; kv?: string; gen?: string; label?: string } = {}) =>
  [
    '# HELP vllm:num_requests_running Number of requests in model execution batches.',
    '# TYPE vllm:num_requests_running gauge',
    `vllm:num_requests_running{engine="0",model_name="${v.label ?? 'm'}"} ${v.running ?? '0.0'}`,
    '# TYPE vllm:num_requests_waiting gauge',
    `vllm:num_requests_waiting{engine="0",model_name="m"} ${v.waiting ?? '0.0'}`,
    '# TYPE vllm:kv_cache_usage_perc gauge',
    `vllm:kv_cache_usage_perc{engine="0",model_name="m"} ${v.kv ?? '0.0'}`,
    '# TYPE vllm:generation_tokens_total counter',
    `vllm:generation_tokens_total{engine="0",model_name="m"} ${v.gen ?? '120.0'}`,
    '',
  ].join('\n');

type Answer = (res: ServerResponse) => void;
const text =
  (body: string, status = 200): Answer =>
  (res) =>
    res.writeHead(status, { 'content-type': 'text/plain' }).end(body);
/** a byte every 200 ms, for ever (until the reader hangs up) */
const drip: Answer = (res) => {
  res.writeHead(200, { 'content-type': 'text/plain' });
  const t = setInterval(() => res.write('v'), 200);
  res.on('close', () => clearInterval(t));
};
/** as fast as the socket takes it, for ever */
const flood: Answer = (res) => {
  res.writeHead(200, { 'content-type': 'text/plain' });
  const chunk = `vllm:num_requests_running{model_name="m"} 0\n`.repeat(1000);
  const more = () => {
    while (!res.destroyed && res.write(chunk));
  };
  res.on('drain', more);
  more();
};

/** [name, /health, /metrics, the verdict must be, why must say] */
const CASES: Array<[string, Answer, Answer, 'healthy' | 'unknown', RegExp | undefined]> = [
  ['an honest idle server (the control)', text(''), text(exposition()), 'healthy', undefined],
  [
    'escape sequences in label values (numbers sound)',
    text(''),
    text(exposition({ label: `m${E.replace(/[\r\n]/g, '')}` })),
    'healthy',
    undefined,
  ],
  [
    'NaN counters',
    text(''),
    text(exposition({ running: 'NaN', waiting: 'NaN', gen: 'NaN' })),
    'unknown',
    /says what no server has: vllm:num_requests_running "NaN"/,
  ],
  [
    '+Inf requests waiting',
    text(''),
    text(exposition({ waiting: '+Inf' })),
    'unknown',
    /vllm:num_requests_waiting "\+Inf"/,
  ],
  ['a negative counter', text(''), text(exposition({ gen: '-5' })), 'unknown', /vllm:generation_tokens_total "-5"/],
  ['a KV share past 1', text(''), text(exposition({ kv: '7' })), 'unknown', /vllm:kv_cache_usage_perc "7"/],
  ['a word for a value', text(''), text(exposition({ running: 'many' })), 'unknown', /vllm:num_requests_running "NaN"/],
  ['an HTML page', text(''), text('<html><body>It works!</body></html>\n'), 'unknown', /no vLLM metric in it/],
  ['an empty answer', text(''), text(''), 'unknown', /no vLLM metric in it/],
  [
    "another program's metrics",
    text(''),
    text('# TYPE go_goroutines gauge\ngo_goroutines 12\n'),
    'unknown',
    /no vLLM metric in it/,
  ],
  ['a 500', text(''), text('oops', 500), 'unknown', /HTTP 500/],
  [
    'an exposition past the size bound, sent for ever',
    text(''),
    flood,
    'unknown',
    /unreadable: .*(larger|more than|too large|bound|MiB|bytes)/i,
  ],
  ['a slow drip', text(''), drip, 'unknown', /unreadable: no answer within 800 ms/],
];

const servers: Server[] = [];
const urls: string[] = [];
beforeAll(async () => {
  for (const [, health, metrics] of CASES) {
    const s = createServer((req, res) =>
      req.url?.startsWith('/health')
        ? health(res)
        : req.url?.startsWith('/metrics')
          ? metrics(res)
          : text('', 404)(res),
    );
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    servers.push(s);
    urls.push(`http://127.0.0.1:${(s.address() as AddressInfo).port}`);
  }
});
afterAll(() => {
  for (const s of servers) s.closeAllConnections(), s.close();
});

describe('watch reads a server that lies', () => {
  CASES.forEach(([name, , , verdict, why], i) =>
    it(`${name}: ${verdict}`, async () => {
      const t = Date.now();
      const r = await readApi(urls[i]!, 800);
      // one deadline for each read, whatever the server does
      expect(Date.now() - t).toBeLessThan(3000);
      const jd = judge([{ at: Date.now(), process: 'alive', ...r }]);
      expect(jd.verdict, jd.why).toBe(verdict);
      if (why) expect(jd.why).toMatch(why);
      const said = JSON.stringify(jd);
      expect(RAW.test(jd.why) || RAW.test(said), said).toBe(false);
    }),
  );

  it('a /health that never ends is no answer (unreachable), and two of them past deadAfter are dead, never healthy', async () => {
    const s = createServer((req, res) => (req.url?.startsWith('/health') ? drip(res) : text(exposition())(res)));
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
      const a = await readApi(url, 600);
      expect(a.health).toBe('unreachable');
      const t0 = Date.now();
      const jd = judge([
        { at: t0, process: 'alive', ...a },
        { at: t0 + 11_000, process: 'alive', ...a },
      ]);
      expect(jd.verdict).toBe('dead');
    } finally {
      s.closeAllConnections();
      s.close();
    }
  });
});
