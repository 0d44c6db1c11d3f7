// The one stop of a registered server: prove it ours, read what was in flight, SIGTERM, wait the
// grace, SIGKILL, then say from evidence what happened to its requests and what it still holds.
// Evidence is vLLM's own: the `[shutdown]` lines it logs after the signal (mode=abort|drain and the
// in-flight counts of its EngineCore) and, before the signal, the running/waiting gauges. Without
// such evidence the outcome says "unknown", never "drained". Library code: it never prints; the
// verb renders the outcome; restart and the router's rolling restart call it too (serve --foreground
// stops what it launched through the runtime directly: it holds the launch records).
import { statSync } from 'node:fs';
import { readTail } from '../util/read.js';
import type { Entry, Instance, Registry } from './registry.js';
import { listeningPorts, type UnprovenCode } from './runtime/proc.js';
import { http } from '../client/http.js';
import { parseVllmMetrics } from '../client/metrics.js';
import { pollUntil } from '../util/poll.js';
import { readGpus } from '../health/gpu.js';
import { RealHost } from '../host/real.js';
import { runtimeOf } from './runtime/index.js';
import { removeStaleSocket, unixListening } from './runtime/replica-socket.js';

/** What vLLM logged about its shutdown after the signal (all engines of the server together). */
interface ShutdownEvidence {
  /** mode=abort (vLLM's default, --shutdown-timeout 0) or mode=drain */
  mode?: 'abort' | 'drain';
  /** the timeout vLLM announced with its mode, seconds */
  timeoutS?: number;
  /** requests the EngineCore(s) said they abort (count=N, summed over engines) */
  aborting?: number;
  /** requests the EngineCore(s) said they drain */
  draining?: number;
  /** "request processing complete": every engine that started a shutdown finished its requests */
  complete: boolean;
  /** the [shutdown] lines themselves, for --json and the report */
  lines: string[];
}

const MODE = /\[shutdown\] (?:API server: stopping engine client|EngineCore: start) mode=(abort|drain) timeout=(\d+)s/;
const ABORTING = /\[shutdown\] EngineCore: aborting in-flight requests count=(\d+)/;
const DRAINING = /\[shutdown\] EngineCore: draining in-flight requests count=(\d+)/;
const STARTED = /\[shutdown\] EngineCore: start mode=/;
const COMPLETE = /\[shutdown\] EngineCore: request processing complete/;

/** vLLM's shutdown lines (launcher.py, v1/engine/core.py) -> evidence. Pure; lines are hostile text. */
export function readShutdownLines(lines: readonly string[]): ShutdownEvidence {
  const ev: ShutdownEvidence = { complete: false, lines: [] };
  let started = 0;
  let completed = 0;
  for (const raw of lines) {
    const line = raw.length > 2000 ? raw.slice(0, 2000) : raw;
    if (!line.includes('[shutdown]')) continue;
    ev.lines.push(line.trim());
    const m = MODE.exec(line);
    if (m) {
      ev.mode = m[1] as 'abort' | 'drain';
      ev.timeoutS = Number(m[2]);
    }
    if (STARTED.test(line)) started++;
    const a = ABORTING.exec(line);
    if (a) ev.aborting = (ev.aborting ?? 0) + Number(a[1]);
    const d = DRAINING.exec(line);
    if (d) ev.draining = (ev.draining ?? 0) + Number(d[1]);
    if (COMPLETE.test(line)) completed++;
  }
  ev.complete = completed > 0 && completed >= started;
  return ev;
}

/** How the server's in-flight requests ended, as far as evidence shows. */
export type RequestsOutcome =
  /** vLLM drained: it logged mode=drain and that request processing completed, then exited before SIGKILL */
  | { kind: 'drained'; count: number }
  /** vLLM aborted them on SIGTERM (mode=abort: no --shutdown-timeout) */
  | { kind: 'aborted'; count: number }
  /** it was draining when the grace ran out: SIGKILL cut off what was left */
  | { kind: 'cut-off'; count?: number }
  /** vLLM said mode=drain but not that its requests completed (an engine that failed on the way): not a drain */
  | { kind: 'unconfirmed'; inFlight?: number }
  /** no [shutdown] evidence (an older vLLM, an unreadable log): how many ran before the signal, if known */
  | { kind: 'unknown'; inFlight?: number }
  /**
   * the router (HAProxy): its soft stop let every request finish (idle keep-alive connections left at the deadline were
   * closed)
   */
  | { kind: 'router-drained'; inFlight?: number; connections?: number; idleClosed: number }
  /** the router: requests still running at the drain deadline; the hard stop closed their connections */
  | { kind: 'router-cut'; cut: number; inFlight?: number; connections?: number }
  /**
   * the router: the drain deadline came and its connections could not be read, so whether the hard stop cut a request
   * is not known
   */
  | { kind: 'router-unknown'; inFlight?: number; connections?: number }
  /** nothing was signalled */
  | { kind: 'none' };

/** Evidence (log lines after the signal, the gauges before it, how it ended) -> the requests' outcome. Pure. */
export function judgeRequests(
  ev: ShutdownEvidence,
  inFlightBefore: number | undefined,
  ended: 'terminated' | 'killed',
): RequestsOutcome {
  if (ev.mode === 'abort') return { kind: 'aborted', count: ev.aborting ?? 0 };
  if (ev.mode === 'drain') {
    // vLLM logs the drain count only when it is not zero: no count line means nothing was in flight
    if (ended === 'terminated' && ev.complete) return { kind: 'drained', count: ev.draining ?? 0 };
    if (ended === 'killed') return { kind: 'cut-off', count: ev.draining };
    // exited in drain mode without saying its requests completed: it did not prove a drain
    return { kind: 'unconfirmed', inFlight: ev.draining ?? inFlightBefore };
  }
  return ended === 'killed' && inFlightBefore
    ? { kind: 'cut-off', count: inFlightBefore }
    : { kind: 'unknown', inFlight: inFlightBefore };
}

export type StopResult =
  /** it ended after SIGTERM within the grace */
  | 'stopped'
  /** it did not end within the grace: SIGKILL */
  | 'killed'
  /** nothing of it was running: the record goes */
  | 'not-running'
  /** its identity could not be proven: nothing was signalled */
  | 'unproven';

export interface StopOutcome {
  name: string;
  pid: number;
  result: StopResult;
  /** the entry was unreadable; the server was found by its processes' marker */
  recovered: boolean;
  /** its API server had died; the rest of its group (an orphaned EngineCore) was stopped */
  degraded: boolean;
  /** set when result is 'unproven' */
  unproven?: { code: UnprovenCode; detail: string };
  requests: RequestsOutcome;
  /** vLLM's [shutdown] lines after the signal */
  evidence: string[];
  /** running + waiting requests read from /metrics right before SIGTERM (absent: not readable) */
  inFlightBefore?: number;
  /** the wait between SIGTERM and SIGKILL */
  graceMs: number;
  /** SIGTERM to the end of the group */
  ms: number;
  /** nothing listens on its port any more (on --uds: on its socket, which is then removed) */
  portFree: boolean;
  /** a replica on vLLM's --uds: its socket (portFree is the socket's) */
  uds?: string;
  groupLeft: number;
  /** pids of the group still holding GPU memory */
  gpuHolders: number[];
  /** a router: what ended it (its soft stop, the hard stop after the drain deadline, SIGKILL) */
  routerEnd?: 'soft-stop' | 'hard-stop' | 'SIGKILL';
  /** its log file was deleted while it ran (rotated away): its shutdown lines are not readable */
  logDeleted?: boolean;
  /** the registry entry was removed (everything released, or --force-forget of an unproven one) */
  removed: boolean;
  forgotten: boolean;
  /** what the runtime could not release, in its words (a container it could not remove) */
  held?: string;
}

/**
 * What a stop left held, in words (the port, members of its group, GPU memory, what its runtime
 * could not release); undefined when everything was released. The one reading of "did it release
 * everything" for stop, restart and the rolling restart.
 */
export function heldText(o: StopOutcome): string | undefined {
  if (o.result === 'unproven') return undefined;
  const held = [
    o.portFree ? '' : `${o.uds ? 'socket' : 'port'} still in use`,
    o.groupLeft ? `${o.groupLeft} process(es) of its group left` : '',
    o.gpuHolders.length ? `GPU still held by ${o.gpuHolders.join(',')}` : '',
    o.held ?? '',
  ].filter(Boolean);
  return held.length ? held.join('; ') : undefined;
}

type StopEvent =
  /** hardStop: a router's SIGTERM at its drain deadline (HAProxy closes every connection) */
  | {
      type: 'signalled';
      name: string;
      signal: 'SIGTERM' | 'SIGKILL';
      inFlight?: number;
      graceMs: number;
      hardStop?: boolean;
    }
  /** a router's soft stop: it stops listening and lets what is open finish, for up to graceMs */
  | { type: 'signalled'; name: string; signal: 'SIGUSR1'; connections?: number; inFlight?: number; graceMs: number }
  | { type: 'stopped'; outcome: StopOutcome };

interface StopOptions {
  /**
   * wait between SIGTERM and SIGKILL (a router: its drain after the soft stop); default: the server's own grace
   * (graceMsOf, routerDrainMsOf)
   */
  graceMs?: number;
  /** aborting it cuts the grace short: SIGKILL at once */
  signal?: AbortSignal;
  onEvent?: (e: StopEvent) => void;
  /** an entry that cannot be proven ours: drop its record (never signals it) */
  forceForget?: boolean;
  /** which of these pids still hold GPU memory; default: nvidia-smi where there is one (a vLLM server only) */
  gpuHolders?: (pids: number[]) => Promise<number[]>;
  /**
   * how a router entry stops (HAProxy's soft stop: src/router/stop.ts, a storey above); without it a router entry is
   * refused
   */
  router?: RouterStop;
}

/** Stop a registered router (proven like any entry) and say what became of the requests passing through it. */
export type RouterStop = (reg: Registry, entry: Entry, base: StopOutcome, opts: StopOptions) => Promise<StopOutcome>;

/** How long vLLM takes to tear down after its requests are done (engine, workers, HTTP server). */
const TEARDOWN_MARGIN_MS = 15_000;
/** The wait for a server that was launched without a drain (or before sparkctl recorded one). */
const DEFAULT_GRACE_MS = 30_000;

/** The wait before SIGKILL this server is owed: its drain timeout plus the teardown margin. */
export function graceMsOf(inst: Pick<Instance, 'shutdownTimeoutSeconds'>): number {
  const drain = inst.shutdownTimeoutSeconds;
  return typeof drain === 'number' && Number.isFinite(drain) && drain > 0
    ? Math.max(DEFAULT_GRACE_MS, drain * 1000 + TEARDOWN_MARGIN_MS)
    : DEFAULT_GRACE_MS;
}

/** A router's drain after its soft stop, unless the profile said otherwise (router.drainTimeoutSeconds). */
export const ROUTER_DRAIN_MS = 30_000;

/** How long a router's soft stop may take before the hard stop: its recorded drain, else ROUTER_DRAIN_MS. */
export function routerDrainMsOf(inst: Pick<Instance, 'shutdownTimeoutSeconds'>): number {
  const s = inst.shutdownTimeoutSeconds;
  return typeof s === 'number' && Number.isFinite(s) && s > 0 ? s * 1000 : ROUTER_DRAIN_MS;
}

/** Running + waiting requests from the server's /metrics (open without the API key); undefined if unreadable. */
async function inFlight(inst: Instance): Promise<number | undefined> {
  if (!inst.url) return undefined;
  const r = await http(`${inst.url}/metrics`, { timeoutMs: 1500, maxBytes: 2 * 1024 * 1024 });
  if (!r.ok || r.status !== 200) return undefined;
  try {
    const m = parseVllmMetrics(r.body);
    if (m.running === undefined) return undefined;
    const n = m.running + (m.waiting ?? 0);
    return Number.isFinite(n) && n >= 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

const logSize = (file: string) => {
  try {
    return statSync(file).size;
  } catch {
    return undefined;
  }
};

/** The log's lines written since `from` (at most the last 1 MiB of them). */
function linesSince(file: string, from: number | undefined): string[] {
  if (from === undefined) return [];
  try {
    const { buf } = readTail(file, from, 1024 * 1024);
    return buf.length ? buf.toString('utf8').split(/\r?\n|\r/) : [];
  } catch {
    return [];
  }
}

/**
 * Stop one registered server (an Entry of Registry.list()/find()). Safe to call twice; never
 * signals what it cannot prove ours. Removes the registry entry when everything is released.
 */
export async function stopInstance(reg: Registry, entry: Entry, opts: StopOptions = {}): Promise<StopOutcome> {
  const { inst, proof } = entry;
  const graceMs = opts.graceMs ?? (inst.role === 'router' ? routerDrainMsOf(inst) : graceMsOf(inst));
  const base: StopOutcome = {
    name: inst.name,
    pid: inst.pid,
    result: 'not-running',
    recovered: Boolean(entry.recovered),
    degraded: proof.state === 'degraded',
    requests: { kind: 'none' },
    evidence: [],
    graceMs,
    ms: 0,
    portFree: true,
    ...(inst.uds ? { uds: inst.uds } : {}),
    groupLeft: 0,
    gpuHolders: [],
    removed: false,
    forgotten: false,
    ...(entry.logDeleted ? { logDeleted: true } : {}),
  };
  const done = (o: StopOutcome) => (opts.onEvent?.({ type: 'stopped', outcome: o }), o);
  if (proof.state === 'unproven') {
    if (opts.forceForget) reg.remove('host', inst.name);
    return done({
      ...base,
      result: 'unproven',
      unproven: { code: proof.code, detail: proof.reason },
      removed: Boolean(opts.forceForget),
      forgotten: Boolean(opts.forceForget),
    });
  }
  if (inst.role === 'router') {
    if (!opts.router)
      throw new Error(
        `${inst.name} is a router: its stop needs the router's driver (StopOptions.router), and none was handed in`,
      );
    return done(await opts.router(reg, entry, base, opts));
  }
  // A replica: its runtime stops it (a host group's signals, a container's stop then rm), proving it first.
  const rt = runtimeOf(inst);
  const before = proof.state === 'alive' ? await inFlight(inst) : undefined;
  // a deleted log's name may hold another file now: its lines are not this server's evidence
  const from = entry.logDeleted ? undefined : logSize(inst.logFile);
  const t0 = performance.now();
  const st = await rt.stop(inst, graceMs, {
    signal: opts.signal,
    onTerm: () => opts.onEvent?.({ type: 'signalled', name: inst.name, signal: 'SIGTERM', inFlight: before, graceMs }),
  });
  const ms = Math.round(performance.now() - t0);
  if (st.how === 'unproven') return done({ ...base, result: 'unproven', unproven: st.unproven });
  if (st.how === 'killed') opts.onEvent?.({ type: 'signalled', name: inst.name, signal: 'SIGKILL', graceMs });
  const ended = st.how === 'killed' ? 'killed' : 'terminated';
  const ev = readShutdownLines(linesSince(inst.logFile, from));
  const portFree = await portFreed(inst);
  const holders =
    inst.engine === 'vllm' && st.members.length ? await (opts.gpuHolders ?? nvidiaGpuHolders)(st.members) : [];
  const removed = st.released && portFree && !holders.length;
  if (removed) reg.remove('host', inst.name);
  return done({
    ...base,
    result: st.how === 'killed' ? 'killed' : st.how === 'gone' ? 'not-running' : 'stopped',
    requests: st.how === 'gone' ? { kind: 'none' } : judgeRequests(ev, before, ended),
    evidence: ev.lines,
    inFlightBefore: before,
    ms,
    portFree,
    groupLeft: st.left,
    gpuHolders: holders,
    removed,
    ...(st.held ? { held: st.held } : {}),
  });
}

/**
 * Wait (bounded, 1 s unless told) until nothing listens on the port any more; whether it is free. A
 * replica on vLLM's --uds: until nothing listens on its socket, which is then removed (the next start
 * would have to; vLLM refuses a path that exists).
 */
export async function portFreed(at: number | { port: number; uds?: string }, deadlineMs = 1000): Promise<boolean> {
  const { port, uds } = typeof at === 'number' ? { port: at, uds: undefined } : at;
  if (uds) {
    const free = (
      await pollUntil(
        () => unixListening(uds) === false,
        (f) => f,
        { deadlineMs, intervalMs: 50 },
      )
    ).done;
    if (free) removeStaleSocket(uds);
    return free;
  }
  if (!port) return true;
  return (
    await pollUntil(
      () => !listeningPorts().has(port),
      (free) => free,
      { deadlineMs, intervalMs: 50 },
    )
  ).done;
}

/** On a real host: wait (bounded) until none of `pids` holds GPU memory; the ones still holding. */
async function nvidiaGpuHolders(pids: number[], boundMs = 5000): Promise<number[]> {
  if (!pids.length || !(await readGpus(2000))) return [];
  const host = new RealHost(2000);
  const holding = async () =>
    (await host.run(['nvidia-smi', '--query-compute-apps=pid', '--format=csv,noheader'])).stdout
      .split('\n')
      .map((l) => Number(l.trim()))
      .filter((p) => Number.isInteger(p) && pids.includes(p));
  return (await pollUntil(holding, (h) => !h.length, { deadlineMs: boundMs, intervalMs: 250 })).value;
}

/**
 * Stop several: the routers first (their soft stops at once), then the rest at once (a server's
 * drain does not wait for another's). A replica stopped while its router still drains would cut
 * the streams the router is letting finish. Outcomes in the order they were stopped.
 */
export async function stopInstances(
  reg: Registry,
  entries: readonly Entry[],
  opts: StopOptions = {},
): Promise<StopOutcome[]> {
  const phase = (es: readonly Entry[]) => Promise.all(es.map((e) => stopInstance(reg, e, opts)));
  const routers = await phase(entries.filter((e) => e.inst.role === 'router'));
  return [...routers, ...(await phase(entries.filter((e) => e.inst.role !== 'router')))];
}
