// Issue 42 item 2, the building block for router -> replica hops over a Unix socket: the simulator
// plays vLLM's `--uds PATH` (0.11 and later; vllm/entrypoints/openai/api_server.py setup_server: the
// socket is bound INSTEAD of the TCP port, and a path that exists is Errno 98), and the real HAProxy
// reaches it as `server NAME unix@PATH` with its /health check. The socket lives in a 0700 folder: a
// second local user (uid 65534 through setpriv) cannot open it, where a loopback port that a dead
// replica freed could be bound by anyone. A vLLM without the flag (0.10) refuses it as vLLM's parser
// does. The router does not render this yet (see /work/notes/s4-issue-42-harm.md): this pins what the
// simulator and HAProxy do, which the router's change will stand on.
import { describe, it, expect, afterAll } from 'vitest';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { BIN, RUN_MARK, freePort, tempDirs, killGroupLeft, canSwitchToNobody, connectAsNobody } from '../helpers.js';

const HAPROXY = '/usr/sbin/haproxy';
const skip = !existsSync(HAPROXY)
  ? `${HAPROXY} is not installed (apt-get install haproxy)`
  : !canSwitchToNobody()
    ? 'needs root and setpriv to try the socket as uid 65534'
    : '';
if (skip) console.warn(`sim --uds e2e skipped: ${skip}`);

const dirs = tempDirs('sparkctl-uds-');
const started: ResultPromise[] = [];
afterAll(async () => {
  for (const p of started) {
    // a group is signalled only while its leader runs (never a number another group may have taken since)
    if (p.pid && p.exitCode === null) {
      try {
        process.kill(-p.pid, 'SIGTERM');
      } catch {}
    }
    await p;
    killGroupLeft(p.pid);
  }
});

const get = (o: { socketPath?: string; port?: number; path: string }) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const r = request(
      { socketPath: o.socketPath, host: '127.0.0.1', port: o.port, path: o.path, timeout: 5000 },
      (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    r.on('error', reject);
    r.on('timeout', () => r.destroy(new Error('timeout')));
    r.end();
  });

async function until<T>(f: () => Promise<T>, ms: number): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      return await f();
    } catch (e) {
      if (Date.now() > end) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

describe.skipIf(!!skip)('vLLM --uds, played by the simulator, behind the real HAProxy', () => {
  it('the replica answers only on its socket in a 0700 folder; HAProxy checks and forwards over it; another user cannot open it', async () => {
    const dir = join(dirs(), 'replicas');
    mkdirSync(dir, { mode: 0o700 });
    const sock = join(dir, 'r0.sock');
    const sim = execa(
      process.execPath,
      [
        BIN,
        'sim',
        'serve',
        'Qwen/Qwen3.5-9B',
        '--uds',
        sock,
        '--port',
        '1',
        '--sim-load-seconds',
        '0.2',
        '--sim-vllm-version',
        '0.27.2',
      ],
      {
        reject: false,
        detached: true,
        all: true,
        env: { SPARKCTL_TEST_RUN: RUN_MARK },
      },
    );
    started.push(sim);
    let out = '';
    sim.all?.on('data', (d: Buffer) => (out += d.toString()));
    const h = await until(() => get({ socketPath: sock, path: '/health' }), 20_000);
    expect(h.status, out).toBe(200);
    expect(out).toMatch(/Starting vLLM server on unix:.*r0\.sock/);
    // no TCP port: --port is not bound when --uds is given (as vLLM)
    await expect(get({ port: 1, path: '/health' })).rejects.toThrow();

    const port = await freePort();
    const cfg = join(dirs(), 'haproxy.cfg');
    writeFileSync(
      cfg,
      [
        'global',
        '    log stderr format raw local0 info',
        'defaults',
        '    mode http',
        '    timeout connect 2s',
        '    timeout client 10s',
        '    timeout server 10s',
        'frontend f',
        `    bind 127.0.0.1:${port}`,
        '    default_backend b',
        'backend b',
        '    option httpchk GET /health',
        '    default-server check inter 300ms fall 2 rise 1',
        `    server r0 unix@${sock}`,
        '',
      ].join('\n'),
    );
    const ha = execa(HAPROXY, ['-db', '-f', cfg], { reject: false, detached: true, all: true });
    started.push(ha);
    const m = await until(async () => {
      const r = await get({ port, path: '/v1/models' });
      if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
      return r;
    }, 10_000);
    expect(JSON.parse(m.body).data[0].id).toBe('Qwen/Qwen3.5-9B');

    // a second local user: the folder is 0700, so the socket cannot be opened at all
    expect(connectAsNobody(sock)).toBe('EACCES');

    // the replica gone: HAProxy has nothing to forward to (its socket path is in our 0700 folder: nobody else binds it)
    process.kill(-sim.pid!, 'SIGTERM');
    await sim;
    const down = await until(async () => {
      const r = await get({ port, path: '/v1/models' });
      if (r.status !== 503) throw new Error(`HTTP ${r.status}`);
      return r;
    }, 10_000);
    expect(down.status).toBe(503);
  }, 60_000);

  it('a vLLM without --uds (0.10) refuses it, as its parser does', async () => {
    const r = await execa(
      process.execPath,
      [
        BIN,
        'sim',
        'serve',
        'Qwen/Qwen3.5-9B',
        '--uds',
        join(dirs(), 'x.sock'),
        '--sim-load-seconds',
        '0.2',
        '--sim-vllm-version',
        '0.10.0',
      ],
      {
        reject: false,
        all: true,
        timeout: 20_000,
        env: { SPARKCTL_TEST_RUN: RUN_MARK },
      },
    );
    expect(r.exitCode).toBe(2);
    expect(r.all).toMatch(/unrecognized arguments: --uds/);
  }, 30_000);
});
