// One reading of one registered server, the cheap way: its processes (from the registry's identity
// proof, and /proc for a stopped member), GET /health and GET /metrics, each with a deadline and a
// size bound; and who else owns it right now (its router's or the gateway's HAProxy). Every byte a
// server or HAProxy returns is hostile: an answer that cannot be read is a finding, never "healthy".
import { readTextSync, READ_LIMITS } from '../util/read.js';
import { statFields } from '../util/pid.js';
import { http } from '../client/http.js';
import { groupMembers } from '../engine/runtime/proc.js';
import { runtimeOf } from '../engine/runtime/index.js';
import { targetFromInstance } from '../engine/target.js';
import type { ClusterRecord, Entry } from '../engine/registry.js';
import { showStat, serverState, type ServerStat } from '../router/api.js';
import { readMetrics } from './signals.js';
import type { Owner, Reading } from './verdict.js';
import { asciiLine } from '../util/control.js';

/** /metrics of a big server is ~100 KB; more than this is no answer a watcher needs */
const METRICS_MAX_BYTES = 2 * 1024 * 1024;

/**
 * The engine-core process of a vLLM server, by proof rather than by its name alone: a child of the
 * API server (whose pid the registry proved by its start time), in the same process group, started
 * after it, and named VLLM::EngineCore by vLLM's setproctitle (its comm is cut to 15 bytes). A pid
 * reused by anything else fails the parent, group or start-time test. Undefined when there is none
 * (not a vLLM, not started yet, or gone).
 */
export function engineCoreOf(apiPid: number, pgid: number): { pid: number; startTime: number } | undefined {
  const api = statFields(apiPid);
  if (!api || Number(api[2]) !== pgid) return undefined;
  const apiStart = Number(api[19]);
  for (const pid of groupMembers(pgid)) {
    const f = statFields(pid);
    if (!f || Number(f[1]) !== apiPid || Number(f[2]) !== pgid || !(Number(f[19]) >= apiStart)) continue;
    let name = '';
    try {
      name = readTextSync(`/proc/${pid}/comm`, { maxBytes: READ_LIMITS.proc }).trim();
    } catch {
      continue;
    }
    if (name === 'VLLM::EngineCor' || name.startsWith('VLLM::EngineCore')) return { pid, startTime: Number(f[19]) };
  }
  return undefined;
}

/** A member of the group stopped by a signal (state T, t: SIGSTOP, a debugger), by pid and name. */
function stoppedMember(pgid: number): string | undefined {
  if (!pgid) return undefined;
  for (const pid of groupMembers(pgid)) {
    const f = statFields(pid);
    if (f?.[0] !== 'T' && f?.[0] !== 't') continue;
    let name = '';
    try {
      name = asciiLine(readTextSync(`/proc/${pid}/comm`, { maxBytes: READ_LIMITS.proc }).trim(), 64);
    } catch {
      /* gone meanwhile */
    }
    return `${name || 'process'} pid ${pid}`;
  }
  return undefined;
}

/** Servers held by a HAProxy in drain or maint, by server name (the instance name). */
export async function heldBy(socket: string, timeoutMs = 1000): Promise<Map<string, 'drain' | 'maint'>> {
  const out = new Map<string, 'drain' | 'maint'>();
  let stats: ServerStat[];
  try {
    stats = await showStat(socket, timeoutMs);
  } catch {
    return out;
  }
  for (const s of stats) {
    const st = serverState(s);
    if (st === 'drain' || st === 'maint') out.set(s.server, st);
  }
  return out;
}

interface ReadOptions {
  timeoutMs: number;
  /** servers the profile's router holds out of rotation (not by this watcher) */
  router?: Map<string, 'drain' | 'maint'>;
  /** servers the gateway holds (asleep or waking) */
  gateway?: Map<string, 'drain' | 'maint'>;
  /**
   * the gateway keeper's own word for each on-demand profile (its record): starting, evicting, sleeping, running,
   * stopped
   */
  gatewayStates?: Map<string, string>;
  now?: () => number;
}

/**
 * Who owns the server's life now, if not the watcher. The gateway first: its keeper's record says
 * when it is starting or evicting a profile (on demand), its HAProxy when it holds a server asleep
 * (maint) or on its way out (drain). Then the profile's router (a rolling restart or an operator),
 * then serve (not ready yet).
 */
export function ownerOf(
  e: Pick<Entry, 'inst'>,
  o: Pick<ReadOptions, 'router' | 'gateway' | 'gatewayStates'>,
): Owner | undefined {
  const word = o.gatewayStates?.get(e.inst.profile);
  if (word === 'starting' || word === 'evicting' || word === 'sleeping') return { by: 'gateway', state: word };
  const g = o.gateway?.get(e.inst.name);
  if (g) return { by: 'gateway', state: g === 'maint' ? 'sleeping' : 'stopping' };
  const r = o.router?.get(e.inst.name);
  if (r) return { by: 'router', state: r };
  if (!e.inst.readyAt) return { by: 'serve', state: 'loading' };
  return undefined;
}

/** The cheap reading: processes, /health, /metrics. */
export async function readServer(e: Entry, o: ReadOptions): Promise<Reading> {
  const at = (o.now ?? Date.now)();
  const owner = ownerOf(e, o);
  const proof = e.proof.state;
  // what degraded means is the runtime's word (engine/runtime: a container that exited is the server gone; a group with
  // members gone is not)
  const degraded = proof === 'degraded' ? runtimeOf(e.inst).degraded(e.inst) : undefined;
  const exited = Boolean(degraded?.gone);
  const stopped = (proof === 'alive' || proof === 'degraded') && !exited ? stoppedMember(e.inst.pgid) : undefined;
  const process: Reading['process'] =
    proof === 'gone' || exited
      ? 'gone'
      : stopped
        ? 'stopped'
        : proof === 'alive' || proof === 'degraded'
          ? 'alive'
          : 'unknown';
  const detail = degraded?.detail;
  const base: Reading = { at, process, processDetail: stopped ?? detail, health: 'unreachable', owner };
  if (process === 'gone') return base;
  return { ...base, ...(await readApi(targetFromInstance(e.inst).url, o.timeoutMs)) };
}

/**
 * GET /health and GET /metrics of one server, each with the deadline and a size bound. The answers
 * are hostile: a /metrics that cannot be read, or that says what no server has, is no numbers (with
 * why), so the verdict is unknown, never healthy on numbers that were never readings.
 */
export async function readApi(
  url: string,
  timeoutMs: number,
): Promise<Pick<Reading, 'health' | 'healthDetail' | 'metrics' | 'metricsDetail'>> {
  const [h, m] = await Promise.all([
    http(`${url}/health`, { timeoutMs, maxBytes: 4096 }),
    http(`${url}/metrics`, { timeoutMs, maxBytes: METRICS_MAX_BYTES }),
  ]);
  const health: Reading['health'] = !h.ok ? 'unreachable' : h.status === 200 ? 'ok' : 'fail';
  const healthDetail = !h.ok ? h.message.slice(0, 200) : h.status === 200 ? undefined : `HTTP ${h.status}`;
  const read = m.ok && m.status === 200 ? readMetrics(m.body) : undefined;
  const metricsDetail = !m.ok ? m.message.slice(0, 200) : m.status !== 200 ? `HTTP ${m.status}` : read?.problem;
  return { health, healthDetail, metrics: read?.numbers, ...(metricsDetail ? { metricsDetail } : {}) };
}

/** A multi-node server's ranks, as its record's executor reads them on their nodes (undefined: not known this time). */
export type RankReading = { alive: number; total: number; detail?: string } | undefined;

/**
 * The cheap reading of a multi-node server (a cluster record): every rank's process (read on its
 * node by the hand the verb gives, through the record: pid, start time, container), and the head's
 * /health and /metrics. Its processes are not this host's to read from /proc: a rank gone is the
 * process signal; the API answering with nothing moving, the progress one.
 */
export async function readCluster(rec: ClusterRecord, ranks: RankReading, o: ReadOptions): Promise<Reading> {
  const at = (o.now ?? Date.now)();
  const word = o.gatewayStates?.get(rec.profile);
  const owner: Owner | undefined =
    word === 'starting' || word === 'evicting' || word === 'sleeping' ? { by: 'gateway', state: word } : undefined;
  const base: Reading = {
    at,
    process: ranks ? (ranks.alive === 0 ? 'gone' : 'alive') : 'unknown',
    processDetail: ranks?.detail,
    ...(ranks ? { ranks: { alive: ranks.alive, total: ranks.total } } : {}),
    health: 'unreachable',
    owner,
  };
  if (base.process === 'gone') return base;
  return { ...base, ...(await readApi(rec.url, o.timeoutMs)) };
}
