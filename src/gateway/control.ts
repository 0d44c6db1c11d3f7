// gateway up / down / status: the keeper (`sparkctl gateway run`) started in its own process group
// with a marker (SPARKCTL_INSTANCE, which HAProxy under it carries too), in the registry from its
// launch (Registry.writeGateway: the pid, that pid's start time and the marker, as the launching
// sparkctl saw its own child), its details (gateway.json, written by the keeper once HAProxy
// answers: ports, HAProxy's pid, the models), and a stop that proves the group is ours from the
// launch record before it signals: SIGTERM to the keeper, which soft-stops HAProxy (the requests in
// flight finish), then the group is stopped if anything is left. A keeper that died leaves HAProxy
// marked: the same stop ends it (soft stop first).
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { openSync, closeSync, mkdirSync, rmSync } from 'node:fs';
import { readTail, readTextSync } from '../util/read.js';
import { join, dirname } from 'node:path';
import { writeFileAtomic } from '../util/atomic.js';
import { pollUntil } from '../util/poll.js';
import { processStartTime } from '../util/pid.js';
import { proveIdentity, signalProven, stopGroup, groupMembers, INSTANCE_ENV } from '../engine/runtime/proc.js';
import { Registry, type GatewayEntry } from '../engine/registry.js';
import {
  backendColumn,
  parseShowStat,
  serverState,
  runtimeCommand,
  showStatEveryWorker,
  type ServerStat,
} from '../router/api.js';
import { UsageError, LaunchError } from '../errors.js';
import type { GatewayModel } from './plan.js';
import { emptyCounts, type UsageCounts } from './usage.js';
import { z } from 'zod';

export interface GatewayRecord {
  version: 1;
  pid: number;
  pgid: number;
  startTime: number;
  /** the launch's id (SPARKCTL_GATEWAY_MARKER), by which gateway up knows its keeper's record */
  launch: string;
  haproxyPid: number;
  url: string;
  host: string;
  port: number;
  statsPort: number;
  /** the keeper's Unix socket (HAProxy hands it sleeping models' requests, aliases' and bodies past 256 KiB) */
  keeperSocket: string;
  socket: string;
  /** HAProxy's master CLI (absent in a record from before it): the old workers' counts after a reload */
  master?: string;
  configFile: string;
  logFile: string;
  apiKeyEnv?: string;
  startedAt: string;
  models: Array<{ name: string; profile: string; backend: string; servers: string[]; sleepMode: boolean }>;
  aliases: Record<string, string>;
  /** the on-demand set as the keeper sees it: state, last start and eviction times (ms) */
  onDemand?: Array<{
    profile: string;
    name: string;
    state: string;
    pinned: boolean;
    lastStartMs?: number;
    lastEvictMs?: number;
    starts: number;
    evictions: number;
  }>;
  /** answers counted by the usage filter since the keeper started, by model name (absent: this HAProxy has no Lua) */
  usage?: { models: Record<string, UsageCounts>; unattributed: number };
}

const recordPath = (stateDir: string) => join(stateDir, 'gateway', 'gateway.json');

const text = (max: number) => z.string().max(max);
const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const ms = z.number().nonnegative().max(Number.MAX_SAFE_INTEGER);
const port = z.number().int().min(1).max(65535);
const pid = z.number().int().positive();
const counts = z.object({
  requests: count,
  withUsage: count,
  prompt: count,
  completion: count,
  cached: count.optional(),
  streamsWithoutUsage: count,
  chunksWithoutUsage: count,
  otherWithoutUsage: count.optional(),
  prefix: z.object({ hit: count, spill: count, new: count }),
});

/**
 * The record's shape, every field bounded: the file is the keeper's, but a file is hostile like any
 * (an older or newer keeper, a hand that edited it). A record that does not fit is no record: status
 * says so (recordProblem), never prints a field of the wrong type or a number that is none.
 */
const GatewayRecordSchema = z.object({
  version: z.literal(1),
  pid,
  pgid: pid,
  startTime: z.number().int().nonnegative(),
  launch: text(200),
  haproxyPid: pid,
  url: text(300),
  host: text(255),
  port,
  statsPort: port,
  keeperSocket: text(4096).optional(),
  socket: text(4096),
  master: text(4096).optional(),
  configFile: text(4096),
  logFile: text(4096),
  apiKeyEnv: text(200).optional(),
  startedAt: text(64),
  models: z
    .array(
      z.object({
        name: text(200),
        profile: text(200),
        backend: text(200),
        servers: z.array(text(200)).max(1024),
        sleepMode: z.boolean(),
      }),
    )
    .max(10_000),
  aliases: z.record(text(200), text(200)).refine((a) => Object.keys(a).length <= 10_000, 'at most 10000 aliases'),
  onDemand: z
    .array(
      z.object({
        profile: text(200),
        name: text(200),
        state: text(64),
        pinned: z.boolean(),
        lastStartMs: ms.optional(),
        lastEvictMs: ms.optional(),
        starts: count,
        evictions: count,
      }),
    )
    .max(10_000)
    .optional(),
  usage: z.object({ models: z.record(text(200), counts), unattributed: count }).optional(),
});

/** Why the record that is there cannot be read (undefined: none there, or it reads). */
export function recordProblem(stateDir: string): string | undefined {
  const p = recordPath(stateDir);
  let raw: string;
  try {
    raw = readTextSync(p, { maxBytes: RECORD_MAX, noFollow: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code === 'ENOENT'
      ? undefined
      : (e as Error).message.includes(p)
        ? (e as Error).message
        : `${p}: ${(e as Error).message}`;
  }
  let j: unknown;
  try {
    j = JSON.parse(raw);
  } catch {
    return `${p} is not JSON`;
  }
  const r = GatewayRecordSchema.safeParse(j);
  if (r.success) return undefined;
  const i = r.error.issues[0]!;
  return `${p} is not a record the keeper writes: ${i.path.join('.') || '(top)'}: ${i.message}`;
}

/** The record is the keeper's own few KiB (10,000 models fit). */
const RECORD_MAX = 4 * 1024 * 1024;

/**
 * The record, if there is one (a regular file, bounded, of the right shape, every field checked); hostile like any
 * file.
 */
export function readRecord(stateDir: string): GatewayRecord | undefined {
  const p = recordPath(stateDir);
  try {
    const r = GatewayRecordSchema.safeParse(JSON.parse(readTextSync(p, { maxBytes: RECORD_MAX, noFollow: true })));
    return r.success ? (r.data as GatewayRecord) : undefined;
  } catch {
    return undefined;
  }
}

export function writeRecord(stateDir: string, r: GatewayRecord) {
  writeFileAtomic(recordPath(stateDir), `${JSON.stringify(r, null, 2)}\n`, { mode: 0o600 });
}

export const modelsRecord = (ms: GatewayModel[]) =>
  ms.map((m) => ({
    name: m.name,
    profile: m.profile,
    backend: m.backend,
    servers: m.servers.map((s) => s.name),
    sleepMode: m.sleepMode,
  }));

/**
 * A gateway that runs: its details, and whether `gateway up` launched it (in the registry: stop --all and gateway down
 * stop it).
 */
interface RunningGateway extends GatewayRecord {
  /**
   * launched by gateway up (its identity from the launch record); false: `gateway run` under a service manager, shown
   * but never signalled
   */
  managed: boolean;
}

/**
 * The running gateway, or undefined. Launched by gateway up: proven from the registry's launch
 * record, its details from the keeper's record of that launch. Run in the foreground (systemd): its
 * own record, proven by pid + start time, only to be shown and used, never signalled.
 */
export function runningGateway(stateDir: string): RunningGateway | undefined {
  const r = readRecord(stateDir);
  const e = new Registry(stateDir).gateway();
  if (e) {
    if (e.proof.state !== 'alive' || !r || r.launch !== e.launch.marker || r.pid !== e.launch.pid) return undefined;
    return { ...r, pid: e.launch.pid, pgid: e.launch.pgid, startTime: e.launch.startTime, managed: true };
  }
  if (!r || r.launch) return undefined;
  return proveIdentity(r).state === 'alive' ? { ...r, managed: false } : undefined;
}

/** The gateway's registry entry and, when its keeper says so, its details (status shows both). */
export function gatewayEntry(stateDir: string): { entry: GatewayEntry; record?: GatewayRecord } | undefined {
  const e = new Registry(stateDir).gateway();
  if (!e) return undefined;
  const r = readRecord(stateDir);
  return { entry: e, record: r && r.launch === e.launch.marker && r.pid === e.launch.pid ? r : undefined };
}

export const gatewayUrl = (r: Pick<GatewayRecord, 'host' | 'port'>) =>
  `http://${r.host === '0.0.0.0' || r.host === '::' ? '127.0.0.1' : r.host}:${r.port}`;

/**
 * Refuses a launch while a gateway runs, while an earlier one's processes still run, or while its record names a pid
 * that cannot be proven ours (UsageError, with what to do).
 */
function refuseEarlierGateway(reg: Registry, stateDir: string): void {
  const prev = reg.gateway();
  const already = runningGateway(stateDir);
  if (already)
    throw new UsageError(`a gateway already runs (pid ${already.pid}) on ${gatewayUrl(already)}`, [
      'sparkctl gateway down stops it; sparkctl gateway status shows it',
    ]);
  if (prev?.alive)
    throw new UsageError(`the processes of an earlier gateway (group ${prev.launch.pgid}) still run`, [
      'sparkctl gateway down stops them',
    ]);
  if (prev?.proof.state === 'unproven')
    throw new UsageError(
      `the gateway's record names pid ${prev.launch.pid}, which cannot be proven ours: ${prev.proof.reason}`,
      ['sparkctl gateway down --force-forget drops the record'],
    );
}

/** The keeper log's last 8 lines, for a launch that failed ('' when it cannot be read). */
function keeperLogTail(log: string): string {
  try {
    // the log's last 64 KiB: it may have grown by gigabytes
    return readTail(log, 0, 64 * 1024, { noFollow: true })
      .buf.toString('utf8')
      .split('\n')
      .slice(-8)
      .join('\n');
  } catch {
    return '';
  }
}

/** Start the keeper and wait until it says HAProxy answers (its record), at most deadlineMs. */
export async function startGateway(o: {
  bin: string;
  args: string[];
  stateDir: string;
  deadlineMs?: number;
}): Promise<GatewayRecord> {
  const reg = new Registry(o.stateDir);
  const release = await reg.lock();
  let child: ReturnType<typeof spawn>;
  const marker = randomUUID();
  const log = join(o.stateDir, 'logs', 'gateway-keeper.log');
  try {
    refuseEarlierGateway(reg, o.stateDir);
    mkdirSync(dirname(log), { recursive: true });
    const fd = openSync(log, 'a', 0o600);
    child = spawn(process.execPath, [o.bin, 'gateway', 'run', ...o.args], {
      detached: true,
      stdio: ['ignore', fd, fd],
      // the marker every process of the gateway carries (HAProxy too): the registry knows it as the gateway's, never as
      // a server's
      env: { ...process.env, [INSTANCE_ENV]: marker, SPARKCTL_GATEWAY_MARKER: marker, SPARKCTL_STATE_DIR: o.stateDir },
    });
    closeSync(fd);
    child.unref();
    // our own child, not yet reaped: its pid cannot have been reused, so its start time now is its own
    const startTime = child.pid ? processStartTime(child.pid) : undefined;
    if (child.pid && startTime)
      reg.writeGateway({
        version: 1,
        pid: child.pid,
        pgid: child.pid,
        startTime,
        marker,
        logFile: log,
        launchedAt: new Date().toISOString(),
      });
  } finally {
    release();
  }
  // the keeper's record of this launch, until it is written or the keeper exits
  const up = await pollUntil(
    () => {
      const r = readRecord(o.stateDir);
      return {
        record: r && r.launch === marker && r.pid === child.pid ? r : undefined,
        exited: child.exitCode !== null,
      };
    },
    (v) => v.record !== undefined || v.exited,
    { deadlineMs: o.deadlineMs ?? 20_000, intervalMs: 50 },
  );
  if (up.value.record) return up.value.record;
  const tail = keeperLogTail(log);
  const launched = reg.gateway();
  if (launched && launched.launch.marker === marker) {
    if (launched.alive) await stopGroup(launched.launch, 3000);
    if (!groupMembers(launched.launch.pgid).length) reg.removeGateway();
  }
  throw new LaunchError(
    `the gateway did not come up${child.exitCode !== null ? ` (the keeper exited with code ${child.exitCode})` : ''}`,
    [tail || `see ${log}`],
  );
}

export interface DownResult {
  /** unmanaged: a `gateway run` that gateway up did not launch (a service manager's): never signalled */
  how: 'not-running' | 'stopped' | 'killed' | 'unproven' | 'unmanaged';
  ms: number;
  pid?: number;
  /** processes of its group still alive after the stop */
  left?: number;
  /** the keeper had died: its HAProxy was found by its marker and stopped */
  orphaned?: boolean;
  /** (unproven) why */
  reason?: string;
  /** the launch record was dropped without signalling (--force-forget of an unproven one) */
  forgotten?: boolean;
}

/**
 * Stop the gateway gateway up launched, from its launch record: SIGTERM to the keeper (it
 * soft-stops HAProxy, whose requests in flight finish, and exits), the group after graceMs; a group
 * whose keeper died (HAProxy left alone, marked) gets HAProxy's soft stop (SIGUSR1), then the same.
 * The record goes when nothing of the group is left.
 */
export async function stopGateway(
  stateDir: string,
  graceMs = 35_000,
  o: { forceForget?: boolean } = {},
): Promise<DownResult> {
  const reg = new Registry(stateDir);
  const t0 = performance.now();
  const ms = () => Math.round(performance.now() - t0);
  const e = reg.gateway();
  if (!e) {
    const r = readRecord(stateDir);
    if (r && !r.launch && proveIdentity(r).state === 'alive') return { how: 'unmanaged', ms: 0, pid: r.pid };
    return { how: 'not-running', ms: 0 };
  }
  const id = e.launch;
  if (e.proof.state === 'gone') {
    reg.removeGateway();
    return { how: 'not-running', ms: 0 };
  }
  if (e.proof.state === 'unproven') {
    if (o.forceForget) reg.removeGateway();
    return {
      how: 'unproven',
      ms: 0,
      pid: id.pid,
      reason: e.proof.reason,
      ...(o.forceForget ? { forgotten: true } : {}),
    };
  }
  const orphaned = e.proof.state === 'degraded';
  // the keeper soft-stops HAProxy itself (its streams finish), then exits; without it, HAProxy's own soft stop
  if (orphaned ? signalProven(id, 'SIGUSR1', 'group') : signalProven(id, 'SIGTERM', 'leader'))
    await pollUntil(
      () => groupMembers(id.pgid).length,
      (n) => n === 0,
      { deadlineMs: graceMs, intervalMs: 50 },
    );
  let how: DownResult['how'] = 'stopped';
  if (groupMembers(id.pgid).length) {
    const h = await stopGroup(id, 3000);
    how = h === 'killed' ? 'killed' : h === 'unproven' ? 'unproven' : 'stopped';
  }
  const left = groupMembers(id.pgid).length;
  if (!left) {
    reg.removeGateway();
    rmSync(recordPath(stateDir), { force: true });
  }
  return { how, ms: ms(), pid: id.pid, left, ...(orphaned ? { orphaned: true } : {}) };
}

interface GatewayView {
  record: GatewayRecord;
  /**
   * requests for no model this gateway routes (HAProxy's own 401, 404 and 400, a body it could not read): counted by
   * the usage filter
   */
  unattributed?: number;
  models: Array<{
    name: string;
    profile: string;
    sleepMode: boolean;
    servers: Array<{ name: string; state: string; check: string; inFlight: number }>;
    asleep: boolean;
    /** running, sleeping, stopped, starting, evicting (the keeper's word for an on-demand model; else from HAProxy) */
    state: string;
    /** requests waiting in HAProxy's queue for the model (admission) */
    queued: number;
    onDemand?: { pinned: boolean; lastStartMs?: number; lastEvictMs?: number; starts: number; evictions: number };
    /**
     * tokens and prefix-routing hits of its answers since the keeper started (src/gateway/usage.ts); absent when not
     * recorded
     */
    usage?: UsageCounts;
  }>;
  /** false: this HAProxy has no Lua, so no usage or prefix hits are counted */
  usageRecorded: boolean;
}

/** The backends' waiting requests (qcur of the BACKEND rows of each worker's `show stat`), summed. */
function backendQueues(texts: string[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const text of texts)
    for (const { backend, value } of backendColumn(text, 'qcur'))
      if (/^\d+$/.test(value)) out.set(backend, (out.get(backend) ?? 0) + Number(value));
  return out;
}

/**
 * `show stat` of the current worker, and of every old one still finishing its connections after a
 * reload (over the master CLI, where the record names it); the current worker alone where it does not.
 */
async function statTexts(r: GatewayRecord): Promise<string[]> {
  if (r.master) {
    try {
      return await showStatEveryWorker(r.socket, r.master, 2000);
    } catch {
      /* no master CLI answer: the current worker's counts alone */
    }
  }
  return [await runtimeCommand(r.socket, 'show stat', 2000)];
}

/** The gateway's models as HAProxy sees them now (its runtime API), with the keeper's on-demand states. */
export async function viewGateway(r: GatewayRecord): Promise<GatewayView> {
  let stats: ServerStat[] = [];
  let old: ServerStat[][] = [];
  let queues = new Map<string, number>();
  try {
    const texts = await statTexts(r);
    [stats = [], ...old] = texts.map(parseShowStat) as [ServerStat[], ...ServerStat[][]];
    queues = backendQueues(texts);
  } catch {
    /* silent runtime API: every server reads missing */
  }
  const usage =
    r.usage && typeof r.usage === 'object' && r.usage.models && typeof r.usage.models === 'object'
      ? r.usage.models
      : undefined;
  const unattributed =
    usage && Number.isSafeInteger(r.usage?.unattributed) && r.usage!.unattributed >= 0
      ? r.usage!.unattributed
      : undefined;
  return {
    record: r,
    usageRecorded: !!usage,
    ...(unattributed !== undefined ? { unattributed } : {}),
    models: r.models.map((m) => {
      const servers = m.servers.map((name) => {
        const st = stats.find((s) => s.backend === m.backend && s.server === name);
        // in flight on every worker: after a reload, the old one still carries its streams
        const carried = old.flat().filter((s) => s.backend === m.backend && s.server === name);
        const inFlight = [...(st ? [st] : []), ...carried].reduce((n, s) => n + s.scur + s.qcur, 0);
        return {
          name,
          state: st ? serverState(st) : 'missing',
          check: st ? `${st.checkStatus} ${st.lastCheck}`.trim() : '',
          inFlight,
        };
      });
      const asleep =
        m.sleepMode &&
        servers.length > 0 &&
        servers.every((s) => s.state === 'maint' || (s.state === 'down' && s.check.startsWith('L7RSP')));
      const od = r.onDemand?.find((x) => x.profile === m.profile);
      const state = od?.state ?? (asleep ? 'sleeping' : servers.length ? 'running' : 'stopped');
      return {
        name: m.name,
        profile: m.profile,
        sleepMode: m.sleepMode,
        servers,
        asleep,
        state,
        queued: queues.get(m.backend) ?? 0,
        ...(od
          ? {
              onDemand: {
                pinned: od.pinned,
                lastStartMs: od.lastStartMs,
                lastEvictMs: od.lastEvictMs,
                starts: od.starts,
                evictions: od.evictions,
              },
            }
          : {}),
        ...(usage ? { usage: { ...emptyCounts(), ...(usage[m.name] ?? {}) } } : {}),
      };
    }),
  };
}
