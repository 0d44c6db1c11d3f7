// pull against a real misbehaving HTTP server (issue 42, items 4, 5 and 6): a mirror that sends a
// byte every 200 ms (a stall timer that every byte resets never fires; the throughput floor does),
// tree listings whose pages never end (empty pages, a page pointing at itself, endless pages of one
// folder each), a download that redirects to itself, a file name holding a lone surrogate, and one
// file listed twice. Each ends with the project's error naming the bound or the name, the exit code
// of the table, and nothing half-written in the cache. The server is a node:http server on a free
// loopback port, gone when the suite ends.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDirs, ROOT, freePort } from '../helpers.js';

const COMMIT = 'c'.repeat(40);
const gitOid = (b: Buffer) => createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');
const CONFIG = Buffer.from(JSON.stringify({ model_type: 'qwen3', pad: 'x'.repeat(4000) }));
const file = (path: string, b: Buffer) => ({ type: 'file', path, size: b.length, oid: gitOid(b) });

let server: Server;
let base = '';
let pages = 0;
const newDir = tempDirs('sparkctl-hostilehub-');

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    let m = /^\/api\/models\/([^/]+)\/([^/]+)\/revision\//.exec(u.pathname);
    if (m) return send(res, 200, { sha: COMMIT });
    m = /^\/api\/models\/([^/]+)\/([^/]+)\/tree\//.exec(u.pathname);
    if (m) {
      pages++;
      const org = m[1];
      const cursor = Number(u.searchParams.get('cursor') ?? 0);
      const next = (c: number) => ({ link: `<${base}${u.pathname}?recursive=true&cursor=${c}>; rel="next"` });
      if (org === 'empty') return send(res, 200, [], next(cursor + 1));
      if (org === 'same')
        return send(res, 200, [file('config.json', CONFIG)], {
          link: `<${base}${u.pathname}?recursive=true&cursor=0>; rel="next"`,
        });
      if (org === 'endless')
        return send(
          res,
          200,
          [{ type: 'directory', path: `d${cursor}`, oid: 'a'.repeat(40), size: 0 }],
          next(cursor + 1),
        );
      // a lone surrogate is legal JSON (\ud800), so the raw text is written by hand
      if (org === 'odd') {
        const text = `[${JSON.stringify(file('config.json', CONFIG))}, {"type":"file","path":"tok\\ud800.json","size":2,"oid":"${gitOid(Buffer.from('{}'))}"}]`;
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(text);
      }
      if (org === 'twice')
        return send(res, 200, [
          file('config.json', CONFIG),
          file('config.json', Buffer.from('{"model_type": "other"}')),
        ]);
      return send(res, 200, [file('config.json', CONFIG)]);
    }
    m = /^\/([^/]+)\/([^/]+)\/resolve\//.exec(u.pathname);
    if (m?.[1] === 'loop') {
      res.writeHead(302, { location: `${base}${u.pathname}?again=${Math.random()}` });
      return res.end();
    }
    if (m?.[1] === 'slow') {
      // the whole file, one byte every 200 ms: every byte resets a stall timer
      res.writeHead(200, { 'content-length': String(CONFIG.length), 'content-type': 'application/octet-stream' });
      let i = 0;
      const t = setInterval(() => {
        if (res.destroyed || i >= CONFIG.length) return clearInterval(t);
        res.write(CONFIG.subarray(i, i + 1));
        i++;
      }, 200);
      res.on('close', () => clearInterval(t));
      return;
    }
    if (m) {
      res.writeHead(200, { 'content-length': String(CONFIG.length) });
      return res.end(CONFIG);
    }
    send(res, 404, { error: 'no route' });
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => server?.close(() => r()));
});

const pull = (cache: string, repo: string, env: Record<string, string> = {}) =>
  cli(['pull', repo, '--config-only'], {
    env: { HF_ENDPOINT: base, HF_HUB_CACHE: cache, HF_TOKEN: '', ...env },
    cwd: ROOT,
    timeout: 60_000,
  });

/** What the cache holds for a repository but the lock folder: no blob, no partial file, no link, no ref. */
const written = (cache: string, repo: string) => {
  const dir = join(cache, `models--${repo.replace('/', '--')}`);
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name), `${rel}${e.name}/`);
      else out.push(`${rel}${e.name}`);
    }
  };
  walk(dir, '');
  return out;
};

describe('a slow mirror: every deadline fires', { timeout: 90_000 }, () => {
  it('a byte every 200 ms is cut off by the throughput floor (tried once more), exit 3 naming the floor; the bytes that came are kept for a resume', async () => {
    const cache = join(newDir(), 'hub');
    const t0 = Date.now();
    const r = await pull(cache, 'slow/m', { SPARKCTL_PULL_MIN_BYTES: '1024', SPARKCTL_PULL_WINDOW_S: '1' });
    const ms = Date.now() - t0;
    expect(r.exitCode, r.stderr).toBe(3);
    expect(r.stderr).toMatch(
      /config\.json: \d+ bytes in 1 s from http:\/\/127\.0\.0\.1:\d+, less than the 1024 a window must bring/,
    );
    // two windows of 1 s and one pause: well under the stall timer (60 s) the trickle reset forever on main
    expect(ms).toBeLessThan(20_000);
    expect(written(cache, 'slow/m').filter((f) => f.startsWith('snapshots/') || f.startsWith('refs/'))).toEqual([]);
  });

  it('a bad floor setting is bad input (exit 2) naming the variable', async () => {
    const r = await pull(join(newDir(), 'hub'), 'slow/m', { SPARKCTL_PULL_WINDOW_S: 'soon' });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('SPARKCTL_PULL_WINDOW_S=soon');
  });
});

describe('every loop ends: pagination and redirects have bounds a server cannot move', { timeout: 90_000 }, () => {
  it('empty pages with a next link: exit 1 at the first, naming it', async () => {
    const cache = join(newDir(), 'hub');
    pages = 0;
    const r = await pull(cache, 'empty/m');
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stderr).toContain('an empty page that points at another');
    expect(pages).toBe(1);
    expect(written(cache, 'empty/m')).toEqual([]);
  });

  it('a page that points at itself: exit 1, the loop named', async () => {
    pages = 0;
    const r = await pull(join(newDir(), 'hub'), 'same/m');
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stderr).toContain('a page points at a page already read');
    // the first page's own URL carries other parameters: its link is read once, then seen again
    expect(pages).toBe(2);
  });

  it('endless pages of one folder each (no file, so the file bound never counts): stopped at the page bound', async () => {
    pages = 0;
    const r = await pull(join(newDir(), 'hub'), 'endless/m');
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stderr).toContain('more than 2000 pages (the bound on pages a listing may have)');
    expect(pages).toBe(2000);
  });

  it('a download that redirects to itself: exit 1 naming the redirect bound, not retried as a network error', async () => {
    const cache = join(newDir(), 'hub');
    const r = await pull(cache, 'loop/m');
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stderr).toContain('more than 20 redirects (the bound on redirects a download follows)');
    expect(written(cache, 'loop/m').filter((f) => !f.endsWith('.incomplete'))).toEqual([]);
  });
});

describe('odd names in a listing are findings before any byte', { timeout: 60_000 }, () => {
  it('a file name with a lone surrogate: exit 1 naming it, nothing written (no partial file)', async () => {
    const cache = join(newDir(), 'hub');
    const r = await pull(cache, 'odd/m');
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stderr).toContain('a lone UTF-16 surrogate in the name');
    expect(r.stderr).not.toMatch(/internal error|URIError/);
    expect(written(cache, 'odd/m')).toEqual([]);
  });

  it('the same file listed twice: refused before any byte is written', async () => {
    const cache = join(newDir(), 'hub');
    const r = await pull(cache, 'twice/m');
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stderr).toContain('"config.json" is listed twice');
    expect(written(cache, 'twice/m')).toEqual([]);
  });
});
