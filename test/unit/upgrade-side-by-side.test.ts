// An upgrade's short bench runs on both servers in turns (current then canary, canary then current, ...),
// so that what the host does meanwhile falls on both sides alike. The stand-ins here are two node:http
// servers on one shared "host" whose first token takes 3x longer once a burst of load begins (after the
// 10th streamed request either of them saw): the way a loaded CI host (another suite starting real vLLM)
// made an identical canary read 1.5x slower to its first token when current was measured whole, then the
// canary whole (CI, 2026-12-05). They speak just enough of vLLM's API for the comparison (health, models,
// version, metrics, completions streamed or not, chat, /tokenize); the real servers' side is
// test/e2e/upgrade.test.ts (the simulator behind real HAProxy) and the real-vLLM suites.
//   - measured one after the other, the burst lands on the canary only: its TTFT comparison fails (the
//     stand-in shows the defect the order had);
//   - side by side, the same burst: the TTFT comparison passes, and the bench requests took turns;
//   - side by side, a canary that is itself 3x slower with no burst: it still fails (the turns do not hide
//     a real difference).
import { describe, it, expect, afterEach } from 'vitest';
import { createServer, type Server, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { measure, measureBoth, type MeasureSettings } from '../../src/upgrade/measure.js';
import { judge, DEFAULT_THRESHOLDS } from '../../src/upgrade/judge.js';

const MODEL = 'Qwen/Qwen3.5-9B';
const FIRST_TOKEN_MS = 60;

interface Host {
  /** streamed requests seen by either server, in order: the server's name */
  streamed: string[];
  /** the burst begins after this many streamed requests (Infinity: never) */
  burstAfter: number;
}

function standIn(name: string, host: Host, ownSlowdown = 1) {
  return (req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const url = req.url ?? '';
      const json = (v: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(v));
      if (url.startsWith('/health')) return res.writeHead(200).end();
      if (url.startsWith('/version')) return json({ version: '0.17.1' });
      if (url.startsWith('/v1/models'))
        return json({ object: 'list', data: [{ id: MODEL, object: 'model', max_model_len: 4096, root: MODEL }] });
      if (url.startsWith('/metrics'))
        return res
          .writeHead(200, { 'content-type': 'text/plain' })
          .end('vllm:num_requests_running{model_name="m"} 0\nvllm:num_requests_waiting{model_name="m"} 0\n');
      if (url.startsWith('/tokenize')) return json({ count: 3, max_model_len: 4096, tokens: [1, 2, 3] });
      if (url.startsWith('/v1/chat/completions'))
        return json({
          id: 'c',
          object: 'chat.completion',
          model: MODEL,
          choices: [{ index: 0, message: { role: 'assistant', content: 'red' }, finish_reason: 'length' }],
        });
      if (!url.startsWith('/v1/completions')) return res.writeHead(404).end();
      let stream = false;
      try {
        stream = JSON.parse(body).stream === true;
      } catch {}
      const chunk = (i: number) =>
        JSON.stringify({
          id: 'c',
          object: 'text_completion',
          model: MODEL,
          choices: [{ index: 0, text: ' tok', finish_reason: i === 3 ? 'length' : null }],
          ...(i === 3 ? { usage: { prompt_tokens: 64, completion_tokens: 4, total_tokens: 68 } } : {}),
        });
      if (!stream) return res.writeHead(200, { 'content-type': 'application/json' }).end(chunk(3));
      host.streamed.push(name);
      const burst = host.streamed.length > host.burstAfter ? 3 : 1;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      setTimeout(
        () => {
          res.write(`data: ${chunk(0)}\n\n`);
          let i = 1;
          const next = setInterval(() => {
            res.write(`data: ${chunk(i)}\n\n`);
            if (++i === 4) clearInterval(next), res.end('data: [DONE]\n\n');
          }, 5);
        },
        FIRST_TOKEN_MS * burst * ownSlowdown,
      );
    });
  };
}

const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.closeAllConnections(), s.close();
});

async function pair(host: Host, canarySlowdown = 1) {
  const up = async (name: string, slow: number) => {
    const s = createServer(standIn(name, host, slow));
    servers.push(s);
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    return {
      name,
      url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
      servedName: MODEL,
      engine: 'sim' as const,
    };
  };
  return { cur: await up('current', 1), can: await up('canary', canarySlowdown) };
}

const SETTINGS: MeasureSettings = {
  probe: { timeoutMs: 2000, kvCacheUsageMax: 0.95, waitingMax: 16, gpuMemoryHeadroomPct: 5, gpus: false },
  golden: [{ name: 'list', prompt: 'The three primary colours are', maxTokens: 8 }],
  // the upgrade's own defaults: 8 requests a side, 2 at once
  bench: { requests: 8, outputTokens: 4, concurrency: 2 },
  timeoutMs: 5000,
};
const ttft = (v: ReturnType<typeof judge>) => v.comparisons.find((c) => c.check === 'TTFT p50')!;

describe("an upgrade's short bench, side by side in turns", () => {
  it('one side whole, then the other: a burst of host load from the 10th request lands on the canary only, and an identical canary fails', async () => {
    const host: Host = { streamed: [], burstAfter: 10 };
    const { cur, can } = await pair(host);
    const current = await measure(cur, '0.17.1', SETTINGS);
    const candidate = await measure(can, '0.17.1', SETTINGS);
    // current: 1 warm-up + 8, all before the burst
    expect(host.streamed.slice(0, 9)).toEqual(Array(9).fill('current'));
    expect(ttft(judge(current, candidate, DEFAULT_THRESHOLDS)).ok).toBe(false);
  }, 30_000);

  it('in turns, the same burst falls on both sides: an identical canary passes; the requests took turns A B, B A, ...', async () => {
    const host: Host = { streamed: [], burstAfter: 10 };
    const { cur, can } = await pair(host);
    const seen: string[] = [];
    const m = await measureBoth(cur, '0.17.1', can, '0.17.1', SETTINGS, (side) => seen.push(side));
    expect(seen).toEqual(['current', 'canary']);
    const v = judge(m.current, m.candidate, DEFAULT_THRESHOLDS);
    expect(ttft(v), JSON.stringify(v.comparisons, null, 1)).toMatchObject({ ok: true });
    expect(v.pass, v.why.join('\n')).toBe(true);
    // each round: 2 requests (the first round of each side after one warm-up), the order flipping every round
    const c = 'current';
    const k = 'canary';
    expect(host.streamed).toEqual([c, c, c, k, k, k, k, k, c, c, c, c, k, k, k, k, c, c]);
    expect(m.current.bench).toMatchObject({ requests: 8, failed: 0 });
    expect(m.candidate.bench).toMatchObject({ requests: 8, failed: 0 });
  }, 30_000);

  it('in turns, with no burst: a canary 3x slower to its first token still fails', async () => {
    const host: Host = { streamed: [], burstAfter: Number.POSITIVE_INFINITY };
    const { cur, can } = await pair(host, 3);
    const m = await measureBoth(cur, '0.17.1', can, '0.17.1', SETTINGS);
    const v = judge(m.current, m.candidate, DEFAULT_THRESHOLDS);
    expect(ttft(v).ok, JSON.stringify(ttft(v))).toBe(false);
    expect(v.why.join('\n')).toMatch(/TTFT p50: canary/);
  }, 30_000);

  it('a canary that cannot be reached: its requests count as failed, the current side is still measured, and the verdict fails', async () => {
    const host: Host = { streamed: [], burstAfter: Number.POSITIVE_INFINITY };
    const { cur } = await pair(host);
    const gone = { name: 'gone', url: 'http://127.0.0.1:1', servedName: MODEL, engine: 'sim' as const };
    const m = await measureBoth(cur, '0.17.1', gone, '0.17.1', {
      ...SETTINGS,
      timeoutMs: 1000,
      probe: { ...SETTINGS.probe, timeoutMs: 1000 },
    });
    expect(m.current.bench).toMatchObject({ requests: 8, failed: 0 });
    expect(m.candidate.bench).toMatchObject({ requests: 8, failed: 8 });
    const v = judge(m.current, m.candidate, DEFAULT_THRESHOLDS);
    expect(v.pass).toBe(false);
    expect(v.why.join('\n')).toMatch(/bench failed requests: canary 8/);
  }, 30_000);
});
