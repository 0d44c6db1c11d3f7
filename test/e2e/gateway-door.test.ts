// The gateway's doors, tried by a real second local user (uid 65534, `nobody`, through setpriv) with
// real HAProxy (2.6) and simulator profiles (sleep mode runs on the simulator; HAProxy, the keeper
// and the uids are real):
// - the keeper (which wakes sleeping models, renames aliases, reads large bodies, and adds a model's
//   key) listens on a Unix socket in the gateway's 0700 folder: another user can neither open it nor
//   bind it, and there is no port next to the gateway to reach or to take (port + 2 was the waker's:
//   any local user could send X-Sparkctl-Model there and get a model's key added);
// - an internal header sent by a client is never believed, at the front door or at the keeper, and
//   the keeper adds a model's key only to a caller that shows the gateway's key;
// - a keeper that died is a 503 in OpenAI's shape, never a forward to whoever took its place;
// - a body past HAProxy's 256 KiB window whose model comes after the prompt is routed (item 11);
// - a socket or a port the gateway needs that another process holds is named, with its holder.
import { describe, it, expect, beforeAll, afterEach, afterAll } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { cli, isolated, freePortRange, waitFor, canSwitchToNobody, AS_NOBODY } from '../helpers.js';
import { tempDir } from '../temp-dirs.js';

const HAPROXY = '/usr/sbin/haproxy';
const skip = !existsSync(HAPROXY)
  ? `${HAPROXY} is not installed (apt-get install haproxy)`
  : !canSwitchToNobody()
    ? 'needs root and setpriv to run the attacker as uid 65534'
    : '';
if (skip) console.warn(`gateway door e2e skipped: ${skip}`);

const PROD_KEY = 'sk-prod-door-4242';
const GW_KEY = 'sk-gateway-door-7171';
const t = isolated({
  prefix: 'sparkctl-gwdoor-',
  per: 'suite',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_COLD_MS: '10', QWEN_PROD_API_KEY: PROD_KEY, GW_KEY },
});

// The attacker: a script nobody can read and run, in a folder of its own (0755).
const ATTACKER = `
const http = require('node:http');
const net = require('node:net');
const [mode, arg] = process.argv.slice(2);
const o = JSON.parse(arg);
const send = (opts, body) => new Promise((resolve) => {
  const r = http.request({ method: 'POST', ...opts, headers: { 'content-type': 'application/json', ...(opts.headers || {}) } }, (res) => {
    let text = '';
    res.on('data', (d) => (text += d));
    res.on('end', () => resolve({ status: res.statusCode, text: text.slice(0, 2000) }));
  });
  r.on('error', (e) => resolve({ error: e.code || e.message }));
  r.setTimeout(10000, () => r.destroy(new Error('timeout')));
  r.end(JSON.stringify(body));
});
(async () => {
  if (mode === 'probe') {
    const inner = { 'x-sparkctl-model': o.model, 'x-sparkctl-backend': o.backend };
    const out = {};
    out.oldWakerPort = await send({ host: '127.0.0.1', port: o.wakerPort, path: '/v1/completions', headers: inner }, { model: o.model, prompt: 'hi', max_tokens: 2 });
    out.frontDoor = await send({ host: '127.0.0.1', port: o.port, path: '/v1/completions', headers: inner }, { model: o.model, prompt: 'hi', max_tokens: 2 });
    out.keeperSocket = await send({ socketPath: o.socket, path: '/v1/completions', headers: inner }, { model: o.model, prompt: 'hi', max_tokens: 2 });
    console.log(JSON.stringify(out));
    return;
  }
  // listen: take the port and the socket path, and report every request that arrives
  const seen = [];
  const srv = http.createServer((req, res) => {
    seen.push({ url: req.url, headers: req.headers });
    console.log(JSON.stringify({ request: { url: req.url, headers: req.headers } }));
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"is_sleeping":false,"id":"attacker","choices":[{"text":"owned"}]}');
  });
  const took = {};
  await new Promise((resolve) => { srv.once('error', (e) => { took.port = e.code; resolve(); }); srv.listen(o.wakerPort, '127.0.0.1', () => { took.port = 'bound'; resolve(); }); });
  const sock = http.createServer((req, res) => { console.log(JSON.stringify({ request: { url: req.url, headers: req.headers, via: 'socket' } })); res.end('{}'); });
  await new Promise((resolve) => { sock.once('error', (e) => { took.socket = e.code; resolve(); }); sock.listen(o.socket, () => { took.socket = 'bound'; resolve(); }); });
  console.log(JSON.stringify({ took }));
})();
`;
let attackerDir = '';
const asNobody = (mode: 'probe' | 'listen', o: object): ChildProcess =>
  spawn('setpriv', [...AS_NOBODY, process.execPath, join(attackerDir, 'attacker.cjs'), mode, JSON.stringify(o)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '' },
  });
const lines = (c: ChildProcess) => {
  const out: string[] = [];
  let buf = '';
  c.stdout!.on('data', (d) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    out.push(...parts.filter(Boolean));
  });
  return out;
};

let base: number;
const gw = () => `http://127.0.0.1:${base}`;
const serve = (profile: string, port: number, extra: string[] = []) =>
  cli(
    [
      'serve',
      profile,
      '--engine',
      'sim',
      '--no-prewarm',
      '--set',
      `server.port=${port}`,
      '--set',
      'server.host=127.0.0.1',
      '--set',
      'parallel.replicas=1',
      ...extra,
    ],
    {
      env: t.env(),
      timeout: 90_000,
    },
  );
const post = (body: object, headers: Record<string, string> = {}) =>
  fetch(`${gw()}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
const auth = { authorization: `Bearer ${GW_KEY}` };
/** One request over the keeper's Unix socket, as root (what HAProxy is to it). */
const overSocket = (socketPath: string, body: object, headers: Record<string, string> = {}) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const r = request(
      {
        socketPath,
        method: 'POST',
        path: '/v1/completions',
        headers: { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    r.on('error', reject);
    r.end(JSON.stringify(body));
  });

describe.skipIf(!!skip)("the gateway's doors, tried by another local user", () => {
  afterEach(async () => {
    await cli(['gateway', 'down'], { env: t.env() });
  });
  afterAll(() => {
    if (attackerDir) rmSync(attackerDir, { recursive: true, force: true });
  });

  beforeAll(async () => {
    attackerDir = tempDir('sparkctl-attacker-');
    chmodSync(attackerDir, 0o755);
    writeFileSync(join(attackerDir, 'attacker.cjs'), ATTACKER, { mode: 0o644 });
    // the state folder as a system install has it (/var/lib/sparkctl, 0755): the gateway's own folder must be what
    // locks its doors
    chmodSync(t.state, 0o755);
    base = await freePortRange(6);
    const a = await serve('qwen-prod', base + 3, ['--set', 'server.sleepMode=true']);
    expect(a.exitCode, a.stderr).toBe(0);
    const b = await serve('qwen-dev', base + 4);
    expect(b.exitCode, b.stderr).toBe(0);
  }, 200_000);

  it("another user reaches no model through the keeper: no port to reach, no socket to open, no header believed; the keeper adds a model's key only for the gateway's key", async () => {
    const up = await cli(
      ['gateway', 'up', '--port', String(base), '--api-key-env', 'GW_KEY', '--alias', 'prod=qwen-prod', '--json'],
      { env: t.env() },
    );
    expect(up.exitCode, up.stderr + up.stdout).toBe(0);
    const rec = JSON.parse(readFileSync(join(t.state, 'gateway', 'gateway.json'), 'utf8'));
    const socket = join(t.state, 'gateway', 'keeper.sock');
    expect(rec.keeperSocket).toBe(socket);
    const backend = rec.models.find((m: { name: string }) => m.name === 'qwen-prod').backend;

    // the attacker, uid 65534: the old waker port, the front door with internal headers, the keeper's socket
    const probe = asNobody('probe', { wakerPort: base + 2, port: base, socket, model: 'qwen-prod', backend });
    const out = lines(probe);
    // 'close', not 'exit': 'exit' may come before the pipe's last line
    await new Promise((r) => probe.once('close', r));
    const got = JSON.parse(out.at(-1)!);
    console.log(`gateway door: what uid 65534 got: ${JSON.stringify(got)}`);
    // nothing listens next to the gateway (main: 200, the model's answer, the model's key added by the waker)
    expect(got.oldWakerPort).toEqual({ error: 'ECONNREFUSED' });
    // the front door believes no internal header: no key, no entry
    expect(got.frontDoor.status).toBe(401);
    // the keeper's socket: another user cannot open it
    expect(got.keeperSocket).toEqual({ error: 'EACCES' });

    // the keeper itself (reached as HAProxy reaches it) believes no header and checks the gateway's key
    const noKey = await overSocket(
      socket,
      { model: 'qwen-prod', prompt: 'hi', max_tokens: 2 },
      { 'x-sparkctl-model': 'qwen-prod' },
    );
    expect(noKey.status).toBe(401);
    expect(JSON.parse(noKey.text).error.type).toBe('AuthenticationError');
    expect(
      (
        await overSocket(
          socket,
          { model: 'qwen-prod', prompt: 'hi', max_tokens: 2 },
          { authorization: 'Bearer sk-gateway-door-7170' },
        )
      ).status,
    ).toBe(401);
    expect(
      (await overSocket(socket, { model: 'qwen-prod', prompt: 'hi', max_tokens: 2 }, { 'x-api-key': PROD_KEY })).status,
    ).toBe(401);
    // with the gateway's key: the model named in the body, never the one in a header
    const ok = await overSocket(
      socket,
      { model: 'qwen-dev', prompt: 'hi', max_tokens: 2 },
      { ...auth, 'x-sparkctl-model': 'qwen-prod', 'x-sparkctl-backend': backend },
    );
    expect(ok.status, ok.text).toBe(200);
    expect(JSON.parse(ok.text).model).toBe('qwen-dev');
    // through the front door too: a client's internal header routes nothing
    const front = await post(
      { model: 'qwen-dev', prompt: 'hi', max_tokens: 2 },
      { ...auth, 'X-Sparkctl-Model': 'qwen-prod', 'X-Sparkctl-Backend': backend },
    );
    expect(front.status).toBe(200);
    expect(((await front.json()) as { model: string }).model).toBe('qwen-dev');
    // and the routes that do go through the keeper work with the gateway's key: an alias (renamed, the model's key
    // added)
    const al = await post({ model: 'prod', prompt: 'hi', max_tokens: 2 }, auth);
    expect(al.status).toBe(200);
    expect(((await al.json()) as { model: string }).model).toBe('qwen-prod');
    expect((await post({ model: 'prod', prompt: 'hi', max_tokens: 2 })).status).toBe(401);
  }, 90_000);

  it('a keeper that died is a 503 in OpenAI shape for the routes it served; whoever takes its old port gets nothing, and nobody can take its socket', async () => {
    const up = await cli(
      ['gateway', 'up', '--port', String(base), '--api-key-env', 'GW_KEY', '--alias', 'prod=qwen-prod', '--json'],
      { env: t.env() },
    );
    expect(up.exitCode, up.stderr + up.stdout).toBe(0);
    const { pid } = JSON.parse(up.stdout) as { pid: number };
    const socket = join(t.state, 'gateway', 'keeper.sock');
    process.kill(pid, 'SIGKILL');
    expect(
      await waitFor(
        () => !existsSync(`/proc/${pid}`) || readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z'),
        5000,
        20,
      ),
    ).toBe(true);
    // the attacker takes port + 2 (the waker's, on main) and tries the socket's path
    const thief = asNobody('listen', { wakerPort: base + 2, socket });
    const heard = lines(thief);
    try {
      expect(await waitFor(() => heard.some((l) => l.includes('"took"')), 10_000, 20)).toBe(true);
      const took = JSON.parse(heard.find((l) => l.includes('"took"'))!).took;
      expect(took.socket).toBe('EACCES');
      // an alias's request (the keeper's route) with the gateway's key
      const r = await post({ model: 'prod', prompt: 'hi', max_tokens: 2 }, auth);
      const text = await r.text();
      expect(r.status, text).toBe(503);
      expect(r.headers.get('content-type')).toBe('application/json');
      expect(JSON.parse(text).error).toMatchObject({ type: 'ServiceUnavailableError', code: 503 });
      expect(JSON.parse(text).error.message).toMatch(/keeper .* is not running/);
      // a model HAProxy serves itself still answers
      expect((await post({ model: 'qwen-dev', prompt: 'hi', max_tokens: 2 }, auth)).status).toBe(200);
      await new Promise((res) => setTimeout(res, 300));
      const stolen = heard.filter((l) => l.includes('"request"'));
      expect(stolen, 'requests (with the clients keys) that reached the thief').toEqual([]);
    } finally {
      thief.kill('SIGKILL');
    }
  }, 90_000);

  it('a body past 256 KiB whose model comes after the prompt goes to that model (the keeper reads it); a body past 64 MiB is told so', async () => {
    const up = await cli(['gateway', 'up', '--port', String(base), '--alias', 'prod=qwen-prod', '--json'], {
      env: t.env(),
    });
    expect(up.exitCode, up.stderr + up.stdout).toBe(0);
    for (const model of ['qwen-dev', 'prod']) {
      // 400 KiB before the model (a field the server ignores: a prompt that long is past the simulator's context)
      const r = await post(
        { prompt: 'hi', user: 'x'.repeat(400 * 1024), max_tokens: 2, model },
        { authorization: `Bearer ${PROD_KEY}` },
      );
      const text = await r.text();
      expect(r.status, text.slice(0, 300)).toBe(200);
      expect(JSON.parse(text).model).toBe(model === 'prod' ? 'qwen-prod' : model);
    }
    // a body past the bound the keeper holds: 413, saying the bound and the fix
    // (sending 65 MiB through HAProxy on a loaded host ended in `write EPIPE` three times in CI runs, not explained:
    // sent once more on that, and the 413 is still what must come back)
    const big = { prompt: 'x'.repeat(65 * 1024 * 1024), model: 'qwen-dev' };
    const r = await post(big).catch(async (e: Error) => {
      console.log(
        `gateway door: the 65 MiB post failed (${String((e.cause as Error | undefined)?.message ?? e.message)}): sent once more`,
      );
      return post(big);
    });
    expect(r.status).toBe(413);
    expect(((await r.json()) as { error: { message: string } }).error.message).toMatch(
      /over the 64 MiB .* send the model first/,
    );
  }, 90_000);

  it('a socket or a port the gateway needs, held by another process: exit 4 naming it, its holder and the fix', async () => {
    // the keeper's socket answered by a live listener (another keeper, say)
    const socket = join(t.state, 'gateway', 'keeper.sock');
    const other = createServer().listen(socket);
    await new Promise((r) => other.once('listening', r));
    try {
      const r = await cli(['gateway', 'run', '--port', String(base)], { env: t.env(), timeout: 30_000 });
      expect(r.exitCode, r.stderr).toBe(4);
      expect(r.stderr).toContain(`another gateway keeper listens on ${socket}`);
    } finally {
      other.close();
    }
    // the stats port (port + 1) taken by another user's process
    const holder = asNobody('listen', { wakerPort: base + 1, socket: '/nonexistent/x.sock' });
    const heard = lines(holder);
    try {
      expect(await waitFor(() => heard.some((l) => l.includes('"took"')), 10_000, 20)).toBe(true);
      const r = await cli(['gateway', 'run', '--port', String(base)], { env: t.env(), timeout: 30_000 });
      expect(r.exitCode, r.stderr).toBe(4);
      expect(r.stderr).toContain(`127.0.0.1:${base + 1}`);
      expect(r.stderr).toContain(`pid ${holder.pid}`);
      expect(r.stderr).toMatch(/--port|statsPort/);
      const up = await cli(['gateway', 'up', '--port', String(base)], { env: t.env(), timeout: 30_000 });
      expect(up.exitCode, up.stderr).toBe(4);
      expect(up.stderr).toContain(`127.0.0.1:${base + 1}`);
    } finally {
      holder.kill('SIGKILL');
    }
  }, 90_000);
});
