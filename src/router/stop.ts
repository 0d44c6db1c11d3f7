// Stopping the router without cutting the streams that pass through it. HAProxy's soft stop
// (SIGUSR1) closes its listeners (the public port, the stats port, the runtime API socket) and its
// idle connections at once, lets every request in progress finish, and exits by itself when the
// last connection is gone. Only after the deadline does it get SIGTERM (HAProxy's hard stop: every
// connection is closed) and then SIGKILL. Every signal re-proves its identity first.
//
// What happened is read from the kernel, not from HAProxy (its runtime API is closed from the soft
// stop on): the client connections it holds on its listening ports, and its connections to the
// replicas. A connection still open at the deadline is cut only if a request was still running on
// it: one whose answer ended during the stop stays open, idle, until `timeout http-keep-alive`
// (a response already under way cannot be given "Connection: close" any more), and HAProxy closes
// those idle ones then; at the deadline, with no connection to a replica left, none of them had a
// request to lose.
import { proveIdentity, groupMembers, signalProven, stopGroup, type Identity } from '../engine/runtime/proc.js';
import { tcpOf, type TcpView } from '../engine/runtime/socket-owner.js';
import { unixClientEndsOf } from '../engine/runtime/replica-socket.js';
import { showStat } from './api.js';
import { pollUntil } from '../util/poll.js';
import { portFreed, type RouterStop, type StopOutcome } from '../engine/stop.js';

interface RouterStopResult {
  /**
   * gone: nothing was running; unproven: not signalled; drained: no request was cut; cut: some were; unknown: the
   * deadline came and its connections could not be read
   */
  how: 'gone' | 'unproven' | 'drained' | 'cut' | 'unknown';
  /** how it ended: by itself after the soft stop, by the hard stop (SIGTERM), or SIGKILL */
  endedBy?: 'soft-stop' | 'hard-stop' | 'SIGKILL';
  /**
   * requests running or queued in HAProxy right before the soft stop (its runtime API); undefined: it did not answer
   */
  inFlight?: number;
  /** client connections open at the soft stop */
  connections?: number;
  /** client connections with a request still running at the deadline, closed by the hard stop */
  cut: number;
  /** idle client connections (no request running) still open at the deadline, closed by the hard stop */
  idleClosed: number;
  /** soft stop to the end of its group */
  ms: number;
}

/** Connections of a TcpView: clients (on one of its listening ports) and to servers (all others). */
export function splitConnections(
  v: Pick<TcpView, 'established'>,
  listening: ReadonlySet<number>,
): { clients: number; servers: number } {
  let clients = 0;
  let servers = 0;
  for (const c of v.established) {
    if (listening.has(c.localPort)) clients++;
    else servers++;
  }
  return { clients, servers };
}

/**
 * What the deadline found -> how many were cut. Pure. Without a connection to a replica, no client
 * connection had a request running. Nothing read (no /proc/net/tcp) is nothing claimed: undefined.
 */
export function judgeDeadline(
  at: { clients: number; servers: number } | undefined,
): { cut: number; idleClosed: number } | undefined {
  if (!at) return undefined;
  return at.servers > 0 ? { cut: at.clients, idleClosed: 0 } : { cut: 0, idleClosed: at.clients };
}

interface RouterStopOptions {
  /** the router's runtime API socket (for the in-flight count before the soft stop) */
  socket?: string;
  /** its public port, when its listeners cannot be read */
  port?: number;
  /** aborting it ends the drain at once (hard stop) */
  signal?: AbortSignal;
  onSignal?: (sig: 'SIGUSR1' | 'SIGTERM' | 'SIGKILL', at: { inFlight?: number; connections?: number }) => void;
}

/** Soft stop, wait up to drainMs for HAProxy to end by itself, then hard stop and SIGKILL. Never throws. */
export async function softStopRouter(
  id: Identity,
  drainMs: number,
  o: RouterStopOptions = {},
): Promise<RouterStopResult> {
  const t0 = performance.now();
  const ms = () => Math.round(performance.now() - t0);
  const proof = proveIdentity(id);
  if (proof.state === 'gone') return { how: 'gone', cut: 0, idleClosed: 0, ms: 0 };
  if (proof.state === 'unproven') return { how: 'unproven', cut: 0, idleClosed: 0, ms: 0 };
  const pgid = proof.pgid;
  const before = tcpOf(groupMembers(pgid));
  // its listeners close with the soft stop: which ports its clients come in on is read now
  const listening = new Set<number>(before?.listening ?? []);
  if (o.port) listening.add(o.port);
  let inFlight: number | undefined;
  if (o.socket && proof.state === 'alive') {
    try {
      inFlight = (await showStat(o.socket, 3000)).reduce((n, s) => n + s.scur + s.qcur, 0);
    } catch {
      inFlight = undefined;
    }
  }
  const connections = before ? splitConnections(before, listening).clients : undefined;
  const soft = !o.signal?.aborted && signalProven(id, 'SIGUSR1');
  if (soft) o.onSignal?.('SIGUSR1', { inFlight, connections });
  if (soft)
    await pollUntil(
      () => groupMembers(pgid).length,
      (n) => n === 0,
      { deadlineMs: drainMs, intervalMs: 100, signal: o.signal },
    );
  if (!groupMembers(pgid).length)
    return { how: 'drained', endedBy: 'soft-stop', inFlight, connections, cut: 0, idleClosed: 0, ms: ms() };
  const members = groupMembers(pgid);
  const at = tcpOf(members);
  // HAProxy's connections to replicas on Unix sockets (vLLM --uds) are no TCP: counted from /proc/net/unix
  const viaSockets = unixClientEndsOf(members) ?? 0;
  const split = at && splitConnections(at, listening);
  const left = judgeDeadline(split && { clients: split.clients, servers: split.servers + viaSockets });
  const how = await stopGroup(id, 3000, { onTerm: () => o.onSignal?.('SIGTERM', {}) });
  if (how === 'unproven') return { how: 'unproven', inFlight, connections, cut: 0, idleClosed: 0, ms: ms() };
  if (how === 'killed') o.onSignal?.('SIGKILL', {});
  // 'gone': it ended by itself between the last look and the hard stop
  if (how === 'gone')
    return { how: 'drained', endedBy: 'soft-stop', inFlight, connections, cut: 0, idleClosed: 0, ms: ms() };
  const endedBy = how === 'killed' ? 'SIGKILL' : 'hard-stop';
  if (!left) return { how: 'unknown', endedBy, inFlight, connections, cut: 0, idleClosed: 0, ms: ms() };
  return { how: left.cut ? 'cut' : 'drained', endedBy, inFlight, connections, ...left, ms: ms() };
}

/**
 * A registered router's stop (StopOptions.router): the soft stop, the drain, then the hard stop. It has no vLLM
 * evidence to read.
 */
export const stopRouterEntry: RouterStop = async (reg, entry, base, opts): Promise<StopOutcome> => {
  const { inst, proof } = entry;
  const r = await softStopRouter(inst, base.graceMs, {
    socket: inst.router?.socket,
    port: inst.port,
    signal: opts.signal,
    onSignal: (sig, at) => {
      if (sig === 'SIGUSR1')
        opts.onEvent?.({ type: 'signalled', name: inst.name, signal: 'SIGUSR1', ...at, graceMs: base.graceMs });
      else opts.onEvent?.({ type: 'signalled', name: inst.name, signal: sig, graceMs: 3000, hardStop: true });
    },
  });
  if (r.how === 'unproven')
    return {
      ...base,
      result: 'unproven',
      unproven: { code: 'reproof-failed', detail: 'its identity could not be proven again before signalling' },
    };
  const left = proof.state === 'gone' || proof.state === 'unproven' ? 0 : groupMembers(proof.pgid).length;
  const portFree = await portFreed(inst.port);
  const removed = !left && portFree;
  if (removed) reg.remove('host', inst.name);
  return {
    ...base,
    result: r.how === 'gone' ? 'not-running' : r.endedBy === 'SIGKILL' ? 'killed' : 'stopped',
    requests:
      r.how === 'gone'
        ? { kind: 'none' }
        : r.how === 'cut'
          ? { kind: 'router-cut', cut: r.cut, inFlight: r.inFlight, connections: r.connections }
          : r.how === 'unknown'
            ? { kind: 'router-unknown', inFlight: r.inFlight, connections: r.connections }
            : { kind: 'router-drained', inFlight: r.inFlight, connections: r.connections, idleClosed: r.idleClosed },
    ...(r.endedBy ? { routerEnd: r.endedBy } : {}),
    ms: r.ms,
    portFree,
    groupLeft: left,
    removed,
  };
};
