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
    return !readRegularFileSync(`/proc/${pid}/environ`, { maxBytes: READ_LIMITS.proc })
      .toString('latin1')
      .split('\0')[0]!
      .includes('=');
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
  /**
   * a container that is not provably ours (another id, no sparkctl label, another marker) or that the runtime would not
   * describe
   */
  | 'container-unproven';

const posInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v > 1;

/**
 * What the proof reads of a machine's processes: a live (non-zombie) process's kernel start time,
 * the live members of a process group, and a process's instance marker. This host reads them from
 * its own /proc (LOCAL_FACTS); a node over ssh sends them in one read (engine/cluster/node-proc.ts).
 * The rule that judges them is one: proveIdentity.
 */
export interface ProcFacts {
  startTime(pid: number): number | undefined;
  groupMembers(pgid: number): number[];
  /** the INSTANCE_ENV value in the process's environment (undefined: unset or unreadable) */
  marker(pid: number): string | undefined;
}

export const LOCAL_FACTS: ProcFacts = {
  startTime: processStartTime,
  groupMembers,
  marker: (pid) => processEnv(pid, INSTANCE_ENV),
};

/**
 * Prove (or not) that the processes an entry names are the ones we launched. Pure reading of a
 * machine's processes (this host's /proc unless `facts` reads another's); the only basis on which
 * sparkctl may signal anything, here or on a node.
 */
export function proveIdentity(id: Identity, facts: ProcFacts = LOCAL_FACTS): Proof {
  const pid = id.pid;
  const pgid = id.pgid;
  if (!posInt(pid))
    return {
      state: 'unproven',
      code: 'entry-incomplete',
      reason: `the entry has no valid pid (${JSON.stringify(pid)})`,
    };
  const marker = markerOf(id);
  const leaderStart = facts.startTime(pid);
  const members = posInt(pgid) ? facts.groupMembers(pgid) : [];
  if (leaderStart === undefined && !members.length) return { state: 'gone' };
  if (!posInt(pgid))
    return {
      state: 'unproven',
      code: 'entry-incomplete',
      reason: `the entry has no valid process group (${JSON.stringify(pgid)})`,
    };
  // sparkctl launches every server as the leader of its own group: anything else is not ours.
  if (pgid !== pid)
    return {
      state: 'unproven',
      code: 'not-group-leader',
      reason: `the entry's process group ${pgid} is not its pid ${pid} (sparkctl always launches a group leader)`,
    };
  if (!posInt(id.startTime))
    return {
      state: 'unproven',
      code: 'entry-incomplete',
      reason: `the entry has no start time: pid ${pid} cannot be told from a reused one`,
    };
  const leaderOurs = leaderStart === id.startTime && (!marker || facts.marker(pid) === marker);
  if (leaderOurs) return { state: 'alive', pgid, members };
  if (!marker) {
    // An entry from before markers: only its leader can be proven; a group without it cannot.
    return {
      state: 'unproven',
      code: leaderStart !== undefined ? 'pid-reused' : 'group-unmarked',
      reason:
        leaderStart !== undefined
          ? `pid ${pid} is another process now (start time differs)`
          : `its leader ${pid} is gone and its group ${pgid} cannot be proven (no marker in the entry)`,
    };
  }
  const marked = members.filter((m) => facts.marker(m) === marker);
  if (marked.length) return { state: 'degraded', pgid, members };
  if (!members.length) return { state: 'gone' };
  return {
    state: 'unproven',
    code: 'group-unmarked',
    reason: `group ${pgid} is alive but none of its ${members.length} process(es) carries this instance's marker: another program reused the number`,
  };
}

const markerOf = (id: Identity) => (typeof id.marker === 'string' && id.marker.length >= 8 ? id.marker : undefined);

/**
 * The process a signal rests on: it must still be this process (same start time) in this group when
 * the signal is sent. While it is, the group's number cannot have been reused (a group lives while
 * any member does), so a transport that checks it right before `kill` closes the gap between the
 * proof and the signal (on a node: an ssh round trip).
 */
interface Anchor {
  pid: number;
  start: number;
  pgid: number;
}

/** A signal the proof allows: its target (a pid, or -pgid for the group) and the process it rests on. */
export interface ProvenSignal {
  target: number;
  anchor: Anchor;
  /** the group's members when it was proven (what the signal reaches) */
  members: number[];
}

/**
 * What a signal to the group (or only its leader) may be sent to, by the proof over `facts`; undefined:
 * nothing may be signalled (gone, unproven; the leader alone only while it is the proven leader).
 */
export function provenSignal(
  id: Identity,
  facts: ProcFacts,
  to: 'group' | 'leader' = 'group',
): ProvenSignal | undefined {
  const p = proveIdentity(id, facts);
  if (p.state !== 'alive' && p.state !== 'degraded') return undefined;
  if (to === 'leader' && p.state !== 'alive') return undefined;
  const pid = id.pid as number;
  const marker = markerOf(id);
  // alive: the leader itself; degraded: a member that carries the marker (the proof found one)
  const on = p.state === 'alive' ? pid : p.members.find((m) => facts.marker(m) === marker);
  const start = on === undefined ? undefined : facts.startTime(on);
  if (on === undefined || start === undefined) return undefined;
  return {
    target: to === 'leader' ? pid : -p.pgid,
    anchor: { pid: on, start, pgid: p.pgid },
    members: to === 'leader' ? [pid] : p.members,
  };
}

/**
 * How sparkctl reaches one machine's processes: read the facts the proof judges, send a signal that
 * rests on an anchor (sent only while the anchor is still that process in that group), and wait for
 * a group to end. This host (LOCAL_PROC) and a node's shell over ssh (engine/cluster/node-proc.ts) are
 * the two transports; the proof (proveIdentity) and the stop (stopGroupOver) are one definition over them.
 */
export interface ProcTransport {
  facts(id: { pid: number; pgid: number }): Promise<ProcFacts>;
  /** true: sent; false: the anchor is no longer that process (or the target is gone) */
  signal(s: ProvenSignal, sig: 'SIGTERM' | 'SIGKILL'): Promise<boolean>;
  /**
   * Wait up to `ms` for the group to have no live member, or (with `leader`) for the leader to be gone
   * or another process; the live members and whether the leader is still that process at the end.
   */
  waitGroup(
    pgid: number,
    o: { ms: number; leader?: { pid: number; start: number }; signal?: AbortSignal },
  ): Promise<{ members: number; leaderAlive: boolean }>;
}

function anchorHolds(a: Anchor): boolean {
  return processStartTime(a.pid) === a.start && processGroup(a.pid) === a.pgid;
}

/** SIGTERM/SIGKILL on this host, after the anchor check; recorded for the test suite's signal log. */
function localSignal(s: ProvenSignal, sig: NodeJS.Signals): boolean {
  if (!anchorHolds(s.anchor)) return false;
  recordSignal(s.target, sig, s.members);
  try {
    process.kill(s.target, sig);
    return true;
  } catch {
    return false;
  }
}

/** This host's processes: /proc read directly, signals by process.kill, waits polled every 50 ms. */
export const LOCAL_PROC: ProcTransport = {
  facts: async () => LOCAL_FACTS,
  signal: async (s, sig) => localSignal(s, sig),
  async waitGroup(pgid, o) {
    const leaderAlive = () => !o.leader || processStartTime(o.leader.pid) === o.leader.start;
    const r = await pollUntil(
      () => ({ members: groupMembers(pgid).length, leaderAlive: leaderAlive() }),
      (v) => v.members === 0 || !v.leaderAlive,
      { deadlineMs: o.ms, intervalMs: 50, signal: o.signal },
    );
    return r.value;
  },
};

/**
 * Record every signal sparkctl sends when SPARKCTL_SIGNAL_LOG names a file (the test suite does):
 * the target and, for each process it reached, the SPARKCTL_TEST_RUN of its environment, so the
 * suite can assert that nothing outside its own processes was ever signalled.
 */
function recordSignal(target: number, sig: NodeJS.Signals, members: number[]) {
  const file = process.env.SPARKCTL_SIGNAL_LOG;
  if (!file) return;
  const reached = members.map((p) => ({
    pid: p,
    testRun: processEnv(p, 'SPARKCTL_TEST_RUN') ?? null,
    environBlank: environBlank(p),
  }));
  try {
    appendFileSync(
      file,
      JSON.stringify({ at: new Date().toISOString(), by: process.pid, target, sig, reached }) + '\n',
    );
  } catch {
    /* recording is best effort; it never stops a stop */
  }
}

/**
 * Signal a group (or only its leader) on this host that proveIdentity just proved. Re-proves first: a
 * group that died meanwhile is never signalled; the leader alone only while it is the proven leader.
 */
export function signalProven(id: Identity, sig: NodeJS.Signals, to: 'group' | 'leader' = 'group'): boolean {
  const s = provenSignal(id, LOCAL_FACTS, to);
  return !!s && localSignal(s, sig);
}

/** The same over a transport: the proof is read afresh there, and the signal rests on its anchor. */
async function signalOver(
  t: ProcTransport,
  id: Identity & { pid: number; pgid: number },
  sig: 'SIGTERM' | 'SIGKILL',
  to: 'group' | 'leader' = 'group',
  facts?: ProcFacts,
): Promise<boolean> {
  const s = provenSignal(id, facts ?? (await t.facts(id)), to);
  return !!s && t.signal(s, sig);
}

export type StopHow = 'gone' | 'terminated' | 'killed' | 'unproven';

/** How long the rest of a group may outlive its leader's exit before it gets a SIGTERM of its own. */
const LINGER_MS = 5000;

/**
 * SIGTERM, wait while it drains, then SIGKILL to the whole group; every signal re-proves identity
 * first; safe to call on a group that is already gone. The first SIGTERM goes to the leader alone
 * while it lives: vLLM's shutdown runs from its API server (drain, then it stops EngineCore, which
 * stops its workers). A SIGTERM to the group reaches the workers too; they exit at once and every
 * request in flight fails ("EngineCore encountered an issue", seen on the real 0.27.2 with
 * --shutdown-timeout 30). The group gets its own SIGTERM when the leader is gone already (an
 * orphaned EngineCore) or the rest outlives the leader by LINGER_MS.
 */
export function stopGroup(
  id: Identity,
  timeoutMs: number,
  opts: { signal?: AbortSignal; onTerm?: () => void } = {},
): Promise<StopHow> {
  return stopGroupOver(LOCAL_PROC, id, timeoutMs, opts);
}

/**
 * stopGroup on any machine: the one definition of a stop, over a transport (this host, or a node's
 * shell). An aborted `signal` cuts the wait short: SIGKILL now.
 */
export async function stopGroupOver(
  t: ProcTransport,
  id: Identity,
  timeoutMs: number,
  opts: { signal?: AbortSignal; onTerm?: () => void } = {},
): Promise<StopHow> {
  if (!posInt(id.pid)) return 'unproven';
  const who = { ...id, pid: id.pid, pgid: posInt(id.pgid) ? id.pgid : id.pid };
  const facts = await t.facts(who);
  const first = proveIdentity(id, facts);
  if (first.state === 'gone') return 'gone';
  if (first.state === 'unproven') return 'unproven';
  const pgid = first.pgid;
  // the members seen while the proven leader lived, by pid and start time: ours by that membership
  // even after the leader is gone (an EngineCore and its Worker, whose environ setproctitle blanked,
  // cannot show the marker; a SIGSTOPped EngineCore outlives its API server that way)
  const known: Array<{ pid: number; start: number }> = [];
  if (first.state === 'alive')
    for (const pid of first.members) {
      const start = facts.startTime(pid);
      if (pid !== who.pid && start !== undefined) known.push({ pid, start });
    }
  // the first signal rests on the facts just read (a node: no second round trip before it)
  let groupTermed = first.state !== 'alive' || !(await signalOver(t, who, 'SIGTERM', 'leader', facts));
  if (groupTermed) await signalOver(t, who, 'SIGTERM');
  opts.onTerm?.();
  const leader = { pid: who.pid, start: id.startTime as number };
  const t0 = performance.now();
  const elapsed = () => performance.now() - t0;
  let leaderGoneAt: number | undefined;
  let w = { members: 1, leaderAlive: true };
  for (;;) {
    const left = timeoutMs - elapsed();
    // each reading of a group still alive applies the linger rule: its own SIGTERM once the leader is gone for
    // LINGER_MS
    const watchLeader = !groupTermed && leaderGoneAt === undefined;
    const ms = groupTermed || leaderGoneAt === undefined ? left : Math.min(left, leaderGoneAt + LINGER_MS - elapsed());
    w = await t.waitGroup(pgid, { ms: Math.max(0, ms), leader: watchLeader ? leader : undefined, signal: opts.signal });
    if (w.members === 0) return 'terminated';
    if (!groupTermed && !w.leaderAlive) leaderGoneAt ??= elapsed();
    if (!groupTermed && leaderGoneAt !== undefined && elapsed() - leaderGoneAt >= LINGER_MS)
      groupTermed = (await signalOver(t, who, 'SIGTERM')) || true;
    if (opts.signal?.aborted || elapsed() >= timeoutMs) break;
  }
  if (w.members === 0) return 'terminated';
  if (!(await signalOver(t, who, 'SIGKILL')) && !(await killKnown(t, pgid, known)))
    return (await t.waitGroup(pgid, { ms: 0 })).members ? 'unproven' : 'terminated';
  await t.waitGroup(pgid, { ms: 1000 });
  return 'killed';
}

/**
 * SIGKILL each member seen under the proven leader that is still that process (same start time, same group); whether
 * any was.
 */
async function killKnown(
  t: ProcTransport,
  pgid: number,
  known: Array<{ pid: number; start: number }>,
): Promise<boolean> {
  let any = false;
  for (const m of known)
    if (await t.signal({ target: m.pid, anchor: { ...m, pgid }, members: [m.pid] }, 'SIGKILL')) any = true;
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
