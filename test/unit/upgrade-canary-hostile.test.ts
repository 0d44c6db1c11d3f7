// Issue 42, hostile bytes from peers: an upgrade's canary answers the comparison's requests (the deep
// probe, the golden prompts, the short bench), and each answer is hostile. The comparison an upgrade
// runs (measure on each side, then judge) is run here with the current side an honest simulator
// (`sparkctl sim serve`, one for the file) and the canary a real node:http server that lies: escape
// sequences in every string, numbers that are none, a number past every double, no choices, an
// answer past the size bound, a slow drip. Each lie fails the verdict (never a pass: nothing is
// rolled onto it), ends within its deadline, and what the verdict says is data (no control
// character) and numbers (no NaN, Infinity, undefined). The control: the simulator against itself passes.
// (The image's own version answer is walked by test/unit/container-image-version.test.ts: escape
// sequences, 1 MiB of output, a label that is shell, a version line among noise.)
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createServer, type Server, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startSim, type SimHandle } from '../helpers.js';
import { measure, type MeasureSettings } from '../../src/upgrade/measure.js';
import { judge, type Thresholds } from '../../src/upgrade/judge.js';

const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/;
const NOT_A_NUMBER = /\bundefined\b|\bNaN\b|\bInfinity\b|\[object Object\]/;
const E = '\u001b[2J\u001b]0;pwned\u0007\u009b1;1H\u2028\r\u007f';
const MODEL = 'Qwen/Qwen3.5-9B';

type Lie = 'escapes' | 'nonsense' | 'huge' | 'empty' | 'oversized' | 'drip';

function liar(kind: Lie) {
  const text = kind === 'escapes' ? `tok${E}` : kind === 'nonsense' ? 7 : 'tok';
  const usage =
    kind === 'nonsense'
      ? { prompt_tokens: 'many', completion_tokens: -1 }
      : kind === 'huge'
        ? { prompt_tokens: 'HUGE', completion_tokens: 'HUGE' }
        : { prompt_tokens: 3, completion_tokens: 1 };
  const choice = (i: number) =>
    kind === 'empty'
      ? []
      : [
          {
            index: 0,
            text,
            delta: { content: text },
            finish_reason: i === 3 ? (kind === 'escapes' ? `stop${E}` : 'length') : null,
          },
        ];
  const chunk = (i: number) =>
    JSON.stringify({
      id: kind === 'escapes' ? `c${E}` : 'c',
      model: kind === 'escapes' ? `${MODEL}${E}` : MODEL,
      choices: choice(i),
      ...(i === 3 ? { usage } : {}),
    }).replace(/"HUGE"/g, '1e999');
  return (req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const url = req.url ?? '';
      const json = (v: unknown) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(v).replace(/"HUGE"/g, '1e999'));
      if (url.startsWith('/health')) return res.writeHead(200).end();
      if (url.startsWith('/version'))
        return json({ version: kind === 'escapes' ? `0.11${E}` : kind === 'nonsense' ? 11 : '0.11.0' });
      if (url.startsWith('/v1/models'))
        return json({
          object: 'list',
          data: [
            {
              id: kind === 'escapes' ? `${MODEL}${E}` : MODEL,
              object: 'model',
              max_model_len: kind === 'huge' ? 'HUGE' : kind === 'nonsense' ? 'long' : 4096,
              root: MODEL,
            },
          ],
        });
      if (url.startsWith('/metrics')) {
        const v = kind === 'nonsense' ? 'NaN' : kind === 'huge' ? '+Inf' : '0';
        return res
          .writeHead(200, { 'content-type': 'text/plain' })
          .end(
            `vllm:num_requests_running{model_name="m${kind === 'escapes' ? E.replace(/[\r\n\u2028]/g, '') : ''}"} ${v}\nvllm:num_requests_waiting{model_name="m"} ${v}\nvllm:kv_cache_usage_perc{model_name="m"} ${v}\n`,
          );
      }
      if (url.startsWith('/v1/')) {
        if (kind === 'drip') {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          const t = setInterval(() => res.write(': \n'), 200);
          return res.on('close', () => clearInterval(t));
        }
        if (kind === 'oversized') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write(`{"id":"c","choices":[{"index":0,"text":"`);
          const more = () => {
            while (!res.destroyed && res.write('x'.repeat(64 * 1024)));
          };
          res.on('drain', more);
          return more();
        }
        let stream = false;
        try {
          stream = JSON.parse(body).stream === true;
        } catch {}
        if (!stream) return res.writeHead(200, { 'content-type': 'application/json' }).end(chunk(3));
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (let i = 0; i < 4; i++) res.write(`data: ${chunk(i)}\n\n`);
        return res.end('data: [DONE]\n\n');
      }
      res.writeHead(404).end();
    });
  };
}

const SETTINGS: MeasureSettings = {
  probe: { timeoutMs: 2000, kvCacheUsageMax: 0.95, waitingMax: 16, gpuMemoryHeadroomPct: 5, gpus: false },
  golden: [{ name: 'list', prompt: 'The three primary colours are', maxTokens: 8 }],
  bench: { requests: 2, outputTokens: 4, concurrency: 1 },
  timeoutMs: 2000,
};
/** wide: the control must not fail on a loaded host's timing; the lies fail on answers, not on speed */
const WIDE: Thresholds = {
  ttftRatio: 1000,
  tpotRatio: 1000,
  throughputRatio: 0.001,
  goldenSameVersion: 1,
  goldenOtherVersion: 0.6,
};

let sim: SimHandle;
const liars: Partial<Record<Lie, { server: Server; url: string }>> = {};
beforeAll(async () => {
  sim = await startSim([]);
  for (const kind of ['escapes', 'nonsense', 'huge', 'empty', 'oversized', 'drip'] as const) {
    const server = createServer(liar(kind));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    liars[kind] = { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
  }
}, 30_000);
afterAll(async () => {
  for (const l of Object.values(liars)) l.server.closeAllConnections(), l.server.close();
  await sim?.stop();
});

const target = (url: string) => ({ name: 'x', url, servedName: MODEL, engine: 'sim' as const });

describe("an upgrade's comparison against a canary that lies", () => {
  it('the control: the simulator against itself passes', async () => {
    const cur = await measure(target(sim.url), '0.11.0', SETTINGS);
    const can = await measure(target(sim.url), '0.11.0', SETTINGS);
    const v = judge(cur, can, WIDE);
    expect(v.pass, v.why.join('\n')).toBe(true);
  }, 30_000);

  for (const kind of ['escapes', 'nonsense', 'huge', 'empty', 'oversized', 'drip'] as const)
    it(`a canary that ${kind === 'oversized' ? 'answers past the size bound' : kind === 'drip' ? 'drips its answers' : kind === 'empty' ? 'answers no choices' : kind === 'huge' ? 'sends numbers past every double' : kind === 'nonsense' ? 'sends nonsense numbers' : 'puts escape sequences in every string'}: the verdict fails, said as data`, async () => {
      const cur = await measure(target(sim.url), '0.11.0', SETTINGS);
      const t = Date.now();
      // the drip is held only by the deadlines: shorter ones keep the file quick
      const can = await measure(
        target(liars[kind]!.url),
        '0.11.0',
        kind === 'drip' ? { ...SETTINGS, timeoutMs: 700, probe: { ...SETTINGS.probe, timeoutMs: 700 } } : SETTINGS,
      );
      // each request ends at its deadline or its bound: probe, golden, warm-up and bench, a few each
      expect(Date.now() - t).toBeLessThan(25_000);
      const v = judge(cur, can, WIDE);
      expect(v.pass, JSON.stringify(v.comparisons, null, 1)).toBe(false);
      const said = `${v.why.join('\n')}\n${v.comparisons.map((c) => `${c.check} ${c.current} ${c.canary} ${c.limit}`).join('\n')}`;
      const raw = RAW.exec(said);
      expect(raw, `raw ${JSON.stringify(raw?.[0])} in ${JSON.stringify(said.slice(0, 600))}`).toBeNull();
      const nan = NOT_A_NUMBER.exec(said);
      expect(
        nan,
        `${nan?.[0]} in ${nan ? JSON.stringify(said.slice(Math.max(0, nan.index - 120), nan.index + 40)) : ''}`,
      ).toBeNull();
      // bounded: a canary's words are quoted short
      expect(said.length).toBeLessThan(20_000);
    }, 40_000);
});
