// A rolling restart behind the router: one replica at a time is drained in HAProxy (no new requests), waited on until
// nothing is in flight (HAProxy's current sessions for it AND its own vllm:num_requests_running/waiting gauges: a
// client that reaches it directly counts too), put in maintenance, stopped (a drain first), started from the plan (so a
// profile edited since the last start gives the new argv, and what changed is said), waited on until ready, prewarmed,
// deep-probed, and only then given traffic again. The first replica that does not come back healthy ends the restart:
// it stays out of rotation, the others keep serving, and the outcome says why.
import type { ServePlan } from '../engine/plan.js';
import { Registry, type Entry, type Instance, type RouterRecord } from '../engine/registry.js';
import { superviseReady } from '../engine/launch.js';
import { replicaRun } from '../engine/plan.js';
import { runtimeFor, type Runtime } from '../engine/runtime/index.js';
import type { Launched } from '../engine/runtime/child.js';
import { instanceOf, replicaUrl } from '../engine/serve.js';
import { replicaChanges } from '../engine/relaunch.js';
import {
  stopInstance,
  portFreed,
  heldText,
  type StopOutcome,
  type StopResult,
  type RequestsOutcome,
} from '../engine/stop.js';
import { diagnose, type Diagnosis } from '../engine/diagnose.js';
import { prewarm, gpuMemoryReader, type PrewarmResult, type PrewarmRequest } from '../health/prewarm.js';
import { probe, type ProbeResult } from '../health/probe.js';
import { targetFromInstance, type InstanceTarget } from '../engine/target.js';
import { http, type HttpResult } from '../client/http.js';
import { parseVllmMetrics } from '../client/metrics.js';
import { setServerState, showStat, serverState, type ServerStat } from './api.js';
import { UsageError } from '../errors.js';
import { pollUntil } from '../util/poll.js';

export type RollingEvent =
  | { type: 'drain'; replica: string }
  | { type: 'drained'; replica: string; ms: number; timedOut: boolean; inFlight: number; atStart: number }
  | { type: 'stopped'; replica: string; how: StopResult; requests: RequestsOutcome; ms: number }
  | { type: 'started'; replica: string; pid: number; argvChanged: boolean; changes: string[] }
  /** what its log says it is doing while it starts (loading weights, compiling, ...): the same phases serve shows */
  | { type: 'phase'; replica: string; phase: string }
  | { type: 'ready'; replica: string; ms: number }
  | { type: 'prewarm-request'; replica: string; request: PrewarmRequest }
  | { type: 'prewarm'; replica: string; result: PrewarmResult }
  | { type: 'probe'; replica: string; result: ProbeResult }
  | { type: 'back'; replica: string; ms: number; spent: Spent }
  | { type: 'aborted'; replica: string; cause: string };

/** Where one replica's restart spent its time, ms by step (the steps a person sees named). */
interface Spent {
  drain: number;
  stop: number;
  /** started until ready: vLLM's own start (weights, compile, graphs) */
  start: number;
  prewarm: number;
  probe: number;
  /** ready in HAProxy again: its own health checks passing */
  rejoin: number;
}

interface RollingReplica {
  name: string;
  port: number;
  /** the restart reached this replica */
  restarted: boolean;
  argvChanged?: boolean;
  /** what its restart changed (the argv's flags, the vLLM version, the image): empty, it started as it ran */
  changes?: string[];
  drainMs?: number;
  /** requests in flight on it when its drain began (HAProxy's count or vLLM's gauges, the larger) */
  inFlightAtDrain?: number;
  downMs?: number;
  spent?: Spent;
  pid?: number;
  failure?: Diagnosis;
  /** how its stop went: what happened to the requests still in flight (vLLM's [shutdown] evidence) */
  stop?: StopOutcome;
  probe?: ProbeResult;
  prewarm?: PrewarmResult;
}

export interface RollingOutcome {
  status: 'healthy' | 'unhealthy' | 'launch-failed' | 'interrupted';
  profile: string;
  replicas: RollingReplica[];
  /** the replica that did not come back, and why (the rest kept serving) */
  aborted?: { replica: string; cause: string };
  ms: number;
}

interface RollingRun {
  plan: ServePlan;
  router: Instance;
  /** the registered replicas of the profile, as they run now */
  entries: Entry[];
  secrets: Record<string, string>;
  /** how long to wait for a drained replica's requests in flight before stopping it anyway (its stop drains too) */
  drainTimeoutMs: number;
  /** SIGTERM, then SIGKILL after this long; default: the replica's own drain + teardown (graceMsOf) */
  stopTimeoutMs?: number;
  signal?: AbortSignal;
  onEvent?: (e: RollingEvent) => void;
  /** restart only these replicas (by name); the others are left as they run */
  only?: string[];
}

/** The plan must balance exactly the servers the running router knows: a rolling restart cannot change them. */
export function checkRollable(plan: ServePlan, router: Instance): void {
  const known = router.router?.servers ?? [];
  // a replica on a socket (vLLM --uds) is HAProxy's unix@PATH: moving between a port and a socket changes the router's
  // servers too
  const at = (x: { port: number; uds?: string }) => (x.uds ? `unix:${x.uds}` : String(x.port));
  const want = plan.replicas.map((p) => ({ name: p.name, port: p.port, uds: p.uds }));
  const same =
    known.length === want.length && want.every((w, i) => known[i]?.name === w.name && at(known[i]!) === at(w));
  if (!same)
    throw new UsageError(
      `${plan.profile.name}: the profile now has ${want.length} replica(s) on ${want.map(at).join(',')}, the running router balances ${known.map((k) => `${k.name}:${at(k)}`).join(', ') || 'none'}`,
      [
        `a rolling restart keeps the router's servers; sparkctl restart ${plan.profile.name} (without --rolling) restarts everything with the new layout`,
      ],
    );
}

/** In flight on one replica: HAProxy's sessions and queue for it, and vLLM's own running + waiting gauges. */
async function inFlight(
  socket: string,
  backend: string,
  name: string,
  url: string,
): Promise<{ router: number; engine: number | undefined; stat?: ServerStat }> {
  const stat = (await showStat(socket, 2000)).find((s) => s.backend === backend && s.server === name);
  return {
    router: (stat?.scur ?? 0) + (stat?.qcur ?? 0),
    engine: engineInFlight(await http(`${url}/metrics`, { timeoutMs: 2000 })),
    stat,
  };
}

/**
 * vLLM's running + waiting from its /metrics answer; undefined (unknown: the drain waits on) when it
 * cannot be read: no running gauge (a missing one is no 0), or a line that is not Prometheus text
 * (the server's bytes: no throw out of the rolling restart). Nothing listening is nothing in flight.
 */
export function engineInFlight(m: HttpResult): number | undefined {
  if (!m.ok) return m.error === 'refused' ? 0 : undefined;
  if (m.status !== 200) return undefined;
  try {
    const v = parseVllmMetrics(m.body);
    return v.running === undefined ? undefined : v.running + (v.waiting ?? 0);
  } catch {
    return undefined;
  }
}

async function waitDrained(
  run: RollingRun,
  name: string,
  url: string,
): Promise<{ ms: number; timedOut: boolean; inFlight: number; atStart: number }> {
  const r = run.router.router!;
  let atStart: number | undefined;
  const read = async () => {
    const f = await inFlight(r.socket, r.backend, name, url);
    atStart ??= Math.max(f.router, f.engine ?? 0);
    return f;
  };
  // The gauge is the engine's word; HAProxy's count covers the moment before vLLM sees a request.
  const p = await pollUntil(read, (f) => f.router === 0 && f.engine === 0, {
    deadlineMs: run.drainTimeoutMs,
    intervalMs: 100,
    signal: run.signal,
  });
  const left = Math.max(p.value.router, p.value.engine ?? 0);
  return { ms: Math.round(p.ms), timedOut: !p.done, inFlight: p.done ? 0 : left, atStart: atStart ?? left };
}

/** Until HAProxy has it UP again (its own /health checks passed), or the deadline. */
async function waitUp(run: RollingRun, name: string, deadlineMs: number): Promise<{ ok: boolean; last?: ServerStat }> {
  const r = run.router.router!;
  const p = await pollUntil(
    async () => (await showStat(r.socket, 2000)).find((s) => s.backend === r.backend && s.server === name),
    (last) => !!last && serverState(last) === 'up',
    { deadlineMs, intervalMs: 50, signal: run.signal },
  );
  return { ok: p.done, last: p.value };
}

type ReplicaPlan = ServePlan['replicas'][number];

/**
 * What every replica's restart works with: the run and its plan, the router's runtime API, the registry, the runtime.
 */
interface Rolling {
  run: RollingRun;
  plan: ServePlan;
  router: RouterRecord;
  registry: Registry;
  rt: Runtime;
  /** what the plan changes on each replica, read before any of them stopped */
  changes: Array<{ name: string; changes: string[] }>;
  emit: (e: RollingEvent) => void;
}

/** Why one replica's restart ends the rolling restart, and the outcome's status. */
interface Failed {
  cause: string;
  status: RollingOutcome['status'];
}

const failed = (cause: string, status: RollingOutcome['status'] = 'launch-failed'): Failed => ({ cause, status });

export async function rollingRestart(run: RollingRun): Promise<RollingOutcome> {
  const { plan } = run;
  const r = run.router.router;
  if (!r) throw new UsageError(`${run.router.name} is not a router entry`);
  checkRollable(plan, run.router);
  const emit = (e: RollingEvent) => run.onEvent?.(e);
  const started = Date.now();
  const out: RollingReplica[] = plan.replicas.map((p) => ({ name: p.name, port: p.port, restarted: false }));
  const chosen = (name: string) => !run.only || run.only.includes(name);
  // before any replica stops: each one's entry is replaced by its new one as it comes back
  const rolling: Rolling = {
    run,
    plan,
    router: r,
    registry: new Registry(plan.stateDir),
    rt: runtimeFor(plan),
    changes: replicaChanges(plan, run.entries),
    emit,
  };
  const done = (status: RollingOutcome['status'], aborted?: RollingOutcome['aborted']): RollingOutcome => ({
    status,
    profile: plan.profile.name,
    replicas: out,
    aborted,
    ms: Date.now() - started,
  });

  for (const [i, p] of plan.replicas.entries()) {
    if (run.signal?.aborted) return done('interrupted');
    if (!chosen(p.name)) continue;
    const f = await restartReplica(rolling, p, out[i]!);
    if (f) {
      emit({ type: 'aborted', replica: p.name, cause: f.cause });
      return done(f.status, { replica: p.name, cause: f.cause });
    }
  }
  return done('healthy');
}

/** One replica, drained to back in rotation; what it did goes into `rep`. The first step that fails says why. */
async function restartReplica(x: Rolling, p: ReplicaPlan, rep: RollingReplica): Promise<Failed | undefined> {
  const { router: r } = x;
  rep.restarted = true;
  // 1. no new requests; 2. wait for the ones in flight
  const drained = await drainReplica(x, p, rep);
  // 3. out of rotation (its checks stop flapping it while it restarts); 4. stop it
  await setServerState(r.socket, r.backend, p.name, 'maint');
  const down = Date.now();
  const spent: Spent = { drain: drained.ms, stop: 0, start: 0, prewarm: 0, probe: 0, rejoin: 0 };
  const stopped = await stopReplica(x, p, rep, spent);
  if (stopped) return stopped;
  // 5. start it from the plan: a profile edited since gives its new argv
  const t = await startReplica(x, p, rep, spent);
  if ('cause' in t) return t;
  // 6. warm, 7. deep probe, straight at the replica (it gets no traffic yet)
  const checked = await checkReplica(x, p, t, rep, spent);
  if (checked) return checked;
  // 8. traffic again, once HAProxy's own checks agree
  const back = await rejoinReplica(x, p, spent);
  if (back) return back;
  rep.downMs = Date.now() - down;
  rep.spent = spent;
  x.emit({ type: 'back', replica: p.name, ms: rep.downMs, spent });
  return undefined;
}

/** Drain in HAProxy, then wait until nothing is in flight on it (or the drain's deadline). */
async function drainReplica(x: Rolling, p: ReplicaPlan, rep: RollingReplica) {
  const { router: r } = x;
  x.emit({ type: 'drain', replica: p.name });
  await setServerState(r.socket, r.backend, p.name, 'drain');
  const drained = await waitDrained(x.run, p.name, replicaUrl(x.plan, p));
  rep.drainMs = drained.ms;
  rep.inFlightAtDrain = drained.atStart;
  x.emit({ type: 'drained', replica: p.name, ...drained });
  return drained;
}

/** Stop the running replica (if it is registered), wait for its port, and take its entry out of the registry. */
async function stopReplica(x: Rolling, p: ReplicaPlan, rep: RollingReplica, spent: Spent): Promise<Failed | undefined> {
  const { run, registry } = x;
  const entry = run.entries.find((e) => e.inst.name === p.name);
  const t0 = Date.now();
  if (entry) {
    // The one stop (engine/stop.ts): proven identity, vLLM's own drain (--shutdown-timeout), SIGKILL after the grace.
    const st = await stopInstance(registry, entry, { graceMs: run.stopTimeoutMs, signal: run.signal });
    rep.stop = st;
    if (st.result === 'unproven')
      return failed(
        `its registry entry cannot be proven ours (${st.unproven?.detail ?? 'unproven'}): not signalled; it is out of rotation`,
      );
    const held = heldText(st);
    if (held) return failed(`it did not release everything after its stop (${held}): out of rotation`);
    x.emit({ type: 'stopped', replica: p.name, how: st.result, requests: st.requests, ms: Date.now() - t0 });
  } else x.emit({ type: 'stopped', replica: p.name, how: 'not-running', requests: { kind: 'none' }, ms: 0 });
  await portFreed(p, 5000);
  spent.stop = Date.now() - t0;
  registry.remove('host', p.name);
  return undefined;
}

/**
 * Launch it from the plan and wait until it is ready; the target to warm and probe it at. One that does not get ready
 * is stopped again.
 */
async function startReplica(
  x: Rolling,
  p: ReplicaPlan,
  rep: RollingReplica,
  spent: Spent,
): Promise<Failed | InstanceTarget> {
  const { run, plan, registry, rt, emit } = x;
  const t1 = Date.now();
  const release = await registry.lock();
  let l: Launched;
  try {
    l = rt.launch(replicaRun(plan, p), run.secrets, (i) => registry.write('host', instanceOf(plan, p, i)));
  } finally {
    release();
  }
  rep.pid = l.pid;
  rep.changes = x.changes.find((c) => c.name === p.name)?.changes ?? [];
  rep.argvChanged = rep.changes.length > 0;
  emit({ type: 'started', replica: p.name, pid: l.pid, argvChanged: rep.argvChanged, changes: rep.changes });
  const ready = await superviseReady(l, {
    // the replica's own address: its socket on vLLM's --uds (a port then answers nothing), else its loopback port
    url: replicaUrl(plan, p),
    servedName: plan.servedName,
    apiKey: run.secrets.VLLM_API_KEY,
    deadlineMs: plan.readyTimeoutMs,
    stallMs: plan.stallTimeoutMs,
    signal: run.signal,
    ours: rt.ours(l),
    onPhase: (phase) => emit({ type: 'phase', replica: p.name, phase }),
  });
  spent.start = Date.now() - t1;
  if (!ready.ok) {
    rep.failure = diagnose(ready, l.tail.text());
    await rt.stop(l, 5000);
    registry.remove('host', p.name);
    return failed(
      `${p.name} did not become ready: ${rep.failure.cause ?? rep.failure.detail}`,
      ready.reason === 'interrupted' ? 'interrupted' : 'launch-failed',
    );
  }
  l.child.unref();
  const inst = registry.find(p.name)[0]?.inst;
  if (inst) registry.write('host', { ...inst, readyAt: new Date().toISOString() });
  emit({ type: 'ready', replica: p.name, ms: ready.ms });
  return { ...targetFromInstance(inst ?? instanceOf(plan, p, l)), apiKey: run.secrets.VLLM_API_KEY };
}

/** Prewarm (when the plan does) and deep-probe it; anything but a healthy probe keeps it out of rotation. */
async function checkReplica(
  x: Rolling,
  p: ReplicaPlan,
  t: InstanceTarget,
  rep: RollingReplica,
  spent: Spent,
): Promise<Failed | undefined> {
  const { plan, emit } = x;
  const sim = plan.engine === 'sim';
  const t2 = Date.now();
  if (plan.prewarm) {
    const onRequest = (request: PrewarmRequest) => emit({ type: 'prewarm-request', replica: p.name, request });
    rep.prewarm = await prewarm(t, plan.profile.prewarm, onRequest, sim ? undefined : gpuMemoryReader(t.gpus));
    emit({ type: 'prewarm', replica: p.name, result: rep.prewarm });
  }
  const t3 = Date.now();
  spent.prewarm = t3 - t2;
  rep.probe = await probe(t, {
    ...plan.profile.probe,
    gpuMemoryUtilization: plan.profile.engine.gpuMemoryUtilization,
    gpus: !sim,
  });
  spent.probe = Date.now() - t3;
  emit({ type: 'probe', replica: p.name, result: rep.probe });
  if (rep.probe.state !== 'healthy') {
    const bad = rep.probe.steps.filter((s) => s.status === 'fail').map((s) => `${s.step}: ${s.detail}`);
    return failed(
      `${p.name} came back ${rep.probe.state} (${bad.join('; ') || 'see the probe'}): left out of rotation`,
      'unhealthy',
    );
  }
  return undefined;
}

/** Ready in HAProxy, then wait until its own checks see it UP; one they never do goes back to maintenance. */
async function rejoinReplica(x: Rolling, p: ReplicaPlan, spent: Spent): Promise<Failed | undefined> {
  const { router: r, plan } = x;
  const checkMs = plan.router?.settings.checkIntervalMs ?? 2000;
  await setServerState(r.socket, r.backend, p.name, 'ready');
  const t4 = Date.now();
  const up = await waitUp(x.run, p.name, checkMs * 4 + 5000);
  spent.rejoin = Date.now() - t4;
  if (!up.ok) {
    await setServerState(r.socket, r.backend, p.name, 'maint');
    return failed(
      `HAProxy did not see ${p.name} UP again (${up.last ? `${up.last.status}, ${up.last.checkStatus} ${up.last.lastCheck}`.trim() : 'not in show stat'}): left out of rotation`,
      'unhealthy',
    );
  }
  return undefined;
}
