// serve: (command: flags -> plan) -> launch every group -> ready -> prewarm -> deep probe, returning
// the one outcome and reporting the one event union. `serve` takes any plan (plan.ts PlanCore) and
// runs it through one loop (servePlaced): a plan on this host (its replicas, each a group on the
// local node: localPlaced) or over nodes (its groups on the nodes file's nodes: serveOnNodes, over
// the placement of the executor the plan names, cluster/). It never prints,
// exits, installs signal handlers or picks exit codes: cancellation is an AbortSignal, the command renders.
// A server we launched is never orphaned: each is registered the moment it is spawned, and a
// failure or a cancellation before "ready" stops every group we started.
import type { ClusterPlan, Plan, PlanCore, ServePlan } from './plan.js';
import { replicaAddress, shutdownTimeoutOf, type ReplicaPlan } from '../profiles/render.js';
import { routerPorts, portRoles } from '../profiles/router.js';
import type { RouterDriver, RouterLaunched } from './router-driver.js';
import { pause } from '../util/pause.js';
import { unixUrl } from '../util/socket-url.js';
import { Registry, type Instance } from './registry.js';
import { localView, watchReady, type LaunchView, type WatchOptions } from './launch.js';
import type { StartClock } from './phases.js';
import type { Launched } from './runtime/child.js';
import { runtimeFor, runtimeOf, type Stopped } from './runtime/index.js';
import { diagnose, failedBefore, type Diagnosis } from './diagnose.js';
import { graceMsOf } from './stop.js';
import { replicaRun } from './plan.js';
import {
  prewarm,
  gpuMemoryReader,
  type PrewarmRequest,
  type PrewarmResult,
  type PrewarmSettings,
} from '../health/prewarm.js';
import { probe, type ProbeResult, type ProbeSettings } from '../health/probe.js';
import { targetFromUrl, type Target } from '../health/target.js';
import { targetFromInstance } from './target.js';
import type { ReadyResult } from '../client/ready.js';
import type { ClusterRecord } from './registry.js';
import { log } from '../output/logger.js';
import { UsageError } from '../errors.js';
import {
  judgeColocation,
  serverNeed,
  largestShare,
  shareBase,
  type GpuMemory,
  type ServerNeed,
} from '../profiles/colocate.js';
import type { EventSink, ReplicaOutcome, ServeOutcome } from './events.js';
import { prepareStart, startReports, StartRecord, type GroupAt } from './start.js';
import { executorFor, finishStarts, nodesOutcome, type GroupLaunch, type NodeWatch } from './cluster/index.js';
import type { ClusterView } from './cluster/ray-plan.js';
import { groupsOf, launchInOrder, nodeName, stepOf, type GroupStarted, type ServerGroup } from './groups.js';

interface ServeRun {
  /** cancellation (Ctrl-C / SIGTERM): stop what was started, gracefully */
  signal: AbortSignal;
  /** a second Ctrl-C: stop at once (SIGKILL), do not wait for a drain */
  force?: AbortSignal;
  onEvent?: EventSink;
  /** VLLM_API_KEY from the variable the profile names; travels in the environment only */
  secrets: Record<string, string>;
  /** the router in front of the replicas (HAProxy: src/router/driver.ts); needed when the plan has one */
  router?: RouterDriver;
}

/**
 * Runs any plan with the same run: its cancellation, its events and its secrets (the key travels in
 * ServeRun.secrets on either placement, never in the plan as built).
 */
export function serve(plan: Plan, run: ServeRun): Promise<ServeOutcome> {
  if (plan.placement === 'local') return serveLocal(plan, run);
  return serveOnNodes({ ...plan, apiKey: run.secrets.VLLM_API_KEY }, run);
}

/** A group as its start clock names it: its node by name over nodes (a replica here has none). */
const groupAt = (g: ServerGroup): GroupAt => ({
  index: g.index,
  server: g.server,
  ...(g.node.kind === 'node' ? { node: nodeName(g) } : {}),
  ready: g.ready,
});

/** What the one readiness watch needs of an endpoint, wherever its groups run. */
interface Endpoint {
  replica: string;
  /** over nodes: the head's node (its phases are said per node) */
  node?: string;
  url: string;
  /** its log and the end of every group raced against it (launch.ts LaunchView) */
  view: LaunchView;
  ours?: WatchOptions['ours'];
  hung?: WatchOptions['hung'];
  clock?: StartClock;
  /** a node is asked over ssh: its readiness every 250 ms (its log and liveness are rate-limited by the view) */
  pollMs?: number;
}

/**
 * One endpoint's readiness (launch.ts watchReady) under the plan's deadline and stall timer, its phases said as events.
 */
function watchEndpoint(
  plan: PlanCore,
  e: Endpoint,
  run: { apiKey?: string; signal?: AbortSignal },
  emit: EventSink,
): Promise<ReadyResult> {
  return watchReady(e.view, {
    url: e.url,
    servedName: plan.servedName,
    apiKey: run.apiKey,
    deadlineMs: plan.readyTimeoutMs,
    stallMs: plan.stallTimeoutMs,
    signal: run.signal,
    pollMs: e.pollMs,
    clock: e.clock,
    onPhase: (phase) =>
      emit({ type: 'phase', replica: e.replica, ...(e.node === undefined ? {} : { node: e.node }), phase }),
    ours: e.ours,
    hung: e.hung,
  });
}

/**
 * Where a plan's groups run, as strategy for serve's one loop (servePlaced): this host (localPlaced)
 * or nodes (nodesPlaced, over the executor's NodesPlacement, cluster/). The loop owns the order;
 * each member is what one step does differently there.
 */
export interface Placed<H> {
  /** the groups that run a vLLM of their own, in start order */
  groups: ServerGroup[];
  /** the start's clocks, one per group, begun at its launch (start.ts); what was prepared is said first */
  start: StartRecord;
  /** refused before anything starts: the outcome (bad input throws) */
  refuse(): Promise<ServeOutcome | undefined>;
  /** what runs before any group's vLLM (Ray: its start on every node, then the wait for the whole cluster) */
  before(): Promise<Diagnosis | undefined>;
  launch(g: ServerGroup): Promise<GroupStarted<H>>;
  /** a group started: said (and, on this host, registered at its spawn) */
  launched(h: H, g: ServerGroup): void;
  /** this host: once cancelled no further group is launched, and the serve is interrupted */
  cancel?: AbortSignal;
  /**
   * every group launched: what stop and status read is written (this host: each was registered at its spawn; the
   * registry's lock is released)
   */
  record(hs: H[]): void;
  /** the endpoints the one watch asks, each raced against the end of every group */
  endpoints(hs: H[]): Endpoint[];
  /** a failure before the watch (before, a launch): what started stopped; the outcome */
  failed(f: Diagnosis, hs: H[]): Promise<ServeOutcome>;
  /** not ready, or cancelled: what started stopped; the outcome saying why */
  notReady(hs: H[], results: ReadyResult[], interrupted: boolean): Promise<ServeOutcome>;
  /** every endpoint ready: each said (this host: its entry's readyAt); how they are warmed and probed (afterReady) */
  ready(hs: H[], results: ReadyResult[]): Promise<Serving>;
  /** a throw on the way (bad input under the lock, a spawn that threw): what started stopped, then the throw goes on */
  abandon(): Promise<void>;
}

/**
 * Every endpoint ready, as the one after-ready step (afterReady) takes them: what differs by placement
 * is values (the endpoints, the settings) and strategy (this host's --foreground and router).
 */
type Serving =
  /** this host --foreground: attached until the servers end (the router first; no prewarm, no probe) */
  { attach: () => Promise<ServeOutcome> } | Warming;

interface Warming {
  /** the ready endpoints, as prewarm and the deep probe ask them (with the plan's settings) */
  endpoints: Warmed[];
  /**
   * warm, before the probe (this host: the router, so that no client meets a cold replica); a failure's outcome ends
   * the serve
   */
  warm?: () => Promise<ServeOutcome | undefined>;
  /** each endpoint's prewarm (where it ran) and probe, in endpoint order: the outcome */
  outcome(prewarmed: PrewarmResult[], probed: ProbeResult[]): Promise<ServeOutcome>;
}

/**
 * After ready, for every placement: prewarm each endpoint (where the plan asks), what must follow warmth, one deep
 * probe of each; the outcome.
 */
async function afterReady(plan: PlanCore, s: Serving, emit: EventSink): Promise<ServeOutcome> {
  if ('attach' in s) return s.attach();
  const prewarmed = plan.prewarm ? await prewarmEach(s.endpoints, plan.profile.prewarm, emit) : [];
  const held = await s.warm?.();
  if (held) return held;
  return s.outcome(prewarmed, await probeEach(s.endpoints, plan.probe, emit));
}

/** A sink that times each first token on the start's clocks (start.ts observe) before it says the event. */
const observing =
  (start: StartRecord, sink?: EventSink): EventSink =>
  (e) => {
    start.observe(e);
    sink?.(e);
  };

/**
 * serve's one loop, for every placement: refused, or what runs before started; every group that runs
 * a vLLM launched in its `starts` order (launchInOrder); recorded; one readiness watch per endpoint
 * (watchEndpoint), each raced against the end of every group with the stall and hang watch; on a
 * failure or a cancellation, stop what started; then prewarm and probe the endpoints (afterReady).
 */
export async function servePlaced<H>(
  plan: PlanCore,
  p: Placed<H>,
  run: { apiKey?: string; signal?: AbortSignal },
  emit: EventSink,
): Promise<ServeOutcome> {
  try {
    return await placedLoop(plan, p, run, emit);
  } finally {
    // every end of the loop (an outcome, a failure, a cancellation, a throw after the launch): no log
    // of this start is followed past it (over nodes: an ssh to each worker every 1.5 s, for the life of
    // the process). The reports, where an end took them, stopped it already; this waits for nothing then.
    await p.start.stop();
  }
}

async function placedLoop<H>(
  plan: PlanCore,
  p: Placed<H>,
  run: { apiKey?: string; signal?: AbortSignal },
  emit: EventSink,
): Promise<ServeOutcome> {
  if (p.start.notes.length) emit({ type: 'cold-start', notes: p.start.notes });
  let hs: H[];
  try {
    const refused = await p.refuse();
    if (refused) return refused;
    const before = await p.before();
    if (before) return await p.failed(before, []);
    const l = await launchInOrder(
      p.groups,
      (g) => p.launch(g),
      (h, g) => p.launched(h, g),
      p.cancel,
    );
    if (l.failure) return await p.failed(l.failure, l.refs);
    hs = l.refs;
    p.record(hs);
  } catch (e) {
    await p.abandon();
    throw e;
  }
  const endpoints = p.endpoints(hs);
  const results = await Promise.all(endpoints.map((e) => watchEndpoint(plan, e, run, emit)));
  const interrupted = !!p.cancel?.aborted || hs.length < p.groups.length;
  if (interrupted || results.some((r) => !r.ok)) return p.notReady(hs, results, interrupted);
  for (const e of endpoints) p.start.clockOf(e.replica)?.ready();
  return afterReady(plan, await p.ready(hs, results), emit);
}

/**
 * A plan over nodes, through its executor's placement (cluster/: native, Ray on the hosts, Ray in
 * containers): the head's endpoint is the one the watch asks; a failure says every group's start
 * and stops what started (the groups, then what `before` started); the record goes with it.
 */
function serveOnNodes(plan: ClusterPlan, run: ServeRun): Promise<ServeOutcome> {
  const ctx = { emit: run.onEvent, signal: run.signal };
  // each group's start timed from its own launch (nothing is prepared here: each node's caches are its launch line's)
  const start = new StartRecord();
  const emit = observing(start, run.onEvent);
  const place = executorFor(plan.executor).placement(plan, ctx);
  const started = Date.now();
  const registry = new Registry(plan.stateDir);
  let view: ClusterView | undefined;
  let record: ClusterRecord | undefined;
  let watch: NodeWatch | undefined;
  /** every group started so far (told by the loop as each starts): what a throw on the way stops */
  const begun: GroupLaunch[] = [];
  // as on this host: `stopping` once, then each node's cleanup as the placement stops what started
  const failed = async (failure: Diagnosis, launched: GroupLaunch[], why: 'failed' | 'interrupted' = 'failed') => {
    const starts = record ? await finishStarts(plan, start, emit) : undefined;
    emit({ type: 'stopping', why, replicas: launched.length });
    await place.stop(launched, record);
    if (record) registry.remove('nodes', plan.profile.name);
    return nodesOutcome(plan, { failure, record, starts });
  };
  const placed: Placed<GroupLaunch> = {
    groups: groupsOf(plan).filter((g) => g.vllm),
    start,
    refuse: async () => {
      const refused = await place.refuse(registry);
      return refused ? nodesOutcome(plan, { failure: refused }) : undefined;
    },
    before: async () => {
      const b = await place.before();
      view = b.view;
      return b.failure;
    },
    launch: (g) => place.launch(stepOf(g), g.index, start.launched(groupAt(g))),
    launched: (h) => {
      begun.push(h);
      emit({
        type: 'launched',
        replica: plan.replica.name,
        port: plan.replica.port,
        gpus: [],
        node: h.node,
        pid: h.pid,
        logFile: h.logFile,
        ...(h.rank === undefined ? {} : { rank: h.rank }),
      });
    },
    record: (hs) => {
      record = place.record(hs);
      registry.write('nodes', record);
    },
    endpoints: () => {
      watch = place.watch(record!, start);
      return [
        {
          replica: plan.replica.name,
          node: plan.nf.head.name,
          url: record!.url,
          pollMs: 250,
          clock: start.clockOf(plan.replica.name),
          ...watch,
        },
      ];
    },
    failed,
    notReady: async (hs, [r]) =>
      !r || r.ok || r.reason === 'interrupted'
        ? failed(failedBefore('interrupted', 'cancelled while waiting for vLLM to be ready', []), hs, 'interrupted')
        : failed(await watch!.failure(r), hs),
    ready: async () => nodesServing(plan, record!, place.joined(record!, view), Date.now() - started, emit, start),
    // a throw on the way (a bug): what started is stopped (the groups, then what `before` started) and unrecorded, then
    // the throw goes on
    abandon: async () => {
      emit({ type: 'stopping', why: 'failed', replicas: begun.length });
      await place.stop(begun, record);
      if (record) registry.remove('nodes', plan.profile.name);
    },
  };
  return servePlaced(plan, placed, { apiKey: plan.apiKey, signal: run.signal }, emit);
}

/** The driver for a plan with a router; undefined for one without. */
function routerDriverOf(plan: ServePlan, run: ServeRun): RouterDriver | undefined {
  if (!plan.router) return undefined;
  if (!run.router)
    throw new Error(
      `${plan.profile.name}: the plan has a router and serve was handed no router driver (ServeRun.router)`,
    );
  return run.router;
}

export function instanceOf(plan: ServePlan, p: ReplicaPlan, l: Launched): Instance {
  const prof = plan.profile;
  const e = prof.engine;
  return {
    version: 1,
    name: p.name,
    profile: prof.name,
    replica: p.index,
    // what proves it ours: its pid and start time, or its container (whose processes are the runtime's)
    ...runtimeOf(l).recordOf(l),
    host: replicaAddress(prof, p.index).host,
    port: p.port,
    ...(p.uds ? { uds: p.uds } : {}),
    url: replicaUrl(plan, p),
    servedName: plan.servedName,
    gpus: p.gpus,
    logFile: p.logFile,
    engine: plan.engine,
    argv: p.argv,
    apiKeyEnv: prof.server.apiKeyEnv,
    startedAt: new Date().toISOString(),
    readyTimeoutSeconds: Math.ceil(plan.readyTimeoutMs / 1000),
    probe: { ...prof.probe, gpuMemoryUtilization: e.gpuMemoryUtilization },
    prewarm: prof.prewarm,
    maxModelLen: e.maxModelLen ?? prof.model.maxContext,
    shutdownTimeoutSeconds: shutdownTimeoutOf(p.argv),
    ...(plan.router ? { routedAt: { host: plan.router.bind.host, port: plan.router.bind.port } } : {}),
    ...(plan.launch ? { launch: plan.launch } : {}),
  };
}

export const replicaUrl = (plan: ServePlan, p: ReplicaPlan) => {
  if (p.uds) return unixUrl(p.uds);
  const host = replicaAddress(plan.profile, p.index).host;
  return `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${p.port}`;
};

/** The GPU a plan's host has, for the co-location rule (DGX Spark: unified memory, shared with the CPU). */
function gpuMemoryOf(plan: Pick<ServePlan, 'host'>): GpuMemory {
  const h = plan.host;
  return { totalBytes: h.gpuMemoryBytes, freeBytes: h.gpuMemoryFreeBytes, unified: /GB10/i.test(h.gpuName ?? '') };
}

/** A running server's need on its GPU, from what its entry says (its share, or --kv-cache-memory-bytes in its argv). */
function runningNeed(inst: Instance): ServerNeed {
  const i = inst.argv.indexOf('--kv-cache-memory-bytes');
  const kv = i >= 0 && /^\d+$/.test(inst.argv[i + 1] ?? '') ? Number(inst.argv[i + 1]) : undefined;
  return {
    name: inst.name,
    share: inst.probe?.gpuMemoryUtilization ?? 0.9,
    kvCacheMemoryBytes: kv,
    weightsBytes: 0,
    reserveBytes: 0,
  };
}

interface Colocated {
  replica: string;
  gpu: number;
  with: string[];
  summary: string;
}

/**
 * What a plan collides with: a port, or a GPU whose memory the servers on it would need more of than
 * it has. A GPU already in use is shared when the co-location rule says they fit (profiles/colocate.ts:
 * every server's share or KV bytes added up, against the GPU, or a Spark's unified memory less what
 * the OS needs); `placed` gets each such placement, said by serve.
 */
export function conflictsWith(plan: ServePlan, live: readonly Instance[], placed: Colocated[] = []): string[] {
  const out: string[] = [];
  const taken = [
    ...plan.replicas.map((p) => ({ name: p.name, port: p.port, gpus: p.gpus })),
    ...(plan.router ? routerPorts(plan.router).map((port) => ({ name: '', port, gpus: [] as number[] })) : []),
  ];
  const gpu = gpuMemoryOf(plan);
  const roles = portRoles(plan.profile, plan.replicas.length);
  for (const p of taken) {
    const role = roles.find((r) => r.port === p.port);
    for (const inst of live)
      if (inst.port === p.port)
        out.push(
          `port ${p.port}${role ? `, ${role.what}` : ''}: held by ${inst.name} (profile ${inst.profile}${inst.pid > 0 ? `, pid ${inst.pid}` : ''}); fix: ${role?.fix ?? '--set server.port=N'}, or sparkctl stop ${inst.profile}`,
        );
    // Simulated GPUs are held like real ones: the same rule, testable without a GPU.
    for (const g of p.gpus) {
      const on = live.filter((inst) => inst.engine === plan.engine && inst.gpus.includes(g) && inst.port !== p.port);
      // earlier replicas of this plan on the same GPU count too
      const mine = taken.filter((q) => q !== p && q.gpus.includes(g) && taken.indexOf(q) < taken.indexOf(p));
      if (!on.length && !mine.length) continue;
      const running = [
        ...on.map(runningNeed),
        ...mine.map((q) => serverNeed(q.name, plan.profile, gpu.totalBytes, plan.modelFacts)),
      ];
      const v = judgeColocation(gpu, running, serverNeed(p.name, plan.profile, gpu.totalBytes, plan.modelFacts));
      if (v.fits)
        placed.push({
          replica: p.name,
          gpu: g,
          with: [...on.map((i) => i.name), ...mine.map((q) => q.name)],
          summary: v.summary,
        });
      else
        out.push(
          `GPU ${g}: held by ${on.map((i) => `${i.name} (pid ${i.pid})`).join(', ') || mine.map((q) => q.name).join(', ')}, and ${p.name} does not fit beside it: ${v.problems.join('; ')}; ${colocationFix(
            gpu,
            running,
            serverNeed(p.name, plan.profile, gpu.totalBytes, plan.modelFacts),
            on.map((i) => i.profile),
          )}`,
        );
    }
  }
  return [...new Set(out)];
}

/**
 * The fix a colocation refusal prints: a share only when one exists that still holds the newcomer's
 * weights and reserve with room for a KV cache (a share of 0, or one below its own weights, is a fix
 * that changes nothing); otherwise what to stop.
 */
export function colocationFix(
  gpu: GpuMemory,
  running: ServerNeed[],
  mine: ServerNeed,
  runningProfiles: string[],
): string {
  const share = largestShare(gpu, running);
  if (share > 0 && share * shareBase(gpu) > mine.weightsBytes + mine.reserveBytes)
    return `fix: --set engine.gpuMemoryUtilization=${share} (the largest share that fits beside them)`;
  const stops = [...new Set(runningProfiles)];
  return `no share of this GPU holds ${mine.name}'s weights beside them; fix: ${stops.length ? stops.map((n) => `sparkctl stop ${n}`).join(', then ') : 'stop what holds it'}, or serve it on a GPU that is free`;
}

/** One serve's launches, shared by its phases: what was launched and registered is what a failure stops. */
interface Session {
  plan: ServePlan;
  run: ServeRun;
  emit: EventSink;
  registry: Registry;
  rt: ReturnType<typeof runtimeFor>;
  driver?: RouterDriver;
  launched: Launched[];
  /** the replicas registered by this run: only those are ours to stop and unregister on a failure */
  registered: Set<string>;
  /** the start's caches, read-ahead and clocks (start.ts) */
  start: StartRecord;
  /** the registry's lock, held from the collision check until every replica is launched and registered */
  release?: () => void;
}

export async function serveLocal(plan: ServePlan, run: ServeRun): Promise<ServeOutcome> {
  const registry = new Registry(plan.stateDir);
  const rt = runtimeFor(plan);
  const driver = routerDriverOf(plan, run);
  // A router that cannot start must not cost a 15-minute load first.
  if (plan.router) driver!.require(plan.router);
  const start = await prepareStart(plan);
  const s: Session = {
    plan,
    run,
    emit: observing(start, run.onEvent),
    registry,
    rt,
    driver,
    launched: [],
    registered: new Set(),
    start,
  };
  try {
    return await served(s);
  } finally {
    s.start.close();
  }
}

/**
 * launch -> ready -> prewarm -> probe (serve's one loop, placed on this host), each replica's start report on its
 * outcome and in its entry.
 */
async function served(s: Session): Promise<ServeOutcome> {
  const out = await servePlaced(
    s.plan,
    localPlaced(s),
    { apiKey: s.run.secrets.VLLM_API_KEY, signal: s.run.signal },
    s.emit,
  );
  for (const { replica, start } of await startReports(s.start, s.emit)) {
    const r = out.replicas.find((x) => x.name === replica);
    if (r) r.start = start;
    const inst = out.stoppedAll ? undefined : s.registry.find(replica)[0]?.inst;
    if (inst) s.registry.write('host', { ...inst, start });
  }
  return out;
}

/** What a replica launched here is, as its outcome says it. */
const replicaOutcome = (plan: ServePlan, l: Launched): ReplicaOutcome => ({
  name: l.plan.name,
  url: replicaUrl(plan, l.plan),
  port: l.plan.port,
  gpus: l.plan.gpus,
  pid: l.pid,
  logFile: l.plan.logFile,
});

/**
 * This host as a placement for serve's one loop: refused under the registry's lock (a live server's
 * port or GPU, the router's precheck); each replica a group on the local node, launched after the one
 * before it and registered the moment it is spawned; its own endpoint watched; a failure or a
 * cancellation stops every replica registered; ready: the router, prewarm and the probe (or
 * --foreground: attached until the servers end).
 */
function localPlaced(s: Session): Placed<Launched> {
  const { plan, run, registry } = s;
  const releaseLock = () => {
    s.release?.();
    s.release = undefined;
  };
  return {
    groups: groupsOf(plan),
    start: s.start,
    cancel: run.signal,
    refuse: async () => {
      s.release = await registry.lock();
      // Only a record proven gone may go: an unproven one is reported by status, never dropped here.
      for (const x of registry.list().filter((x) => x.proof.state === 'gone')) registry.remove('host', x.inst.name);
      const placed: Colocated[] = [];
      const live = registry
        .list()
        .filter((x) => x.alive)
        .map((x) => x.inst);
      const conflicts = conflictsWith(plan, live, placed);
      if (conflicts.length)
        throw new UsageError(`${plan.profile.name} would collide with running servers`, [
          ...conflicts,
          // a port's line has its own fix; a GPU's needs these
          ...(conflicts.some((x) => x.startsWith('GPU'))
            ? [
                `sparkctl stop <name> first, or --set server.port=N${plan.host.gpus > 1 ? ' / parallel.firstGpu=N' : ''} / engine.gpuMemoryUtilization=SHARE`,
              ]
            : []),
        ]);
      for (const c of placed) s.emit({ type: 'colocated', ...c });
      // after the collisions (a port our own router holds is said as that), before any model load
      const routerRefused = plan.router ? await s.driver!.precheck(plan.router) : undefined;
      if (!routerRefused) return undefined;
      releaseLock();
      s.emit({ type: 'router', router: routerRefused });
      return {
        profile: plan.profile.name,
        engine: plan.engine,
        replicas: [],
        status: 'launch-failed',
        stoppedAll: true,
        router: routerRefused,
      };
    },
    before: async () => undefined,
    // each a replica on the local node, registered the moment it is spawned
    launch: async (g) => {
      if (!('replica' in g.of)) throw new Error(`internal: a group on ${g.node.kind} in a plan on this host`);
      const p = g.of.replica;
      s.start.launched(groupAt(g));
      const l = s.rt.launch(replicaRun(plan, p), run.secrets, (x) => {
        registry.write('host', instanceOf(plan, p, x));
        s.registered.add(p.name);
      });
      s.launched.push(l);
      (await log())?.debug(
        { replica: p.name, pid: l.pid, port: p.port, gpus: p.gpus, argv: p.argv, log: p.logFile },
        'launched',
      );
      return { ref: l };
    },
    launched: (l) => {
      const p = l.plan;
      s.emit({
        type: 'launched',
        replica: p.name,
        pid: l.pid,
        port: p.port,
        ...(p.uds ? { uds: p.uds } : {}),
        gpus: p.gpus,
        logFile: p.logFile,
      });
    },
    record: releaseLock,
    endpoints: (launched) =>
      launched.map((l) => ({
        replica: l.plan.name,
        url: l.plan.uds ? unixUrl(l.plan.uds) : `http://127.0.0.1:${l.plan.port}`,
        view: localView(l),
        ours: s.rt.ours(l),
        clock: s.start.clockOf(l.plan.name),
      })),
    // a launch here throws rather than fails (abandon)
    failed: async (f) => {
      await stopAll(s);
      releaseLock();
      throw new Error(`internal: ${f.detail}`);
    },
    notReady: async (launched, results, interrupted) => {
      const replicas = launched.map((l) => replicaOutcome(plan, l));
      s.emit({ type: 'stopping', why: interrupted ? 'interrupted' : 'failed', replicas: launched.length });
      // Nothing of any group may be left holding a port or a GPU.
      await stopAll(s);
      results.forEach((res, i) => {
        if (res.ok) replicas[i]!.readyMs = res.ms;
        // Only what this launch wrote is classified: an earlier run's OOM is not today's cause.
        else if (res.reason !== 'interrupted' || !interrupted)
          replicas[i]!.failure = diagnose(res, launched[i]!.tail.text());
      });
      return {
        profile: plan.profile.name,
        engine: plan.engine,
        replicas,
        status: interrupted ? 'interrupted' : 'launch-failed',
        stoppedAll: true,
      };
    },
    ready: async (launched, results) => {
      const replicas = launched.map((l) => replicaOutcome(plan, l));
      for (const [i, l] of launched.entries()) {
        const ms = (results[i] as { ms: number }).ms;
        replicas[i]!.readyMs = ms;
        const inst = registry.find(l.plan.name)[0]?.inst;
        if (inst) registry.write('host', { ...inst, readyAt: new Date().toISOString() });
        s.emit({ type: 'ready', replica: l.plan.name, url: replicas[i]!.url, ms });
      }
      return localServing(s, replicas);
    },
    abandon: async () => {
      await stopAll(s);
      releaseLock();
    },
  };
}

/**
 * Every replica ready, as afterReady takes them: the router at once in the foreground (then attached
 * until the servers end), otherwise once the replicas are warm, so that no client request meets a
 * cold replica; prewarm as the plan asks; the probe.
 */
function localServing(s: Session, replicas: ReplicaOutcome[]): Serving {
  const { plan, run } = s;
  const base = { profile: plan.profile.name, engine: plan.engine, replicas };
  let router: Awaited<ReturnType<RouterDriver['start']>> | undefined;
  const routerUp = async (): Promise<ServeOutcome | undefined> => {
    if (!s.driver) return undefined;
    router = await s.driver.start(plan, s.registry);
    s.emit({ type: 'router', router: router.outcome });
    if (!router.outcome.failure) return undefined;
    s.emit({ type: 'stopping', why: 'failed', replicas: s.launched.length });
    await stopAll(s);
    return { ...base, status: 'launch-failed', stoppedAll: true, router: router.outcome };
  };
  if (plan.foreground)
    return {
      attach: async () =>
        (await routerUp()) ?? foreground(plan, s.launched, replicas, s.registry, run, s.emit, router?.launched),
    };
  for (const l of s.launched) l.child?.unref();
  const targets = s.launched.map((l) => {
    const t = targetFromInstance(s.registry.find(l.plan.name)[0]?.inst ?? instanceOf(plan, l.plan, l));
    return { ...t, apiKey: run.secrets.VLLM_API_KEY ?? t.apiKey };
  });
  return {
    endpoints: localWarmed(s, targets),
    warm: async () => {
      const failed = await routerUp();
      if (failed) return failed;
      router?.launched?.child.unref();
      return undefined;
    },
    outcome: async (prewarmed, probed) => {
      for (const [i, r] of prewarmed.entries()) replicas[i]!.prewarm = r;
      for (const [i, r] of probed.entries()) replicas[i]!.probe = r;
      if (router?.launched) router.outcome.servers = await s.driver!.servers(plan.router!, router.outcome.servers);
      return {
        ...base,
        status: replicas.every((r) => r.probe?.state === 'healthy') ? 'healthy' : 'unhealthy',
        stoppedAll: false,
        router: router?.outcome,
      };
    },
  };
}

/**
 * Stop every launch we registered (proven first, by the runtime); a second cancellation (force) cuts the drain short.
 */
async function stopAll({ launched, registered, rt, registry, run, emit }: Session): Promise<void> {
  const onForce = () => emit({ type: 'stopping', why: 'forced', replicas: launched.length });
  if (run.force?.aborted) onForce();
  else run.force?.addEventListener('abort', onForce, { once: true });
  await Promise.all(
    launched.map(async (l) => {
      if (!registered.has(l.plan.name)) return;
      await rt.stop(l, run.force?.aborted ? 0 : 5000, { signal: run.force });
      registry.remove('host', l.plan.name);
    }),
  );
  run.force?.removeEventListener('abort', onForce);
}

/** A ready endpoint as prewarm and the deep probe ask it, wherever it runs, and how their events name it. */
interface Warmed {
  target: Target;
  replica: string;
  /** over nodes: the head's node */
  node?: string;
  /** each prewarm request (this host: said as an event; over nodes: only the first token's time) */
  onRequest: (request: PrewarmRequest) => void;
  /** this host's GPUs, read between prewarm's rounds (absent: the simulator, or a node's GPUs) */
  gpuMemory?: ReturnType<typeof gpuMemoryReader>;
}

const at = (w: Warmed) => (w.node === undefined ? {} : { node: w.node });

/** Each endpoint from cold to warm, at once. */
function prewarmEach(ws: Warmed[], settings: PrewarmSettings, emit: EventSink): Promise<PrewarmResult[]> {
  return Promise.all(
    ws.map(async (w) => {
      const result = await prewarm(w.target, settings, w.onRequest, w.gpuMemory);
      emit({ type: 'prewarm', replica: w.replica, ...at(w), result });
      return result;
    }),
  );
}

/** One deep probe of each endpoint: its verdict is the outcome's. */
function probeEach(ws: Warmed[], settings: ProbeSettings, emit: EventSink): Promise<ProbeResult[]> {
  return Promise.all(
    ws.map(async (w) => {
      const result = await probe(w.target, settings);
      emit({ type: 'probe', replica: w.replica, ...at(w), result });
      return result;
    }),
  );
}

/** This host's replicas, as prewarm and the probe ask them. */
function localWarmed({ plan, emit }: Session, targets: Target[]): Warmed[] {
  const sim = plan.engine === 'sim';
  return targets.map((t) => ({
    target: t,
    replica: t.name,
    onRequest: (request) => emit({ type: 'prewarm-request', replica: t.name, request }),
    gpuMemory: sim ? undefined : gpuMemoryReader(t.gpus),
  }));
}

/**
 * Over nodes, ready, as afterReady takes it: said with what joined; the same prewarm and deep probe
 * as on one host against the head's endpoint (prewarm's requests time the first token, they are not
 * said), then every rank's start report, said and kept in the record.
 */
function nodesServing(
  plan: ClusterPlan,
  record: ClusterRecord,
  view: ClusterView,
  readyMs: number,
  emit: EventSink,
  start: StartRecord,
): Serving {
  const node = record.head;
  const replica = plan.replica.name;
  emit({ type: 'ready', replica, node, ms: readyMs, url: record.url, cluster: { nodes: view.nodes, gpus: view.gpus } });
  const target = {
    ...targetFromUrl(record.url, record.servedName),
    name: `${plan.profile.name} (${plan.nf.head.name})`,
    apiKey: plan.apiKey,
    apiKeyEnv: plan.profile.server.apiKeyEnv,
  };
  return {
    endpoints: [
      { target, replica, node, onRequest: (request) => start.observe({ type: 'prewarm-request', replica, request }) },
    ],
    outcome: async ([w], [p]) =>
      nodesOutcome(plan, {
        record,
        view,
        readyMs,
        prewarm: w,
        probe: p,
        starts: await finishStarts(plan, start, emit, record),
      }),
  };
}

/** The replicas of the profile registered and alive that this run did not launch (a router aside). */
function liveReplacements(registry: Registry, profile: string, launched: Launched[]) {
  return registry
    .find(profile)
    .filter((e) => e.alive && e.inst.role !== 'router' && !launched.some((l) => l.pid === e.inst.pid));
}

/** Settles once the servers end (every replica, or the router) or the run is cancelled, whichever comes first. */
function untilEndedOrCancelled(
  plan: ServePlan,
  launched: Launched[],
  registry: Registry,
  run: ServeRun,
  router?: RouterLaunched,
): Promise<void> {
  // The router ending on its own ends the service too: the unit restarts it all. Behind a router a
  // rolling restart (another sparkctl) replaces our children one by one: the service lasts while any
  // replica of the profile is registered and alive, not just the ones started here.
  const replicasGone = async () => {
    await Promise.all(launched.map((l) => l.exited));
    while (router && !run.signal.aborted && liveReplacements(registry, plan.profile.name, launched).length)
      await pause(1000, run.signal);
  };
  const allExited = router ? Promise.race([replicasGone(), router.exited]) : replicasGone();
  const cancelled = new Promise<void>((res) =>
    run.signal.aborted ? res() : run.signal.addEventListener('abort', () => res(), { once: true }),
  );
  return Promise.race([allExited, cancelled]);
}

/** systemd Type=simple / containers: stay attached until the servers end or the run is cancelled. */
async function foreground(
  plan: ServePlan,
  launched: Launched[],
  replicas: ReplicaOutcome[],
  registry: Registry,
  run: ServeRun,
  emit: EventSink,
  router?: RouterLaunched,
): Promise<ServeOutcome> {
  for (const l of launched) l.child.ref();
  await untilEndedOrCancelled(plan, launched, registry, run, router);
  const byRequest = run.signal.aborted;
  if (byRequest) emit({ type: 'stopping', why: 'signal', replicas: launched.length });
  // A signal stops every group (drain, then SIGKILL; at once on a second signal). Once the API
  // server is gone its EngineCore must be too. A container is stopped by its runtime (stop --time,
  // then rm), proven by its id and marker label first; its own exit code is the server's.
  const rt = runtimeFor(plan);
  const stopped = new Map<Launched, Stopped>();
  const stopOne = async (l: Launched, graceMs: number) => {
    const r = await rt.stop(l, graceMs);
    if (!stopped.has(l) || r.exitCode !== undefined) stopped.set(l, r);
  };
  const stop = (l: Launched) =>
    stopOne(
      l,
      byRequest && !run.force?.aborted ? graceMsOf({ shutdownTimeoutSeconds: shutdownTimeoutOf(l.plan.argv) }) : 5000,
    );
  const forced = new Promise<void>((res) => run.force?.addEventListener('abort', () => res(), { once: true }));
  // The router goes first (its soft stop: no new request, the open ones finish), so that no
  // request is sent to a replica that is stopping and none it lets finish is cut by one.
  if (router)
    await run.router!.softStop(
      router,
      byRequest && !run.force?.aborted ? router.plan.drainSeconds * 1000 : 0,
      run.force,
    );
  const replacements = router ? liveReplacements(registry, plan.profile.name, launched) : [];
  const stopping = launched.map(stop);
  await Promise.race([
    Promise.all([
      ...stopping,
      ...replacements.map((e) =>
        runtimeOf(e.inst)
          .stop(e.inst, 30_000)
          .then(() => registry.remove('host', e.inst.name)),
      ),
    ]),
    forced,
  ]);
  if (run.force?.aborted) {
    emit({ type: 'stopping', why: 'forced', replicas: launched.length });
    await Promise.all(launched.map((l) => rt.kill(l)));
    // the drains end with the kill: each then reads its container's exit code and removes it (bounded)
    const done = new AbortController();
    await Promise.race([Promise.all(stopping).finally(() => done.abort()), pause(60_000, done.signal)]);
  }
  if (router) registry.remove('host', router.plan.name);
  for (const l of launched) rt.release(l);
  const exits = launched.map((l) => rt.exitOf(l, stopped.get(l)));
  for (const [i, l] of launched.entries()) {
    registry.remove('host', l.plan.name);
    replicas[i]!.exit = { code: exits[i]?.code ?? null, signal: exits[i]?.signal ?? null };
    emit({ type: 'exited', replica: l.plan.name, ...replicas[i]!.exit });
  }
  // A server that ended on its own with a failure is a failure; one we stopped on request is not.
  const failed = !byRequest && (exits.some((e) => e && (e.code !== 0 || e.signal)) || Boolean(router?.exit));
  return {
    profile: plan.profile.name,
    engine: plan.engine,
    replicas,
    status: failed ? 'server-exited' : 'stopped',
    stoppedAll: true,
  };
}
