// The lock discipline of every file several sparkctl runs update (the registry, the probe state, the watcher's folder,
// a pull's repository in the model cache), on its own so that a probe, which takes the probe-state lock, does not load
// the registry.
import { rmSync, closeSync, writeSync, linkSync, statSync, lstatSync } from 'node:fs';
import { UsageError } from '../errors.js';
import { dirname } from 'node:path';
import { fsProblem } from './dirs.js';
import { openExclusiveTemp } from './atomic.js';
import { isAlive, processStartTime } from './pid.js';
import { pollUntil } from './poll.js';
import { readTextSync, READ_LIMITS } from './read.js';

interface LockPlace {
  /** what the folder is, and how to mend it, for an error creating the lock (default: the state folder) */
  what: string;
  fix: string;
  /**
   * the error for something at `path` that is no lock (a link, a folder, a large file): never read through or removed
   */
  notALock?: (path: string) => Error;
}

const STATE: LockPlace = { what: 'state folder', fix: 'set SPARKCTL_STATE_DIR to a writable folder' };

/**
 * An exclusive lock on `path`, which holds "PID STARTTIME" of its holder; a dead holder's lock, or
 * one whose pid now names another process (a reused pid: its start time differs), is taken over
 * under a break lock. Waits at most `timeoutMs`, then throws `busy(pid)`.
 */
export async function lockFile(
  path: string,
  timeoutMs: number,
  busy: (pid: number) => Error,
  place: LockPlace = STATE,
): Promise<() => void> {
  const me = `${process.pid} ${processStartTime(process.pid) ?? 0}\n`;
  // One attempt: the lock taken, or the pid of its live holder. A lock released meanwhile, or left by
  // a dead holder (broken here), is tried again at once, within the attempt.
  const attempt = (): { taken: true } | { taken: false; holder: number } => {
    for (;;) {
      if (createComplete(path, me, place)) return { taken: true };
      const seen = readOr(path);
      if (seen === undefined) {
        if (notALock(path))
          throw place.notALock?.(path) ?? new UsageError(`${path} is not a sparkctl lock`, [`remove it: ${path}`]);
        continue; // released meanwhile
      }
      const [pid, start] = seen.trim().split(/\s+/).map(Number);
      const holderAlive = Number.isInteger(pid) && pid! > 0 && isAlive(pid!, start ? start : undefined);
      if (holderAlive) return { taken: false, holder: pid! };
      breakStale(path, seen);
    }
  };
  // jittered: ten probes waiting do not retry in step
  const r = await pollUntil(attempt, (a) => a.taken, {
    deadlineMs: timeoutMs,
    intervalMs: () => 20 + Math.random() * 30,
  });
  if (!r.value.taken) throw busy(r.value.holder);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    // Only our own lock is removed (never one that replaced it).
    if (readOr(path) === me) rmSync(path, { force: true });
  };
}

function readOr(path: string): string | undefined {
  try {
    return readTextSync(path, { maxBytes: READ_LIMITS.record, noFollow: true });
  } catch {
    return undefined;
  }
}

/** Something is there that a lock's read refused: a link, a folder, a file over the record limit. */
function notALock(path: string): boolean {
  try {
    const st = lstatSync(path);
    return !st.isFile() || st.size > READ_LIMITS.record;
  } catch {
    return false;
  }
}

/** Create `path` holding `content`, complete or not at all; false if it exists. */
function createComplete(path: string, content: string, place: LockPlace = STATE): boolean {
  const { fd, tmp } = openExclusiveTemp(path, 0o600);
  try {
    writeSync(fd, content);
    closeSync(fd);
    linkSync(tmp, path);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw fsProblem(e, place.what, dirname(path), place.fix);
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** Remove the stale lock `seen`, if it is still exactly that lock, under an exclusive break lock. */
function breakStale(path: string, seen: string) {
  const brk = `${path}.break`;
  if (!createComplete(brk, `${process.pid}\n`)) {
    // Another taker is breaking it. A break lock left by a taker that died mid-break is old: clear it.
    try {
      if (Date.now() - statSync(brk).mtimeMs > 10_000) rmSync(brk, { force: true });
    } catch {
      /* gone */
    }
    return;
  }
  try {
    if (readOr(path) === seen) rmSync(path, { force: true });
  } finally {
    rmSync(brk, { force: true });
  }
}
