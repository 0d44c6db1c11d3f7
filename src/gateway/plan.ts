// The gateway's plan, pure: which models this host serves (every running profile of the registry and
// every multi-node server whose head is here), their servers, the names clients may send (served
// names and aliases), and where the gateway's own parts listen. A name goes into HAProxy's map file
// and a JSON list: only names of safe characters are taken, the others are left out and said.
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { parseDuration } from '../util/duration.js';
import { checkExposure, isLoopback } from '../util/exposure.js';
import { UsageError } from '../errors.js';
import { RouterBlock } from '../profiles/schema.js';
import type { Balance } from '../profiles/haproxy.js';
import { unifiedSleepRefusal } from '../engine/sleep.js';
import { own } from '../util/own.js';

/** One model's settings under gateway.models (keyed by profile name). */
const ModelSettings = z.strictObject({
  concurrency: z
    .number()
    .int()
    .min(1)
    .max(100_000)
    .optional()
    .describe(
      "Requests in flight per server before the gateway queues; default the server's --max-num-seqs (what vLLM runs at once), else 256",
    ),
  queue: z
    .number()
    .int()
    .min(0)
    .max(100_000)
    .optional()
    .describe(
      'Requests that may wait for a slot of this model; past it 429 + Retry-After. Default: as many as the model runs at once',
    ),
  pinned: z.boolean().default(false).describe('Never evicted to make room for another model'),
  onDemand: z
    .boolean()
    .default(true)
    .describe(
      'Started when a request names it and it is not running; evicted (least recently used first) to make room for another',
    ),
  serve: z
    .array(z.string().max(4096))
    .max(64)
    .default([])
    .describe(
      'The arguments `sparkctl serve PROFILE` gets when the gateway starts it (--profiles DIR, --engine, --set ...); never a secret: keys travel in variables',
    ),
});
type ModelSettings = z.infer<typeof ModelSettings>;

/** vLLM's own default --max-num-seqs (SchedulerConfig) where a server's argv sets none. */
export const VLLM_DEFAULT_MAX_NUM_SEQS = 256;

/** The gateway's settings: a `gateway:` block in a file (--config) and the verb's flags over it. */
export const GatewaySettings = z.strictObject({
  host: z.string().default('127.0.0.1').describe('Where the gateway listens (0.0.0.0: every interface)'),
  port: z.number().int().min(1).max(65535).default(8080),
  statsPort: z
    .number()
    .int()
    .min(1)
    .max(65535)
    .optional()
    .describe("HAProxy's stats page and Prometheus exporter on 127.0.0.1; default port + 1"),
  wakerPort: z
    .number()
    .int()
    .min(1)
    .max(65535)
    .optional()
    .describe(
      "No longer used (kept so that older files still load): the keeper listens on a Unix socket in the gateway's 0700 folder, never on a port",
    ),
  aliases: z
    .record(z.string(), z.string())
    .default({})
    .describe('NAME: MODEL, a name clients may send for a served model'),
  apiKeyEnv: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name')
    .optional()
    .describe(
      "One key at the gateway: the NAME of the variable that holds it. Unset: each model's own key passes through",
    ),
  idleSleep: z
    .string()
    .optional()
    .describe('Put a model with sleep mode to sleep after this long without a request (15m); unset: never'),
  checkIntervalMs: RouterBlock.shape.checkIntervalMs,
  bin: z.string().default('haproxy'),
  models: z
    .record(z.string(), ModelSettings)
    .default({})
    .describe(
      'Per profile: admission (concurrency, queue) and, for on-demand start, pinned; a profile listed here and not running is started when a request names it',
    ),
  onDemand: z
    .strictObject({
      gpuMemoryBytes: z
        .number()
        .positive()
        .optional()
        .describe('The memory the on-demand models share (one GPU, or a Spark): --gpu-memory'),
      unified: z.boolean().default(false).describe('DGX Spark: the memory is unified, the servers may take 0.8 of it'),
      evict: z
        .enum(['stop', 'sleep1', 'sleep2'])
        .default('stop')
        .describe(
          'How a model makes room: stopped, or put to sleep (level 1 or 2; its profile needs server.sleepMode)',
        ),
      startTimeout: z
        .string()
        .default('10m')
        .describe('How long a request waits for its model to start before a 503 + Retry-After'),
    })
    .default({}),
  retryAfterSeconds: z
    .number()
    .int()
    .min(1)
    .max(3600)
    .default(2)
    .describe('The Retry-After of a 429 (queue full) and of a 503 (not started in time)'),
  balance: RouterBlock.shape.balance.describe(
    "Within a model: prefix (a bounded-load consistent hash of the prompt's first prefixBytes) or leastconn",
  ),
  prefixBytes: RouterBlock.shape.prefixBytes,
  hashBalanceFactor: RouterBlock.shape.hashBalanceFactor,
});
export type GatewaySettings = z.infer<typeof GatewaySettings>;

export { isLoopback };

/**
 * A gateway bound beyond loopback without its own key hands every model to whoever reaches the
 * address: refused (exit 2) unless --allow-unauthenticated, which then gets a warning at every start
 * (the rule of util/exposure.ts, shared with serve and the router). Returns the warning to print, if any.
 */
export function exposure(
  s: Pick<GatewaySettings, 'host' | 'apiKeyEnv'>,
  allowUnauthenticated: boolean,
): string | undefined {
  return checkExposure(
    {
      who: 'the gateway',
      field: 'gateway --host',
      host: s.host,
      keyed: Boolean(s.apiKeyEnv),
      fixes: ['--api-key-env NAME (one key at the gateway; export NAME=...)', 'or --host 127.0.0.1'],
    },
    allowUnauthenticated,
  );
}

/** A name HAProxy's map file and a config line can hold: no space, quote, control or comment character. */
export const SAFE_NAME = /^[A-Za-z0-9._:/@+-]{1,200}$/;

interface GatewayServer {
  /** HAProxy's server name: the instance name */
  name: string;
  host: string;
  port: number;
}

export interface GatewayModel {
  /** the served name clients send */
  name: string;
  profile: string;
  /** HAProxy backend name (m_ + a safe form of the profile) */
  backend: string;
  servers: GatewayServer[];
  /** the variable that holds this model's own key (its servers check it) */
  apiKeyEnv?: string;
  /** its servers run with sleep mode: checked by /is_sleeping, the waker behind them */
  sleepMode: boolean;
  maxModelLen?: number;
  /**
   * admission: requests in flight per server (HAProxy maxconn), and the most that may wait for the model (past it 429)
   */
  admission: { perServer: number; queue: number };
  /** in the on-demand set: with no server running its requests go to the keeper, which starts it */
  onDemand?: boolean;
}

/** A profile of the on-demand set, as the keeper read it (its served name from the profile). */
export interface OnDemandEntry {
  profile: string;
  servedName: string;
  sleepMode: boolean;
  maxModelLen?: number;
}

/** What a registry entry and a cluster record give the plan (no import of the registry: pure). */
export interface ServedInstance {
  name: string;
  profile: string;
  servedName: string;
  host: string;
  port: number;
  role?: string;
  argv: string[];
  apiKeyEnv?: string;
  maxModelLen?: number;
  /** where and with which vLLM it was served (a GB10 without the fix has no sleep: engine/sleep.ts) */
  launch?: { platform?: string; vllm?: { resolved?: string } };
  /** a replica behind a router on vLLM's --uds: the Unix socket it listens on (its port is not listened on) */
  uds?: string;
}

export interface GatewayPlan {
  bind: { host: string; port: number };
  stats: { host: '127.0.0.1'; port: number };
  /**
   * The keeper's own listener (the waker, aliases, bodies HAProxy cannot read): a Unix socket in the
   * gateway's folder (0700, sparkctl's), so only sparkctl's own processes can open it or bind it; a
   * port next to the gateway could be taken by any local user the moment the keeper died.
   */
  keeper: {
    socket: string;
    /** a backend's waker (backup or, for an on-demand model with no server, its one server) */
    backupSocket: string;
    /**
     * HAProxy's own door for what the keeper passes on (a started or woken model's waiting requests,
     * an alias's, a body past the window): back into the model's backend, so that the prefix hash and
     * the admission limit hold for them as for every other request. HAProxy binds it, mode 600.
     */
    returnSocket: string;
  };
  models: GatewayModel[];
  /** client name -> backend (served names and aliases) */
  routes: Map<string, string>;
  /**
   * alias -> the served name it stands for (the keeper rewrites the request's model: vLLM answers only to its own name)
   */
  aliasOf: Map<string, string>;
  aliases: Record<string, string>;
  /** names left out, and why */
  skipped: string[];
  apiKeyEnv?: string;
  idleSleepMs?: number;
  retryAfterSeconds: number;
  checkIntervalMs: number;
  /** how a model's replicas are picked */
  balance: Balance;
  dir: string;
  files: {
    config: string;
    models: string;
    map: string;
    aliasMap: string;
    unknown: string;
    socket: string;
    master: string;
    pid: string;
    log: string;
    state: string;
  };
}

// The exact name's hash is part of the backend: by its '_'-for-'.'/'-' spelling alone, profiles qwen-a
// and qwen_a were one backend name, and one model's requests could reach the other's servers.
const nameHash = (profile: string) => createHash('sha256').update(profile).digest('hex').slice(0, 8);
const backendOf = (profile: string) => `m_${profile.replace(/[^A-Za-z0-9_]/g, '_')}_${nameHash(profile)}`;
const loopback = (h: string) => (h === '0.0.0.0' || h === '::' ? '127.0.0.1' : h);

/** A server's --max-num-seqs from its argv (both spellings), else undefined. */
export function maxNumSeqs(argv: string[]): number | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const v =
      a === '--max-num-seqs'
        ? argv[i + 1]
        : a.startsWith('--max-num-seqs=')
          ? a.slice('--max-num-seqs='.length)
          : undefined;
    if (v !== undefined && /^[1-9][0-9]{0,6}$/.test(v)) return Number(v);
  }
  return undefined;
}

/**
 * Admission of a model: its own settings, else what its servers run at once (--max-num-seqs) and a queue of as many.
 * Pure.
 */
export function admissionOf(argvs: string[][], own: ModelSettings | undefined): { perServer: number; queue: number } {
  const perServer = own?.concurrency ?? Math.min(...argvs.map((a) => maxNumSeqs(a) ?? VLLM_DEFAULT_MAX_NUM_SEQS));
  return { perServer, queue: own?.queue ?? perServer * argvs.length };
}

/**
 * The models of the running instances: one per profile, its replicas its servers (a router of it left out: the
 * gateway balances the replicas itself), except replicas on Unix sockets behind their router (vLLM's --uds: their
 * ports are not listened on), which the gateway reaches through that router. Pure.
 */
export function modelsOf(
  instances: ServedInstance[],
  settings: Record<string, ModelSettings> = {},
): { models: GatewayModel[]; skipped: string[] } {
  const byProfile = new Map<string, ServedInstance[]>();
  const routers = new Map<string, ServedInstance>();
  for (const i of instances) {
    if (i.role === 'router') routers.set(i.profile, i);
    if (i.role === 'router' || i.role === 'gateway') continue;
    byProfile.set(i.profile, [...(byProfile.get(i.profile) ?? []), i]);
  }
  const models: GatewayModel[] = [];
  const skipped: string[] = [];
  const seen = new Map<string, string>();
  for (const [profile, list] of [...byProfile].sort(([a], [b]) => a.localeCompare(b))) {
    const name = list[0]!.servedName;
    const router = routers.get(profile);
    const onSockets = list.some((i) => i.uds);
    if (onSockets && !router) {
      skipped.push(`${profile}: its replicas listen on Unix sockets behind a router that is not running`);
      continue;
    }
    if (!SAFE_NAME.test(name)) {
      skipped.push(`${profile}: served name ${JSON.stringify(name)} has characters a route cannot hold`);
      continue;
    }
    const other = seen.get(name);
    if (other) {
      skipped.push(`${profile}: serves ${name}, as ${other} does; requests for it go to ${other}`);
      continue;
    }
    seen.set(name, profile);
    const sorted = [...list].sort((a, b) => a.port - b.port);
    const viaRouter = onSockets ? router : undefined;
    const admission = admissionOf(
      sorted.map((i) => i.argv),
      own(settings, profile),
    );
    models.push({
      name,
      profile,
      backend: backendOf(profile),
      servers: (viaRouter ? [viaRouter] : sorted).map((i) => ({
        name: i.name.replace(/[^A-Za-z0-9._-]/g, '_'),
        host: loopback(i.host),
        port: i.port,
      })),
      apiKeyEnv: list[0]!.apiKeyEnv,
      // no sleep (idle sleep, the waker, eviction by sleep) where vLLM's wake crashes: GB10 without the fix
      // (engine/sleep.ts), nor through a router (a sleep or a wake would reach one replica of several)
      sleepMode: !viaRouter && list.every((i) => i.argv.includes('--enable-sleep-mode') && !unifiedSleepRefusal(i)),
      maxModelLen: list[0]!.maxModelLen,
      // through the router, the one server takes what every replica takes
      admission: viaRouter ? { ...admission, perServer: admission.perServer * sorted.length } : admission,
    });
  }
  return { models, skipped };
}

/** `--alias NAME=MODEL` flags over the file's aliases. */
export function parseAliases(flags: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of flags) {
    const eq = f.indexOf('=');
    if (eq < 1 || eq === f.length - 1)
      throw new UsageError(`--alias ${JSON.stringify(f)}: expected NAME=MODEL`, ['e.g. --alias coder=Qwen/Qwen3.5-9B']);
    out[f.slice(0, eq)] = f.slice(eq + 1);
  }
  return out;
}

/**
 * The on-demand profiles not running now: a model with no server, whose requests the keeper takes (and starts it).
 * Pure.
 */
function idleOnDemand(
  running: GatewayModel[],
  entries: OnDemandEntry[],
  settings: Record<string, ModelSettings>,
): { models: GatewayModel[]; skipped: string[] } {
  const models: GatewayModel[] = [];
  const skipped: string[] = [];
  for (const e of entries) {
    const on = running.find((m) => m.profile === e.profile);
    if (on) {
      on.onDemand = true;
      continue;
    }
    if (!SAFE_NAME.test(e.servedName)) {
      skipped.push(`${e.profile}: served name ${JSON.stringify(e.servedName)} has characters a route cannot hold`);
      continue;
    }
    const other = [...running, ...models].find((m) => m.name === e.servedName);
    if (other) {
      skipped.push(
        `${e.profile}: serves ${e.servedName}, as ${other.profile} does; requests for it go to ${other.profile}`,
      );
      continue;
    }
    const own = settings[e.profile];
    const perServer = own?.concurrency ?? VLLM_DEFAULT_MAX_NUM_SEQS;
    models.push({
      name: e.servedName,
      profile: e.profile,
      backend: backendOf(e.profile),
      servers: [],
      sleepMode: e.sleepMode,
      maxModelLen: e.maxModelLen,
      admission: { perServer, queue: own?.queue ?? perServer },
      onDemand: true,
    });
  }
  return { models, skipped };
}

export function planGateway(
  s: GatewaySettings,
  instances: ServedInstance[],
  stateDir: string,
  onDemand: OnDemandEntry[] = [],
): GatewayPlan {
  const found = modelsOf(instances, s.models);
  const idle = idleOnDemand(found.models, onDemand, s.models);
  const models = [...found.models, ...idle.models];
  const skipped = [...found.skipped, ...idle.skipped];
  const routes = new Map<string, string>();
  const aliasOf = new Map<string, string>();
  for (const m of models) routes.set(m.name, m.backend);
  const problems: string[] = [];
  for (const [alias, target] of Object.entries(s.aliases)) {
    if (!SAFE_NAME.test(alias))
      problems.push(
        `gateway.aliases: ${JSON.stringify(alias)} has characters a route cannot hold (letters, digits, . _ : / @ + -)`,
      );
    else if (routes.has(alias) && !models.some((m) => m.name === alias && m.name === target))
      skipped.push(`alias ${alias}: a served model has that name; the model wins`);
    else {
      const m = models.find((x) => x.name === target);
      // an alias of a model not served now waits for it: the registry is read again at every change
      if (m) {
        routes.set(alias, m.backend);
        if (alias !== m.name) aliasOf.set(alias, m.name);
      } else skipped.push(`alias ${alias} -> ${target}: ${target} is not served now`);
    }
  }
  const stats = s.statsPort ?? s.port + 1;
  if (s.port === stats) problems.push(`gateway ports collide: port ${s.port}, statsPort ${stats}`);
  for (const m of models)
    for (const sv of m.servers)
      if ([s.port, stats].includes(sv.port)) problems.push(`gateway port ${sv.port} is ${sv.name}'s port`);
  const dir = join(stateDir, 'gateway');
  const keeperSocket = join(dir, 'keeper.sock');
  const backupSocket = join(dir, 'backup.sock');
  // a Unix socket's path holds at most 107 bytes (sun_path), for Node and HAProxy alike
  if (Buffer.byteLength(keeperSocket) > 107)
    problems.push(
      `the keeper's socket ${keeperSocket} is ${Buffer.byteLength(keeperSocket)} bytes long; a Unix socket's path holds at most 107 (set SPARKCTL_STATE_DIR to a shorter folder)`,
    );
  if (problems.length)
    throw new UsageError('the gateway cannot be planned', [
      ...problems,
      'choose --port (the stats port follows it) or set gateway.statsPort',
    ]);
  return {
    bind: { host: s.host, port: s.port },
    stats: { host: '127.0.0.1', port: stats },
    keeper: { socket: keeperSocket, backupSocket, returnSocket: join(dir, 'return.sock') },
    models,
    routes,
    aliasOf,
    aliases: s.aliases,
    skipped,
    apiKeyEnv: s.apiKeyEnv,
    idleSleepMs: s.idleSleep ? parseDuration(s.idleSleep, 'gateway.idleSleep') : undefined,
    retryAfterSeconds: s.retryAfterSeconds,
    checkIntervalMs: s.checkIntervalMs,
    balance: { balance: s.balance, prefixBytes: s.prefixBytes, hashBalanceFactor: s.hashBalanceFactor },
    dir,
    files: {
      config: join(dir, 'haproxy.cfg'),
      models: join(dir, 'models.json'),
      map: join(dir, 'models.map'),
      aliasMap: join(dir, 'aliases.map'),
      unknown: join(dir, 'unknown-model.lf'),
      socket: join(dir, 'api.sock'),
      // the master CLI: after a reload, the old worker's connections are read there (the stats socket answers for the
      // new worker)
      master: join(dir, 'master.sock'),
      pid: join(dir, 'haproxy.pid'),
      log: join(stateDir, 'logs', 'gateway.log'),
      state: join(dir, 'gateway.json'),
    },
  };
}

/** The environment variable HAProxy reads a model's own key from (never its value in a file). */
// The exact name's hash is part of the variable: by its upper-cased, '_'-for-'-' spelling alone,
// profiles qwen-a and qwen_a (or Qwen and qwen) shared one variable, and one model's key went to the other's server.
export const keyVar = (m: Pick<GatewayModel, 'profile'>) =>
  `SPARKCTL_KEY_${m.profile.replace(/[^A-Za-z0-9]/g, '_').toUpperCase()}_${nameHash(m.profile).toUpperCase()}`;
export const GATEWAY_KEY_VAR = 'SPARKCTL_GATEWAY_KEY';
