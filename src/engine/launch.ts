// Launch one replica in its own process group with its own log, then supervise it until it is
// really ready. Supervision races the child's exit, the deadline and a stall timer that log
// activity resets; readiness is /health 200, /v1/models listing the served name, and the
// listening socket held by our own process group (not a server that held the port before us).
import { fsProblem } from '../util/fs.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, writeSync, mkdirSync, fstatSync, constants } from 'node:fs';
import { dirname } from 'node:path';
import type { ReplicaPlan } from '../profiles/render.js';
import { randomUUID } from 'node:crypto';
import { groupMembers, INSTANCE_ENV } from './proc.js';
import { processStartTime } from '../util/pid.js';
import { phaseOf, classifyStall } from './classify.js';

/**
 * How long a log must be quiet at a known hang line before the wait names it. vLLM logs every few
 * seconds while it works; a Ray placement-group line already means 10 s of waiting, but building the
 * P2P access cache of 8 GPUs can legitimately be quiet for tens of seconds, so that one waits longer.
 */
export const HANG_QUIET_MS: Record<string, number> = { 'ray-placement-group': 15_000, 'p2p-hang': 60_000 };
const DEFAULT_HANG_QUIET_MS = 60_000;
/** No hang is named before the log has been quiet this long. */
const LEAST_HANG_QUIET_MS = Math.min(DEFAULT_HANG_QUIET_MS, ...Object.values(HANG_QUIET_MS));
import { LogTail } from './logtail.js';
import { listenerIsOneOf } from './socket-owner.js';
import { waitReady, type ReadyResult } from '../client/ready.js';
import type { ContainerRecord } from './runtime/ops.js';

/** The launch record of a supervised child: a replica, the HAProxy router, a container's log follower. */
export interface ChildRecord {
  child: ChildProcess;
  pid: number;
  /** = pid: every supervised child is the leader of its own process group */
  pgid: number;
  startTime: number;
  /** SPARKCTL_INSTANCE of every process of this launch: what proves a process is ours before it is signalled */
  marker: string;
  exit: ChildExit | undefined;
  exited: Promise<void>;
  /** what THIS launch writes to the log: read from the log's size at launch, never an earlier run's lines */
  tail: LogTail;
}

export interface Launched extends ChildRecord {
  plan: ReplicaPlan;
  /** runtime container: the container (the child is its `logs -f` follower) */
  container?: ContainerRecord;
}

/**
 * A launch's log, opened for the child's stdout and stderr: appended (its tail reads from where this
 * launch begins), never through a link planted at its name (O_NOFOLLOW: ELOOP instead), headed by
 * the launch line. argv must never hold a secret: it is logged.
 */
export function openLaunchLog(logFile: string, what: string, argv: string[]): { fd: number; tail: LogTail } {
  mkdirSync(dirname(logFile), { recursive: true });
  const tail = new LogTail(logFile, 200, { fromEnd: true });
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO at the name fails the open (ENXIO) instead of blocking the launch; fstat refuses a device
    fd = openSync(logFile, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o644);
    if (!fstatSync(fd).isFile()) {
      closeSync(fd);
      throw Object.assign(new Error('not a regular file'), { code: 'ENOTREG' });
    }
  } catch (e) {
    throw fsProblem(e, what, logFile, 'remove what stands at that name (a link, a folder): sparkctl appends its logs only to regular files');
  }
  writeSync(fd, `=== sparkctl ${new Date().toISOString()} launch: ${argv.join(' ')}\n`);
  return { fd, tail };
}

/**
 * The launch record of a child just spawned in its own group, with the fields of its kind (`of`);
 * watchExit fills its exit (errorText and exitCode as there).
 */
export function childRecord<T extends object>(
  of: T,
  child: ChildProcess,
  marker: string,
  tail: LogTail,
  errorText: (e: NodeJS.ErrnoException) => string,
  exitCode?: (code: number | null) => number | null,
): T & ChildRecord {
  const pid = child.pid ?? -1;
  const l: T & ChildRecord = { ...of, child, pid, pgid: pid, startTime: child.pid ? (processStartTime(child.pid) ?? 0) : 0, marker, exit: undefined, exited: Promise.resolve(), tail };
  watchExit(l, child, errorText, exitCode);
  return l;
}

export function launchReplica(plan: ReplicaPlan, secrets: Record<string, string>): Launched {
  // argv never holds a secret (the key travels in the environment), so it may be logged.
  const { fd, tail } = openLaunchLog(plan.logFile, 'server log', plan.argv);
  const marker = randomUUID();
  const env: NodeJS.ProcessEnv = { ...process.env, ...plan.env, ...secrets, [INSTANCE_ENV]: marker };
  for (const k of plan.unsetEnv ?? []) delete env[k];
  const child = spawn(plan.argv[0]!, plan.argv.slice(1), {
    detached: true, // its own process group: stop signals the whole group, EngineCore included
    stdio: ['ignore', fd, fd],
    env,
  });
  closeSync(fd);
  return childRecord({ plan }, child, marker, tail, (e) => (e.code === 'ENOENT' ? `${plan.argv[0]} not found (is vLLM installed? --vllm-bin PATH)` : e.message));
}

export type ChildExit = { code: number | null; signal: NodeJS.Signals | null; error?: string };

/**
 * How a supervised child ended, on its launch record: `exit` is set and `exited` resolves once it
 * failed to start (errorText says why) or exited (exitCode maps its status, e.g. a log follower's).
 */
export function watchExit(
  l: { exit: ChildExit | undefined; exited: Promise<void> },
  child: ChildProcess,
  errorText: (e: NodeJS.ErrnoException) => string,
  exitCode: (code: number | null) => number | null = (code) => code,
): void {
  l.exited = new Promise<void>((resolve) => {
    child.once('error', (e: NodeJS.ErrnoException) => {
      l.exit = { code: null, signal: null, error: errorText(e) };
      resolve();
    });
    child.once('exit', (code, signal) => {
      l.exit ??= { code: exitCode(code), signal };
      resolve();
    });
  });
}

/** Supervise a launched replica until ready, through the shared waitReady. */
export function superviseReady(
  l: Launched,
  opts: { url: string; servedName: string; apiKey?: string; deadlineMs: number; stallMs: number; onPhase?: (phase: string) => void; signal?: AbortSignal; ours?: () => boolean },
): Promise<ReadyResult> {
  let lastPhase = '';
  // The log's verdict while it is quiet: the same text gives the same answer, so it is classified
  // once per quiet spell, not on every readiness round (20+ a second).
  let judged: { at: number; h: ReturnType<typeof classifyStall> } | undefined;
  return waitReady({
    url: opts.url,
    servedName: opts.servedName,
    apiKey: opts.apiKey,
    deadlineMs: opts.deadlineMs,
    signal: opts.signal,
    stallMs: opts.stallMs,
    quietMs: () => Date.now() - l.tail.lastActivity,
    // A log that stopped at a known hang is named after a short quiet spell, not the stall timeout.
    hung: () => {
      const quiet = Date.now() - l.tail.lastActivity;
      if (quiet < Math.min(LEAST_HANG_QUIET_MS, opts.stallMs)) return undefined;
      if (judged?.at !== l.tail.lastActivity) judged = { at: l.tail.lastActivity, h: classifyStall(l.tail.text()) };
      const h = judged.h;
      if (!h?.stall || quiet < Math.min(HANG_QUIET_MS[h.id] ?? DEFAULT_HANG_QUIET_MS, opts.stallMs)) return undefined;
      return `no log output for ${Math.round(quiet / 1000)} s, stopped at a known hang: ${h.cause}`;
    },
    onPoll: () => {
      for (const line of l.tail.poll()) {
        const p = phaseOf(line);
        if (p && p !== lastPhase) {
          lastPhase = p;
          opts.onPhase?.(p);
        }
      }
    },
    ended: () => {
      if (!l.exit) return undefined;
      l.tail.poll();
      if (l.exit.error) return { reason: 'spawn-error', detail: l.exit.error };
      return { reason: 'exited', detail: `exited with ${l.exit.signal ?? `code ${l.exit.code}`} before it was ready` };
    },
    // Ready only if our own group holds the listening socket: a server that held the port first
    // answers /health too, while ours dies with EADDRINUSE. A container's socket is the runtime's: its proof is the container's.
    ours: opts.ours ?? (() => (l.exit || l.pid <= 0 ? false : listenerIsOneOf(l.plan.port, [l.pid, ...groupMembers(l.pid)]))),
  });
}
