// src/client/http.ts against a real node:http server that drops a kept-alive socket when the next
// request arrives on it (what a server's keep-alive timeout does when it fires just as the client
// reuses the socket: seen as "connection reset" probes of healthy servers once serve's default
// address became 127.0.0.1, the same address readiness polled). A GET is sent again on a fresh
// socket; a POST is never sent twice.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { http, retryDeadlineMs } from '../../src/client/http.js';

let server: Server;
let url: string;
const seen: Array<{ method: string; fresh: boolean }> = [];
let lateDropMs = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    const sock = req.socket as typeof req.socket & { served?: number };
    sock.served = (sock.served ?? 0) + 1;
    seen.push({ method: req.method ?? '', fresh: sock.served === 1 });
    // the second request on one socket: the socket is closed without an answer (late: after lateDropMs)
    if (sock.served > 1) {
      if (lateDropMs) return void setTimeout(() => sock.resetAndDestroy(), lateDropMs);
      return sock.destroy();
    }
    // a fresh socket after a late drop: answered a little later still
    if (lateDropMs) return void setTimeout(() => res.end('{"ok":true}'), 150);
    res.setHeader('content-type', 'application/json');
    res.end('{"ok":true}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('a kept-alive socket the server closed', () => {
  it('a GET is answered: sent again once on a fresh socket', async () => {
    seen.length = 0;
    expect((await http(`${url}/health`, { timeoutMs: 5000 })).ok).toBe(true);
    const second = await http(`${url}/health`, { timeoutMs: 5000 });
    expect(second.ok, JSON.stringify(second)).toBe(true);
    // the second GET went out on the kept socket (dropped), then on a fresh one
    expect(seen.map((s) => s.fresh)).toEqual([true, false, true]);
  });

  it('a POST is not sent twice: the reset is the answer', async () => {
    // after a GET the agent keeps one socket that has served one request: the next request on it is dropped
    expect((await http(`${url}/health`, { timeoutMs: 5000 })).ok).toBe(true);
    seen.length = 0;
    const post = await http(`${url}/v1/completions`, { body: { a: 1 }, timeoutMs: 5000 });
    expect(post).toMatchObject({ ok: false, error: 'reset' });
    expect(seen).toEqual([{ method: 'POST', fresh: false }]);
  });
});

describe("the fresh socket's deadline", () => {
  it.each([
    // [deadline, spent on the dead socket, what the retry gets]
    [5000, 3, 4997],
    [5000, 2900, 2100],
    [5000, 4999, 2000], // the floor: a reset noticed late still leaves the server its time
    [5000, 9000, 2000],
    [800, 790, 800], // a deadline under the floor: never more than the deadline itself
    [800, 100, 800],
    [2000, 1500, 2000],
  ])('deadline %i ms, %i ms spent before the reset: the retry gets %i ms', (deadline, spent, want) => {
    expect(retryDeadlineMs(deadline, spent)).toBe(want);
  });

  it('a reset noticed late: the retry still waits for the server (not what was left of the deadline)', async () => {
    lateDropMs = 400;
    try {
      expect((await http(`${url}/health`, { timeoutMs: 5000 })).ok).toBe(true);
      seen.length = 0;
      // 400 ms lost on the dropped socket; the fresh socket's answer takes 150 ms more: 550 > the 500 ms deadline
      const r = await http(`${url}/health`, { timeoutMs: 500 });
      expect(r.ok, JSON.stringify(r)).toBe(true);
      expect(seen.map((s) => s.fresh)).toEqual([false, true]);
    } finally {
      lateDropMs = 0;
    }
  });
});
