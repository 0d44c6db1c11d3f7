// Issue 13's hostile-server suite (items 4, 6, 11, 13, 14): real servers on free ports of 127.0.0.1
// that never answer, hang the body, trickle, send 50 MB, answer the wrong shape, redirect, echo a
// key. Every probe/prewarm ends within its deadline with exit 1 or 3 and a cause; bad input is exit 2
// at once; no credential reaches output, state files, metric labels or a webhook.
import { describe, it, expect, beforeAll, afterAll, beforeEach, afterEach } from 'vitest';
import { createServer as createHttp, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import { createServer as createTcp, type Socket } from 'node:net';
import { writeFileSync, readFileSync, symlinkSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, rmrf } from '../helpers.js';

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;
const servers: Array<{ close: () => void }> = [];

async function serveHttp(h: Handler): Promise<string> {
  const sockets = new Set<Socket>();
  const s: Server = createHttp((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => h(req, res, body));
  });
  s.on('connection', (c) => {
    sockets.add(c);
    c.on('close', () => sockets.delete(c));
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  servers.push({
    close: () => {
      for (const c of sockets) c.destroy();
      s.close();
    },
  });
  const a = s.address();
  return `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
}

const json = (res: ServerResponse, status: number, v: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(typeof v === 'string' ? v : JSON.stringify(v));
};

/** Answers like a healthy vLLM serving model "m", except where `over` says otherwise. */
const fakeVllm =
  (over: Record<string, Handler> = {}): Handler =>
  (req, res, body) => {
    const path = (req.url ?? '').split('?')[0]!;
    if (over[path]) return over[path]!(req, res, body);
    if (path === '/health') return json(res, 200, '');
    if (path === '/v1/models')
      return json(res, 200, { object: 'list', data: [{ id: 'm', object: 'model', max_model_len: 4096 }] });
    if (path === '/v1/completions')
      return json(res, 200, {
        choices: [{ text: 'x', index: 0, finish_reason: 'length' }],
        usage: { prompt_tokens: 1, completion_tokens: 1 },
      });
    if (path === '/tokenize')
      return json(res, 200, { count: Math.max(1, Math.round(JSON.parse(body || '{}').prompt?.length / 4 || 1)) });
    if (path === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      return res.end('');
    }
    json(res, 404, { error: 'not found' });
  };

let state: string;
beforeEach(() => {
  state = tempDir('sparkctl-hostile-');
});
afterEach(() => rmrf(state));
afterAll(() => {
  for (const s of servers) s.close();
});

const probe = (url: string, extra: string[] = [], env: Record<string, string> = {}) =>
  cli(['probe', '--url', url, '--step-timeout', '1500ms', ...extra], {
    env: { SPARKCTL_STATE_DIR: state, ...env },
    timeout: 60_000,
  });
const prewarm = (url: string, extra: string[] = [], env: Record<string, string> = {}) =>
  cli(['prewarm', '--url', url, '--deadline', '4', ...extra], {
    env: { SPARKCTL_STATE_DIR: state, ...env },
    timeout: 60_000,
  });

describe('servers that misbehave: every probe and prewarm ends in time with exit 1 or 3 and a cause', {
  timeout: 120_000,
}, () => {
  let never: string,
    hangBody: string,
    trickle: string,
    huge: string,
    badShape: string,
    nullList: string,
    redirect: string;
  beforeAll(async () => {
    // accepts the connection, never says a word
    const tcp = createTcp(() => {});
    const held: Socket[] = [];
    tcp.on('connection', (c) => held.push(c));
    await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
    servers.push({
      close: () => {
        for (const c of held) c.destroy();
        tcp.close();
      },
    });
    never = `http://127.0.0.1:${(tcp.address() as { port: number }).port}`;
    hangBody = await serveHttp((_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"data":');
    });
    trickle = await serveHttp((_q, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const t = setInterval(() => (res.destroyed ? clearInterval(t) : res.write('.')), 1000);
    });
    const mb = Buffer.alloc(1024 * 1024, 'x');
    huge = await serveHttp((_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      let n = 0;
      const more = () => {
        while (n < 50 && !res.destroyed) {
          n++;
          if (!res.write(mb)) return res.once('drain', more);
        }
        res.end();
      };
      more();
    });
    badShape = await serveHttp(fakeVllm({ '/v1/models': (_q, res) => json(res, 200, { data: 'oops' }) }));
    nullList = await serveHttp(fakeVllm({ '/v1/models': (_q, res) => json(res, 200, [null]) }));
    redirect = await serveHttp((_q, res) => {
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' });
      res.end();
    });
  });

  it.each([
    ['never answers', () => never, 3, /no answer within 1500 ms/],
    ['hangs the body', () => hangBody, 3, /no answer within 1500 ms/],
    ['trickles a byte a second', () => trickle, 3, /no answer within 1500 ms/],
    // cut off at 8 MiB, or (on a loaded machine) the deadline comes first: bounded either way
    ['sends 50 MB', () => huge, [1, 3], /exceeded \d+ bytes: cut off|no answer within 1500 ms/],
    ['/v1/models {"data":"oops"}', () => badShape, 1, /identity fail: \/v1\/models answered a body of the wrong shape/],
    ['/v1/models [null]', () => nullList, 1, /wrong shape/],
    ['redirects elsewhere', () => redirect, 1, /\/health answers HTTP 302/],
  ])('probe: %s', async (_name, url, code, cause) => {
    const prom = join(state, 'sparkctl.prom');
    const r = await probe(url(), ['--prometheus', prom]);
    expect(r.timedOut).toBe(false);
    expect([code].flat(), r.stdout + r.stderr).toContain(r.exitCode);
    expect(r.stdout).toMatch(cause);
    // The verdict of every target survives: the textfile is written.
    expect(readFileSync(prom, 'utf8')).toMatch(/sparkctl_probe_healthy\{.*\} 0/);
  });

  it.each([
    ['never answers', () => never, 3, /did not become healthy within 4 s/],
    ['/v1/models {"data":"oops"}', () => badShape, 1, /wrong shape/],
    ['/v1/models [null]', () => nullList, 1, /wrong shape/],
    ['sends 50 MB', () => huge, 3, /did not become healthy within 4 s \((the answer exceeded|no answer within)/],
  ])('prewarm: %s', async (_name, url, code, cause) => {
    const r = await prewarm(url());
    expect(r.timedOut).toBe(false);
    expect(r.exitCode, r.stdout + r.stderr).toBe(code);
    expect(r.stdout + r.stderr).toMatch(cause);
  });
});

describe('a URL that cannot be right is exit 2 at once; a host that does not resolve is exit 3', {
  timeout: 120_000,
}, () => {
  it.each(['file:///etc/passwd', 'ftp://127.0.0.1/', 'http://127.0.0.1:99999', 'not a url', 'http://'])(
    '%s',
    async (u) => {
      for (const verb of [probe, prewarm]) {
        const r = await verb(u, [], {});
        expect(r.exitCode, `${u}: ${r.stderr}`).toBe(2);
        expect(r.stderr).toMatch(/--url: /);
      }
      const w = await cli(['probe', '--url', 'http://127.0.0.1:1', '--alert-webhook', u], {
        env: { SPARKCTL_STATE_DIR: state },
      });
      expect(w.exitCode).toBe(2);
    },
  );
  it('an unresolvable host', async () => {
    const p = await probe('http://no-such-host.invalid:8000');
    expect(p.exitCode, p.stdout + p.stderr).toBe(3);
    expect(p.stdout).toMatch(/does not resolve/);
    const w = await prewarm('http://no-such-host.invalid:8000', ['--deadline', '30']);
    expect(w.exitCode, w.stdout + w.stderr).toBe(3);
    expect(w.stdout).toMatch(/does not resolve/);
  });
});

describe('credentials never reach output, files, labels or webhooks', { timeout: 120_000 }, () => {
  it('URL userinfo and a key the server echoes back are redacted everywhere', async () => {
    const KEY = 'sk-hostile-test-9f3a7c';
    let hook = '';
    const webhook = await serveHttp((_q, res, body) => {
      hook += body;
      json(res, 200, {});
    });
    const echo = await serveHttp(
      fakeVllm({
        '/v1/completions': (req, res) =>
          json(res, 401, {
            error: { message: `invalid key ${String(req.headers.authorization).replace('Bearer ', '')}` },
          }),
      }),
    );
    const url = echo.replace('http://', 'http://admin:hunter2pass@');
    const prom = join(state, 'p.prom');
    const r = await probe(url, ['--prometheus', prom, '--alert-webhook', webhook, '--json'], { SPARKCTL_API_KEY: KEY });
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stdout).toContain('<redacted>'); // the echoed key, masked
    const files = [
      prom,
      join(state, 'probe-state.json'),
      ...readdirSync(state, { recursive: true }).map((f) => join(state, String(f))),
    ].filter((f) => existsSync(f) && !readdirSync(state).includes(''));
    const everything = [
      r.stdout,
      r.stderr,
      hook,
      ...files.map((f) => {
        try {
          return readFileSync(f, 'utf8');
        } catch {
          return '';
        }
      }),
    ].join('\n');
    expect(hook).toContain('sparkctl');
    expect(everything).not.toContain('hunter2pass');
    expect(everything).not.toContain('admin:');
    expect(everything).not.toContain(KEY);
  });
});

describe('items 11, 14: unusable folders are exit 2 with a message, and probe still prints its verdict', {
  timeout: 120_000,
}, () => {
  let ok: string;
  beforeAll(async () => {
    ok = await serveHttp(fakeVllm());
  });
  it('state folder that is a file: status exit 2; probe --url prints the verdict, then exit 2', async () => {
    const file = join(state, 'afile');
    writeFileSync(file, 'x');
    const st = await cli(['status'], { env: { SPARKCTL_STATE_DIR: file } });
    expect(st.exitCode, st.stderr).toBe(2);
    expect(st.stderr).toMatch(/state folder .*afile/);
    const p = await cli(['probe', '--url', ok], { env: { SPARKCTL_STATE_DIR: file } });
    expect(p.stdout).toMatch(/healthy/);
    expect(p.stderr).toMatch(/probe state was not saved/);
    expect(p.exitCode).toBe(2);
  });
  it('state folder under /proc or a dangling link: exit 2', async () => {
    for (const dir of [
      '/proc/sparkctl-state',
      (symlinkSync(join(state, 'nowhere'), join(state, 'dangling')), join(state, 'dangling')),
    ]) {
      const st = await cli(['status'], { env: { SPARKCTL_STATE_DIR: dir } });
      expect(st.exitCode, `${dir}: ${st.stderr}`).toBe(2);
      expect(st.stderr).toMatch(/state folder/);
    }
  });
  it('--prometheus whose folder is a file or a dangling link: exit 2 before anything is probed', async () => {
    writeFileSync(join(state, 'afile'), 'x');
    symlinkSync(join(state, 'nowhere'), join(state, 'dangling'));
    for (const prom of [join(state, 'afile', 'x.prom'), join(state, 'dangling', 'x.prom')]) {
      const p = await probe(ok, ['--prometheus', prom]);
      expect(p.stdout).toBe('');
      expect(p.exitCode, p.stderr).toBe(2);
      expect(p.stderr).toMatch(/--prometheus/);
    }
  });
  it('collect --out-dir that is a file or a dangling link: exit 2', async () => {
    writeFileSync(join(state, 'afile'), 'x');
    symlinkSync(join(state, 'nowhere'), join(state, 'dangling'));
    for (const out of [join(state, 'afile'), join(state, 'dangling')]) {
      const c = await cli(['collect', '--out-dir', out, '--probe-timeout', '2000'], {
        env: { SPARKCTL_STATE_DIR: state },
      });
      expect(c.exitCode, c.stderr).toBe(2);
      expect(c.stderr).toMatch(/--out/);
    }
  });
  it('--profiles that does not exist or is a file: exit 2', async () => {
    writeFileSync(join(state, 'afile'), 'x');
    for (const d of ['/nonexistent-sparkctl-profiles', join(state, 'afile')]) {
      const r = await cli(['plan', 'qwen3.5-9b', '--profiles', d]);
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/--profiles/);
      const l = await cli(['profiles', 'list', '--profiles', d]);
      expect(l.exitCode, l.stderr).toBe(2);
    }
  });
});
