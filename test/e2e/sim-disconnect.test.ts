// A client that disconnects from a non-streaming or a queued request gets it
// aborted, as vLLM does: its slot and KV share are free at once, so the next request is not stuck
// behind work nobody will read.
import { describe, it, expect, afterEach } from 'vitest';
import { request } from 'node:http';
// @ts-expect-error no types shipped
import parsePrometheus from 'parse-prometheus-text-format';
import { startSim, waitFor, type SimHandle } from '../helpers.js';

type Family = { name: string; metrics: Array<{ value?: string; labels?: Record<string, string> }> };
async function gauges(url: string) {
  const fams = parsePrometheus(await (await fetch(`${url}/metrics`)).text()) as Family[];
  const v = (name: string, label?: [string, string]) =>
    Number(
      fams.find((f) => f.name === name)?.metrics.find((m) => !label || m.labels?.[label[0]] === label[1])?.value ?? NaN,
    );
  return {
    running: v('vllm:num_requests_running'),
    waiting: v('vllm:num_requests_waiting'),
    kv: v('vllm:kv_cache_usage_perc'),
    aborted: v('vllm:request_success_total', ['finished_reason', 'abort']),
    generated: v('vllm:generation_tokens_total'),
  };
}

/** Waits until the server's gauges meet `want` (false at the deadline). */
const gaugesReach = (url: string, want: (g: Awaited<ReturnType<typeof gauges>>) => boolean, ms: number) =>
  waitFor(async () => want(await gauges(url)), ms);

/** A raw POST that we can hang up on (the OpenAI SDK would retry). */
function post(url: string, body: object) {
  const req = request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } });
  const done = new Promise<number | 'hung-up'>((resolve) => {
    req.on('response', (res) => {
      res.resume();
      res.on('close', () => resolve(res.complete ? (res.statusCode ?? 0) : 'hung-up'));
    });
    req.on('error', () => resolve('hung-up'));
  });
  req.end(JSON.stringify(body));
  return { hangUp: () => req.destroy(), done };
}

let sim: SimHandle | undefined;
afterEach(async () => {
  await sim?.stop();
  sim = undefined;
});

describe('simulator: a client that disconnects aborts its request', () => {
  it.each([
    ['non-streaming', false],
    ['streaming', true],
  ])(
    '%s: 4 running + 2 queued, all clients hang up -> nothing running or waiting; the next request is served',
    async (_, stream) => {
      // Each request would decode for 60 s: nothing may finish on its own during the test.
      sim = await startSim([
        '--max-num-seqs',
        '4',
        '--sim-decode-ms',
        '1000',
        '--sim-cold-ms',
        '0',
        '--max-model-len',
        '4096',
        '--served-model-name',
        'm',
      ]);
      const reqs = Array.from({ length: 6 }, () =>
        post(sim!.url, { model: 'm', prompt: 'hello there', max_tokens: 60, stream }),
      );
      expect(await gaugesReach(sim.url, (g) => g.running === 4 && g.waiting === 2, 10_000)).toBe(true);
      const before = await gauges(sim.url);
      expect(before.kv).toBeGreaterThan(0);
      for (const r of reqs) r.hangUp();
      expect(await Promise.all(reqs.map((r) => r.done))).toEqual(Array(6).fill('hung-up'));
      expect(await gaugesReach(sim.url, (g) => g.running === 0 && g.waiting === 0, 5_000)).toBe(true);
      const after = await gauges(sim.url);
      expect(after.kv).toBe(0);
      // As in vLLM: a request aborted because its client left is not counted as finished (not even as "abort").
      expect(after.aborted).toBe(0);
      // Only the first tokens were made: the 4 running got a first token and about a second of decode each.
      expect(after.generated).toBeLessThan(6 * 60);
      // A new 1-token request is admitted at once (with the aborted work still holding slots it would wait ~60 s).
      const r = await fetch(`${sim.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', prompt: 'hi', max_tokens: 1 }),
        signal: AbortSignal.timeout(20_000),
      });
      expect(r.status).toBe(200);
      expect((await r.json()).usage.completion_tokens).toBe(1);
    },
  );
});
