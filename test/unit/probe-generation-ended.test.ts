// The probe's generation must produce a token and end for a normal reason: a 200 whose choice
// ended finish_reason "abort" with nothing out (vLLM's answer for a request it gave up on) was
// "healthy". A real HTTP server answering as vLLM's completions endpoint does, one answer per case.
import { describe, it, expect, afterAll, beforeAll } from 'vitest';
import { createServer, type Server } from 'node:http';
import { probe, inferenceCheck } from '../../src/health/probe.js';
import { targetFromUrl } from '../../src/health/target.js';
import { freePort } from '../helpers.js';

let answer: unknown;
let server: Server;
let port = 0;
beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer));
    });
  });
  port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
});
afterAll(() => server.close());

const gen = (text: string, finish_reason: string | null, completion_tokens?: number) => ({
  id: 'cmpl-1',
  object: 'text_completion',
  model: 'm',
  choices: [{ index: 0, text, finish_reason }],
  ...(completion_tokens === undefined
    ? {}
    : { usage: { prompt_tokens: 2, completion_tokens, total_tokens: 2 + completion_tokens } }),
});

const cases: Array<[string, unknown, 'healthy' | 'unhealthy', RegExp?]> = [
  ['a token, finish_reason length', gen('x', 'length', 1), 'healthy'],
  ['a token, finish_reason stop', gen('x', 'stop', 1), 'healthy'],
  ['an empty-text token counted by usage (a special token)', gen('', 'length', 1), 'healthy'],
  ['abort with no token out', gen('', 'abort', 0), 'unhealthy', /finish_reason "abort" with 0 token/],
  ['abort even with a token', gen('x', 'abort', 1), 'unhealthy', /finish_reason "abort"/],
  ['error', gen('', 'error', 0), 'unhealthy', /finish_reason "error"/],
  ['no finish_reason (never ended)', gen('x', null, 1), 'unhealthy', /never ended/],
  ['length with no token out', gen('', 'length', 0), 'unhealthy', /no token out/],
  ['no usage and no text', gen('', 'length'), 'unhealthy', /no token out/],
];

describe('probe inference: a token out and a normal end', () => {
  for (const [label, a, want, why] of cases) {
    it(`${label}: ${want}`, async () => {
      answer = a;
      const r = await probe(
        targetFromUrl(`http://127.0.0.1:${port}`, 'm'),
        { timeoutMs: 5_000, kvCacheUsageMax: 0.9, waitingMax: 10, gpuMemoryHeadroomPct: 5 },
        [inferenceCheck],
      );
      expect(r.state, JSON.stringify(r.steps)).toBe(want);
      if (why) expect(r.steps[0]!.detail).toMatch(why);
    });
  }
});
