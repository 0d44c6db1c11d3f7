// The probe's 1-token generation is sampled as a client that sets nothing is served, not greedy: a
// vLLM whose sampler fails only off the greedy path (seen on the real CPU image without a C++
// compiler: greedy requests answered, the first default one killed the engine) is unhealthy.
import { describe, it, expect, afterAll } from 'vitest';
import { createServer, type ServerResponse } from 'node:http';
import { probe, inferenceCheck } from '../../src/health/probe.js';
import { targetFromUrl } from '../../src/health/target.js';
import { freePort } from '../helpers.js';

const json = (res: ServerResponse, status: number, v: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(v));
};
const bodies: Array<Record<string, unknown>> = [];
// vLLM's answers: a greedy request (temperature 0) is served; any other finds the engine dead
const server = createServer((req, res) => {
  let b = '';
  req.on('data', (d) => (b += d));
  req.on('end', () => {
    const body = JSON.parse(b || '{}') as Record<string, unknown>;
    bodies.push(body);
    if (body.temperature === 0)
      return json(res, 200, {
        choices: [{ text: 'x', index: 0, finish_reason: 'length' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      });
    json(res, 500, {
      error: {
        message: 'EngineCore encountered an issue. See stack trace (above) for the root cause.',
        type: 'InternalServerError',
        code: 500,
      },
    });
  });
});
afterAll(() => server.close());

describe('probe inference: sampled with the server defaults', () => {
  it('sends no temperature (nor any other sampling override), so an engine that dies off the greedy path is found unhealthy', async () => {
    const port = await freePort();
    await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
    const r = await probe(
      targetFromUrl(`http://127.0.0.1:${port}`, 'm'),
      { timeoutMs: 10_000, kvCacheUsageMax: 0.9, waitingMax: 10, gpuMemoryHeadroomPct: 5 },
      [inferenceCheck],
    );
    expect(bodies).toHaveLength(1);
    expect(bodies[0]).toEqual({ model: 'm', prompt: 'ping', max_tokens: 1 });
    expect(r.state).toBe('unhealthy');
    expect(r.steps[0]).toMatchObject({
      step: 'inference',
      status: 'fail',
      detail: expect.stringContaining('HTTP 500'),
    });
  });
});
