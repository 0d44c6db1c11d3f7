// The simulator's faults the watcher is proven against (src/sim/engine.ts), each seen through the
// same /metrics reader the watcher uses: a wedge (API up, /health 200, the held request counted as
// running, every engine-reported value frozen), a long chunked prefill (prompt tokens counted only at
// its end, KV usage rising chunk by chunk, as vLLM V1), a crash mid-stream, and a saturated queue.
import { describe, expect, it } from 'vitest';
import { engineNumbers, moved } from '../../src/watch/signals.js';
import { sleep, startSim, waitFor } from '../helpers.js';

const timing = [
  '--sim-time-factor',
  '1',
  '--sim-cold-ms',
  '0',
  '--sim-decode-ms',
  '20',
  '--sim-prefill-tps',
  '1000000',
];
const numbers = async (url: string) => engineNumbers(await (await fetch(`${url}/metrics`)).text());
const complete = (url: string, max: number, signal?: AbortSignal, prompt = 'hello there') =>
  fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: max, stream: true }),
    signal,
  });

describe('simulator faults for the watcher', () => {
  it('zombie-after:N wedges: /health 200, the held request stays running, nothing the engine reports moves, later requests are not counted', async () => {
    const sim = await startSim([...timing, '--sim-fault', 'zombie-after:1']);
    const ac = new AbortController();
    try {
      const first = await complete(sim.url, 3);
      expect(await first.text()).toContain('[DONE]');
      const stuck = complete(sim.url, 200, ac.signal).catch(() => undefined);
      expect(await waitFor(async () => (await numbers(sim.url)).running === 1, 5000)).toBe(true);
      const a = await numbers(sim.url);
      await sleep(600);
      // a request after the wedge: never scheduled, never counted
      const late = complete(sim.url, 2, ac.signal).catch(() => undefined);
      await sleep(400);
      const b = await numbers(sim.url);
      expect(moved(a, b)).toEqual([]);
      expect(b).toMatchObject({ running: 1, waiting: 0 });
      expect((await fetch(`${sim.url}/health`)).status).toBe(200);
      ac.abort();
      await Promise.all([stuck, late]);
      await sleep(100);
      // the abandoned request's slot stays counted: vLLM's frozen gauges keep it
      expect((await numbers(sim.url)).running).toBe(1);
    } finally {
      ac.abort();
      await sim.stop();
    }
  });

  it('long-prefill:S: prompt tokens frozen until the prefill ends, KV usage rising meanwhile', async () => {
    const sim = await startSim([...timing, '--sim-fault', 'long-prefill:2']);
    try {
      const before = await numbers(sim.url);
      const req = complete(sim.url, 2, undefined, 'a long prompt '.repeat(2000)).then((r) => r.text());
      const kv: number[] = [];
      const prompt: number[] = [];
      for (let i = 0; i < 6; i++) {
        await sleep(250);
        const n = await numbers(sim.url);
        kv.push(n.kv ?? -1);
        prompt.push(n.prompt ?? -1);
      }
      expect(new Set(prompt)).toEqual(new Set([before.prompt]));
      expect(kv[kv.length - 1]!).toBeGreaterThan(kv[0]!);
      expect(await req).toContain('[DONE]');
      expect((await numbers(sim.url)).prompt).toBeGreaterThan(before.prompt ?? 0);
    } finally {
      await sim.stop();
    }
  });

  it('crash-mid-stream:N: the stream breaks after a few tokens and the server exits 1', async () => {
    const sim = await startSim([...timing, '--sim-fault', 'crash-mid-stream:1']);
    try {
      const r = await complete(sim.url, 50);
      const body = await r.text().catch((e: Error) => `broken: ${e.message}`);
      expect(body).not.toContain('[DONE]');
      await sim.proc;
      expect(sim.proc.exitCode).toBe(1);
      expect(sim.output()).toContain('EngineCore encountered a fatal error');
    } finally {
      await sim.stop();
    }
  });

  it('saturate:N: no more than N run, the rest wait, and the queue drains', async () => {
    const sim = await startSim([...timing, '--sim-fault', 'saturate:1']);
    try {
      const reqs = [0, 1, 2].map(() => complete(sim.url, 20).then((r) => r.text()));
      expect(await waitFor(async () => (await numbers(sim.url)).waiting === 2, 5000)).toBe(true);
      expect((await numbers(sim.url)).running).toBe(1);
      for (const t of await Promise.all(reqs)) expect(t).toContain('[DONE]');
      expect(await numbers(sim.url)).toMatchObject({ running: 0, waiting: 0 });
    } finally {
      await sim.stop();
    }
  });
});
