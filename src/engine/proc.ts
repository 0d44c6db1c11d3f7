// Processes by pid and process group, with the start time that tells a reused pid from ours.
import { readFileSync, readdirSync } from 'node:fs';
import { parseListeningPorts } from '../host/parse.js';

/** The fields of /proc/PID/stat after the command name (index 0 = field 3, the state); undefined if gone or a zombie. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
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

/** Field 5 of /proc/PID/stat: the process group. */
export function processGroup(pid: number): number | undefined {
  const f = statFields(pid);
  return f ? Number(f[2]) : undefined;
}

export function isAlive(pid: number, startTime?: number): boolean {
  const st = processStartTime(pid);
  if (st === undefined) return false;
  return startTime === undefined || st === startTime;
}

/** Live (non-zombie) members of a process group. */
export function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    if (processGroup(Number(d)) === pgid) out.push(Number(d));
  }
  return out;
}

export function signalGroup(pgid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, sig);
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * SIGTERM to the whole group (API server and EngineCore alike), wait while it drains, then SIGKILL.
 * Returns how it ended. Safe to call on a group that is already gone.
 */
export async function stopGroup(pgid: number, timeoutMs: number): Promise<'gone' | 'terminated' | 'killed'> {
  if (!groupMembers(pgid).length) return 'gone';
  signalGroup(pgid, 'SIGTERM');
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!groupMembers(pgid).length) return 'terminated';
    await sleep(50);
  }
  signalGroup(pgid, 'SIGKILL');
  for (let i = 0; i < 40 && groupMembers(pgid).length; i++) await sleep(25);
  return 'killed';
}

/** Listening TCP ports of this machine (from /proc/net/tcp{,6}, read as preflight reads them). */
export function listeningPorts(): Set<number> {
  const read = (f: string) => {
    try {
      return readFileSync(f, 'utf8');
    } catch {
      return null;
    }
  };
  return new Set([...parseListeningPorts(read('/proc/net/tcp')), ...parseListeningPorts(read('/proc/net/tcp6'))]);
}
