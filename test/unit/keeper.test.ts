// The gateway's keeper (src/gateway/keeper.ts) in-process: what it reads from the registry
// (servedInstances), the files it renders (renderFiles), and the Keeper itself running the real
// HAProxy (2.6) as its child. Pinned here, not by the gateway's e2e tests:
// - only a server proven ours and ready is routed (not one still loading, gone, another program's, or
//   a group whose leader died); a server over nodes by its head's URL;
// - the files: the same plan renders the same bytes whatever the clock (a follow reloads only on a
//   change), and a path a config line cannot hold is refused naming it;
// - the start refuses, naming the path and the fix: a gateway folder that is a link, a socket path
//   that is a file, a folder or a link, a config HAProxy refuses; a socket left by a keeper that died
//   is taken over; the folder 0700, every file and socket 0600;
// - the keeper's door: the answers it gives itself in OpenAI's shape, what a model's server is sent
//   (its body renamed, its own key, no header a client forged), a stream passed on as it comes, and the bound
//   on request bodies held at once (256 MiB), released when an upload is cut off;
// - follow, tend and wake: a reload only on a change, published once HAProxy runs it; an idle model
//   with sleep mode put to sleep (out of rotation first), a refused sleep put back; a wake asked once
//   however many wait, and a refused wake named and tried again next time;
// - stop: HAProxy ended, the sockets gone.
// The models' servers are small HTTP servers on loopback playing vLLM (the far side: /health,
// /is_sleeping, /sleep, /wake_up, /v1/completions); each registry entry is proven by a real `sleep`
// process that leads its own group and carries the entry's marker. Two start cases run a shell script in
// HAProxy's place (one refuses every config: the real one never refuses the plan's; one accepts every
// config: what HAProxy says is not what the socket cases try).
import { describe, it, expect, beforeAll, afterAll, vi } from 'vitest';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import {
  createServer,
  request,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Keeper, renderFiles, servedInstances } from '../../src/gateway/keeper.js';
import { GatewaySettings, planGateway, type ServedInstance } from '../../src/gateway/plan.js';
import { Registry, type ClusterRecord, type Instance } from '../../src/engine/registry.js';
import { INSTANCE_ENV } from '../../src/engine/runtime/proc.js';
import { processStartTime } from '../../src/util/pid.js';
import { showStat } from '../../src/router/api.js';
import { LaunchError, UsageError } from '../../src/errors.js';
import { freePort, freePortRange, killGroupLeft, tempDir, tempDirs, waitFor } from '../helpers.js';

const HAPROXY = '/usr/sbin/haproxy';
const noHaproxy = existsSync(HAPROXY) ? undefined : `${HAPROXY} is not installed (apt-get install haproxy)`;
if (noHaproxy) console.warn(`keeper unit tests with HAProxy skipped: ${noHaproxy}`);

const fresh = tempDirs('sk-');

// ---- processes that prove a registry entry ours: each leads its own group, carrying its marker ----

const started: ChildProcess[] = [];
afterAll(() => {
  for (const c of started) killGroupLeft(c.pid);
  for (const c of started)
    try {
      if (c.exitCode === null && c.signalCode === null) process.kill(c.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
});

async function leader(cmd: string, args: string[], marker?: string): Promise<{ pid: number; startTime: number }> {
  const c = spawn(cmd, args, {
    detached: true,
    stdio: 'ignore',
    env: { ...process.env, ...(marker ? { [INSTANCE_ENV]: marker } : {}) },
  });
  started.push(c);
  let t: number | undefined;
  for (let i = 0; i < 100 && !(t = processStartTime(c.pid!)); i++) await new Promise((r) => setTimeout(r, 10));
  return { pid: c.pid!, startTime: t! };
}

/** A registry entry on this host, as serve writes it once the server answers (readyAt). */
function entry(
  state: string,
  o: { profile: string; served: string; port: number; pid: number; startTime: number; marker: string },
  over: Partial<Instance> = {},
): Instance {
  return {
    version: 1,
    name: `${o.profile}-0`,
    profile: o.profile,
    replica: 0,
    pid: o.pid,
    pgid: o.pid,
    startTime: o.startTime,
    marker: o.marker,
    host: '127.0.0.1',
    port: o.port,
    url: `http://127.0.0.1:${o.port}`,
    servedName: o.served,
    gpus: [],
    logFile: join(state, 'logs', `${o.profile}-0.log`),
    engine: 'sim',
    argv: ['--port', String(o.port)],
    startedAt: new Date().toISOString(),
    readyAt: new Date().toISOString(),
    readyTimeoutSeconds: 60,
    ...over,
  } as Instance;
}

/** A running server's entry in `state`: its process started and proven, the entry written. */
async function served(state: string, profile: string, served: string, port: number, over: Partial<Instance> = {}) {
  const marker = randomUUID();
  const p = await leader('sleep', ['60'], marker);
  new Registry(state).write('host', entry(state, { profile, served, port, marker, ...p }, over));
}

describe('servedInstances: only a server proven ours and ready is routed', () => {
  it('a ready server: every field the plan reads, as the entry has it (a router entry keeps its role)', async () => {
    const state = fresh();
    const launch = { sets: [], platform: 'gb10', vllm: { asked: '0.11.0', resolved: '0.11.0', how: 'pinned' } };
    await served(state, 'fine', 'fine/model', 18101, {
      apiKeyEnv: 'KEY_ONE',
      maxModelLen: 4096,
      argv: ['--enable-sleep-mode'],
      launch: launch as Instance['launch'],
    });
    await served(state, 'fine-router', 'fine/model', 18100, { role: 'router' });
    const got = servedInstances(state).sort((a, b) => a.port - b.port);
    expect(got).toEqual([
      {
        name: 'fine-router-0',
        profile: 'fine-router',
        servedName: 'fine/model',
        host: '127.0.0.1',
        port: 18100,
        role: 'router',
        argv: ['--port', '18100'],
      },
      {
        name: 'fine-0',
        profile: 'fine',
        servedName: 'fine/model',
        host: '127.0.0.1',
        port: 18101,
        argv: ['--enable-sleep-mode'],
        apiKeyEnv: 'KEY_ONE',
        maxModelLen: 4096,
        launch,
      },
    ] satisfies ServedInstance[]);
  });

  it('left out: still loading (no readyAt), its process gone, a pid that is another program now', async () => {
    const state = fresh();
    await served(state, 'loading', 'm/loading', 18110, { readyAt: undefined });
    // a process that has ended: its entry stays until stop, its pid is nobody's
    const gone = await leader('sleep', ['60']);
    const ended = new Promise((r) => started.at(-1)!.once('exit', r));
    process.kill(gone.pid, 'SIGKILL');
    await ended;
    new Registry(state).write(
      'host',
      entry(state, { profile: 'gone', served: 'm/gone', port: 18111, marker: randomUUID(), ...gone }),
    );
    // a live group leader without the entry's marker: not the process serve started
    const other = await leader('sleep', ['60']);
    new Registry(state).write(
      'host',
      entry(state, { profile: 'other', served: 'm/other', port: 18112, marker: randomUUID(), ...other }),
    );
    await served(state, 'ok', 'm/ok', 18113);
    expect(servedInstances(state).map((i) => i.name)).toEqual(['ok-0']);
  });

  it("left out: a group whose leader died (vLLM's API server gone, an engine still marked): never routed", async () => {
    const state = fresh();
    const marker = randomUUID();
    const p = await leader('sh', ['-c', 'sleep 60 & sleep 0.2'], marker);
    await new Promise((r) => started.at(-1)!.once('exit', r));
    new Registry(state).write('host', entry(state, { profile: 'half', served: 'm/half', port: 18120, marker, ...p }));
    const reg = new Registry(state);
    expect(reg.list().map((e) => e.proof.state)).toEqual(['degraded']);
    expect(servedInstances(state)).toEqual([]);
  });

  it("a server over nodes: its head by the record's URL (port 80 where it names none); a record without a URL is left out", () => {
    const state = fresh();
    const reg = new Registry(state);
    const rec = (profile: string, url: string): ClusterRecord => ({
      version: 1,
      profile,
      nodesFile: '/etc/sparkctl/nodes.yaml',
      head: 'n0',
      pid: 4242,
      port: 8000,
      url,
      servedName: `org/${profile}`,
      logFile: '$HOME/.local/state/sparkctl/logs/big-0-rank0.log',
      startedAt: '2026-01-01T00:00:00.000Z',
    });
    reg.write('nodes', rec('big', 'http://10.0.0.1:8000'));
    reg.write('nodes', rec('edge', 'http://10.0.0.2'));
    reg.write('nodes', rec('bad', 'not a url'));
    expect(servedInstances(state).sort((a, b) => a.name.localeCompare(b.name))).toEqual([
      { name: 'big-head', profile: 'big', servedName: 'org/big', host: '10.0.0.1', port: 8000, argv: [] },
      { name: 'edge-head', profile: 'edge', servedName: 'org/edge', host: '10.0.0.2', port: 80, argv: [] },
    ]);
  });
});

describe('renderFiles: the five files HAProxy and the keeper read, the same bytes for the same plan', () => {
  const inst = (profile: string, served: string, port: number): ServedInstance => ({
    name: `${profile}-0`,
    profile,
    servedName: served,
    host: '127.0.0.1',
    port,
    argv: [],
  });
  const settings = GatewaySettings.parse({ port: 18080, aliases: { coder: 'fine/model' } });
  const plan = (port = 18101) => planGateway(settings, [inst('fine', 'fine/model', port)], '/state');

  it('files of an unchanged plan are byte for byte the same at any time (a follow reloads only on a change)', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    let early: ReturnType<typeof renderFiles>;
    let later: ReturnType<typeof renderFiles>;
    try {
      vi.setSystemTime(new Date('2026-01-01T00:00:00Z'));
      early = renderFiles(plan());
      vi.setSystemTime(new Date('2027-06-01T12:34:56Z'));
      later = renderFiles(plan());
    } finally {
      vi.useRealTimers();
    }
    expect(later).toEqual(early);
    expect(Object.keys(early).sort()).toEqual(['aliases', 'config', 'map', 'models', 'unknown']);
    // /v1/models as compared: created 0, never the clock's second
    expect(JSON.parse(early.models)).toEqual({
      object: 'list',
      data: [
        {
          id: 'fine/model',
          object: 'model',
          created: 0,
          owned_by: 'vllm',
          root: 'fine/model',
          parent: null,
          max_model_len: null,
        },
        {
          id: 'coder',
          object: 'model',
          created: 0,
          owned_by: 'vllm',
          root: 'fine/model',
          parent: 'fine/model',
          max_model_len: null,
        },
      ],
    });
    const backend = plan().models[0]!.backend;
    expect(early.map).toBe(
      `# client model name -> backend: written by sparkctl gateway\nfine/model ${backend}\ncoder ${backend}\n`,
    );
    expect(early.aliases).toBe('# alias -> served name: written by sparkctl gateway\ncoder fine/model\n');
    expect(early.unknown).toContain('Models served here: fine/model, coder');
    // a server moved to another port: the config changes, the names do not
    const moved = renderFiles(plan(18102));
    expect(moved.config).not.toBe(early.config);
    expect(moved.config).toContain('server fine-0 127.0.0.1:18102');
    expect({ ...moved, config: '' }).toEqual({ ...early, config: '' });
  });

  it('HAProxy, run by the keeper in the foreground, logs to stdout; with the usage filter, to the pipe and the Lua file loaded', () => {
    const plain = renderFiles(plan()).config;
    expect(plain).toContain('\n    log stdout format raw local0 info\n');
    expect(plain).not.toMatch(/lua/);
    const usage = renderFiles(plan(), { lua: '/state/gateway/usage.lua', logFd: 3 }).config;
    expect(usage).toContain('\n    log fd@3 format raw local0 info\n');
    expect(usage).toContain('\n    lua-load /state/gateway/usage.lua\n');
    expect(usage).toContain('\n    filter lua.sparkctl_usage\n');
  });

  it.each([
    ['a state folder with a space', '/srv/my state', 'socket "/srv/my state/gateway/api.sock"'],
    ['a state folder with a newline', '/srv/x\nglobal', 'socket "/srv/x\\nglobal/gateway/api.sock"'],
  ])('%s: refused, naming the path and the fix', (_what, stateDir, named) => {
    const p = planGateway(settings, [inst('fine', 'fine/model', 18101)], stateDir);
    let e: unknown;
    try {
      renderFiles(p);
    } catch (x) {
      e = x;
    }
    expect(e).toBeInstanceOf(UsageError);
    expect(e).toMatchObject({
      message: `gateway config: ${named} has characters a config line cannot hold`,
      details: ['use plain names and paths'],
    });
  });

  it('a usage filter path a config line cannot hold is refused, naming it', () => {
    expect(() => renderFiles(plan(), { lua: '/state/x.lua\n    lua-load /tmp/evil.lua', logFd: 3 })).toThrow(
      'gateway config: usage filter file "/state/x.lua\\n    lua-load /tmp/evil.lua" has characters a config line cannot hold',
    );
  });
});

// ---- the Keeper with the real HAProxy ----

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}
/**
 * A model's server playing vLLM: its health, its sleep routes, and completions (a stream held open until `release`).
 */
interface Upstream {
  port: number;
  seen: Seen[];
  sleeping: boolean;
  refuseSleep?: string;
  refuseWake?: string;
  release: () => void;
}
const upstreams: Server[] = [];
async function vllmStandIn(): Promise<Upstream> {
  let open!: () => void;
  let gate = new Promise<void>((r) => (open = r));
  const u: Upstream = {
    port: await freePort(),
    seen: [],
    sleeping: false,
    release: () => {
      open();
      gate = new Promise<void>((r) => (open = r));
    },
  };
  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const url = req.url ?? '';
      if (url === '/health') return res.end();
      if (url === '/is_sleeping') return json(res, 200, { is_sleeping: u.sleeping });
      if (url === '/metrics')
        return res.end(u.sleeping ? 'vllm:engine_sleep_state{engine="0",sleep_state="weights_offloaded"} 1.0\n' : '');
      u.seen.push({ method: req.method ?? '', url, headers: req.headers, body });
      if (url.startsWith('/sleep')) {
        if (u.refuseSleep) return json(res, 500, { error: { message: u.refuseSleep } });
        u.sleeping = true;
        return json(res, 200, {});
      }
      if (url.startsWith('/wake_up')) {
        if (u.refuseWake) return json(res, 500, { error: { message: u.refuseWake } });
        setTimeout(() => {
          u.sleeping = false;
          json(res, 200, {});
        }, 100);
        return;
      }
      const b = JSON.parse(body || '{}') as { model?: string; stream?: boolean };
      if (b.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"first":true}\n\n');
        void gate.then(() => res.end('data: [DONE]\n\n'));
        return;
      }
      json(res, 200, { model: b.model, object: 'text_completion' });
    });
  });
  await new Promise<void>((r) => server.listen(u.port, '127.0.0.1', r));
  upstreams.push(server);
  return u;
}
afterAll(async () => {
  for (const s of upstreams) {
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
});

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}
/** One request on its own connection (no keep-alive left behind): over TCP, or over a Unix socket. */
function call(
  to: { port: number } | { socketPath: string },
  body: unknown,
  headers: Record<string, string> = {},
  onFirst?: (chunk: string) => void,
): Promise<Answer> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        ...('port' in to ? { host: '127.0.0.1', port: to.port } : to),
        agent: false,
        method: 'POST',
        path: '/v1/completions',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers },
      },
      (res) => {
        let out = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          if (!out) onFirst?.(d);
          out += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: out }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

const GW_KEY = 'gw-secret-nt1-9d2f';
const FINE_KEY = 'fine-secret-nt1-77aa';
const gwAuth = { authorization: `Bearer ${GW_KEY}` };

describe.skipIf(!!noHaproxy)("the keeper's start refuses what it cannot stand on, naming it", () => {
  it('a config HAProxy refuses: the start fails naming the file and what HAProxy said; the files were written 0600 in a 0700 folder', async () => {
    // a stand-in for an haproxy that refuses every config (the plan never writes one the real one refuses)
    const state = fresh();
    const fake = join(state, 'haproxy-refuses');
    writeFileSync(
      fake,
      '#!/bin/sh\necho "[ALERT] config : parsing [haproxy.cfg:3] : unknown keyword \'frob\'" >&2\nexit 1\n',
    );
    chmodSync(fake, 0o755);
    mkdirSync(join(state, 'gateway'), { mode: 0o755 });
    chmodSync(join(state, 'gateway'), 0o755);
    const lines: string[] = [];
    const k = new Keeper({
      settings: GatewaySettings.parse({ port: await freePort() }),
      stateDir: state,
      haproxy: fake,
      log: (l) => lines.push(l),
      signal: new AbortController().signal,
    });
    const e = await k.run().then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(LaunchError);
    expect(e).toMatchObject({
      message: `haproxy -c refused the gateway's config (${join(state, 'gateway', 'haproxy.cfg')})`,
      details: [
        "[ALERT] config : parsing [haproxy.cfg:3] : unknown keyword 'frob'",
        'HAProxy 2.6 or later is needed; sparkctl gateway config prints what it would run',
      ],
    });
    expect(lines).toEqual([
      'gateway: token usage per model is not recorded: this HAProxy is built without Lua (haproxy -vv: USE_LUA)',
    ]);
    const dir = join(state, 'gateway');
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    const files = readdirSync(dir).sort();
    expect(files).toEqual(['aliases.map', 'haproxy.cfg', 'models.json', 'models.map', 'unknown-model.lf']);
    for (const f of files) expect([f, statSync(join(dir, f)).mode & 0o777]).toEqual([f, 0o600]);
  });

  it('a gateway folder that is a link: refused, nothing written through it', async () => {
    const state = fresh();
    const elsewhere = fresh();
    symlinkSync(elsewhere, join(state, 'gateway'));
    const k = new Keeper({
      settings: GatewaySettings.parse({ port: await freePort() }),
      stateDir: state,
      haproxy: HAPROXY,
      log: () => {},
      signal: new AbortController().signal,
    });
    const e = await k.run().then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(UsageError);
    const dir = join(state, 'gateway');
    expect(e).toMatchObject({
      message: `gateway folder ${dir}: is not a plain folder (a link?)`,
      details: [`remove ${dir}; sparkctl creates it`],
    });
    expect(readdirSync(elsewhere)).toEqual([]);
  });

  it.each<[string, (p: string) => void, string]>([
    ['a file', (p) => writeFileSync(p, 'x'), 'a file'],
    ['a folder', (p) => mkdirSync(p), 'a folder'],
    ['a link', (p) => symlinkSync('/tmp', p), 'a link'],
  ])("the keeper's socket path holds %s: refused, naming it and the fix", async (_what, plant, kind) => {
    const state = fresh();
    mkdirSync(join(state, 'gateway'), { mode: 0o700 });
    const sock = join(state, 'gateway', 'keeper.sock');
    plant(sock);
    // a stand-in for an haproxy that accepts every config: what HAProxy says is not what these cases try
    const accepts = join(state, 'haproxy-accepts');
    writeFileSync(accepts, '#!/bin/sh\nexit 0\n');
    chmodSync(accepts, 0o755);
    const k = new Keeper({
      settings: GatewaySettings.parse({ port: await freePortRange(2) }),
      stateDir: state,
      haproxy: accepts,
      log: () => {},
      signal: new AbortController().signal,
    });
    const e = await k.run().then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(LaunchError);
    expect(e).toMatchObject({
      message: `${sock} is not a socket (${kind})`,
      details: [`remove ${sock}; sparkctl creates it`],
    });
    expect(lstatSync(sock).isSocket()).toBe(false);
  });
});

describe.skipIf(!!noHaproxy)('the Keeper running HAProxy: its door, follow, tend, wake and stop', () => {
  let state: string;
  let port: number;
  let keeper: Keeper;
  let running: Promise<void>;
  let haproxyPid = 0;
  const ac = new AbortController();
  const lines: string[] = [];
  let fine: Upstream;
  let sleepy: Upstream;
  const saved = { gw: process.env.NT1_GW_KEY, fine: process.env.NT1_KEY_FINE };
  const sock = () => keeper.plan.keeper.socket;
  const model = (name: string) => keeper.plan.models.find((m) => m.name === name)!;

  beforeAll(async () => {
    process.env.NT1_GW_KEY = GW_KEY;
    process.env.NT1_KEY_FINE = FINE_KEY;
    state = tempDir('sk-');
    fine = await vllmStandIn();
    sleepy = await vllmStandIn();
    await served(state, 'fine', 'fine/model', fine.port, { apiKeyEnv: 'NT1_KEY_FINE' });
    await served(state, 'sleepy', 'sleepy/model', sleepy.port, { argv: ['--enable-sleep-mode'] });
    // a socket left by a keeper that died (its process ended without closing it): nothing answers there
    mkdirSync(join(state, 'gateway'), { mode: 0o700 });
    execFileSync(process.execPath, [
      '-e',
      `require('net').createServer().listen(${JSON.stringify(join(state, 'gateway', 'keeper.sock'))}, () => process.exit(0))`,
    ]);
    port = await freePortRange(2);
    let ready!: (pid: number) => void;
    const isReady = new Promise<number>((r) => (ready = r));
    keeper = new Keeper({
      settings: GatewaySettings.parse({
        port,
        apiKeyEnv: 'NT1_GW_KEY',
        aliases: { coder: 'fine/model' },
        checkIntervalMs: 200,
        idleSleep: '500ms',
      }),
      stateDir: state,
      haproxy: HAPROXY,
      log: (l) => lines.push(l),
      signal: ac.signal,
      // follow and tend run when a test calls them, never behind its back
      followMs: 3_600_000,
      onReady: ({ haproxyPid: pid }) => ready(pid),
    });
    running = keeper.run();
    haproxyPid = await Promise.race([
      isReady,
      running.then(() => {
        throw new Error('the keeper ended before it was ready');
      }),
    ]);
  });
  afterAll(async () => {
    ac.abort();
    await running?.catch(() => {});
    if (haproxyPid)
      try {
        process.kill(haproxyPid, 'SIGKILL');
      } catch {
        /* ended, as it should */
      }
    process.env.NT1_GW_KEY = saved.gw;
    process.env.NT1_KEY_FINE = saved.fine;
    if (saved.gw === undefined) delete process.env.NT1_GW_KEY;
    if (saved.fine === undefined) delete process.env.NT1_KEY_FINE;
  }, 60_000);

  it("ready: both models routed, said in one line; the folder 0700, its files and sockets 0600; the dead keeper's socket taken over", async () => {
    expect(() => process.kill(haproxyPid, 0)).not.toThrow();
    expect(keeper.plan.models.map((m) => m.name)).toEqual(['fine/model', 'sleepy/model']);
    expect(keeper.routed).toEqual(keeper.plan.models);
    expect(lines).toContain('gateway: 2 model(s): fine/model (1), sleepy/model (1)');
    const dir = keeper.plan.dir;
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const f of [
      'haproxy.cfg',
      'models.json',
      'models.map',
      'aliases.map',
      'unknown-model.lf',
      'keeper.sock',
      'backup.sock',
    ])
      expect([f, statSync(join(dir, f)).mode & 0o777]).toEqual([f, 0o600]);
    // this keeper answers where the dead one's socket was
    expect((await call({ socketPath: sock() }, { model: 'fine/model' })).status).toBe(401);
  });

  it("without the gateway's key: 401 in OpenAI's shape, and the model's server is sent nothing", async () => {
    const before = fine.seen.length;
    const tries: Array<Record<string, string>> = [
      {},
      { authorization: `Bearer ${FINE_KEY}` },
      { 'x-sparkctl-model': 'fine/model' },
    ];
    for (const headers of tries) {
      const r = await call({ socketPath: sock() }, { model: 'fine/model', prompt: 'hi' }, headers);
      expect(r.status).toBe(401);
      expect(r.headers['content-type']).toBe('application/json');
      expect(JSON.parse(r.text)).toEqual({
        error: { message: 'Unauthorized', type: 'AuthenticationError', param: null, code: 401 },
      });
    }
    expect(fine.seen.length).toBe(before);
  });

  it("an alias: the model's server gets the body renamed (the rest as sent), its own key for the gateway's, no header the client forged", async () => {
    const before = fine.seen.length;
    const body = `{"model":"coder","prompt":"caf\u00e9 \\u2603","max_tokens":3,"extra":{"model":"coder"}}`;
    const r = await call({ socketPath: sock() }, body, {
      ...gwAuth,
      'x-api-key': GW_KEY,
      'x-sparkctl-route': 'sleepy/model',
      'x-sparkctl-returned': 'forged',
      'x-client-tag': 'kept',
    });
    expect(r.status, r.text).toBe(200);
    expect(JSON.parse(r.text).model).toBe('fine/model');
    const got = fine.seen.slice(before);
    expect(got).toHaveLength(1);
    const sent = JSON.parse(got[0]!.body);
    expect(sent).toEqual({ model: 'fine/model', prompt: 'caf\u00e9 \u2603', max_tokens: 3, extra: { model: 'coder' } });
    expect(Number(got[0]!.headers['content-length'])).toBe(Buffer.byteLength(got[0]!.body));
    expect(got[0]!.headers.authorization).toBe(`Bearer ${FINE_KEY}`);
    expect(got[0]!.headers['x-api-key']).toBeUndefined();
    expect(got[0]!.headers['x-client-tag']).toBe('kept');
    expect(got[0]!.headers['x-sparkctl-route']).toBeUndefined();
    expect(got[0]!.headers['x-sparkctl-returned']).not.toBe('forged');
    expect(JSON.stringify(got[0]!.headers)).not.toContain(GW_KEY);
    // what went to the sleeping-capable model: nothing (the forged route header routed nothing)
    expect(sleepy.seen.filter((s) => s.url === '/v1/completions')).toEqual([]);
  });

  it('a stream is passed on as it comes: its first event reaches the client before the server has ended it', async () => {
    let first = '';
    const answered = call(
      { socketPath: sock() },
      { model: 'coder', prompt: 'hi', stream: true },
      gwAuth,
      (c) => (first = c),
    );
    expect(await waitFor(() => first !== '', 10_000, 10)).toBe(true);
    expect(first).toContain('data: {"first":true}');
    fine.release();
    const r = await answered;
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/event-stream');
    expect(r.text).toBe('data: {"first":true}\n\ndata: [DONE]\n\n');
  });

  it("what the keeper answers itself is in OpenAI's shape: an unknown model 404, no model among several 400", async () => {
    const unknown = await call({ socketPath: sock() }, { model: 'evil/one' }, gwAuth);
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text)).toEqual({
      error: {
        message: 'The model `evil/one` does not exist. Models served here: fine/model, sleepy/model, coder',
        type: 'NotFoundError',
        param: 'model',
        code: 404,
      },
    });
    const none = await call({ socketPath: sock() }, 'not json {', gwAuth);
    expect(none.status).toBe(400);
    expect(JSON.parse(none.text).error).toMatchObject({ type: 'BadRequestError', code: 400 });
    expect(JSON.parse(none.text).error.message).toContain('this gateway serves: fine/model, sleepy/model, coder');
  });

  it('at most 256 MiB of request bodies held at once: past it a 503 with Retry-After at once; an upload cut off gives its share back', async () => {
    // four uploads that announce 64 MiB each and send one byte: the keeper holds a 64 MiB share for each
    const uploads = [0, 1, 2, 3].map(() => {
      const req = request({
        socketPath: sock(),
        agent: false,
        method: 'POST',
        path: '/v1/completions',
        headers: { ...gwAuth, 'content-type': 'application/json', 'content-length': String(64 * 1024 * 1024) },
      });
      req.on('error', () => {});
      req.write('{');
      return req;
    });
    try {
      let last: Answer | undefined;
      expect(
        await waitFor(
          async () => (last = await call({ socketPath: sock() }, { model: 'coder' }, gwAuth)).status === 503,
        ),
      ).toBe(true);
      expect(last!.headers['retry-after']).toBe('2');
      expect(JSON.parse(last!.text)).toEqual({
        error: {
          message: 'the gateway holds 256 MiB of request bodies now (at most 256 MiB at once): retry shortly',
          type: 'ServiceUnavailableError',
          param: null,
          code: 503,
        },
      });
    } finally {
      for (const u of uploads) u.destroy();
    }
    // the uploads cut off: their shares come back, a request is answered again
    expect(
      await waitFor(async () => (await call({ socketPath: sock() }, { model: 'coder' }, gwAuth)).status === 200, 5000),
    ).toBe(true);
  });

  it('tend: an idle model with sleep mode is taken out of rotation and put to sleep (level 1, wait); said in one line', async () => {
    expect(
      await waitFor(
        async () => {
          await keeper.tend();
          return sleepy.seen.some((s) => s.url.startsWith('/sleep'));
        },
        8000,
        100,
      ),
    ).toBe(true);
    expect(sleepy.seen.filter((s) => s.url.startsWith('/sleep')).map((s) => `${s.method} ${s.url}`)).toEqual([
      'POST /sleep?level=1&mode=wait',
    ]);
    expect(lines.some((l) => /^gateway: sleepy\/model: idle \d+ s, asleep \(level 1, 1 server\(s\)\)$/.test(l))).toBe(
      true,
    );
    const m = model('sleepy/model');
    const row = (await showStat(keeper.plan.files.socket)).find(
      (s) => s.backend === m.backend && s.server === 'sleepy-0',
    );
    expect(row?.status).toBe('MAINT');
    // the fine model has no sleep mode: never put to sleep
    expect(fine.seen.some((s) => s.url.startsWith('/sleep'))).toBe(false);
  });

  it('wake: asked once however many wait; back in rotation; said in one line', async () => {
    const m = model('sleepy/model');
    const before = sleepy.seen.length;
    const a = keeper.wake(m);
    const b = keeper.wake(m);
    expect(b).toBe(a);
    await Promise.all([a, b]);
    expect(sleepy.seen.slice(before).map((s) => `${s.method} ${s.url}`)).toEqual(['POST /wake_up']);
    expect(sleepy.sleeping).toBe(false);
    expect(lines.some((l) => /^gateway: sleepy\/model: woken in \d+ ms$/.test(l))).toBe(true);
    // through HAProxy's own door (no keeper on the way): the model answers
    const r = await call({ port }, { model: 'sleepy/model', prompt: 'hi' }, gwAuth);
    expect(r.status, r.text).toBe(200);
  });

  it('a wake the server refuses: an error naming the model, the server and what it said; the next wake asks again', async () => {
    const m = model('sleepy/model');
    sleepy.sleeping = true;
    sleepy.refuseWake = 'CUDA error: out of memory';
    const before = sleepy.seen.length;
    await expect(keeper.wake(m)).rejects.toThrow(
      'sleepy/model: sleepy-0 could not be woken: HTTP 500: CUDA error: out of memory',
    );
    sleepy.refuseWake = undefined;
    await keeper.wake(m);
    expect(sleepy.seen.slice(before).map((s) => s.url)).toEqual(['/wake_up', '/wake_up']);
    expect(sleepy.sleeping).toBe(false);
  });

  it('a sleep the server refuses: said with its words, and the model put back in rotation', async () => {
    sleepy.refuseSleep = 'sleep mode is off (VLLM_SERVER_DEV_MODE)';
    try {
      const m = model('sleepy/model');
      expect(
        await waitFor(
          async () => {
            await keeper.tend();
            return lines.some((l) => l.includes('sleep refused'));
          },
          8000,
          100,
        ),
      ).toBe(true);
      expect(lines.find((l) => l.includes('sleep refused'))).toMatch(
        /^gateway: sleepy\/model: idle \d+ s, sleep refused by 1 server\(s\): HTTP 500: sleep mode is off \(VLLM_SERVER_DEV_MODE\)$/,
      );
      const row = (await showStat(keeper.plan.files.socket)).find((s) => s.backend === m.backend);
      expect(row?.status).not.toBe('MAINT');
    } finally {
      sleepy.refuseSleep = undefined;
    }
  });

  it('follow: nothing changed is no reload; a model served is reloaded and listed once HAProxy runs it; one stopped, gone', async () => {
    expect(await keeper.follow()).toBe(false);
    expect(keeper.reloads).toBe(0);
    const other = await vllmStandIn();
    await served(state, 'other', 'other/model', other.port);
    expect(await keeper.follow()).toBe(true);
    expect(keeper.reloads).toBe(1);
    expect(keeper.plan.models.map((m) => m.name)).toEqual(['fine/model', 'other/model', 'sleepy/model']);
    expect(await waitFor(() => keeper.routed.length === 3, 15_000)).toBe(true);
    expect(lines.find((l) => l.startsWith('gateway: reloaded'))).toMatch(
      /^gateway: reloaded \(1 new, 0 gone\): fine\/model, other\/model, sleepy\/model; HAProxy runs it \(\d+ ms\)$/,
    );
    const r = await call({ port }, { model: 'other/model', prompt: 'hi' }, gwAuth);
    expect(r.status, r.text).toBe(200);
    expect(other.seen.filter((s) => s.url === '/v1/completions')).toHaveLength(1);
    // a second follow with nothing new: no second reload
    expect(await keeper.follow()).toBe(false);
    new Registry(state).remove('host', 'other-0');
    expect(await keeper.follow()).toBe(true);
    expect(await waitFor(() => keeper.routed.length === 2, 15_000)).toBe(true);
    expect(lines.filter((l) => l.startsWith('gateway: reloaded')).at(-1)).toMatch(
      /^gateway: reloaded \(0 new, 1 gone\): fine\/model, sleepy\/model; HAProxy runs it/,
    );
  });

  it('stop (the signal aborted): run returns, HAProxy has ended, the sockets are gone', async () => {
    // HAProxy 2.6 does not end at a soft stop that comes right after a runtime API session closed (it then
    // waits out `stats timeout`, 30 s, and stop() SIGTERMs it): the last test's reads settle first
    await new Promise((r) => setTimeout(r, 1000));
    const t0 = Date.now();
    ac.abort();
    await running;
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(() => process.kill(haproxyPid, 0)).toThrow();
    haproxyPid = 0;
    expect(existsSync(join(keeper.plan.dir, 'keeper.sock'))).toBe(false);
    expect(existsSync(join(keeper.plan.dir, 'backup.sock'))).toBe(false);
  }, 40_000);
});
