// The one readiness wait, against real sockets on 127.0.0.1.
import { describe, it, expect, afterEach } from 'vitest';
import { createServer, type Server } from 'node:http';
import { waitReady } from '../../src/client/ready.js';
import { listenerIsOneOf, listeningInodes } from '../../src/engine/runtime/socket-owner.js';
import { freePort } from '../helpers.js';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A server whose /health and /v1/models answers are scripted. */
async function fake(models: unknown, health = 200): Promise<{ url: string; port: number; hits: () => number }> {
  let hits = 0;
  const s = createServer((req, res) => {
    hits++;
    if (req.url === '/health') return res.writeHead(health).end();
    if (req.url === '/v1/models')
      return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(models));
    res.writeHead(404).end();
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, port, hits: () => hits };
}
const listing = (...ids: string[]) => ({ object: 'list', data: ids.map((id) => ({ id, object: 'model' })) });

describe('waitReady', () => {
  it('ready: /health 200 and /v1/models lists the served name', async () => {
    const s = await fake(listing('other', 'Qwen/Qwen3.5-9B'));
    const r = await waitReady({ url: s.url, servedName: 'Qwen/Qwen3.5-9B', deadlineMs: 10_000 });
    expect(r.ok).toBe(true);
  });

  it('without a served name, /health 200 is enough', async () => {
    const s = await fake({ data: 'oops' });
    expect((await waitReady({ url: s.url, deadlineMs: 10_000 })).ok).toBe(true);
  });

  it.each([
    ['another model', listing('meta-llama/Llama-3-8B'), /serves meta-llama\/Llama-3-8B, not Qwen\/Qwen3\.5-9B/],
    ['a hostile shape: data is a string', { data: 'oops' }, /serves nothing, not Qwen/],
    ['a hostile shape: [null]', [null], /serves nothing, not Qwen/],
    ['a hostile shape: data of nulls and numbers', { data: [null, 3, { id: 7 }] }, /serves nothing, not Qwen/],
  ])('wrong model (%s): ends at once as wrong-model, never a crash', async (_, models, detail) => {
    const s = await fake(models);
    const r = await waitReady({ url: s.url, servedName: 'Qwen/Qwen3.5-9B', deadlineMs: 10_000 });
    expect(r).toMatchObject({ ok: false, reason: 'wrong-model' });
    expect(!r.ok && r.detail).toMatch(detail);
  });

  it('a server that is not ours is never ready: it waits, and at the deadline says whose it is not', async () => {
    const s = await fake(listing('Qwen/Qwen3.5-9B'));
    const r = await waitReady({ url: s.url, servedName: 'Qwen/Qwen3.5-9B', deadlineMs: 600, ours: () => false });
    expect(r).toMatchObject({ ok: false, reason: 'not-ours' });
    expect(!r.ok && r.detail).toMatch(/not the process sparkctl started/);
    expect(s.hits()).toBeGreaterThan(2);
  });

  it('ours once our process holds the socket', async () => {
    const s = await fake(listing('Qwen/Qwen3.5-9B'));
    let calls = 0;
    const r = await waitReady({
      url: s.url,
      servedName: 'Qwen/Qwen3.5-9B',
      deadlineMs: 10_000,
      ours: () => ++calls >= 3,
    });
    expect(r.ok).toBe(true);
    expect(calls).toBe(3);
  });

  it('the process ending wins over polling: exited, with its detail', async () => {
    const port = await freePort();
    let n = 0;
    const r = await waitReady({
      url: `http://127.0.0.1:${port}`,
      servedName: 'm',
      deadlineMs: 10_000,
      ended: () => (++n > 2 ? { reason: 'exited', detail: 'exited with code 1 before it was ready' } : undefined),
    });
    expect(r).toMatchObject({ ok: false, reason: 'exited', detail: 'exited with code 1 before it was ready' });
  });

  it('refused until the deadline: timeout', async () => {
    const port = await freePort();
    const r = await waitReady({ url: `http://127.0.0.1:${port}`, servedName: 'm', deadlineMs: 300 });
    expect(r).toMatchObject({ ok: false, reason: 'timeout' });
    expect(!r.ok && r.ms).toBeGreaterThanOrEqual(300);
  });

  it('a quiet log past the stall limit: stalled', async () => {
    const port = await freePort();
    const r = await waitReady({
      url: `http://127.0.0.1:${port}`,
      servedName: 'm',
      deadlineMs: 60_000,
      stallMs: 1000,
      quietMs: () => 5000,
    });
    expect(r).toMatchObject({ ok: false, reason: 'stalled' });
    expect(!r.ok && r.detail).toMatch(/no log output for 5 s \(stall timeout\)/);
  });

  it('a hang named from the log ends the wait long before the stall limit', async () => {
    const port = await freePort();
    let rounds = 0;
    const hung = () => (++rounds >= 3 ? 'stopped at a known hang: Ray cannot place the workers' : undefined);
    const r = await waitReady({
      url: `http://127.0.0.1:${port}`,
      servedName: 'm',
      deadlineMs: 60_000,
      stallMs: 600_000,
      quietMs: () => 0,
      hung,
      pollMs: 10,
    });
    expect(r).toMatchObject({ ok: false, reason: 'stalled', detail: /Ray cannot place the workers/ });
    expect(rounds).toBe(3);
  });

  it('cancellation ends the wait promptly (interrupted)', async () => {
    const port = await freePort();
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    const r = await waitReady({
      url: `http://127.0.0.1:${port}`,
      servedName: 'm',
      deadlineMs: 600_000,
      signal: ac.signal,
      pollMs: 60_000,
    });
    expect(r).toMatchObject({ ok: false, reason: 'interrupted' });
  });
});

describe('listenerIsOneOf: who holds a listening socket', () => {
  it('this process holds its own server; pid 1 does not', async () => {
    const s = await fake(listing());
    expect(listeningInodes(s.port)?.size).toBeGreaterThan(0);
    expect(listenerIsOneOf(s.port, [process.pid])).toBe(true);
    expect(listenerIsOneOf(s.port, [1])).toBe(false);
  });

  it('nobody listening: false; parsing /proc/net/tcp lines by port and LISTEN state', async () => {
    const port = await freePort();
    expect(listenerIsOneOf(port, [process.pid])).toBe(false);
    const hex = port.toString(16).toUpperCase().padStart(4, '0');
    const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:${hex} 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0\n   1: 0100007F:${hex} 0100007F:9999 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0\n`;
    expect(listeningInodes(port, (f) => (f.endsWith('tcp') ? tcp : null))).toEqual(new Set(['4242']));
    expect(listeningInodes(port, () => null)).toBeUndefined();
  });
});

describe('pause: the wait every readiness and cluster loop uses', () => {
  it('leaves no listener on the signal it waited on, however many rounds; an abort ends it at once', async () => {
    const { pause } = await import('../../src/util/pause.js');
    const { getEventListeners } = await import('node:events');
    const ac = new AbortController();
    for (let i = 0; i < 50; i++) await pause(1, ac.signal);
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
    const t = performance.now();
    const p = pause(10_000, ac.signal);
    ac.abort();
    await p;
    expect(performance.now() - t).toBeLessThan(1000);
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(0);
  });

  it('an async hang check (the Ray head asking Ray over ssh) ends the wait as stalled with its why', async () => {
    const port = await freePort();
    let asked = 0;
    const r = await waitReady({
      url: `http://127.0.0.1:${port}`,
      deadlineMs: 10_000,
      hung: async () => (++asked >= 3 ? 'the Ray cluster lost capacity' : undefined),
    });
    expect(r).toMatchObject({ ok: false, reason: 'stalled', detail: 'the Ray cluster lost capacity' });
    expect(asked).toBe(3);
  });

  it('onHealth sees every /health answer, so a caller can say why the server never came up', async () => {
    const s = await fake(listing('m'), 503);
    const seen: Array<number | string> = [];
    const r = await waitReady({ url: s.url, deadlineMs: 400, onHealth: (h) => seen.push(h.ok ? h.status : h.error) });
    expect(r).toMatchObject({ ok: false, reason: 'timeout' });
    expect(seen.length).toBeGreaterThan(1);
    expect(new Set(seen)).toEqual(new Set([503]));
  });
});
