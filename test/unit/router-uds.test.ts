// Issue 42 (never harm, part 4, item 2's rest): the router's replicas listen on vLLM's --uds, a Unix
// socket in the router's 0700 folder, instead of a loopback port any local user can connect to past
// the router's key and admission (and bind when a replica dies and frees it). Pure tables of what is
// rendered (per vLLM version, host and container, HAProxy's servers), then the parts that touch the
// system: the one HTTP client over a socket, who listens on a socket (/proc/net/unix), and the folder's
// checks before a replica starts. The end-to-end run (real HAProxy, simulator replicas, a second uid)
// is test/e2e/router.test.ts's first case.
import { describe, it, expect, afterAll } from 'vitest';
import { createServer, type Server } from 'node:http';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Profile } from '../../src/profiles/schema.js';
import { loadProfile, loadPlatform } from '../../src/profiles/load.js';
import { hostFromPlatform } from '../../src/profiles/validate.js';
import { replicaHop, renderReplicas, MAX_SOCKET_PATH } from '../../src/profiles/render.js';
import { planRouter, renderConfig, hopInWords } from '../../src/profiles/router.js';
import { renderContainerRun } from '../../src/engine/runtime/container.js';
import { http, closeHttp } from '../../src/client/http.js';
import { makePool } from '../../src/bench/runner.js';
import { unixUrl, socketPathOf, requestPathOf, shownAddress } from '../../src/util/socket-url.js';
import {
  unixListeners,
  unixListenerIsOneOf,
  unixClientEnds,
  prepareReplicaSocket,
  ensureSocketDir,
} from '../../src/engine/runtime/replica-socket.js';
import { targetFromInstance } from '../../src/engine/target.js';
import type { Instance } from '../../src/engine/registry.js';
import { tempDir } from '../temp-dirs.js';

const profile = (sets: Record<string, unknown> = {}, version = 'auto') =>
  Profile.parse({
    name: 'm',
    model: { id: 'x/y', parameters: 1e9, layers: 2, attentionHeads: 4, kvHeads: 2, headDim: 8, maxContext: 4096 },
    engine: { vllmVersion: version },
    server: { port: 8000 },
    router: {},
    ...sets,
  });

const tmp = tempDir('router-uds-');
afterAll(async () => {
  await closeHttp();
  rmSync(tmp, { recursive: true, force: true });
});

describe('which replicas listen on a socket: per vLLM version and layout', () => {
  it.each([
    // [vLLM version, on a socket]: --uds from 0.11 (vllm-source-facts: in 0.11.0, 0.12.0, 0.16.0, 0.17.0, 0.25.0,
    // 0.28.0; absent in 0.9.0, 0.10.0)
    ['0.9.0', false],
    ['0.10.0', false],
    ['0.10.2', false],
    ['0.11.0', true],
    ['0.12.0', true],
    ['0.17.1', true],
    ['0.27.2', true],
    ['0.28.0', true],
    ['auto', true],
  ])('vLLM %s: on a socket %s', (version, uds) => {
    const hop = replicaHop(profile({}, version), '/state', 2);
    expect(hop.uds).toBe(uds);
    if (!hop.uds)
      expect(hop.why).toMatch(
        new RegExp(
          `^the replicas listen on loopback ports \\(router.replicaPort\\), which any local user can connect to, past the router's key: vLLM ${version.replace(/\./g, '\\.')} has no --uds \\(added in 0\\.11\\)`,
        ),
      );
    else expect(hop.dir).toBe('/state/router/m');
  });

  it.each([
    ['router.replicaSocket false', { router: { replicaSocket: false } }, /router\.replicaSocket is false/],
    ['a replica over nodes', { parallel: { nodes: 2 } }, /over nodes is reached on its head node's address/],
    ['Ray', { parallel: { executor: 'ray' } }, /over nodes/],
  ])('%s: loopback ports, with why', (_, sets, why) => {
    const hop = replicaHop(profile(sets), '/state', 2);
    expect(hop.uds).toBe(false);
    if (!hop.uds) expect(hop.why).toMatch(why);
  });

  it(`a path past the ${MAX_SOCKET_PATH} bytes a socket's name holds: ports, naming the path and the fix`, () => {
    const long = `/${'s'.repeat(90)}`;
    const hop = replicaHop(profile(), long, 2);
    expect(hop.uds).toBe(false);
    if (!hop.uds) expect(hop.why).toContain(`${long}/router/m/m-1.sock) is longer than the 107 bytes`);
    expect(hop.uds || hop.why).toMatch(/SPARKCTL_STATE_DIR/);
    // the longest name counts: 10 replicas make m-9, 100 make m-99
    const edge = `/${'s'.repeat(MAX_SOCKET_PATH - '/router/m/m-9.sock'.length - 1)}`;
    expect(replicaHop(profile(), edge, 10).uds).toBe(true);
    expect(replicaHop(profile(), edge, 11).uds).toBe(false);
  });

  it('no router: never a socket', () => {
    expect(replicaHop(profile({ router: { enabled: false } }), '/state', 2).uds).toBe(false);
  });
});

describe('what is rendered: vLLM argv, HAProxy servers, the stats routes', () => {
  const host = { gpus: 8, gpusSource: 'flag' as const, gpuMemoryBytes: 80 * 2 ** 30 };
  const argvOf = (p: Profile) =>
    renderReplicas({ ...p, parallel: { ...p.parallel, replicas: 2 } }, host, {
      executable: ['vllm'],
      stateDir: '/state',
    });

  it.each([
    ['0.17.1', true],
    ['0.10.0', false],
  ])('vLLM %s: the replica argv (socket %s)', (version, uds) => {
    const reps = argvOf(profile({}, version));
    for (const [i, r] of reps.entries()) {
      const a = r.argv.join(' ');
      if (uds) {
        expect(r.uds).toBe(`/state/router/m/m-${i}.sock`);
        expect(a).toContain(`--uds /state/router/m/m-${i}.sock`);
        // vLLM binds the socket INSTEAD of the port: --host/--port are not written (they would be ignored)
        expect(r.argv).not.toContain('--port');
        expect(r.argv).not.toContain('--host');
      } else {
        expect(r.uds).toBeUndefined();
        expect(a).toContain(`--port ${8001 + i} --host 127.0.0.1`);
        expect(r.argv).not.toContain('--uds');
      }
    }
  });

  it('HAProxy: each replica as unix@PATH with the same check; its /metrics (only) on the loopback stats listener', () => {
    const plan = planRouter(profile(), 2, '/state')!;
    const lines = renderConfig(plan, { socket: plan.socket })
      .split('\n')
      .map((l) => l.trim());
    expect(lines).toContain('server m-0 unix@/state/router/m/m-0.sock');
    expect(lines).toContain('server m-1 unix@/state/router/m/m-1.sock');
    expect(lines).toContain('default-server check inter 2000ms fastinter 500ms downinter 2000ms fall 2 rise 2');
    expect(lines.some((l) => /^server m-\d 127\.0\.0\.1:/.test(l))).toBe(false);
    const text = renderConfig(plan, { socket: plan.socket });
    // the stats frontend routes /replica/NAME/metrics to a backend that asks the replica for /metrics
    const stats = text.slice(text.indexOf('frontend stats'));
    expect(stats).toContain('    use_backend metrics_m-0 if { path /replica/m-0/metrics }');
    expect(stats).toContain(
      'backend metrics_m-1\n    http-request set-path /metrics\n    server m-1 unix@/state/router/m/m-1.sock',
    );
    expect(hopInWords(plan)).toMatch(/^replicas on Unix sockets in \/state\/router\/m \(0700/);
  });

  it('HAProxy on ports (vLLM 0.10): host:port servers, no metrics routes, and the reason said', () => {
    const plan = planRouter(profile({}, '0.10.0'), 2, '/state')!;
    const text = renderConfig(plan);
    expect(text).toContain('    server m-0 127.0.0.1:8001');
    expect(text).not.toContain('unix@');
    expect(text).not.toContain('/replica/');
    expect(hopInWords(plan)).toMatch(/vLLM 0\.10\.0 has no --uds/);
    // router config (and the file serve writes) says why in a comment
    expect(text.split('\n')[1]).toMatch(
      /^# the replicas listen on loopback ports .*vLLM 0\.10\.0 has no --uds \(added in 0\.11\)/,
    );
  });

  it('a socket path that a config line cannot hold is refused, not written', () => {
    expect(() => renderConfig(planRouter(profile(), 1, '/st ate')!)).toThrow(
      /has characters a config line cannot hold/,
    );
  });
});

describe('containers (docker, podman): the socket folder bind-mounted, nothing published', () => {
  const env = { HF_HOME: join(tmp, 'hf'), HOME: '/nonexistent' };
  const A100 = loadPlatform('dgx-a100-os6');
  const run = (sets: string[], cli: 'docker' | 'podman') => {
    const p = loadProfile('qwen3.5-9b', {
      sets: ['parallel.tensor=2', 'parallel.replicas=2', 'router.enabled=true', ...sets],
    }).profile;
    return renderReplicas(p, hostFromPlatform(A100, 8), {
      executable: ['/opt/vllm/bin/vllm'],
      stateDir: '/tmp/st',
      runtime: 'container',
    }).map(
      (replica) =>
        renderContainerRun({
          profile: p,
          platform: A100,
          replica,
          engine: 'vllm',
          marker: 'm-1',
          stateDir: '/tmp/st',
          cli,
          env,
          executableLen: 1,
          stopTimeoutS: 45,
        }).argv,
    );
  };
  for (const cli of ['docker', 'podman'] as const) {
    it(`${cli}, vLLM 0.17.0: --uds inside, the folder at the same path, no --publish`, () => {
      for (const [i, argv] of run(['engine.vllmVersion="0.17.0"'], cli).entries()) {
        expect(argv).not.toContain('--publish');
        expect(argv).not.toContain('--network');
        const vols = argv.flatMap((a, k) => (a === '--volume' ? [argv[k + 1]] : []));
        expect(vols).toContain('/tmp/st/router/qwen3.5-9b:/tmp/st/router/qwen3.5-9b');
        expect(argv.join(' ')).toContain(`--uds /tmp/st/router/qwen3.5-9b/qwen3.5-9b-${i}.sock`);
      }
    });
    it(`${cli}, vLLM 0.10.0: a port published on 127.0.0.1, no socket folder`, () => {
      for (const argv of run(['engine.vllmVersion="0.10.0"'], cli)) {
        expect(argv[argv.indexOf('--publish') + 1]).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
        expect(argv.join(' ')).not.toContain('/tmp/st/router');
      }
    });
    it(`${cli}, container.network host: the host's network, the folder mounted, --uds`, () => {
      for (const argv of run(['engine.vllmVersion="0.17.0"', 'container.network=host'], cli)) {
        expect(argv[argv.indexOf('--network') + 1]).toBe('host');
        expect(argv.join(' ')).toContain('--volume /tmp/st/router/qwen3.5-9b:/tmp/st/router/qwen3.5-9b');
        expect(argv).toContain('--uds');
      }
    });
  }
});

describe('one client over a socket: every reader of a replica takes its URL', () => {
  it.each([['/state/router/m/m-0.sock'], ['/tmp/a b/%x/r.sock'], ['/s/ü.sock']])(
    'the URL of %s round-trips, with a request path after it',
    (path) => {
      const u = unixUrl(path);
      expect(socketPathOf(u)).toBe(path);
      expect(socketPathOf(`${u}/v1/models`)).toBe(path);
      expect(requestPathOf(`${u}/v1/models?x=1`)).toBe('/v1/models?x=1');
      expect(requestPathOf(u)).toBe('/');
      expect(shownAddress(`${u}/health`)).toBe(`unix:${path}/health`);
    },
  );
  it.each([
    ['http://127.0.0.1:8000'],
    ['http+unix://relative.sock'],
    ['http+unix://%2Fa%00b'],
    ['http+unix://%E0%A4%A'],
  ])('%s: no socket', (u) => {
    expect(socketPathOf(u)).toBeUndefined();
  });

  it('a registry entry on a socket is a target on that socket (probe, prewarm, watch, status, upgrade read it so)', () => {
    const inst = {
      name: 'm-0',
      host: '127.0.0.1',
      port: 8001,
      uds: '/state/router/m/m-0.sock',
      servedName: 'x',
      gpus: [],
      engine: 'sim',
    } as unknown as Instance;
    expect(targetFromInstance(inst).url).toBe(unixUrl('/state/router/m/m-0.sock'));
    expect(targetFromInstance({ ...inst, uds: undefined }).url).toBe('http://127.0.0.1:8001');
  });

  it('GET and POST over the socket, the same bounds; a missing socket is refused, never a TCP fallback', async () => {
    const dir = join(tmp, 'c');
    mkdirSync(dir, { mode: 0o700 });
    const sock = join(dir, 'r.sock');
    const srv: Server = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        if (req.url === '/big') return res.end('x'.repeat(2048));
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ method: req.method, url: req.url, auth: req.headers.authorization ?? null, body }));
      });
    });
    await new Promise<void>((r) => srv.listen(sock, r));
    try {
      const g = await http(`${unixUrl(sock)}/health?x=1`, { timeoutMs: 2000, apiKey: 'k' });
      expect(g.ok && g.json).toEqual({ method: 'GET', url: '/health?x=1', auth: 'Bearer k', body: '' });
      const p = await http(`${unixUrl(sock)}/v1/completions`, { timeoutMs: 2000, body: { a: 1 } });
      expect(p.ok && p.json).toEqual({ method: 'POST', url: '/v1/completions', auth: null, body: '{"a":1}' });
      const big = await http(`${unixUrl(sock)}/big`, { timeoutMs: 2000, maxBytes: 100 });
      expect(big).toMatchObject({ ok: false, error: 'too-large' });
    } catch (e) {
      srv.close();
      throw e;
    }
    // the bench's pool (upgrade's canary comparison benches a replica) over the same socket
    const pool = makePool(unixUrl(sock), 1);
    try {
      const b = await pool.request({ path: '/v1/completions', method: 'POST', body: '{}' });
      expect(JSON.parse(await b.body.text())).toMatchObject({ method: 'POST', url: '/v1/completions' });
    } finally {
      await pool.close();
    }
    await new Promise((r) => srv.close(r));
    const gone = await http(`${unixUrl(sock)}/health`, { timeoutMs: 2000 });
    expect(gone).toMatchObject({ ok: false, error: 'refused' });
    expect(await http('http+unix://relative/health', { timeoutMs: 500 })).toMatchObject({ ok: false, error: 'other' });
  });
});

describe('who listens on a socket: /proc/net/unix and our group', () => {
  const text = [
    'Num       RefCount Protocol Flags    Type St Inode Path',
    '0000000000000000: 00000002 00000000 00010000 0001 01 101 /s/m-0.sock',
    '0000000000000000: 00000003 00000000 00000000 0001 03 102 /s/m-0.sock',
    '0000000000000000: 00000002 00000000 00010000 0001 01 103 /s/m-0.sock.old',
    '0000000000000000: 00000002 00000000 00010000 0001 01 104 /s/a b.sock',
    '0000000000000000: 00000003 00000000 00000000 0001 03 105',
    'garbage line',
  ].join('\n');
  it.each([
    ['/s/m-0.sock', ['101']],
    ['/s/a b.sock', ['104']],
    ['/s/m-1.sock', []],
  ])('listeners at %s: %j (a connected socket with the same name is no listener)', (path, inodes) => {
    expect([...unixListeners(text, path)]).toEqual(inodes);
  });
  it("HAProxy's connections to socket replicas: its connected stream ends without a path (a stop's cut/drained judgement counts them)", () => {
    const t = [
      'Num       RefCount Protocol Flags    Type St Inode Path',
      '0000000000000000: 00000003 00000000 00000000 0001 03 201', // a client end: counted
      '0000000000000000: 00000003 00000000 00000000 0001 03 202 /s/api.sock', // an end it accepted on its own socket: not
      '0000000000000000: 00000002 00000000 00010000 0001 01 203 /s/api.sock', // its listener: not
      '0000000000000000: 00000003 00000000 00000000 0002 03 204', // a datagram socket: not
      '0000000000000000: 00000003 00000000 00000000 0001 03 205', // someone else's: not
    ].join('\n');
    expect(unixClientEnds(t, new Set(['201', '202', '203', '204']))).toBe(1);
    expect(unixClientEnds(t, new Set())).toBe(0);
  });
  it('ours only when one of our processes holds the listening inode; no /proc: cannot tell', () => {
    expect(
      unixListenerIsOneOf(
        '/s/m-0.sock',
        [7],
        () => text,
        (pid) => (pid === 7 ? ['101'] : []),
      ),
    ).toBe(true);
    expect(
      unixListenerIsOneOf(
        '/s/m-0.sock',
        [8],
        () => text,
        (pid) => (pid === 7 ? ['101'] : []),
      ),
    ).toBe(false);
    expect(
      unixListenerIsOneOf(
        '/s/m-0.sock',
        [7],
        () => text,
        () => ['102'],
      ),
    ).toBe(false);
    expect(
      unixListenerIsOneOf(
        '/s/m-0.sock',
        [7],
        () => null,
        () => ['101'],
      ),
    ).toBeUndefined();
  });
  it('this process, listening on a socket, is proven by the real /proc', async () => {
    const dir = join(tmp, 'p');
    mkdirSync(dir, { mode: 0o700 });
    const sock = join(dir, 'me.sock');
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(sock, r));
    try {
      expect(unixListenerIsOneOf(sock, [process.pid])).toBe(true);
      expect(unixListenerIsOneOf(sock, [1])).toBe(false);
      expect(() => prepareReplicaSocket(sock)).toThrow(/a process listens on it/);
    } finally {
      await new Promise((r) => srv.close(r));
    }
  });
});

describe("the socket's folder, before a replica starts", () => {
  it('made 0700 (and its router/ parent) where missing; a stale socket removed', () => {
    const state = join(tmp, 'st1');
    const sock = join(state, 'router', 'm', 'm-0.sock');
    prepareReplicaSocket(sock);
    expect(lstatSync(join(state, 'router', 'm')).mode & 0o777).toBe(0o700);
    expect(lstatSync(join(state, 'router')).mode & 0o777).toBe(0o700);
    // a socket a gone replica left (vLLM would refuse the path: Errno 98): a process killed while it listened leaves it
    const stale = sock;
    try {
      execFileSync(
        process.execPath,
        [
          '-e',
          `require('net').createServer().listen(${JSON.stringify(stale)}, () => process.kill(process.pid, 'SIGKILL'))`,
        ],
        { stdio: 'ignore' },
      );
    } catch {
      /* killed, as meant */
    }
    expect(lstatSync(stale).isSocket()).toBe(true);
    prepareReplicaSocket(stale);
    expect(existsSync(stale)).toBe(false);
  });
  it('a folder that is a link, or 0755: the link refused, the mode put back to 0700', () => {
    const state = join(tmp, 'st2');
    mkdirSync(join(state, 'router'), { recursive: true, mode: 0o700 });
    mkdirSync(join(tmp, 'elsewhere'));
    symlinkSync(join(tmp, 'elsewhere'), join(state, 'router', 'm'));
    expect(() => prepareReplicaSocket(join(state, 'router', 'm', 'm-0.sock'))).toThrow(
      /router folder .*\/router\/m: is not a plain folder \(a link\?\)/,
    );
    const open = join(tmp, 'st3', 'router', 'm');
    mkdirSync(open, { recursive: true, mode: 0o755 });
    chmodSync(open, 0o755);
    ensureSocketDir(open);
    expect(lstatSync(open).mode & 0o777).toBe(0o700);
    // the router/ parent a link: refused too
    const st4 = join(tmp, 'st4');
    mkdirSync(st4);
    mkdirSync(join(tmp, 'other-router'));
    symlinkSync(join(tmp, 'other-router'), join(st4, 'router'));
    expect(() => ensureSocketDir(join(st4, 'router', 'm'))).toThrow(/st4\/router: is not a plain folder/);
  });
  it('something that is not a socket at the path: refused with the path, never removed', () => {
    const dir = join(tmp, 'st5', 'router', 'm');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(join(dir, 'm-0.sock'), 'not a socket');
    expect(() => prepareReplicaSocket(join(dir, 'm-0.sock'))).toThrow(
      /replica socket .*m-0\.sock: something that is not a socket is there/,
    );
    expect(existsSync(join(dir, 'm-0.sock'))).toBe(true);
  });
});
