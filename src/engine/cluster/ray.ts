// The Ray executor: vLLM's multi-node engine through Ray, driven over ssh. Ray head, workers, a
// wait for exactly the nodes and GPUs the nodes file declares (read from Ray), vLLM on the head,
// then the same readiness, prewarm and probe as on one node (the order is serve's one loop,
// engine/serve.ts; rayPlacement is what Ray adds to it). Library code: it reports progress as
// events and returns an outcome; it never prints, exits or installs signal handlers (cancellation
// is the AbortSignal). Ray is only ever stopped on nodes where this run started it.
import type { NodesFile, NodeEntry } from '../../profiles/schema.js';
import type { Registry, ClusterRecord } from '../registry.js';
import { http } from '../../client/http.js';
import type { EventSink } from '../events.js';
import { RemoteView } from './remote-view.js';
import { remoteListenerOurs } from './remote-socket.js';
import { shellQuote } from '../../output/format.js';
import { ssh, remoteWhy, type Remote } from './ssh.js';
import { randomUUID } from 'node:crypto';
import { launchOnNodeHost, NODE_LOGS, nodePathWord, stopOnNode, sshShell } from './node-proc.js';
import {
  allNodes,
  exportLine,
  fabricAddress,
  describeShortfall,
  parseRayStatus,
  type ClusterView,
  type NodeStep,
} from './ray-plan.js';
import { readCluster, type RaySeen } from './ray-read.js';
import type { NodeContainerRef } from './node-container.js';
import { pollUntil } from '../../util/poll.js';
import type { StartRecord } from '../start.js';
import type { ClusterPlan } from '../plan.js';
import { rayLineNode } from './rank-start.js';
import { cachesFrom, nodeCacheScript, type NodeCaches } from './node-caches.js';
import type { StartClock } from '../phases.js';
import { failedBefore, type Diagnosis } from '../diagnose.js';
import {
  refuseRecorded,
  headFailure,
  type GroupLaunch,
  type Launched,
  type NodesPlacement,
  type NodeWatch,
  type ClusterStatus,
  type NodeState,
  type RunCtx,
  type StopClusterOutcome,
} from './common.js';

// the start caches' folder made on the node before Ray starts there: Ray's workers (vLLM's ranks) are
// the raylet's children and take its environment (node-caches.ts)
const rayStart = (s: NodeStep, caches?: NodeCaches) =>
  [exportLine(s.env), ...(caches ? [nodeCacheScript(caches)] : []), s.argv[0]!.map(shellQuote).join(' ')].join('; ');

/**
 * One node's `ray start` under its deadline. Ray gives a raylet a fixed 30 s to register with the
 * GCS ("The current node timed out during startup"); a busy machine can miss that once. Transient:
 * clean that node and try once more, as an operator would.
 */
async function startRay(
  nf: NodesFile,
  n: NodeEntry,
  s: NodeStep,
  joinS: number,
  signal?: AbortSignal,
  caches?: NodeCaches,
): Promise<Remote> {
  const r = await ssh(nf, n, rayStart(s, caches), { remoteTimeoutS: joinS, signal });
  if (r.exitCode === 0 || !/timed out during startup/.test(r.stderr + r.stdout)) return r;
  await ssh(nf, n, 'ray stop --force', { timeoutMs: 60_000, signal });
  return ssh(nf, n, rayStart(s, caches), { remoteTimeoutS: joinS, signal });
}

/**
 * Ray on the hosts as a placement for serve's one loop: before, Ray's head then every worker (each
 * node's `ray start`), then until Ray lists exactly the file's nodes and GPUs; the one group that runs
 * a vLLM is the head's; the watch adds Ray's own view; a failure stops vLLM, then Ray on every node
 * where this run started it.
 */
export function rayPlacement(plan: ClusterPlan, ctx: RunCtx): NodesPlacement<HeadLaunch> {
  const { nf } = plan;
  const emit = ctx.emit ?? (() => {});
  const signal = ctx.signal;
  const ours = new Set<NodeEntry>();
  return {
    refuse: (registry) => refuseRunning(plan, registry, signal),
    before: async () => {
      const joined = await startRayCluster(plan, ours, emit, signal);
      if (joined) return { failure: joined };
      const cluster = await waitForCluster(plan, signal);
      if ('failure' in cluster) return cluster;
      emit({ type: 'ray-cluster', nodes: cluster.view.nodes, gpus: cluster.view.gpus });
      return cluster;
    },
    launch: (_step, _index, clock) => launchEngine(plan, signal, clock),
    record: ([head]) => head!.record,
    watch: (record, start) => rayWatch(plan, emit, signal, hostWatch(nf, record, signal), start),
    joined: (_record, view) => view!,
    stop: async (launched, record) => {
      const engine = record ?? launched[0]?.record;
      if (engine) await stopEngine(nf, engine);
      await stopOurRay(nf, ours, emit);
    },
  };
}

/** vLLM launched on the head by Ray's executor: the record it starts (Ray's groups are the head's vLLM's). */
export interface HeadLaunch extends GroupLaunch {
  record: ClusterRecord;
}

/** Ray is only ever stopped on nodes where this run started it. */
async function stopOurRay(nf: NodesFile, ours: Set<NodeEntry>, emit: EventSink) {
  await Promise.all(
    [...ours].map(async (n) => {
      const r = await ssh(nf, n, 'ray stop --force', { timeoutMs: 60_000 });
      emit({
        type: 'cleanup',
        node: n.name,
        what: r.exitCode === 0 ? 'ray stopped' : `ray stop failed: ${remoteWhy(r, 1)}`,
      });
    }),
  );
}

/** 0. One cluster per set of nodes: a second serve must not touch the running one, nor a Ray sparkctl did not start. */
async function refuseRunning(
  plan: ClusterPlan,
  registry: Registry,
  signal?: AbortSignal,
): Promise<Diagnosis | undefined> {
  const { nf } = plan;
  const running = refuseRecorded(plan, registry);
  if (running) return running;
  const pre = await ssh(nf, nf.head, 'ray status', { timeoutMs: 30_000, signal });
  if (pre.exitCode === 0 && parseRayStatus(pre.stdout)) {
    return failedBefore(
      'refused',
      `Ray is already running on ${nf.head.name} (${nf.head.address}); sparkctl did not start it and leaves it alone`,
      pre.stdout.trim().split('\n').slice(0, 12),
      {
        fix: `if nothing else uses it: ray stop on every node (or sparkctl stop --nodes ${plan.nodesFile}), then serve again`,
        node: nf.head.name,
      },
    );
  }
  return undefined;
}

/** 1. Ray head, then every worker (concurrently); each `ray start` has a deadline on its node. */
async function startRayCluster(
  plan: ClusterPlan,
  ours: Set<NodeEntry>,
  emit: EventSink,
  signal?: AbortSignal,
): Promise<Diagnosis | undefined> {
  const { nf } = plan;
  const joinS = plan.joinTimeoutS ?? 90;
  ours.add(nf.head);
  const h = await startRay(nf, nf.head, plan.steps[0]!, joinS, signal, plan.caches);
  if (h.exitCode !== 0)
    return failedBefore(
      'not-started',
      `Ray head on ${nf.head.name} (${nf.head.address}) did not start: ${remoteWhy(h, 3)}`,
      (h.stderr || h.stdout).trim().split('\n').slice(-10),
      {
        fix: `check Ray on ${nf.head.name}: ssh ${nf.head.sshUser}@${nf.head.address} ray status; sparkctl preflight --nodes ${plan.nodesFile}`,
        node: nf.head.name,
      },
    );
  emit({ type: 'ray-head', node: nf.head.name });
  const joins = await Promise.all(
    plan.steps.slice(1).map(async (s) => {
      const n = allNodes(nf).find((x) => x.name === s.node)!;
      ours.add(n);
      return { s, r: await startRay(nf, n, s, joinS, signal, plan.caches) };
    }),
  );
  const failedJoins = joins.filter((j) => j.r.exitCode !== 0);
  if (!failedJoins.length) {
    emit({ type: 'ray-workers', nodes: nf.workers.map((w) => w.name) });
    return undefined;
  }
  return failedBefore(
    'not-started',
    failedJoins
      .map(
        (j) =>
          `node ${j.s.node} (${j.s.address}) failed to join the Ray cluster${j.r.error === 'timeout' ? ` (timed out after ${joinS} s; its ray start was ended)` : ''}: ${remoteWhy(j.r)}`,
      )
      .join('\n'),
    failedJoins.flatMap((j) =>
      (j.r.stderr || j.r.stdout)
        .trim()
        .split('\n')
        .slice(-4)
        .map((l) => `${j.s.node}: ${l}`),
    ),
    {
      fix: `check that ${failedJoins.map((j) => j.s.node).join(', ')} can reach ${fabricAddress(nf.head)}:${nf.rayPort} (routes, firewall, interface) and runs the head's Ray version: sparkctl preflight --nodes ${plan.nodesFile}`,
      ...(failedJoins.length === 1 ? { node: failedJoins[0]!.s.node } : {}),
    },
  );
}

/**
 * 2. Wait until Ray lists exactly the nodes and GPUs of the file. A view that stops changing while
 * short is final: name the missing node within seconds, not at the deadline.
 */
export async function waitForCluster(
  plan: ClusterPlan,
  signal?: AbortSignal,
  via?: ClusterVia,
): Promise<{ view: ClusterView } | { failure: Diagnosis }> {
  const { nf } = plan;
  const cancelled = { failure: failedBefore('interrupted', 'cancelled while waiting for the Ray cluster', []) };
  if (signal?.aborted) return cancelled;
  const settleMs = plan.settleMs ?? 10_000;
  let last = '';
  let lastChange = Date.now();
  const unchanged = () => Date.now() - lastChange > settleMs;
  // one reading: what Ray lists, a node's container that ended, or a view that waiting will not change
  const read = async (): Promise<{ seen: RaySeen; ended?: Diagnosis; final?: boolean }> => {
    const seen = await readCluster(nf, signal, via?.head);
    const v = seen.view;
    if (v?.complete) return { seen };
    // Ray in containers: a node's container that ended will not join, whatever the wait
    const ended = await via?.ended();
    if (ended) return { seen, ended };
    const key = JSON.stringify(
      v ? [v.nodes, v.gpus, v.missing?.map((n) => n.name), v.extra?.map((n) => n.ip)] : seen.error,
    );
    if (key !== last) (last = key), (lastChange = Date.now());
    // Every node listed but the GPUs differ, or a node too many: waiting will not change it.
    const final =
      !!v &&
      (v.nodes > allNodes(nf).length ||
        (v.extra?.length ?? 0) > 0 ||
        (v.nodes === allNodes(nf).length && !v.missing?.length));
    return { seen, final: final || unchanged() };
  };
  const r = await pollUntil(read, (x) => !!x.seen.view?.complete || !!x.ended || !!x.final, {
    deadlineMs: plan.rayWaitMs ?? 120_000,
    intervalMs: 1000,
    signal,
  });
  const { seen, ended } = r.value;
  const v = seen.view;
  if (v?.complete) return { view: v };
  if (ended) return { failure: ended };
  if (!r.done && r.reason === 'aborted') return cancelled;
  return {
    failure: failedBefore(
      'not-started',
      v
        ? `${describeShortfall(nf, v)}${unchanged() ? ` (unchanged for ${Math.round((Date.now() - lastChange) / 1000)} s)` : ''}; TP ${plan.tensor} x PP ${plan.pipeline} needs ${plan.tensor * plan.pipeline}`
        : `Ray on ${nf.head.name} did not answer: ${seen.error}`,
      ['ray status on ' + nf.head.name + ':', ...(seen.status ?? '').trim().split('\n').slice(0, 30)],
      {
        fix: v?.missing?.length
          ? `on ${v.missing.map((n) => n.name).join(', ')}: ray status, and its ray start --address ${fabricAddress(nf.head)}:${nf.rayPort} --num-gpus N; sparkctl preflight --nodes ${plan.nodesFile}`
          : `check every node's GPUs (nvidia-smi) and its ray start --num-gpus; sparkctl preflight --nodes ${plan.nodesFile}`,
      },
    ),
  };
}

/**
 * 3. vLLM on the head, in its own session (the one launch on a node's host: node-proc.ts); the key goes through stdin,
 *    never argv.
 */
async function launchEngine(
  plan: ClusterPlan,
  signal?: AbortSignal,
  clock?: StartClock,
): Promise<Launched<HeadLaunch>> {
  const { nf } = plan;
  const rep = plan.replica;
  const logFile = `${NODE_LOGS}/${rep.name}.log`;
  // What proves, before any signal, that the group on the head is the one this launch started.
  const marker = randomUUID();
  const setup = plan.caches ? nodeCacheScript(plan.caches) : undefined;
  const l = await launchOnNodeHost(nf, nf.head, {
    argv: rep.argv,
    stepEnv: plan.steps[0]!.env,
    env: rep.env,
    setup,
    key: plan.apiKey,
    marker,
    logFile,
    signal,
  });
  if ('error' in l) return { error: `vLLM did not start on ${nf.head.name}: ${l.error}`, evidence: [] };
  const { pid, startTime } = l;
  const caches = plan.caches ? cachesFrom(l.stdout, plan.caches) : undefined;
  if (caches) clock?.cachesWere(caches);
  const record: ClusterRecord = {
    version: 1,
    profile: plan.profile.name,
    nodesFile: plan.nodesFile,
    head: nf.head.name,
    pid,
    port: rep.port,
    url: `http://${nf.head.address}:${rep.port}`,
    servedName: plan.servedName,
    logFile,
    startedAt: new Date().toISOString(),
    ...(plan.launch ? { launch: plan.launch } : {}),
    startTime,
    marker,
  };
  return { ref: { node: nf.head.name, pid, logFile, record } };
}

/** The engine on the head, stopped by its group after it failed to become ready (5 s grace). */
async function stopEngine(nf: NodesFile, record: ClusterRecord) {
  await stopOnNode(sshShell(nf, nf.head), record, 5);
}

/**
 * How the engine on the head is watched while it starts: its process, its log, Ray's view and (in containers) every
 * node's container.
 */
export interface EngineWatch {
  /**
   * a shell line on the head: exit 0 the engine runs, 9 it is gone; any other exit is no answer (a busy runtime, ssh),
   * never "gone"
   */
  alive: string;
  /** the shell line that prints the last n lines of the engine's log on the head */
  tail: (lines: number) => string;
  /** Ray in containers: where the head's Ray answers, and a node's container that ended */
  via?: ClusterVia;
  /**
   * the head's listening socket is held by the engine's own group (the one-host path's socket-owner proof); absent:
   * cannot tell
   */
  ours?: () => Promise<boolean | undefined>;
}

/**
 * Ray in containers: the head's container (Ray is asked there) and the check that names a node whose container ended.
 */
export interface ClusterVia {
  head: NodeContainerRef;
  ended(): Promise<Diagnosis | undefined>;
}

/** What vLLM's Ray executor logs while it waits for its GPUs. */
const PLACEMENT_WAIT = /Waiting for creating a placement group of specs for \d+ seconds/;

/** The engine on the head's host: its pid, its log file. */
const hostWatch = (nf: NodesFile, record: ClusterRecord, signal?: AbortSignal): EngineWatch => ({
  alive: `kill -0 ${record.pid} 2>/dev/null || exit 9`,
  tail: (n) => `tail -n ${Math.trunc(n)} ${nodePathWord(record.logFile)}`,
  ours: () => remoteListenerOurs(nf, nf.head, record.port, record.pid, signal),
});

/**
 * 4. The one after-launch watch's inputs (engine/launch.ts: the stall timer, a known hang named from
 * the head's log, its phases), racing the engine's process, the deadline and the cluster: a node that
 * leaves makes vLLM wait for its placement group forever (as real vLLM does); name it.
 */
export function rayWatch(
  plan: ClusterPlan,
  emit: EventSink,
  signal: AbortSignal | undefined,
  watch: EngineWatch,
  start: StartRecord,
): NodeWatch {
  const { nf } = plan;
  let lastCluster = Date.now();
  let placementLine: string | undefined;
  let lost: RaySeen | undefined;
  let ended: Diagnosis | undefined;
  const view = new RemoteView(
    nf,
    nf.head,
    watch.tail,
    async () => {
      // exit 9 from the node is gone; anything else (ssh's 255, a runtime that did not answer) is no answer
      const x = await ssh(nf, nf.head, watch.alive, { timeoutMs: 15_000 });
      if (x.exitCode === 9) return { reason: 'exited', detail: 'exited before it was ready' };
      ended = await watch.via?.ended();
      return ended ? { reason: 'exited', detail: 'a node left' } : undefined;
    },
    (lines) => {
      // a worker actor's forwarded line (ip=...) is its node's too
      for (const l of lines) {
        const at = rayLineNode(nf, l);
        if (at) start.forwarded(at.index, at.node, l);
      }
      const m = placementLine ? undefined : lines.map((l) => PLACEMENT_WAIT.exec(l)?.[0]).find(Boolean);
      if (!m) return;
      placementLine = m;
      emit({ type: 'placement-wait', node: nf.head.name, line: m });
    },
  );
  return {
    view,
    // what answers on the head's port is the engine's own group, not a server that held the port first
    ours: watch.ours,
    // Ray's own view first: a placement-group wait because a node left is named as that, not as a hang
    hung: async () => {
      if (!(Date.now() - lastCluster > 5000 || placementLine)) return undefined;
      lastCluster = Date.now();
      const now = await readCluster(nf, signal, watch.via?.head);
      if (!now.view || now.view.complete) return undefined;
      lost = now;
      return 'the Ray cluster lost capacity';
    },
    failure: async (r) => {
      if (ended) return ended;
      const tail = (await ssh(nf, nf.head, watch.tail(60), { timeoutMs: 15_000 })).stdout;
      if (lost?.view) {
        // the watch's reason (a stall: Ray's view said the hang), its own cause id; the head's log in the lines
        const missing = lost.view.missing ?? [];
        return {
          reason: r.reason,
          ms: r.ms,
          detail: `the Ray cluster lost capacity while vLLM was starting: ${describeShortfall(nf, lost.view)}; vLLM waits for a placement group of ${plan.tensor * plan.pipeline} GPUs${placementLine ? ` ("${placementLine} ...")` : ''}`,
          causeId: 'ray-lost-capacity',
          ...(placementLine ? { evidence: placementLine } : {}),
          fix: `bring ${missing.map((n) => n.name).join(', ') || 'the missing node'} back (ray status on it), then serve again; sparkctl preflight --nodes ${plan.nodesFile}`,
          lastLines: [
            'ray status on ' + nf.head.name + ':',
            ...(lost.status ?? '').trim().split('\n').slice(0, 30),
            `${plan.replica.name}.log:`,
            ...tail.trim().split('\n').slice(-8),
          ],
          ...(missing.length === 1 ? { node: missing[0]!.name } : {}),
        };
      }
      // The same diagnosis as on one node (the head's log is written fresh by this launch).
      return headFailure(plan, r, tail);
    },
  };
}

/** Ends the recorded vLLM on the head (its process group: TERM, wait, KILL), then Ray on every node of the file. */
export async function stopRay(
  nf: NodesFile,
  record: ClusterRecord | undefined,
  timeoutS: number,
  signal?: AbortSignal,
): Promise<StopClusterOutcome> {
  let engine: StopClusterOutcome['engine'] = { node: nf.head.name, state: 'not-recorded' };
  if (record) {
    // Never a signal to a group not proven ours (a reused pid on the head): 'unproven', reported.
    engine = { node: nf.head.name, ...(await stopOnNode(sshShell(nf, nf.head), record, timeoutS, signal)) };
  }
  const stops = await Promise.all(
    allNodes(nf).map(async (n) => ({ n, r: await ssh(nf, n, 'ray stop', { timeoutMs: 90_000, signal }) })),
  );
  return {
    engine,
    ray: stops.map(({ n, r }) => ({
      node: n.name,
      ok: r.exitCode === 0,
      detail: r.exitCode === 0 ? 'stopped' : remoteWhy(r, 1),
    })),
  };
}

/** A running cluster as the operator sees it: the head's server, and every node's Ray state and GPUs. */
export async function rayStatus(
  record: ClusterRecord,
  nf: NodesFile | undefined,
  signal?: AbortSignal,
  head?: NodeContainerRef,
): Promise<ClusterStatus> {
  const h = await http(`${record.url}/health`, { timeoutMs: 2000 });
  const server = h.ok ? (h.status === 200 ? 'healthy' : 'unhealthy') : 'unreachable';
  const serverDetail = h.ok ? `HTTP ${h.status}` : h.message;
  if (!nf)
    return {
      record,
      server,
      serverDetail,
      nodes: [],
      state: server === 'healthy' ? 'degraded' : 'down',
      rayError: `nodes file ${record.nodesFile} cannot be read`,
    };
  const seen = await readCluster(nf, signal, head);
  const nodes: NodeState[] = allNodes(nf).map((n, i) => {
    const r = seen.nodes?.find((x) => x.ip === fabricAddress(n));
    return {
      node: n.name,
      role: i === 0 ? 'head' : 'worker',
      address: n.address,
      ray: seen.nodes ? (r ? 'up' : 'missing') : 'unknown',
      gpus: r?.gpus,
    };
  });
  const complete = seen.view?.complete ?? false;
  const state =
    server === 'healthy' && complete ? 'healthy' : server === 'unreachable' && !seen.view ? 'down' : 'degraded';
  return { record, server, serverDetail, nodes, state, rayError: seen.view ? undefined : seen.error };
}
