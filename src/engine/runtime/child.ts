// A supervised child of sparkctl: its launch record, its log (opened for it, headed by the launch
// line) and how its exit is watched. Every runtime's launch ends in one of these (the host's vLLM
// process, a container's log follower), and so does the router's HAProxy.
import type { ChildProcess } from 'node:child_process';
import { openSync, closeSync, writeSync, mkdirSync, fstatSync, constants } from 'node:fs';
import { dirname } from 'node:path';
import type { ReplicaPlan } from '../../profiles/render.js';
import { fsProblem } from '../../util/dirs.js';
import { LogTail } from './logtail.js';
import { processStartTime } from '../../util/pid.js';
import type { ContainerRecord } from './ops.js';

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
    fd = openSync(
      logFile,
      constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK,
      0o644,
    );
    if (!fstatSync(fd).isFile()) {
      closeSync(fd);
      throw Object.assign(new Error('not a regular file'), { code: 'ENOTREG' });
    }
  } catch (e) {
    throw fsProblem(
      e,
      what,
      logFile,
      'remove what stands at that name (a link, a folder): sparkctl appends its logs only to regular files',
    );
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
  const l: T & ChildRecord = {
    ...of,
    child,
    pid,
    pgid: pid,
    startTime: child.pid ? (processStartTime(child.pid) ?? 0) : 0,
    marker,
    exit: undefined,
    exited: Promise.resolve(),
    tail,
  };
  watchExit(l, child, errorText, exitCode);
  return l;
}

export type ChildExit = { code: number | null; signal: NodeJS.Signals | null; error?: string };

/**
 * How a supervised child ended, on its launch record: `exit` is set and `exited` resolves once it
 * failed to start (errorText says why) or exited (exitCode maps its status, e.g. a log follower's).
 */
function watchExit(
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
