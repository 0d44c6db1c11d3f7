// What the HAProxy benchmarks (bench-router, bench-gateway) share: HAProxy started on a config (one
// thread, pinned to core 1 where taskset exists), one request at a time on one keep-alive
// connection, latency rounds interleaved across the endpoints (drift on a shared machine hits them
// alike), percentiles, and the closed-loop ceiling (autocannon).
import autocannon from 'autocannon';
import { writeFileSync } from 'node:fs';
import { request, Agent } from 'undici';
import { killIfRunning, pin, spawnKept, untilHealthy } from './sim.mjs';

const HAPROXY = process.env.HAPROXY ?? '/usr/sbin/haproxy';

/** HAProxy on `cfg` (one thread forced), written to `file`, pinned to core 1; resolves once `port` answers /health. */
export async function startHaproxy(cfg, file, port) {
  // one thread (the gateway's config with its Lua file says so itself: src/profiles/haproxy.ts)
  writeFileSync(file, /^\s*nbthread /m.test(cfg) ? cfg : cfg.replace('global\n', 'global\n    nbthread 1\n'));
  const [cmd, argv] = pin(1, [HAPROXY, '-db', '-f', file]);
  const child = spawnKept(cmd, argv);
  await untilHealthy(port, 'haproxy', 200);
  return { port, stop: () => killIfRunning(child) };
}

/** A completion request the benchmarks send (one token, the simulator's time model off). */
export const completionBody = (model) => JSON.stringify({ model, prompt: 'Hello', max_tokens: 1, temperature: 0 });

const agent = new Agent({ connections: 1, pipelining: 1 });
/** One POST /v1/completions on the one keep-alive connection: its wall time, ms (a non-200 throws). */
export async function once(port, body) {
  const t = performance.now();
  const r = await request(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json' },
    dispatcher: agent,
  });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`HTTP ${r.statusCode}: ${text.slice(0, 200)}`);
  return performance.now() - t;
}

/** The p-quantile (0..1) of xs, linearly interpolated. */
export const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  const i = (s.length - 1) * p;
  const lo = Math.floor(i);
  return s[lo] + (s[Math.ceil(i)] - s[lo]) * (i - lo);
};
export const p50p99 = (xs) => ({ p50: +pct(xs, 0.5).toFixed(3), p99: +pct(xs, 0.99).toFixed(3) });

/**
 * n requests to each port, one at a time, in alternating rounds of 50 after 200 warm-up requests to
 * each: the timings per port, in the order given.
 */
export async function interleaved(ports, n, body) {
  const out = ports.map(() => []);
  for (let i = 0; i < 200; i++) for (const p of ports) await once(p, body);
  for (let done = 0; done < n; done += 50)
    for (const [k, p] of ports.entries()) for (let i = 0; i < 50; i++) out[k].push(await once(p, body));
  return out;
}

/** The closed-loop ceiling through `port`: `connections` connections for `seconds`. */
export async function ceiling(port, body, connections, seconds) {
  const res = await autocannon({
    url: `http://127.0.0.1:${port}/v1/completions`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    connections,
    duration: seconds,
  });
  return {
    reqPerSec: Math.round(res.requests.average),
    p50Ms: res.latency.p50,
    p99Ms: res.latency.p99,
    non2xx: res.non2xx,
    errors: res.errors,
  };
}

/** A streamed completion (SSE): what the time to first token is measured on. */
export const streamBody = (model, maxTokens = 8) =>
  JSON.stringify({ model, prompt: 'Hello', max_tokens: maxTokens, temperature: 0, stream: true });

/**
 * One streamed request on the one keep-alive connection: ms until the first SSE event (`data:`) arrived, the rest read
 * to its end.
 */
export async function ttftOnce(port, body) {
  const t = performance.now();
  const r = await request(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json' },
    dispatcher: agent,
  });
  let first;
  let text = '';
  for await (const chunk of r.body) {
    if (first === undefined && (text += chunk.toString()).includes('data:')) first = performance.now() - t;
  }
  if (r.statusCode !== 200 || first === undefined)
    throw new Error(`HTTP ${r.statusCode}: no SSE event: ${text.slice(0, 200)}`);
  return first;
}

/**
 * Time to first token through each port: n streams each, one at a time, in alternating rounds of 10 after 10 warm-up
 * streams each.
 */
export async function interleavedTtft(ports, n, body) {
  const out = ports.map(() => []);
  for (let i = 0; i < 10; i++) for (const p of ports) await ttftOnce(p, body);
  for (let done = 0; done < n; done += 10)
    for (const [k, p] of ports.entries()) for (let i = 0; i < 10; i++) out[k].push(await ttftOnce(p, body));
  return out;
}
