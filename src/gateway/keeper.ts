// The gateway's keeper: one sparkctl process (`sparkctl gateway run`, which `gateway up` starts in
// its own group) that runs HAProxy as its child in master-worker mode, follows the registry, wakes
// sleeping models and puts idle ones to sleep.
// - Follow: every second it plans the gateway from the registry again; when the files would change
//   (a profile served, stopped, restarted on other ports) it writes them, has HAProxy check them
//   (`haproxy -c`) and reloads: SIGUSR2 to the master, which starts a new worker on the new config
//   and lets the old one finish the requests it holds (no restart: other models' streams go on).
// - Wake on demand: HAProxy cannot call /wake_up. A model with sleep mode has the waker as its
//   backup server; its servers are checked by /is_sleeping, so while it sleeps HAProxy sends its
//   requests here. The waker wakes every server of the model (once, however many requests wait),
//   puts them back in rotation through the runtime API, and answers each waiting request itself by
//   passing it to a woken server (streams included): the client gets its answer, not a 5xx.
// - Idle sleep (gateway.idleSleep): a model with sleep mode that had no request for that long (the
//   backend's `lastsess` in `show stat`, nothing in flight) is taken out of rotation (maint), put to
//   sleep (level 1, mode wait), and left to the waker.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import { mkdirSync, openSync, closeSync, chmodSync, lstatSync } from 'node:fs';
import { dirname } from 'node:path';
import { writeFileAtomic } from '../util/fs.js';
import { pause } from '../util/pause.js';
import { pollUntil } from '../util/poll.js';
import { Registry } from '../engine/registry.js';
import { INSTANCE_ENV } from '../engine/runtime/proc.js';
import { readSleep, requestSleep, requestWake } from '../client/sleep.js';
import { runtimeCommand, setServerState, showStat, type ServerStat } from '../router/api.js';
import { planGateway, type GatewayPlan, type GatewayModel, type GatewaySettings, type ServedInstance } from './plan.js';
import { renderGatewayConfig, modelsJson, modelsMap, aliasesMap, unknownModelBody, haproxyEnv } from './config.js';
import { OnDemand, readOnDemand } from './ondemand.js';
import { parseDuration } from '../util/duration.js';

export type Log = (line: string) => void;

/** Every running server of this host's registry (and the heads of multi-node servers), as the plan reads them. */
export function servedInstances(stateDir: string): ServedInstance[] {
  const reg = new Registry(stateDir);
  const out: ServedInstance[] = reg
    .list()
    .filter((e) => e.alive && e.proof.state === 'alive' && e.inst.readyAt)
    .map(({ inst }) => ({
      name: inst.name,
      profile: inst.profile,
      servedName: inst.servedName,
      host: inst.host,
      port: inst.port,
      role: inst.role,
      argv: inst.argv,
      apiKeyEnv: inst.apiKeyEnv,
      maxModelLen: inst.maxModelLen,
      launch: inst.launch,
    }));
  for (const c of reg.clusters()) {
    try {
      const u = new URL(c.url);
      out.push({ name: `${c.profile}-head`, profile: c.profile, servedName: c.servedName, host: u.hostname, port: Number(u.port || 80), argv: [] });
    } catch {
      /* a record without a usable URL is not routed */
    }
  }
  return out;
}

interface Files {
  config: string;
  models: string;
  map: string;
  aliases: string;
  unknown: string;
}

export function renderFiles(plan: GatewayPlan): Files {
  return { config: renderGatewayConfig(plan, { logStdout: true }), models: modelsJson(plan, 0), map: modelsMap(plan), aliases: aliasesMap(plan), unknown: unknownModelBody(plan) };
}

function writeFiles(plan: GatewayPlan, f: Files) {
  writeFileAtomic(plan.files.config, f.config, { mode: 0o600 });
  writeFileAtomic(plan.files.models, modelsJson(plan), { mode: 0o600 });
  writeFileAtomic(plan.files.map, f.map, { mode: 0o600 });
  writeFileAtomic(plan.files.aliasMap, f.aliases, { mode: 0o600 });
  writeFileAtomic(plan.files.unknown, f.unknown, { mode: 0o600 });
}

export function ensureGatewayDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (st.isSymbolicLink() || !st.isDirectory()) throw new Error(`gateway folder ${dir}: is not a plain folder (a link?)`);
  if (typeof process.getuid === 'function' && st.uid !== process.getuid()) throw new Error(`gateway folder ${dir}: belongs to uid ${st.uid}, not to this user`);
  if ((st.mode & 0o777) !== 0o700) chmodSync(dir, 0o700);
}

function check(haproxy: string, file: string, env: Record<string, string>): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) =>
    execFile(haproxy, ['-c', '-f', file], { timeout: 15_000, env: { PATH: process.env.PATH ?? '', ...env } }, (err, so, se) => resolve({ ok: !err, output: `${so}${se}`.trim() })),
  );
}

export interface KeeperOptions {
  settings: GatewaySettings;
  stateDir: string;
  haproxy: string;
  log: Log;
  signal: AbortSignal;
  /** how often the registry is read again */
  followMs?: number;
  /** the sparkctl entry point (bin/sparkctl.js) the keeper runs serve and stop with, for on-demand starts */
  sparkctl?: string;
  /** called once HAProxy holds its port and the waker listens */
  onReady?: (info: { haproxyPid: number; plan: GatewayPlan }) => void;
}

export class Keeper {
  plan!: GatewayPlan;
  private files!: Files;
  private child?: ChildProcess;
  private waker?: Server;
  private waking = new Map<string, Promise<void>>();
  /** models the keeper put to sleep (their servers in maint until the waker brings them back) */
  private slept = new Set<string>();
  private rr = 0;
  reloads = 0;
  /** the on-demand set (gateway.models): started when a request names it, evicted to make room */
  od?: OnDemand;

  constructor(readonly o: KeeperOptions) {}

  private env(plan: GatewayPlan): Record<string, string> {
    return haproxyEnv(plan, process.env).env;
  }

  async run(): Promise<void> {
    const o = this.o;
    this.startOnDemand();
    this.plan = planGateway(o.settings, servedInstances(o.stateDir), o.stateDir, this.od?.entries());
    ensureGatewayDir(this.plan.dir);
    this.files = renderFiles(this.plan);
    writeFiles(this.plan, this.files);
    const checked = await check(o.haproxy, this.plan.files.config, this.env(this.plan));
    if (!checked.ok) throw new Error(`haproxy -c refused the gateway's config:\n${checked.output}`);
    await this.startWaker();
    this.startHaproxy();
    await this.waitListening();
    o.onReady?.({ haproxyPid: this.child!.pid!, plan: this.plan });
    o.log(`gateway: ${this.plan.models.length} model(s): ${this.plan.models.map((m) => `${m.name} (${m.servers.length})`).join(', ') || 'none yet'}`);
    for (const s of this.plan.skipped) o.log(`gateway: left out: ${s}`);
    const every = o.followMs ?? 1000;
    while (!o.signal.aborted) {
      await pause(every, o.signal);
      if (o.signal.aborted) break;
      if (this.child?.exitCode !== null && this.child?.exitCode !== undefined) throw new Error(`haproxy exited with code ${this.child.exitCode}`);
      try {
        await this.follow();
        await this.tend();
      } catch (e) {
        o.log(`gateway: ${(e as Error).message}`);
      }
    }
    await this.stop();
  }

  private startHaproxy() {
    const p = this.plan.files;
    mkdirSync(dirname(p.log), { recursive: true });
    const fd = openSync(p.log, 'a', 0o600);
    // the master in the foreground (-db), workers under it (-W): a SIGUSR2 reloads, a SIGUSR1 soft-stops
    this.child = spawn(this.o.haproxy, ['-W', '-db', '-f', p.config, '-p', p.pid], {
      stdio: ['ignore', fd, fd],
      env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...markers(), ...this.env(this.plan) },
    });
    closeSync(fd);
  }

  private async waitListening(deadlineMs = 10_000) {
    const answers = async () => {
      if (this.child?.exitCode !== null) throw new Error(`haproxy exited with code ${this.child?.exitCode} (see ${this.plan.files.log})`);
      return runtimeCommand(this.plan.files.socket, 'show info', 1000).then(
        () => true,
        () => false,
      );
    };
    const r = await pollUntil(answers, (ok) => ok, { deadlineMs, intervalMs: 50 });
    if (!r.done) throw new Error(`haproxy did not answer on ${this.plan.files.socket} within ${deadlineMs} ms`);
  }

  private startOnDemand() {
    const o = this.o;
    const { profiles, problems } = readOnDemand(o.settings);
    for (const p of problems) o.log(`gateway: on demand: left out: ${p}`);
    if (!profiles.length) return;
    if (!o.sparkctl) throw new Error('the keeper needs the sparkctl entry point to start models on demand');
    const busy = async () => {
      const inFlight = new Map<string, number>();
      let stats: ServerStat[] = [];
      try {
        stats = await showStat(this.plan.files.socket, 2000);
      } catch {
        /* no answer: only the keeper's own count */
      }
      for (const m of this.plan.models) {
        const rows = stats.filter((x) => x.backend === m.backend && x.server !== 'waker');
        inFlight.set(m.backend, rows.reduce((n, x) => n + x.scur + x.qcur, 0) + m.servers.reduce((n, sv) => n + (this.inFlight.get(sv.name) ?? 0), 0));
      }
      const idleS = await this.lastSessions().catch(() => new Map<string, number>());
      return { inFlight, idleS };
    };
    this.od = new OnDemand(
      o.settings,
      profiles,
      {
        model: (profile) => this.plan.models.find((m) => m.profile === profile),
        running: () => this.plan.models.filter((m) => m.servers.length > 0),
        load: busy,
        rotation: async (m, out) => {
          for (const sv of m.servers) await setServerState(this.plan.files.socket, m.backend, sv.name, out ? 'maint' : 'ready').catch(() => undefined);
        },
        follow: () => this.follow(),
        asleep: (m) => this.slept.has(m.name),
        markSlept: (m) => this.slept.add(m.name),
        log: o.log,
      },
      { stateDir: o.stateDir, sparkctl: o.sparkctl, startTimeoutMs: parseDuration(o.settings.onDemand.startTimeout, 'gateway.onDemand.startTimeout') },
    );
    o.log(`gateway: on demand: ${profiles.map((p) => `${p.profile}${p.pinned ? ' (pinned)' : ''}`).join(', ')}; evict by ${o.settings.onDemand.evict}`);
  }

  /** Read the registry again; a change of the files is a reload. */
  async follow(): Promise<boolean> {
    const plan = planGateway(this.o.settings, servedInstances(this.o.stateDir), this.o.stateDir, this.od?.entries());
    const files = renderFiles(plan);
    if (files.config === this.files.config && files.map === this.files.map && files.models === this.files.models && files.aliases === this.files.aliases && files.unknown === this.files.unknown)
      return false;
    writeFiles(plan, files);
    const checked = await check(this.o.haproxy, plan.files.config, this.env(plan));
    if (!checked.ok) {
      this.o.log(`gateway: the new config was refused, the running one stays: ${checked.output.split('\n').slice(-3).join(' | ')}`);
      writeFiles(this.plan, this.files);
      return false;
    }
    const was = new Set(this.plan.models.map((m) => `${m.name}@${m.servers.map((s) => s.port).join('+')}`));
    this.plan = plan;
    this.files = files;
    this.child?.kill('SIGUSR2');
    this.reloads++;
    const now = plan.models.map((m) => `${m.name}@${m.servers.map((s) => s.port).join('+')}`);
    this.o.log(`gateway: reloaded (${now.filter((x) => !was.has(x)).length} new, ${[...was].filter((x) => !now.includes(x)).length} gone): ${plan.models.map((m) => m.name).join(', ') || 'none'}`);
    // a reloaded worker starts its servers from the checks: the ones the keeper put to sleep stay in maint
    await pause(300);
    for (const name of this.slept) {
      const m = plan.models.find((x) => x.name === name);
      if (m) for (const s of m.servers) await setServerState(plan.files.socket, m.backend, s.name, 'maint').catch(() => undefined);
    }
    return true;
  }

  /** Idle sleep, and the wake of a model whose server holds requests while it sleeps (slept outside the gateway). */
  async tend(): Promise<void> {
    const plan = this.plan;
    const sleepers = plan.models.filter((m) => m.sleepMode);
    if (!sleepers.length) return;
    let stats: ServerStat[];
    try {
      stats = await showStat(plan.files.socket, 2000);
    } catch {
      return;
    }
    const lastsess = await this.lastSessions();
    for (const m of sleepers) {
      const rows = stats.filter((s) => s.backend === m.backend && s.server !== 'waker');
      const busy = rows.reduce((n, s) => n + s.scur + s.qcur, 0) + (stats.find((s) => s.backend === m.backend && s.server === 'waker')?.scur ?? 0);
      // a request reached a sleeping server before the checks took it out: it waits there until woken
      if (rows.some((s) => s.checkStatus === 'L7RSP' && s.scur > 0) && !this.waking.has(m.backend)) void this.wake(m).catch((e) => this.o.log(`gateway: ${(e as Error).message}`));
      const idle = lastsess.get(m.backend);
      if (plan.idleSleepMs && !this.slept.has(m.name) && !this.waking.has(m.backend) && busy === 0 && idle !== undefined && idle * 1000 >= plan.idleSleepMs) await this.sleepModel(m, idle);
    }
  }

  /** `show stat` as CSV, for the backend rows' lastsess (seconds since the last request; -1 before any). */
  private async lastSessions(): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const text = await runtimeCommand(this.plan.files.socket, 'show stat', 2000);
    const lines = text.split('\n');
    const cols = (lines[0] ?? '').replace(/^# /, '').split(',');
    const at = cols.indexOf('lastsess');
    const since = Date.now();
    for (const l of lines.slice(1)) {
      const f = l.split(',');
      if (f[1] !== 'BACKEND' || at < 0) continue;
      const n = Number(f[at]);
      // never a request yet: idle since the keeper began following it
      out.set(f[0]!, Number.isFinite(n) && n >= 0 ? n : Math.round((since - this.started) / 1000));
    }
    return out;
  }

  private started = Date.now();

  private async sleepModel(m: GatewayModel, idleS: number) {
    const sock = this.plan.files.socket;
    this.slept.add(m.name);
    for (const s of m.servers) await setServerState(sock, m.backend, s.name, 'maint');
    const results = await Promise.all(m.servers.map((s) => requestSleep(`http://${s.host}:${s.port}`, 1, { mode: 'wait', timeoutMs: 300_000 })));
    const bad = results.filter((r) => !r.ok);
    this.o.log(
      `gateway: ${m.name}: idle ${idleS} s, ${bad.length ? `sleep refused by ${bad.length} server(s): ${bad.map((r) => (r.ok ? '' : r.detail)).join('; ')}` : `asleep (level 1, ${m.servers.length} server(s))`}`,
    );
    if (bad.length) {
      this.slept.delete(m.name);
      for (const s of m.servers) await setServerState(sock, m.backend, s.name, 'ready').catch(() => undefined);
    }
  }

  /** Wake every server of the model once, however many requests wait for it; back in rotation when awake. */
  wake(m: GatewayModel): Promise<void> {
    const running = this.waking.get(m.backend);
    if (running) return running;
    const p = (async () => {
      const t0 = performance.now();
      await Promise.all(
        m.servers.map(async (s) => {
          const url = `http://${s.host}:${s.port}`;
          const before = await readSleep(url);
          if (before.state === 'sleeping') {
            const r = await requestWake(url, 300_000, before.level);
            if (!r.ok) throw new Error(`${m.name}: ${s.name} could not be woken: ${r.detail}`);
          }
          await pollUntil(
            () => readSleep(url),
            (r) => r.state !== 'sleeping',
            { deadlineMs: 300_000, intervalMs: 25 },
          );
        }),
      );
      const sock = this.plan.files.socket;
      for (const s of m.servers) {
        await setServerState(sock, m.backend, s.name, 'ready').catch(() => undefined);
        await runtimeCommand(sock, `set server ${m.backend}/${s.name} health up`, 2000).catch(() => undefined);
      }
      this.slept.delete(m.name);
      this.o.log(`gateway: ${m.name}: woken in ${Math.round(performance.now() - t0)} ms`);
    })().finally(() => this.waking.delete(m.backend));
    this.waking.set(m.backend, p);
    return p;
  }

  private startWaker(): Promise<void> {
    this.waker = createServer((req, res) => {
      this.onWaker(req, res).catch((e) => {
        if (!res.headersSent) sendError(res, 503, `the gateway could not wake the model: ${(e as Error).message}`);
        else res.destroy();
      });
    });
    this.waker.keepAliveTimeout = 5000;
    return new Promise((resolve, reject) => {
      this.waker!.once('error', reject);
      this.waker!.listen(this.plan.waker.port, this.plan.waker.host, () => resolve());
    });
  }

  private async onWaker(req: IncomingMessage, res: ServerResponse) {
    const real = req.headers['x-sparkctl-model'];
    const backend = String(req.headers['x-sparkctl-backend'] ?? '');
    let m = typeof real === 'string' ? this.plan.models.find((x) => x.name === real) : this.plan.models.find((x) => x.backend === backend);
    if (!m) return sendError(res, 503, `no model behind ${JSON.stringify(String(real ?? backend).slice(0, 80))} now`);
    let body = await readBounded(req, 64 * 1024 * 1024);
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP.has(k) && k !== 'x-sparkctl-model') headers[k] = v;
    if (typeof real === 'string') {
      body = renamed(body, real);
      // one key at the gateway: the model's own key replaces the client's (HAProxy does it for the other routes)
      if (this.plan.apiKeyEnv) {
        delete headers['x-api-key'];
        const k = m.apiKeyEnv ? process.env[m.apiKeyEnv] : undefined;
        if (k) headers.authorization = `Bearer ${k}`;
        else delete headers.authorization;
      }
    }
    const ready = await this.onDemandReady(m, res);
    if (!ready) return;
    m = ready;
    const s = this.pick(m);
    if (m.sleepMode && (this.slept.has(m.name) || this.waking.has(m.backend) || (await readSleep(`http://${s.host}:${s.port}`)).state === 'sleeping')) await this.wake(m);
    this.inFlight.set(s.name, (this.inFlight.get(s.name) ?? 0) + 1);
    try {
      await passOn(req.method ?? 'POST', req.url ?? '/', headers, body, res, s.host, s.port);
    } finally {
      this.inFlight.set(s.name, (this.inFlight.get(s.name) ?? 1) - 1);
    }
  }

  private inFlight = new Map<string, number>();

  /**
   * An on-demand model: started (room made by the plan first) when it has no server, room made
   * before a sleeping one wakes; the model as the plan has it then, or undefined when the request
   * was answered here (503 + Retry-After: it could not start in time, or no room can be made).
   */
  private async onDemandReady(m: GatewayModel, res: ServerResponse): Promise<GatewayModel | undefined> {
    const od = this.od;
    if (!od || !m.onDemand || !od.byProfile.has(m.profile)) return m;
    od.used(m.profile);
    const retry = this.o.settings.retryAfterSeconds;
    const limitMs = parseDuration(this.o.settings.onDemand.startTimeout, 'gateway.onDemand.startTimeout');
    try {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`not started within ${this.o.settings.onDemand.startTimeout}`)), limitMs);
      });
      try {
        if (!m.servers.length || od.state(m.profile) === 'evicting') await Promise.race([od.ensure(m.profile), late]);
        else if (m.sleepMode && this.slept.has(m.name)) await Promise.race([od.roomFor(m.profile), late]);
      } finally {
        clearTimeout(timer);
      }
    } catch (e) {
      sendError(res, 503, `${m.name}: ${(e as Error).message}`, retry);
      return undefined;
    }
    const now = this.plan.models.find((x) => x.profile === m.profile);
    if (!now?.servers.length) {
      sendError(res, 503, `${m.name}: not running`, retry);
      return undefined;
    }
    return now;
  }

  /** The server with the fewest requests the keeper passes on (leastconn, as HAProxy balances the rest). */
  private pick(m: GatewayModel) {
    let best = m.servers[this.rr++ % m.servers.length]!;
    for (const s of m.servers) if ((this.inFlight.get(s.name) ?? 0) < (this.inFlight.get(best.name) ?? 0)) best = s;
    return best;
  }

  async stop(): Promise<void> {
    this.waker?.close();
    this.waker?.closeAllConnections();
    const c = this.child;
    if (!c || c.exitCode !== null) return;
    // soft stop: the listeners close, the requests in flight finish
    c.kill('SIGUSR1');
    const exited = (deadlineMs: number) =>
      pollUntil(
        () => c.exitCode,
        (code) => code !== null,
        { deadlineMs, intervalMs: 50 },
      );
    await exited(30_000);
    if (c.exitCode === null) c.kill('SIGTERM');
    await exited(3000);
    if (c.exitCode === null) c.kill('SIGKILL');
  }
}

/** The marks HAProxy carries from the keeper: the gateway's marker (what proves the group ours if the keeper dies), a test run's. */
function markers(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of [INSTANCE_ENV, 'SPARKCTL_TEST_RUN', 'SPARKCTL_TEST_CASE']) {
    const v = process.env[k];
    if (v) out[k] = v;
  }
  return out;
}

function sendError(res: ServerResponse, status: number, message: string, retryAfterS?: number) {
  const text = JSON.stringify({ error: { message, type: 'ServiceUnavailableError', param: null, code: status } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...(retryAfterS ? { 'retry-after': String(retryAfterS) } : {}) });
  res.end(text);
}

function readBounded(req: IncomingMessage, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n > max) {
        req.destroy();
        reject(new Error(`request body over ${max} bytes`));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer', 'x-sparkctl-backend', 'content-length']);

/** The request's body with its model renamed (an alias to the served name); a body that is not a JSON object passes as it is. */
export function renamed(body: Buffer, name: string): Buffer {
  try {
    const j = JSON.parse(body.toString('utf8'));
    if (!j || typeof j !== 'object' || Array.isArray(j)) return body;
    j.model = name;
    return Buffer.from(JSON.stringify(j));
  } catch {
    return body;
  }
}

/** The request to a (woken) server, its answer streamed back as it comes (an SSE stream included). */
function passOn(method: string, path: string, headers: Record<string, string | string[]>, body: Buffer, res: ServerResponse, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    headers['content-length'] = String(body.length);
    const up = httpRequest({ host, port, method, path, headers, timeout: 1_800_000 }, (r) => {
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !HOP.has(k)) out[k] = v;
      res.writeHead(r.statusCode ?? 502, out);
      r.pipe(res);
      r.on('end', resolve);
      r.on('error', reject);
    });
    up.on('timeout', () => up.destroy(new Error('the woken server did not answer within 30 min')));
    up.on('error', reject);
    res.on('close', () => up.destroy());
    up.end(body);
  });
}
