// Processes by pid and process group, and the one rule for signalling them: no signal is ever
// sent without proving identity. An instance is proven by its leader's pid AND kernel start time
// (a reused pid has another start time) and, for its process group, by a member that still
// carries the instance's marker in its environment (SPARKCTL_INSTANCE=<id>, set at launch and
// inherited by vLLM's EngineCore). Whatever cannot be proven is reported and left alone.
import { readdirSync, appendFileSync } from 'node:fs';
import { parseListeningPorts } from '../../host/parse.js';
import { pollUntil } from '../../util/poll.js';
import { readTextSync, readRegularFileSync, READ_LIMITS } from '../../util/read.js';
import { statFields, processStartTime } from '../../util/pid.js';

/** The environment variable that marks every process of one launched instance. */
export const INSTANCE_ENV = 'SPARKCTL_INSTANCE';

/** Field 5 of /proc/PID/stat: the process group. */
export function processGroup(pid: number): number | undefined {
  const f = statFields(pid);
  return f ? Number(f[2]) : undefined;
}

/** The value of NAME in a process's initial environment; undefined if unreadable or unset. */
export function processEnv(pid: number, name: string): string | undefined {
  try {
    const env = readRegularFileSync(`/proc/${pid}/environ`, { maxBytes: READ_LIMITS.proc }).toString('latin1');
    for (const kv of env.split('\0')) if (kv.startsWith(name + '=')) return kv.slice(name.length + 1);
  } catch {
    /* gone, or not ours to read */
  }
  return undefined;
}

/**
 * An environment whose start was overwritten: vLLM's EngineCore and Worker call setproctitle, which
 * writes their title over the environ area, so no marker can be read there.
 */
export function environBlank(pid: number): boolean {
  try {
    // setproctitle writes the title (then NULs) over the start of the area; a few variables may survive at its end
    return !readRegularFileSync(`/proc/${pid}/environ`, { maxBytes: READ_LIMITS.proc }).toString('latin1').split('\0')[0]!.includes('=');
  } catch {
    return false;
  }
}

/** Live (non-zombie) members of a process group. */
export function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  if (!Number.isInteger(pgid) || pgid <= 1) return out;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    if (processGroup(Number(d)) === pgid) out.push(Number(d));
  }
  return out;
}

/** What identifies one launched instance (from its registry entry, or from launch). */
export interface Identity {
  pid: unknown;
  pgid: unknown;
  startTime: unknown;
  marker?: unknown;
}

export type Proof =
  /** the leader is ours (pid + start time [+ marker]) */
  | { state: 'alive'; pgid: number; members: number[] }
  /** the leader is gone but members of its group that carry the marker live on (an orphaned EngineCore) */
  | { state: 'degraded'; pgid: number; members: number[] }
  /** nothing of it is left: the record can go */
  | { state: 'gone' }
  /** something lives under that pid or group that we cannot prove is ours: leave it alone */
  | { state: 'unproven'; code: UnprovenCode; reason: string };

/** Why an entry could not be proven ours (typed, so callers decide without reading the message). */
export type UnprovenCode =
  /** the entry lacks a field identity rests on (pid, process group, start time) */
  | 'entry-incomplete'
  /** the entry's group is not led by its pid: sparkctl never launches it that way */
  | 'not-group-leader'
  /** the pid now belongs to another process (its start time differs) */
  | 'pid-reused'
  /** the group lives on, but none of its members carries the instance's marker */
  | 'group-unmarked'
  /** proven once, but the proof did not hold again right before a signal */
  | 'reproof-failed'
  /** a container that is not provably ours (another id, no sparkctl label, another marker) or that the runtime would not describe */
  | 'container-unproven';

const posInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v > 1;

/**
 * Prove (or not) that the processes an entry names are the ones we launched. Pure reading of /proc;
 * the only basis on which sparkctl may signal anything.
 */
export function proveIdentity(id: Identity): Proof {
  const pid = id.pid;
  const pgid = id.pgid;
  if (!posInt(pid)) return { state: 'unproven', code: 'entry-incomplete', reason: `the entry has no valid pid (${JSON.stringify(pid)})` };
  const marker = typeof id.marker === 'string' && id.marker.length >= 8 ? id.marker : undefined;
  const leaderStart = processStartTime(pid);
  const members = posInt(pgid) ? groupMembers(pgid) : [];
  if (leaderStart === undefined && !members.length) return { state: 'gone' };
  if (!posInt(pgid)) return { state: 'unproven', code: 'entry-incomplete', reason: `the entry has no valid process group (${JSON.stringify(pgid)})` };
  // sparkctl launches every server as the leader of its own group: anything else is not ours.
  if (pgid !== pid) return { state: 'unproven', code: 'not-group-leader', reason: `the entry's process group ${pgid} is not its pid ${pid} (sparkctl always launches a group leader)` };
  if (!posInt(id.startTime)) return { state: 'unproven', code: 'entry-incomplete', reason: `the entry has no start time: pid ${pid} cannot be told from a reused one` };
  const leaderOurs = leaderStart === id.startTime && (!marker || processEnv(pid, INSTANCE_ENV) === marker);
  if (leaderOurs) return { state: 'alive', pgid, members };
  if (!marker) {
    // An entry from before markers: only its leader can be proven; a group without it cannot.
    return {
      state: 'unproven',
      code: leaderStart !== undefined ? 'pid-reused' : 'group-unmarked',
      reason: leaderStart !== undefined ? `pid ${pid} is another process now (start time differs)` : `its leader ${pid} is gone and its group ${pgid} cannot be proven (no marker in the entry)`,
    };
  }
  const marked = members.filter((m) => processEnv(m, INSTANCE_ENV) === marker);
  if (marked.length) return { state: 'degraded', pgid, members };
  if (!members.length) return { state: 'gone' };
  return {
    state: 'unproven',
    code: 'group-unmarked',
    reason: `group ${pgid} is alive but none of its ${members.length} process(es) carries this instance's marker: another program reused the number`,
  };
}

/**
 * Record every signal sparkctl sends when SPARKCTL_SIGNAL_LOG names a file (the test suite does):
 * the target and, for each process it reached, the SPARKCTL_TEST_RUN of its environment, so the
 * suite can assert that nothing outside its own processes was ever signalled.
 */
function recordSignal(target: number, sig: NodeJS.Signals, members: number[]) {
  const file = process.env.SPARKCTL_SIGNAL_LOG;
  if (!file) return;
  const reached = members.map((p) => ({ pid: p, testRun: processEnv(p, 'SPARKCTL_TEST_RUN') ?? null, environBlank: environBlank(p) }));
  try {
    appendFileSync(file, JSON.stringify({ at: new Date().toISOString(), by: process.pid, target, sig, reached }) + '\n');
  } catch {
    /* recording is best effort; it never stops a stop */
  }
}

/**
 * Signal a group (or only its leader) that proveIdentity just proved. Re-proves first: a group that
 * died meanwhile is never signalled; the leader alone only while it is the proven leader.
 */
export function signalProven(id: Identity, sig: NodeJS.Signals, to: 'group' | 'leader' = 'group'): boolean {
  const p = proveIdentity(id);
  if (p.state !== 'alive' && p.state !== 'degraded') return false;
  if (to === 'leader' && p.state !== 'alive') return false;
  const target = to === 'leader' ? (id.pid as number) : -p.pgid;
  recordSignal(target, sig, to === 'leader' ? [target] : p.members);
  try {
    process.kill(target, sig);
    return true;
  } catch {
    return false;
  }
}

export type StopHow = 'gone' | 'terminated' | 'killed' | 'unproven';

/** How long the rest of a group may outlive its leader's exit before it gets a SIGTERM of its own. */
export const LINGER_MS = 5000;

/**
 * SIGTERM, wait while it drains, then SIGKILL to the whole group; every signal re-proves identity
 * first; safe to call on a group that is already gone. The first SIGTERM goes to the leader alone
 * while it lives: vLLM's shutdown runs from its API server (drain, then it stops EngineCore, which
 * stops its workers). A SIGTERM to the group reaches the workers too; they exit at once and every
 * request in flight fails ("EngineCore encountered an issue", seen on the real 0.27.2 with
 * --shutdown-timeout 30). The group gets its own SIGTERM when the leader is gone already (an
 * orphaned EngineCore) or the rest outlives the leader by LINGER_MS.
 */
export async function stopGroup(id: Identity, timeoutMs: number, opts: { signal?: AbortSignal; onTerm?: () => void } = {}): Promise<StopHow> {
  const first = proveIdentity(id);
  if (first.state === 'gone') return 'gone';
  if (first.state === 'unproven') return 'unproven';
  const pgid = first.pgid;
  // the members seen while the proven leader lived, by pid and start time: ours by that membership
  // even after the leader is gone (an EngineCore and its Worker, whose environ setproctitle blanked,
  // cannot show the marker; a SIGSTOPped EngineCore outlives its API server that way)
  const known = first.state === 'alive' ? first.members.map((pid) => ({ pid, start: processStartTime(pid) })).filter((m) => m.start !== undefined && m.pid !== id.pid) : [];
  let groupTermed = first.state !== 'alive' || !signalProven(id, 'SIGTERM', 'leader');
  if (groupTermed) signalProven(id, 'SIGTERM');
  opts.onTerm?.();
  let leaderGoneAt: number | undefined;
  // each reading of a group still alive applies the linger rule: its own SIGTERM once the leader is gone for LINGER_MS
  const members = () => {
    const n = groupMembers(pgid).length;
    if (n && !groupTermed && processStartTime(id.pid as number) !== id.startTime) {
      leaderGoneAt ??= Date.now();
      if (Date.now() - leaderGoneAt >= LINGER_MS) groupTermed = signalProven(id, 'SIGTERM') || true;
    }
    return n;
  };
  // an aborted signal cuts the wait short: SIGKILL now
  if ((await pollUntil(members, (n) => n === 0, { deadlineMs: timeoutMs, intervalMs: 50, signal: opts.signal })).done) return 'terminated';
  if (!groupMembers(pgid).length) return 'terminated';
  if (!signalProven(id, 'SIGKILL') && !killKnown(pgid, known)) return groupMembers(pgid).length ? 'unproven' : 'terminated';
  await pollUntil(
    () => groupMembers(pgid).length,
    (n) => n === 0,
    { deadlineMs: 1000, intervalMs: 25 },
  );
  return 'killed';
}

/** SIGKILL each member seen under the proven leader that is still that process (same start time, same group); whether any was. */
function killKnown(pgid: number, known: Array<{ pid: number; start?: number }>): boolean {
  let any = false;
  for (const m of known) {
    if (processStartTime(m.pid) !== m.start || processGroup(m.pid) !== pgid) continue;
    recordSignal(m.pid, 'SIGKILL', [m.pid]);
    try {
      process.kill(m.pid, 'SIGKILL');
      any = true;
    } catch {
      /* gone meanwhile */
    }
  }
  return any;
}

/** Listening TCP ports of this machine (from /proc/net/tcp{,6}, read as preflight reads them). */
export function listeningPorts(): Set<number> {
  const read = (f: string) => {
    try {
      return readTextSync(f, { maxBytes: 64 * 1024 * 1024 }); // /proc/net/tcp: 150 bytes a socket
    } catch {
      return null;
    }
  };
  return new Set([...parseListeningPorts(read('/proc/net/tcp')), ...parseListeningPorts(read('/proc/net/tcp6'))]);
}
