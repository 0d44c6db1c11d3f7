// A node's processes, reached through its shell: the transport that lets the one proof
// (proveIdentity) and the one stop (stopGroupOver), both in engine/runtime/proc.ts, run on a node
// over ssh. The node's shell only reads facts, sends a signal whose anchor still holds, and waits;
// what is proven, and what may be signalled, is decided here, by the same rule as on this host.
// Every byte the node sends is hostile: a line that does not parse is left out, so a forged or
// garbled answer proves less, never more.
import {
  INSTANCE_ENV,
  stopGroupOver,
  type ProcFacts,
  type ProcTransport,
  type ProvenSignal,
  type StopHow,
} from '../runtime/proc.js';
import type { NodeEntry, NodesFile } from '../../profiles/schema.js';
import { ssh, remoteWhy, type Remote } from './ssh.js';
import { shellQuote } from '../../output/format.js';
import { exportLine } from './ray-plan.js';

/** A container's proof on a node (node-container.ts) that fails: exit 4, and nothing is signalled. */
export const REMOTE_UNPROVEN_EXIT = 4;

/** One shell script run on the node (ssh there; `sh` here in the tests); `signal` cuts a wait short. */
export type NodeShell = (script: string, o: { timeoutMs: number; signal?: AbortSignal }) => Promise<Remote>;

/** The node did not answer a read the proof needs: nothing more is signalled; the stop says why. */
export class NodeUnreachable extends Error {}

const int = (n: number) => {
  if (!Number.isInteger(n) || n <= 1) throw new Error(`node-proc: not a process id: ${n}`);
  return String(n);
};

// one process's "STATE PGRP STARTTIME" (fields 3, 5, 22 of /proc/PID/stat): the command name may hold
// spaces, parentheses and newlines, so newlines are folded and the fields are cut after the last ") "
const STAT = (p: string) => `tr '\\n' ' ' < /proc/${p}/stat 2>/dev/null | sed 's/.*) //' | awk '{ print $1, $3, $20 }'`;

/**
 * POSIX sh: the leader `pid` and every member of group `pgid` (`@proc PID STATE PGRP START`), and the
 * instance marker each carries (`@env PID VALUE`, that one variable only: the rest of an environment,
 * its secrets with it, never leaves the node).
 */
export function factsScript(pid: number, pgid: number): string {
  return [
    `for p in ${int(pid)} $(ps -eo pid=,pgid= 2>/dev/null | awk -v g=${int(pgid)} '$2 == g { print $1 }'); do`,
    `  s=$(${STAT('$p')}); [ -n "$s" ] || continue; echo "@proc $p $s"`,
    `  m=$(tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | grep -a -m1 '^${INSTANCE_ENV}=' | cut -c1-120); [ -n "$m" ] && echo "@env $p \${m#${INSTANCE_ENV}=}"`,
    'done',
    'exit 0',
  ].join('\n');
}

/** What the node sent, as the proof reads a machine's processes (pure; zombies are gone, as on this host). */
export function factsFrom(text: string): ProcFacts {
  const procs = new Map<number, { pgid: number; start: number }>();
  const markers = new Map<number, string>();
  for (const line of text.split('\n')) {
    const p = /^@proc (\d+) ([A-Za-z]) (\d+) (\d+)$/.exec(line);
    if (p && p[2] !== 'Z') procs.set(Number(p[1]), { pgid: Number(p[3]), start: Number(p[4]) });
    const e = /^@env (\d+) ([A-Za-z0-9-]{8,64})$/.exec(line);
    if (e) markers.set(Number(e[1]), e[2]!);
  }
  return {
    startTime: (pid) => procs.get(pid)?.start,
    groupMembers: (pgid) => [...procs].filter(([, v]) => v.pgid === pgid).map(([pid]) => pid),
    marker: (pid) => (procs.has(pid) ? markers.get(pid) : undefined),
  };
}

/** POSIX sh: `kill -SIG TARGET` only while the anchor is still that process in that group; exit 0 when sent. */
export function signalScript(s: ProvenSignal, sig: 'SIGTERM' | 'SIGKILL'): string {
  const a = s.anchor;
  const target = s.target < 0 ? `-${int(-s.target)}` : int(s.target);
  return `a=$(${STAT(int(a.pid))}); case "$a" in Z*|'') exit 1;; esac; [ "\${a#* }" = "${int(a.pgid)} ${Math.trunc(Number(a.start))}" ] || exit 1; kill -${sig.slice(3)} ${target} 2>/dev/null`;
}

/**
 * POSIX sh: poll every 0.1 s for `ms` (by the node's clock, /proc/uptime: a poll itself takes time on
 * a loaded node) until group `pgid` has no live member or (with a leader) until the leader is gone or
 * another process; prints "MEMBERS LEADER_ALIVE(0|1)".
 */
export function waitScript(pgid: number, ms: number, leader?: { pid: number; start: number }): string {
  const g = int(pgid);
  const cs = Math.max(0, Math.ceil(ms / 10));
  // the leader is alive while its stat says a non-zombie with the recorded start time (the last field)
  const lead = leader
    ? `ls=$(${STAT(int(leader.pid))}); case "$ls" in Z*|'') ;; *) [ "\${ls##* }" = "${Math.trunc(Number(leader.start))}" ] && l=1;; esac`
    : 'l=1';
  const now = `awk '{ printf "%d", $1 * 100 }' /proc/uptime`;
  return [
    `end=$(( $(${now}) + ${cs} )); while :; do`,
    `  n=$(ps -eo pgid=,stat= 2>/dev/null | awk -v g=${g} '$1 == g && $2 !~ /^Z/' | wc -l); l=0; ${lead}`,
    `  if [ "$n" -eq 0 ] || [ "$l" = 0 ] || [ "$(${now})" -ge "$end" ]; then echo "$n $l"; exit 0; fi`,
    `  sleep 0.1`,
    'done',
  ].join('\n');
}

/** A node's processes through its shell. A read that fails throws NodeUnreachable (nothing is decided on no answer). */
export function nodeProc(shell: NodeShell): ProcTransport {
  const run = async (script: string, timeoutMs: number, signal?: AbortSignal) => {
    const r = await shell(script, { timeoutMs, signal });
    if (r.exitCode === null) throw new NodeUnreachable(remoteWhy(r, 1));
    return r;
  };
  return {
    async facts(id) {
      const r = await run(factsScript(id.pid, id.pgid), 20_000);
      if (r.exitCode !== 0) throw new NodeUnreachable(remoteWhy(r, 1));
      return factsFrom(r.stdout);
    },
    async signal(s, sig) {
      const r = await run(signalScript(s, sig), 20_000);
      // 0: sent; 1: the anchor no longer holds (or the target is gone); anything else: ssh's own failure (255)
      if (r.exitCode !== 0 && r.exitCode !== 1) throw new NodeUnreachable(remoteWhy(r, 1));
      return r.exitCode === 0;
    },
    async waitGroup(pgid, o) {
      let r: Remote;
      try {
        r = await run(waitScript(pgid, o.ms, o.leader), o.ms + 20_000, o.signal);
      } catch (e) {
        // cut short (Ctrl-C): the caller goes on to SIGKILL, over a fresh call; a group still there is read again then
        if (o.signal?.aborted) return { members: 1, leaderAlive: true };
        throw e;
      }
      const m = /^(\d+) ([01])\s*$/.exec(r.stdout.trim());
      if (r.exitCode !== 0 || !m)
        throw new NodeUnreachable(`the wait on the node answered ${JSON.stringify(r.stdout.slice(0, 80))}`);
      return { members: Number(m[1]), leaderAlive: m[2] === '1' };
    },
  };
}

/** The node's shell over ssh. */
export const sshShell =
  (nf: NodesFile, node: NodeEntry): NodeShell =>
  (script, o) =>
    ssh(nf, node, script, o);

interface NodeStop {
  state: 'stopped' | 'killed' | 'unproven' | 'failed';
  detail?: string;
}

const STATE: Record<StopHow, NodeStop['state']> = {
  gone: 'stopped',
  terminated: 'stopped',
  killed: 'killed',
  unproven: 'unproven',
};

/**
 * Stop what a record launched on a node (its own session: the process group is its pid): the one
 * stop, proven over the node's shell. An unproven group is reported and never signalled.
 */
export async function stopOnNode(
  shell: NodeShell,
  id: { pid: number; startTime?: number; marker?: string },
  graceS: number,
  signal?: AbortSignal,
): Promise<NodeStop> {
  try {
    const how = await stopGroupOver(
      nodeProc(shell),
      { pid: id.pid, pgid: id.pid, startTime: id.startTime, marker: id.marker },
      Math.max(0, graceS * 1000),
      { signal },
    );
    return how === 'unproven'
      ? {
          state: 'unproven',
          detail: `unproven: pid ${id.pid} (group ${id.pid}) is not provably the server sparkctl started: not signalled`,
        }
      : { state: STATE[how] };
  } catch (e) {
    if (e instanceof NodeUnreachable) return { state: 'failed', detail: e.message };
    throw e;
  }
}

/** The launch's tail: start the server in its own session and print "PID STARTTIME". */
export const launchAndReport = (cmd: string) =>
  `${cmd} & p=$!; echo "$p $(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f20)"`;

/** Where a server launched on a node's host writes its log (the ssh user's state folder there). */
export const NODE_LOGS = '$HOME/.local/state/sparkctl/logs';

/**
 * A node path as one shell word: a leading $HOME expands on the node ("$HOME"), the rest is single-
 * quoted, so nothing in a path read back from a record ($(...), `...`, quotes, a newline) is run.
 */
export const nodePathWord = (p: string): string =>
  p.startsWith('$HOME/') ? `"$HOME"${shellQuote(p.slice(5))}` : shellQuote(p);

/**
 * A vLLM group on a node's host, in its own session (the leader of its group, as on this host): the
 * step's and the server's environment, the instance marker, the API key through stdin (never argv);
 * its output into `logFile`. What proves it ours later: the pid and start time it printed, the marker.
 * The one launch on a node's host, for a native rank and for Ray's vLLM on the head alike.
 */
export async function launchOnNodeHost(
  nf: NodesFile,
  node: NodeEntry,
  o: {
    argv: string[];
    stepEnv: Record<string, string>;
    env: Record<string, string>;
    /** a line run before it (the start caches' folder: node-caches.ts), its output read back by the caller */
    setup?: string;
    key?: string;
    marker: string;
    logFile: string;
    signal?: AbortSignal;
  },
): Promise<{ pid: number; startTime?: number; stdout: string } | { error: string; evidence: string[] }> {
  const line = [
    `mkdir -p "${NODE_LOGS}"`,
    exportLine(o.stepEnv),
    ...Object.entries(o.env).map(([k, v]) => `export ${k}=${shellQuote(v)}`),
    ...(o.setup ? [o.setup] : []),
    o.key ? 'IFS= read -r VLLM_API_KEY; export VLLM_API_KEY' : ':',
    `export ${INSTANCE_ENV}=${o.marker}`,
    launchAndReport(`setsid nohup ${o.argv.map(shellQuote).join(' ')} > ${nodePathWord(o.logFile)} 2>&1 < /dev/null`),
  ].join('; ');
  const r = await ssh(nf, node, line, { input: o.key ? `${o.key}\n` : undefined, signal: o.signal });
  const [pidText, startText] = (r.stdout.trim().split('\n').pop() ?? '').split(' ');
  const pid = Number(pidText);
  if (r.exitCode !== 0 || !Number.isInteger(pid) || pid <= 1)
    return { error: remoteWhy(r), evidence: (r.stderr || r.stdout).trim().split('\n').slice(-6) };
  return { pid, startTime: Number(startText) || undefined, stdout: r.stdout };
}
