// The gateway's keeper: one sparkctl process (`sparkctl gateway run`, which `gateway up` starts in
// its own group) that runs HAProxy as its child in master-worker mode, follows the registry, wakes
// sleeping models and puts idle ones to sleep.
// - Follow: every second it plans the gateway from the registry again; when the files would change
//   (a profile served, stopped, restarted on other ports) it writes them, has HAProxy check them
//   (`haproxy -c`) and reloads: SIGUSR2 to the master, which starts a new worker on the new config
//   and lets the old one finish the requests it holds (no restart: other models' streams go on).
// - Wake on demand: HAProxy cannot call /wake_up. A model with sleep mode has its servers checked
//   by /is_sleeping, so while it sleeps none is usable and HAProxy's frontend sends its requests to
//   the keeper (via_keeper: a Unix socket in the gateway's 0700 folder, which no other user can open
//   or bind). The keeper wakes every server of the model (once, however many requests wait),
//   puts them back in rotation through the runtime API, and answers each waiting request itself by
//   passing it to a woken server (streams included): the client gets its answer, not a 5xx.
// - Idle sleep (gateway.idleSleep): a model with sleep mode that had no request for that long (the
//   backend's `lastsess` in `show stat`, nothing in flight) is taken out of rotation (maint), put to
//   sleep (level 1, mode wait), and left to the keeper to wake.
// - The keeper also takes an alias's requests (it rewrites the body's model) and a body too large for
//   HAProxy to read its model (past tune.bufsize). It believes no header: the caller shows the
//   gateway's key (constant-time compare) before the keeper adds a model's key, and the model is
//   read from the body (src/gateway/route.ts).
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type ServerResponse,
  type Server,
} from 'node:http';
import { mkdirSync, openSync, closeSync, chmodSync, lstatSync, unlinkSync, fstatSync, writeSync } from 'node:fs';
import { connect } from 'node:net';
import { bindTrial, holdersInWords, listenerIsOneOf } from '../engine/runtime/socket-owner.js';
import { haproxyAddr, HAPROXY_MALLOC_ENV } from '../profiles/haproxy.js';
import { dirname } from 'node:path';
import { writeFileAtomic } from '../util/atomic.js';
import { pause } from '../util/pause.js';
import { pollUntil } from '../util/poll.js';
import { Registry } from '../engine/registry.js';
import { onHost, overNodes } from '../engine/servers.js';
import { LaunchError, UsageError } from '../errors.js';
import { readTail } from '../util/read.js';
import { INSTANCE_ENV } from '../engine/runtime/proc.js';
import { readSleep, requestSleep, requestWake } from '../client/sleep.js';
import {
  backendColumn,
  parseShowStat,
  runtimeCommand,
  setServerState,
  showStat,
  showStatEveryWorker,
  type ServerStat,
} from '../router/api.js';
import { planGateway, type GatewayPlan, type GatewayModel, type GatewaySettings, type ServedInstance } from './plan.js';
import { routeBody, renamed, carriesKey, INTERNAL_HEADER_PREFIX } from './route.js';
import {
  renderGatewayConfig,
  modelsJson,
  modelsMap,
  aliasesMap,
  unknownModelBody,
  haproxyEnv,
  RETURN_ROUTE_HEADER,
  RETURNED_HEADER,
  type RenderOptions,
} from './config.js';
import { USAGE_LUA, UsageBook, parseRouteLine, parseUsageLine } from './usage.js';
import { createInterface } from 'node:readline';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { OnDemand, readOnDemand } from './ondemand.js';
import { parseDuration } from '../util/duration.js';

type Log = (line: string) => void;

/** How often the keeper appends the models' usage to usage.jsonl. */
const USAGE_FLUSH_MS = 60_000;

/**
 * How long a reload may take before the keeper goes on without HAProxy's confirmation (and says so):
 * HAProxy re-executes its master, parses the configuration (the Lua filter included) and forks a new
 * worker; 0.1 to 0.5 s measured on an idle 2-core host, seconds on a loaded one.
 */
const RELOAD_CONFIRM_MS = 15_000;

/** Every running server of this host's registry (and the heads of multi-node servers), as the plan reads them. */
export function servedInstances(stateDir: string): ServedInstance[] {
  const servers = new Registry(stateDir).servers();
  const out: ServedInstance[] = onHost(servers)
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
      uds: inst.uds,
    }));
  for (const c of overNodes(servers)) {
    try {
      const u = new URL(c.url);
      out.push({
        name: `${c.profile}-head`,
        profile: c.profile,
        servedName: c.servedName,
        host: u.hostname,
        port: Number(u.port || 80),
        argv: [],
      });
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

export function renderFiles(plan: GatewayPlan, usage?: RenderOptions['usage']): Files {
  return {
    config: renderGatewayConfig(plan, { logStdout: true, usage }),
    models: modelsJson(plan, 0),
    map: modelsMap(plan),
    aliases: aliasesMap(plan),
    unknown: unknownModelBody(plan),
  };
}

function writeFiles(plan: GatewayPlan, f: Files) {
  writeFileAtomic(plan.files.config, f.config, { mode: 0o600 });
  writeFileAtomic(plan.files.models, modelsJson(plan), { mode: 0o600 });
  writeFileAtomic(plan.files.map, f.map, { mode: 0o600 });
  writeFileAtomic(plan.files.aliasMap, f.aliases, { mode: 0o600 });
  writeFileAtomic(plan.files.unknown, f.unknown, { mode: 0o600 });
}

function ensureGatewayDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (st.isSymbolicLink() || !st.isDirectory())
    throw new UsageError(`gateway folder ${dir}: is not a plain folder (a link?)`, [
      `remove ${dir}; sparkctl creates it`,
    ]);
  if (typeof process.getuid === 'function' && st.uid !== process.getuid())
    throw new UsageError(`gateway folder ${dir}: belongs to uid ${st.uid}, not to this user`, [
      `remove ${dir}; sparkctl creates it`,
    ]);
  if ((st.mode & 0o777) !== 0o700) chmodSync(dir, 0o700);
}

function check(haproxy: string, file: string, env: Record<string, string>): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) =>
    execFile(
      haproxy,
      ['-c', '-f', file],
      { timeout: 15_000, env: { PATH: process.env.PATH ?? '', ...env } },
      (err, so, se) => resolve({ ok: !err, output: `${so}${se}`.trim() }),
    ),
  );
}

interface KeeperOptions {
  settings: GatewaySettings;
  stateDir: string;
  haproxy: string;
  log: Log;
  signal: AbortSignal;
  /** how often the registry is read again */
  followMs?: number;
  /** the sparkctl entry point (bin/sparkctl.js) the keeper runs serve and stop with, for on-demand starts */
  sparkctl?: string;
  /** called once HAProxy holds its port and the keeper listens on its socket */
  onReady?: (info: { haproxyPid: number; plan: GatewayPlan }) => void;
  /**
   * called as soon as what gateway status shows changed: the models (a reload), an on-demand model's
   * state (starting, evicting, started, stopped, asleep), and (`usage` true) the usage counts
   */
  onChange?: (usage?: boolean) => void;
}

export class Keeper {
  plan!: GatewayPlan;
  private files!: Files;
  private child?: ChildProcess;
  private listeners: Server[] = [];
  private waking = new Map<string, Promise<void>>();
  /** models the keeper put to sleep (their servers in maint until the keeper wakes them) */
  private slept = new Set<string>();
  private rr = 0;
  reloads = 0;
  /**
   * The models HAProxy routes: the plan of the last reload its new worker was seen to run (its
   * runtime API answered by a new worker, the old one out of the listening socket). What gateway
   * status lists: a model listed there is routable. `plan` is the keeper's own, ahead of it during a reload.
   */
  routed: GatewayModel[] = [];
  /** the on-demand set (gateway.models): started when a request names it, evicted to make room */
  od?: OnDemand;
  /** token usage and prefix hits per model (HAProxy's Lua filter; undefined when this HAProxy has no Lua) */
  usage?: UsageBook;
  private usageOpts?: RenderOptions['usage'];

  constructor(readonly o: KeeperOptions) {}

  private env(plan: GatewayPlan): Record<string, string> {
    return haproxyEnv(plan, process.env).env;
  }

  async run(): Promise<void> {
    const o = this.o;
    this.startOnDemand();
    this.plan = planGateway(o.settings, servedInstances(o.stateDir), o.stateDir, this.od?.entries());
    ensureGatewayDir(this.plan.dir);
    await this.startUsage();
    this.files = renderFiles(this.plan, this.usageOpts);
    writeFiles(this.plan, this.files);
    const checked = await check(o.haproxy, this.plan.files.config, this.env(this.plan));
    if (!checked.ok)
      throw new LaunchError(`haproxy -c refused the gateway's config (${this.plan.files.config})`, [
        ...checked.output.split('\n').slice(-6),
        'HAProxy 2.6 or later is needed; sparkctl gateway config prints what it would run',
      ]);
    // each port HAProxy will bind, tried first: one another process holds is named with its holder (not "haproxy exited
    // with code 1")
    await portFree(
      this.plan.bind.host,
      this.plan.bind.port,
      'the gateway port',
      '--port N (the stats port follows it: N + 1), or gateway.port in --config',
    );
    await portFree(
      this.plan.stats.host,
      this.plan.stats.port,
      "the gateway's stats port",
      '--port N (the stats port is N + 1), or gateway.statsPort in --config',
    );
    await this.startListener();
    this.startHaproxy();
    await this.waitListening();
    this.routed = this.plan.models;
    o.onReady?.({ haproxyPid: this.child!.pid!, plan: this.plan });
    o.log(
      `gateway: ${this.plan.models.length} model(s): ${this.plan.models.map((m) => `${m.name} (${m.servers.length})`).join(', ') || 'none yet'}`,
    );
    for (const s of this.plan.skipped) o.log(`gateway: left out: ${s}`);
    const every = o.followMs ?? 1000;
    while (!o.signal.aborted) {
      await pause(every, o.signal);
      if (o.signal.aborted) break;
      if (this.child?.exitCode !== null && this.child?.exitCode !== undefined)
        throw new Error(`haproxy exited with code ${this.child.exitCode}`);
      try {
        if (this.usage && Date.now() - this.flushedAt >= USAGE_FLUSH_MS) {
          this.flushedAt = Date.now();
          this.usage.flush();
        }
        await this.follow();
        await this.tend();
      } catch (e) {
        o.log(`gateway: ${(e as Error).message}`);
      }
    }
    await this.stop();
    this.usage?.flush();
  }

  private flushedAt = Date.now();

  /**
   * Usage per model needs HAProxy's Lua (the filter reads each answer as it passes): with it, the
   * filter's file is written in the gateway's folder and HAProxy's log comes to the keeper over a
   * pipe (fd 3); without it, the gateway runs as before and says what it does not count.
   */
  private async startUsage() {
    const vv = await new Promise<string>((resolve) =>
      execFile(this.o.haproxy, ['-vv'], { timeout: 15_000, maxBuffer: 1 << 20 }, (_e, so) => resolve(String(so ?? ''))),
    );
    if (!/Built with Lua version/.test(vv)) {
      this.o.log(
        'gateway: token usage per model is not recorded: this HAProxy is built without Lua (haproxy -vv: USE_LUA)',
      );
      return;
    }
    const lua = join(this.plan.dir, 'usage.lua');
    writeFileAtomic(lua, USAGE_LUA, { mode: 0o600 });
    this.usageOpts = { lua, logFd: 3 };
    this.usage = new UsageBook(
      this.o.stateDir,
      (backend) => {
        const m = this.plan.models.find((x) => x.backend === backend);
        return m && { name: m.name, profile: m.profile };
      },
      this.o.log,
    );
  }

  private startHaproxy() {
    const p = this.plan.files;
    mkdirSync(dirname(p.log), { recursive: true });
    const fd = openSync(p.log, 'a', 0o600);
    this.logFrom = fstatSync(fd).size;
    // the master in the foreground (-db), workers under it (-W): a SIGUSR2 reloads, a SIGUSR1 soft-stops.
    // With the usage filter, HAProxy logs to fd 3 (a pipe the keeper reads: usage lines counted, the rest
    // written to the log) and runs quiet (-q): a Lua log line is not also printed to stderr
    // -S: the master CLI, where an old worker is asked what it still carries after a reload (workers())
    this.child = spawn(
      this.o.haproxy,
      ['-W', '-db', '-S', `${p.master},mode,600`, ...(this.usage ? ['-q'] : []), '-f', p.config, '-p', p.pid],
      {
        stdio: this.usage ? ['ignore', fd, fd, 'pipe'] : ['ignore', fd, fd],
        env: {
          PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
          ...HAPROXY_MALLOC_ENV,
          ...markers(),
          ...this.env(this.plan),
        },
      },
    );
    const pipe = this.child.stdio[3] as NodeJS.ReadableStream | null | undefined;
    if (this.usage && pipe) {
      const book = this.usage;
      const lines = createInterface({ input: pipe, crlfDelay: Number.POSITIVE_INFINITY });
      const logOut = openSync(p.log, 'a', 0o600);
      lines.on('line', (line) => {
        const u = parseUsageLine(line);
        const r = u ? undefined : parseRouteLine(line);
        if (u) {
          book.add(u);
          this.o.onChange?.(true);
        } else if (r) {
          book.addRoute(r);
          this.o.onChange?.(true);
        } else if (line.trim()) {
          try {
            writeSync(logOut, `${line.slice(0, 4096)}\n`);
          } catch {
            /* the log cannot be written: the line is dropped, HAProxy is not held */
          }
        }
      });
      lines.on('close', () => closeSync(logOut));
    }
    closeSync(fd);
  }

  /** HAProxy's log size when this keeper started it: a failed start shows only what came after */
  private logFrom = 0;

  private async waitListening(deadlineMs = 10_000) {
    const answers = async () => {
      if (this.child?.exitCode !== null)
        throw new LaunchError(`haproxy exited with code ${this.child?.exitCode} as it started`, [
          ...logTail(this.plan.files.log, this.logFrom),
          `see ${this.plan.files.log}`,
        ]);
      return runtimeCommand(this.plan.files.socket, 'show info', 1000).then(
        () => true,
        () => false,
      );
    };
    const r = await pollUntil(answers, (ok) => ok, { deadlineMs, intervalMs: 50 });
    if (!r.done)
      throw new LaunchError(`haproxy did not answer on ${this.plan.files.socket} within ${deadlineMs} ms`, [
        ...logTail(this.plan.files.log, this.logFrom),
        `see ${this.plan.files.log}`,
      ]);
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
      let texts: string[] = [];
      let unread: string | undefined;
      // a loaded host can hold HAProxy's answer (or this process) past 2 s: once more, longer; still
      // no answer is an unknown count, never none in flight (a stream running on a model it would evict)
      for (const ms of [2000, 5000]) {
        try {
          ({ all: stats, texts } = await this.workers(ms));
          unread = undefined;
          break;
        } catch (e) {
          unread = `HAProxy's stat socket: ${(e as Error).message}`;
        }
      }
      for (const m of this.plan.models) {
        const rows = stats.filter((x) => x.backend === m.backend && x.server !== 'waker');
        // HAProxy's count (every worker's), the keeper's own (what it passes straight to a server), and what it holds
        // or passes back for the model
        inFlight.set(
          m.backend,
          rows.reduce((n, x) => n + x.scur + x.qcur, 0) +
            m.servers.reduce((n, sv) => n + (this.inFlight.get(sv.name) ?? 0), 0) +
            (this.passing.get(m.name) ?? 0),
        );
      }
      return { inFlight, idleS: this.lastSessions(texts), unread };
    };
    this.od = new OnDemand(
      o.settings,
      profiles,
      {
        model: (profile) => this.plan.models.find((m) => m.profile === profile),
        running: () => this.plan.models.filter((m) => m.servers.length > 0),
        load: busy,
        rotation: async (m, out) => {
          for (const sv of m.servers)
            await setServerState(this.plan.files.socket, m.backend, sv.name, out ? 'maint' : 'ready').catch(
              () => undefined,
            );
        },
        follow: () => this.follow(),
        asleep: (m) => this.slept.has(m.name),
        markSlept: (m) => this.slept.add(m.name),
        changed: () => o.onChange?.(),
        log: o.log,
      },
      {
        stateDir: o.stateDir,
        sparkctl: o.sparkctl,
        startTimeoutMs: parseDuration(o.settings.onDemand.startTimeout, 'gateway.onDemand.startTimeout'),
      },
    );
    o.log(
      `gateway: on demand: ${profiles.map((p) => `${p.profile}${p.pinned ? ' (pinned)' : ''}`).join(', ')}; evict by ${o.settings.onDemand.evict}`,
    );
  }

  /**
   * Read the registry again; a change of the files is a reload. Its models are published (gateway
   * status, the "reloaded" line) only once HAProxy runs it, or RELOAD_CONFIRM_MS passed: a model listed
   * is routable. The follow itself returns as before (the keeper's own routes and an on-demand start go
   * on at once: what they pass back into HAProxy is routed either way, by the old worker's waker).
   */
  async follow(): Promise<boolean> {
    const plan = planGateway(this.o.settings, servedInstances(this.o.stateDir), this.o.stateDir, this.od?.entries());
    const files = renderFiles(plan, this.usageOpts);
    if (
      files.config === this.files.config &&
      files.map === this.files.map &&
      files.models === this.files.models &&
      files.aliases === this.files.aliases &&
      files.unknown === this.files.unknown
    )
      return false;
    writeFiles(plan, files);
    const checked = await check(this.o.haproxy, plan.files.config, this.env(plan));
    if (!checked.ok) {
      this.o.log(
        `gateway: the new config was refused, the running one stays: ${checked.output.split('\n').slice(-3).join(' | ')}`,
      );
      writeFiles(this.plan, this.files);
      return false;
    }
    const was = new Set(this.plan.models.map((m) => `${m.name}@${m.servers.map((s) => s.port).join('+')}`));
    // the worker that runs the files before this reload: the reload is done when another one answers and it has left
    // the listening socket
    const before = await this.workerPid();
    this.plan = plan;
    this.files = files;
    const t0 = performance.now();
    this.child?.kill('SIGUSR2');
    const seq = ++this.reloads;
    void this.reloaded(before).then((confirmed) => {
      // a later reload publishes its own models
      if (seq !== this.reloads || this.o.signal.aborted) return;
      this.routed = plan.models;
      this.o.onChange?.();
      const now = plan.models.map((m) => `${m.name}@${m.servers.map((s) => s.port).join('+')}`);
      this.o.log(
        `gateway: reloaded (${now.filter((x) => !was.has(x)).length} new, ${[...was].filter((x) => !now.includes(x)).length} gone): ${plan.models.map((m) => m.name).join(', ') || 'none'}; ${
          confirmed
            ? `HAProxy runs it (${Math.round(performance.now() - t0)} ms)`
            : `HAProxy did not show that it runs it within ${RELOAD_CONFIRM_MS / 1000} s (no new worker on its runtime API, or the old one still listening): a request may still get the old routes`
        }`,
      );
    });
    // a reloaded worker starts its servers from the checks: the ones the keeper put to sleep stay in maint
    await pause(300);
    for (const name of this.slept) {
      const m = plan.models.find((x) => x.name === name);
      if (m)
        for (const s of m.servers)
          await setServerState(plan.files.socket, m.backend, s.name, 'maint').catch(() => undefined);
    }
    return true;
  }

  /** The pid of the HAProxy worker that answers the runtime API now (`show info`); undefined: no answer. */
  private async workerPid(timeoutMs = 2000): Promise<number | undefined> {
    try {
      const m = /^Pid: (\d+)\s*$/m.exec(await runtimeCommand(this.plan.files.socket, 'show info', timeoutMs));
      return m ? Number(m[1]) : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * After SIGUSR2: whether HAProxy runs the new files within RELOAD_CONFIRM_MS. The master forks a new
   * worker, which takes the listening sockets (expose-fd listeners) while the old one still holds
   * them; the old one leaves them at its soft stop. Until then a new connection may reach the old
   * worker, whose map lacks a model just served: a 404 "does not exist" for a model the registry has
   * (gateway-usage.test.ts saw it on a loaded host). Done: a worker other than `before` answers the
   * runtime API, and `before` holds no listening socket of the gateway's port (without /proc to
   * read, the new worker's answer is the evidence there is).
   */
  private async reloaded(before: number | undefined): Promise<boolean> {
    const port = this.plan.bind.port;
    const r = await pollUntil(
      async () => {
        const now = await this.workerPid(1000);
        if (now === undefined || now === before) return false;
        return before === undefined || listenerIsOneOf(port, [before]) !== true;
      },
      (done) => done,
      { deadlineMs: RELOAD_CONFIRM_MS, intervalMs: 25, signal: this.o.signal },
    );
    return r.done;
  }

  /** Idle sleep, and the wake of a model whose server holds requests while it sleeps (slept outside the gateway). */
  async tend(): Promise<void> {
    const plan = this.plan;
    const sleepers = plan.models.filter((m) => m.sleepMode);
    if (!sleepers.length) return;
    let read: Awaited<ReturnType<Keeper['workers']>>;
    try {
      read = await this.workers(2000);
    } catch {
      // an old worker unread: no idle sleep this round (a stream may run there); a wake needs only the current worker
      const current = await showStat(plan.files.socket, 2000).catch(() => undefined);
      if (!current) return;
      for (const m of sleepers) this.wakeHeld(m, current);
      return;
    }
    const lastsess = this.lastSessions(read.texts);
    for (const m of sleepers) {
      // in flight on every worker: a stream the old worker still carries after a reload keeps its model awake
      const busy =
        read.all.filter((s) => s.backend === m.backend).reduce((n, s) => n + s.scur + s.qcur, 0) +
        (this.passing.get(m.name) ?? 0);
      this.wakeHeld(m, read.current);
      const idle = lastsess.get(m.backend);
      if (
        plan.idleSleepMs &&
        !this.slept.has(m.name) &&
        !this.waking.has(m.backend) &&
        busy === 0 &&
        idle !== undefined &&
        idle * 1000 >= plan.idleSleepMs
      )
        await this.sleepModel(m, idle);
    }
  }

  /**
   * A request reached a sleeping server before the checks took it out (the current worker's rows): it waits there until
   * woken.
   */
  private wakeHeld(m: GatewayModel, current: ServerStat[]) {
    if (
      current.some((s) => s.backend === m.backend && s.checkStatus === 'L7RSP' && s.scur > 0) &&
      !this.waking.has(m.backend)
    )
      void this.wake(m).catch((e) => this.o.log(`gateway: ${(e as Error).message}`));
  }

  /**
   * `show stat` of every HAProxy worker: the current one's rows (server states, checks) and all rows
   * (what is in flight: after a reload the old worker still carries its streams), and the CSV texts.
   */
  private async workers(timeoutMs: number): Promise<{ current: ServerStat[]; all: ServerStat[]; texts: string[] }> {
    const texts = await showStatEveryWorker(this.plan.files.socket, this.plan.files.master, timeoutMs);
    const [current, ...old] = texts.map(parseShowStat);
    return { current: current!, all: [current!, ...old].flat(), texts };
  }

  /**
   * Seconds since each backend's last request, from the backend rows' lastsess of every worker
   * (-1: none yet in that worker). A reload starts a worker at -1, so the latest request seen by any
   * worker is kept here across reads: a model used just before a reload is not idle since the keeper began.
   */
  private lastSessions(texts: string[]): Map<string, number> {
    const now = Date.now();
    for (const text of texts)
      for (const { backend, value } of backendColumn(text, 'lastsess')) {
        const n = Number(value);
        if (value !== '' && Number.isFinite(n) && n >= 0)
          this.lastRequest.set(backend, Math.max(this.lastRequest.get(backend) ?? 0, now - n * 1000));
      }
    const out = new Map<string, number>();
    // never a request yet: idle since the keeper began following it
    for (const m of this.plan.models)
      out.set(m.backend, Math.round((now - (this.lastRequest.get(m.backend) ?? this.started)) / 1000));
    return out;
  }

  private started = Date.now();
  /** backend -> when a worker last saw a request on it (ms since the epoch) */
  private lastRequest = new Map<string, number>();

  private async sleepModel(m: GatewayModel, idleS: number) {
    const sock = this.plan.files.socket;
    this.slept.add(m.name);
    this.o.onChange?.();
    for (const s of m.servers) await setServerState(sock, m.backend, s.name, 'maint');
    const results = await Promise.all(
      m.servers.map((s) => requestSleep(`http://${s.host}:${s.port}`, 1, { mode: 'wait', timeoutMs: 300_000 })),
    );
    const bad = results.filter((r) => !r.ok);
    this.o.log(
      `gateway: ${m.name}: idle ${idleS} s, ${bad.length ? `sleep refused by ${bad.length} server(s): ${bad.map((r) => (r.ok ? '' : r.detail)).join('; ')}` : `asleep (level 1, ${m.servers.length} server(s))`}`,
    );
    if (bad.length) {
      this.slept.delete(m.name);
      this.o.onChange?.();
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
      this.o.onChange?.();
      this.o.log(`gateway: ${m.name}: woken in ${Math.round(performance.now() - t0)} ms`);
    })().finally(() => this.waking.delete(m.backend));
    this.waking.set(m.backend, p);
    return p;
  }

  /**
   * The keeper's listeners: two Unix sockets in the gateway's folder (0700, checked ours), never a
   * port: keeper.sock for the frontend's via_keeper (the client's own headers), backup.sock for the
   * backends' waker. A socket file left by a keeper that died is removed (nothing answers on it); one
   * that answers is another keeper's, and this one does not start.
   */
  private async startListener(): Promise<void> {
    for (const [door, path] of [
      ['front', this.plan.keeper.socket],
      ['backup', this.plan.keeper.backupSocket],
    ] as const) {
      await clearStaleSocket(path);
      const server = createServer((req, res) => {
        this.onRequest(req, res, door).catch((e) => {
          if (!res.headersSent)
            sendError(res, 503, `the gateway could not pass the request on: ${(e as Error).message}`);
          else res.destroy();
        });
      });
      server.keepAliveTimeout = 5000;
      this.listeners.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', (e: NodeJS.ErrnoException) =>
          reject(
            new LaunchError(`the keeper could not listen on ${path}: ${e.code ?? e.message}`, [
              `remove ${path} if no gateway runs (sparkctl gateway status)`,
            ]),
          ),
        );
        server.listen(path, () => resolve());
      });
      chmodSync(path, 0o600);
    }
  }

  /** Bytes of request bodies the keeper holds now (each at most MAX_BODY; all together at most MAX_HELD). */
  private held = 0;

  /**
   * A request HAProxy passed to the keeper: a sleeping model's, an alias's, or one whose body was
   * too large for HAProxy to read its model. The caller shows the gateway's key (when there is one)
   * before anything is added; the model comes from the body, never from a header.
   */
  private async onRequest(req: IncomingMessage, res: ServerResponse, door: 'front' | 'backup') {
    const plan = this.plan;
    const gatewayKey = plan.apiKeyEnv ? process.env[plan.apiKeyEnv] : undefined;
    // the front door (the client's own headers): the gateway's key, or nothing is added. The backup
    // door is a backend's waker: HAProxy checked the key at its frontend and set the model's own
    if (door === 'front' && plan.apiKeyEnv && !carriesKey(req.headers, gatewayKey))
      return sendError(res, 401, 'Unauthorized', undefined, 'AuthenticationError');
    // came back from HAProxy's keeper_return and still found no usable server: straight to a server now (never around
    // again)
    const returned = door === 'backup' && req.headers[RETURNED_HEADER] === this.hop;
    const announced = Number(req.headers['content-length']);
    const want = Number.isFinite(announced) && announced > 0 ? announced : MAX_BODY;
    if (this.held + Math.min(want, MAX_BODY) > MAX_HELD)
      return sendError(
        res,
        503,
        `the gateway holds ${Math.round(this.held / 2 ** 20)} MiB of request bodies now (at most ${MAX_HELD / 2 ** 20} MiB at once): retry shortly`,
        2,
      );
    const reserved = Math.min(want, MAX_BODY);
    this.held += reserved;
    let body: Buffer;
    try {
      body = await readBounded(req, MAX_BODY);
    } catch (e) {
      this.held -= reserved;
      return sendError(res, 413, (e as Error).message, undefined, 'BadRequestError');
    }
    try {
      const route = routeBody(plan, body);
      if (!route.ok) return sendError(res, route.status, route.message, undefined, route.type, route.param);
      let m = route.model;
      if (route.rename) body = renamed(body, route.rename);
      // one key at the gateway (checked above): the model's own key replaces the client's, as HAProxy does for the
      // other routes
      const headers = this.forwardedHeaders(req, m, door === 'front' && !!plan.apiKeyEnv);
      this.passing.set(m.name, (this.passing.get(m.name) ?? 0) + 1);
      try {
        const ready = await this.onDemandReady(m, res);
        if (!ready) return;
        m = ready;
        const s = this.pick(m);
        if (
          m.sleepMode &&
          (this.slept.has(m.name) ||
            this.waking.has(m.backend) ||
            (await readSleep(`http://${s.host}:${s.port}`)).state === 'sleeping')
        )
          await this.wake(m);
        if (!returned) {
          // back into HAProxy, to the model's backend: the prefix hash and the admission limit hold for it too
          await passOn(
            req.method ?? 'POST',
            req.url ?? '/',
            { ...headers, [RETURN_ROUTE_HEADER]: m.name, [RETURNED_HEADER]: this.hop },
            body,
            res,
            {
              socketPath: this.plan.keeper.returnSocket,
            },
          );
          return;
        }
        this.inFlight.set(s.name, (this.inFlight.get(s.name) ?? 0) + 1);
        try {
          await passOn(req.method ?? 'POST', req.url ?? '/', headers, body, res, { host: s.host, port: s.port });
        } finally {
          this.inFlight.set(s.name, (this.inFlight.get(s.name) ?? 1) - 1);
        }
      } finally {
        this.donePassing(m.name);
      }
    } finally {
      this.held -= reserved;
    }
  }

  /**
   * The headers a request is passed on with: the client's, less the hop-by-hop ones and the keeper's own; with
   * modelKey, the model's key in place of the client's (none when the model has none).
   */
  private forwardedHeaders(
    req: IncomingMessage,
    m: GatewayModel,
    modelKey: boolean,
  ): Record<string, string | string[]> {
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (v !== undefined && !HOP.has(k) && !k.startsWith(INTERNAL_HEADER_PREFIX)) headers[k] = v;
    if (modelKey) {
      delete headers['x-api-key'];
      const k = m.apiKeyEnv ? process.env[m.apiKeyEnv] : undefined;
      if (k) headers.authorization = `Bearer ${k}`;
      else delete headers.authorization;
    }
    return headers;
  }

  /**
   * This keeper's token on what it passes back into HAProxy (believed only as its own: no client can set an
   * x-sparkctl-* header)
   */
  private readonly hop = randomBytes(16).toString('hex');

  /** Requests the keeper is passing on (or holding for a wake), by model: a model with one is not idle. */
  private passing = new Map<string, number>();

  private donePassing(name: string) {
    this.passing.set(name, (this.passing.get(name) ?? 1) - 1);
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
        timer = setTimeout(
          () => reject(new Error(`not started within ${this.o.settings.onDemand.startTimeout}`)),
          limitMs,
        );
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
    for (const l of this.listeners) {
      l.close();
      l.closeAllConnections();
    }
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

/**
 * The marks HAProxy carries from the keeper: the gateway's marker (what proves the group ours if the keeper dies), a
 * test run's.
 */
function markers(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of [INSTANCE_ENV, 'SPARKCTL_TEST_RUN', 'SPARKCTL_TEST_CASE']) {
    const v = process.env[k];
    if (v) out[k] = v;
  }
  return out;
}

/** The last lines of HAProxy's log (its last 16 KiB: it may be large), for a start that failed. */
function logTail(path: string, from: number): string[] {
  try {
    return readTail(path, from, 16 * 1024, { noFollow: true })
      .buf.toString('utf8')
      .split('\n')
      .filter((l) => l.trim())
      .slice(-4);
  } catch {
    return [];
  }
}

function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  retryAfterS?: number,
  type = 'ServiceUnavailableError',
  param: string | null = null,
) {
  const text = JSON.stringify({ error: { message, type, param, code: status } });
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...(retryAfterS ? { 'retry-after': String(retryAfterS) } : {}),
  });
  res.end(text);
}

/**
 * The bound on a body the keeper holds whole to read its model (HAProxy reads only the first
 * tune.bufsize, 256 KiB): 64 MiB each, 256 MiB all together; past them the client is told so.
 */
const MAX_BODY = 64 * 1024 * 1024;
const MAX_HELD = 256 * 1024 * 1024;
const bodyTooLarge = (n: number) =>
  `the request body (${n} bytes) is over the ${MAX_BODY / 2 ** 20} MiB the gateway reads to find its model; send the model first in the JSON (the gateway reads the first 256 KiB itself), or send it to the model's server directly`;

/**
 * Bind host:port for a moment: taken (or not ours to take) is a launch failure naming the port, its holder and the fix.
 */
async function portFree(host: string, port: number, what: string, fix: string): Promise<void> {
  const taken = await bindTrial(host, port);
  if (!taken) return;
  const at = haproxyAddr(host, port);
  if (taken.code === 'EADDRINUSE') {
    throw new LaunchError(`${what} ${at} is taken by ${holdersInWords(taken.holders)}`, [
      `choose a free port: ${fix}`,
      ...(taken.holders.length ? [`or stop what holds it (ss -ltnp 'sport = :${port}' shows it)`] : []),
    ]);
  }
  throw new LaunchError(`${what} ${at} cannot be bound: ${taken.code}`, [
    taken.code === 'EACCES'
      ? `a port below 1024 needs root; ${fix}`
      : taken.code === 'EADDRNOTAVAIL'
        ? `${host} is not an address of this host: --host`
        : fix,
  ]);
}

/**
 * A socket file left at `path` by a keeper that died is removed; one that answers belongs to a
 * running keeper (a `gateway run` under a service manager, say) and is an error naming it.
 */
async function clearStaleSocket(path: string): Promise<void> {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(path);
  } catch {
    return;
  }
  if (!st.isSocket())
    throw new LaunchError(
      `${path} is not a socket (a ${st.isSymbolicLink() ? 'link' : st.isDirectory() ? 'folder' : 'file'})`,
      [`remove ${path}; sparkctl creates it`],
    );
  const answers = await new Promise<boolean>((resolve) => {
    const c = connect(path);
    const t = setTimeout(() => {
      c.destroy();
      resolve(true);
    }, 1000);
    c.once('connect', () => {
      clearTimeout(t);
      c.destroy();
      resolve(true);
    });
    c.once('error', () => {
      clearTimeout(t);
      resolve(false);
    });
  });
  if (answers)
    throw new LaunchError(`another gateway keeper listens on ${path}`, [
      'sparkctl gateway status shows it; sparkctl gateway down stops one that gateway up started',
    ]);
  unlinkSync(path);
}

/**
 * The body, at most `max` bytes. Past it, the rest is read and dropped (up to 4 x max more, so that
 * the client, still sending, can read the 413 instead of a reset), then refused naming the bound.
 */
function readBounded(req: IncomingMessage, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      n += c.length;
      if (n > max) {
        over = true;
        chunks.length = 0;
        if (n > 5 * max) {
          req.destroy();
          reject(new Error(bodyTooLarge(n)));
        }
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => (over ? reject(new Error(bodyTooLarge(n))) : resolve(Buffer.concat(chunks))));
    req.on('error', reject);
  });
}

const HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'proxy-connection',
  'te',
  'trailer',
  'content-length',
]);

/** The request to a (woken) server, its answer streamed back as it comes (an SSE stream included). */
function passOn(
  method: string,
  path: string,
  headers: Record<string, string | string[]>,
  body: Buffer,
  res: ServerResponse,
  to: { host: string; port: number } | { socketPath: string },
): Promise<void> {
  return new Promise((resolve, reject) => {
    headers['content-length'] = String(body.length);
    const up = httpRequest({ ...to, method, path, headers, timeout: 1_800_000 }, (r) => {
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
