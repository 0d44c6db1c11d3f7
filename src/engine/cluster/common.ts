// What every multi-node executor shares: the placement it gives serve's one loop for the plan it is given
// (engine/plan.ts ClusterPlan, the nodes' placement of the one Plan) (NodesPlacement: what differs between the
// executors, as strategy; the order is engine/serve.ts's), the outcome (serve's one ServeOutcome, built by
// nodesOutcome; its events are serve's one union, engine/events.ts), and the one remote stop rule. Two executors
// implement ClusterExecutor: Ray (ray.ts on the hosts, ray-containers.ts in containers: a Ray cluster, vLLM on the
// head) and native (native.ts: vLLM's own --nnodes launch, one vLLM per node). index.ts picks one from the plan (or
// from the record, to stop or read a running cluster).
import type { NodesFile } from '../../profiles/schema.js';
import type { ClusterPlan, ExecutorKind } from '../plan.js';
import type { ClusterRecord } from '../registry.js';
import type { PrewarmResult } from '../../health/prewarm.js';
import type { ProbeResult } from '../../health/probe.js';
import { Registry } from '../registry.js';
import { diagnose, failedBefore, type Diagnosis } from '../diagnose.js';
import type { NotReady } from '../../client/ready.js';
import type { LaunchView } from '../launch.js';
import type { StartClock } from '../phases.js';
import type { ClusterView, NodeStep } from './ray-plan.js';
import type { EventSink, ServeOutcome } from '../events.js';
import { rankStarts, type RankStart } from './rank-start.js';
import { startReports, type StartRecord } from '../start.js';

export interface RunCtx {
  emit?: EventSink;
  signal?: AbortSignal;
}

export interface StopClusterOutcome {
  engine: { node: string; state: 'stopped' | 'killed' | 'not-recorded' | 'unproven' | 'failed'; detail?: string };
  ray: Array<{ node: string; ok: boolean; detail: string }>;
  /** native: each node's vLLM rank (the head's is also `engine`) */
  ranks?: Array<{
    node: string;
    rank: number;
    state: 'stopped' | 'killed' | 'not-recorded' | 'unproven' | 'failed';
    detail?: string;
  }>;
}

export interface NodeState {
  node: string;
  role: 'head' | 'worker';
  address: string;
  /** in Ray's node list (by address); native clusters have no Ray: 'unknown' */
  ray: 'up' | 'missing' | 'unknown';
  gpus?: number;
  /** native: this node's vLLM rank and whether its process group still runs */
  rank?: { rank: number; process: 'running' | 'gone' | 'unknown' };
}

export interface ClusterStatus {
  record: ClusterRecord;
  server: 'healthy' | 'unhealthy' | 'unreachable';
  serverDetail: string;
  nodes: NodeState[];
  /** healthy: the server answers and Ray lists every node of the file */
  state: 'healthy' | 'degraded' | 'down';
  rayError?: string;
}

/** A group's vLLM as its launch got it back: what the `launched` event names (rank: native's --node-rank). */
export interface GroupLaunch {
  node: string;
  pid: number;
  logFile: string;
  rank?: number;
}

/** A launch that started (its handle), or why not: the message already names the node. */
export type Launched<H> = { ref: H } | { error: string; evidence: string[] };

/** The one watch's inputs for the endpoint on the head, and the failure it names when it was not ready. */
export interface NodeWatch {
  /** the head's log and the end of every group (any one gone ends the wait) */
  view: LaunchView;
  /** the head's listening socket held by what was launched (absent: cannot tell) */
  ours?: () => Promise<boolean | undefined>;
  /** a hang only the executor sees (Ray's cluster losing capacity) */
  hung?: () => Promise<string | undefined>;
  /** not ready (and not cancelled): the failure, naming the node */
  failure(r: NotReady): Promise<Diagnosis>;
}

/**
 * How one executor places a plan's groups on the nodes: what differs between native, Ray on the
 * hosts and Ray in containers. The order is serve's one loop (engine/serve.ts): refuse; before; each
 * group that runs a vLLM launched in its `starts` order; the record; the one watch on the endpoint;
 * on a failure, stop what started; then prewarm, probe and every rank's start report.
 */
export interface NodesPlacement<H extends GroupLaunch = GroupLaunch> {
  /** refused before anything starts (a cluster recorded on these nodes, a Ray sparkctl did not start, another image) */
  refuse(registry: Registry): Promise<Diagnosis | undefined>;
  /**
   * what runs on the nodes before any group's vLLM (Ray: every node's start, then until Ray lists the whole cluster)
   */
  before(): Promise<{ view?: ClusterView; failure?: Diagnosis }>;
  /** one group's vLLM on its node (`clock`: its start, timed from now) */
  launch(step: NodeStep, index: number, clock: StartClock): Promise<Launched<H>>;
  /** the record of the launch, written before the watch (what stop --nodes and status read) */
  record(launched: H[]): ClusterRecord;
  /** the watch on the head's endpoint (native: every worker rank's log followed on `start` too) */
  watch(record: ClusterRecord, start: StartRecord): NodeWatch;
  /** ready: what served (native: every rank joined; Ray: the view `before` waited for) */
  joined(record: ClusterRecord, view: ClusterView | undefined): ClusterView;
  /** a failure: stop what this serve started (the groups launched, then what `before` started), 5 s of grace */
  stop(launched: H[], record?: ClusterRecord): Promise<void>;
}

export interface ClusterExecutor {
  kind: ExecutorKind;
  /** the placement serve's one loop runs this plan with */
  placement(plan: ClusterPlan, ctx: RunCtx): NodesPlacement;
  /** the recorded cluster (record undefined: nothing recorded, clean what this executor can prove ours) */
  stop(
    nf: NodesFile,
    record: ClusterRecord | undefined,
    timeoutS: number,
    signal?: AbortSignal,
  ): Promise<StopClusterOutcome>;
  status(record: ClusterRecord, nf: NodesFile, signal?: AbortSignal): Promise<ClusterStatus>;
}

/**
 * A record runs on these nodes: the same nodes file, or the same head. The one rule for "the cluster
 * on these nodes": serve refuses a second one by it, and stop --nodes without a name stops what it finds.
 */
export const runsOn = (rec: Pick<ClusterRecord, 'nodesFile' | 'head'>, nodesFile: string, nf: NodesFile): boolean =>
  rec.nodesFile === nodesFile || rec.head === nf.head.name;

/** One cluster per set of nodes: a second serve must not touch the running one. */
export function refuseRecorded(plan: Pick<ClusterPlan, 'nodesFile' | 'nf'>, registry: Registry): Diagnosis | undefined {
  const running = registry.clusters().find((c) => runsOn(c, plan.nodesFile, plan.nf));
  if (!running) return undefined;
  return failedBefore(
    'refused',
    `${running.profile} is already served on these nodes (head ${running.head}, ${running.url}, since ${running.startedAt})`,
    [],
    {
      fix: `stop it first: sparkctl stop ${running.profile} --nodes ${running.nodesFile}`,
      node: running.head,
    },
  );
}

/**
 * Not ready, and no other node to blame: the same diagnosis as on one host, from the head's log
 * (written fresh by this launch): its cause id and the line it was read from, the node named.
 */
export function headFailure(plan: Pick<ClusterPlan, 'nf'>, r: NotReady, tail: string): Diagnosis {
  const d = diagnose(
    r.reason === 'exited'
      ? { reason: 'exited', detail: 'exited before it was ready', ms: r.ms }
      : r.reason === 'timeout'
        ? { reason: 'timeout', detail: `was not ready after ${Math.round(r.ms / 1000)} s`, ms: r.ms }
        : r,
    tail,
  );
  return {
    ...d,
    detail: `vLLM on ${plan.nf.head.name} ${d.detail}${d.cause ? `: ${d.cause}` : ''}`,
    node: plan.nf.head.name,
  };
}

/**
 * Groups on several nodes that ended, each diagnosed from its own log, as the one failure: the first
 * whose log named a cause gives the cause id, the line it was read from and the node (else the first
 * that ended); `fix` when none of their logs gave one.
 */
export function endedOnNodes(
  parts: Array<{ node: string; d: Diagnosis }>,
  detail: string,
  lastLines: string[],
  fix: string,
): Diagnosis {
  const first = parts.find((p) => p.d.causeId !== p.d.reason) ?? parts[0]!;
  const { reason, ms, causeId, cause, evidence } = first.d;
  return {
    reason,
    ...(ms === undefined ? {} : { ms }),
    detail,
    causeId,
    ...(cause === undefined ? {} : { cause }),
    fix: parts.find((p) => p.d.fix)?.d.fix ?? fix,
    ...(evidence === undefined ? {} : { evidence }),
    lastLines,
    node: first.node,
  };
}

/**
 * The one serve outcome, for a server over nodes: its head's endpoint is the one replica (once a
 * record named it); the nodes file, what joined and a failure naming a node are its `nodes`.
 */
export function nodesOutcome(
  plan: Pick<ClusterPlan, 'executor' | 'engine' | 'nodesFile' | 'profile' | 'replica'>,
  r: {
    failure?: Diagnosis;
    record?: ClusterRecord;
    view?: ClusterView;
    readyMs?: number;
    prewarm?: PrewarmResult;
    probe?: ProbeResult;
    starts?: RankStart[];
  },
): ServeOutcome {
  const { record: rec } = r;
  const head = r.starts?.find((x) => x.rank === 0)?.start;
  return {
    status: r.failure ? 'launch-failed' : r.probe?.state === 'healthy' ? 'healthy' : 'unhealthy',
    profile: plan.profile.name,
    engine: plan.engine,
    replicas: rec
      ? [
          {
            name: plan.replica.name,
            url: rec.url,
            port: rec.port,
            gpus: [],
            pid: rec.pid,
            logFile: rec.logFile,
            node: rec.head,
            readyMs: r.readyMs,
            start: head,
            prewarm: r.prewarm,
            probe: r.probe,
          },
        ]
      : [],
    stoppedAll: !!r.failure,
    nodes: {
      file: plan.nodesFile,
      executor: plan.executor,
      cluster: r.view ? { nodes: r.view.nodes, gpus: r.view.gpus } : undefined,
      failure: r.failure,
      ranks: r.starts,
    },
  };
}

/**
 * The start over nodes is over (served, or failed): stop following the ranks' logs, say each rank's
 * report (start.ts startReports, as on one host), and keep them in the cluster's record when it stays
 * (status --json and the probe's history read them there).
 */
export async function finishStarts(
  plan: Pick<ClusterPlan, 'stateDir'>,
  start: StartRecord,
  emit: EventSink,
  record?: ClusterRecord,
): Promise<RankStart[]> {
  const starts = rankStarts(await startReports(start, emit));
  if (record) {
    record.start = starts.find((s) => s.rank === 0)?.start;
    record.starts = starts;
    new Registry(plan.stateDir).write('nodes', record);
  }
  return starts;
}
