// A process by its pid, read from /proc: alive or not, and its kernel start time (which tells a
// reused pid from the process that held it). Reading only: signalling lives with the proof, in engine/runtime/proc.ts.
import { readTextSync, READ_LIMITS } from './read.js';

/**
 * The fields of /proc/PID/stat after the command name (index 0 = field 3, the state); undefined if gone or a zombie.
 */
export function statFields(pid: number): string[] | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    const stat = readTextSync(`/proc/${pid}/stat`, { maxBytes: READ_LIMITS.proc });
    const after = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return after[0] === 'Z' ? undefined : after;
  } catch {
    return undefined;
  }
}

/** Field 22 of /proc/PID/stat: start time in clock ticks since boot. */
export function processStartTime(pid: number): number | undefined {
  const f = statFields(pid);
  return f ? Number(f[19]) : undefined;
}

/**
 * Is `pid` alive and (when given) the process that started at `startTime`? For lock holders; never a licence to signal.
 */
export function isAlive(pid: number, startTime?: number): boolean {
  const st = processStartTime(pid);
  if (st === undefined) return false;
  return startTime === undefined || st === startTime;
}
