// bench builds every prompt before it sends one: a length or count no server takes is exit 2 before
// any work (--input-len 1000000000 built a prompt until V8 aborted; --warmup 1e9 ran until killed).
// Static ceilings are checked before the server is contacted (a counting server proves it); the
// server's own max model len (its /v1/models, the simulator here, as vLLM lists it) before any
// prompt is made.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createServer, type Server } from 'node:http';
import { cli, freePort, startSim, type SimHandle } from '../helpers.js';

let hits = 0;
let server: Server;
let url = '';
let sim: SimHandle;
beforeAll(async () => {
  server = createServer((_req, res) => {
    hits++;
    res.statusCode = 500;
    res.end('no');
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  url = `http://127.0.0.1:${port}`;
  sim = await startSim(['--max-model-len', '4096']);
}, 60_000);
afterAll(async () => {
  await sim?.stop();
  await new Promise<void>((r) => server.close(() => r()));
});

describe('bench refuses a run no server could take, before any work', { timeout: 120_000 }, () => {
  const huge: Array<[string, string[], RegExp]> = [
    ['--input-len 1000000000', ['--input-len', '1000000000'], /--input-len: 1000000000 is above 1048576/],
    ['--prefix-len 1000000000', ['--prefix-len', '1000000000'], /--prefix-len: 1000000000 is above 1048576/],
    ['--output-len 1000000000', ['--output-len', '1000000000'], /--output-len: 1000000000 is above 1048576/],
    ['--warmup 1000000000', ['--warmup', '1000000000'], /--warmup: 1000000000 is above 10000/],
    ['--requests 1000000000', ['--requests', '1000000000'], /--requests: 1000000000 is above 100000/],
    [
      '--prefix-len + --input-len past the ceiling',
      ['--prefix-len', '1000000', '--input-len', '100000'],
      /--prefix-len 1000000 \+ --input-len 100000 is above 1048576/,
    ],
  ];
  for (const [label, args, why] of huge) {
    it(`${label}: exit 2 at once, the server never contacted`, async () => {
      hits = 0;
      const t0 = Date.now();
      const r = await cli(['bench', '--url', url, '--model', 'm', ...args], { timeout: 20_000 });
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stderr).toMatch(why);
      expect(hits).toBe(0);
      expect(Date.now() - t0).toBeLessThan(10_000);
    });
  }

  it("a prompt past the server's max model len (its /v1/models): exit 2 naming it, before any prompt is built or sent", async () => {
    const before = await (await fetch(`${sim.url}/metrics`)).text();
    const r = await cli(['bench', '--url', sim.url, '--requests', '2', '--input-len', '4000', '--output-len', '200'], {
      timeout: 30_000,
    });
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toContain("above Qwen/Qwen3.5-9B's max model len 4096");
    expect(r.stderr).toMatch(/lower --input-len \(at most \d+ here\)/);
    const after = await (await fetch(`${sim.url}/metrics`)).text();
    const reqs = (m: string) =>
      m
        .split('\n')
        .filter((l) => l.startsWith('vllm:request_success_total') || l.startsWith('vllm:prompt_tokens_total'));
    expect(reqs(after)).toEqual(reqs(before));
    // one that fits runs
    const ok = await cli(
      ['bench', '--url', sim.url, '--requests', '2', '--input-len', '64', '--output-len', '4', '--warmup', '0'],
      { timeout: 60_000 },
    );
    expect(ok.exitCode, ok.stderr).toBe(0);
  });
});
