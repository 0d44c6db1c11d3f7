// A native rank (one `vllm serve` of vLLM's own --nnodes launch) on its node, as each runtime runs
// it: on the node's host (a process group in its own session, proven by pid, start time and marker;
// node-proc.ts) or in a container (proven by the ID its run got back; node-container.ts). Each is a
// RankOps: how a rank launches, stops, is seen alive, shows its log, and whether its listening socket
// can be proven its own. node-runtime.ts holds one per engine.runtime word; native.ts asks it and
// never asks which runtime it is.
import type { NodesFile } from '../../profiles/schema.js';
import type { ClusterRank } from '../registry.js';
import type { StartClock } from '../phases.js';
import { remoteListenerOurs } from './remote-socket.js';
import { launchOnNodeHost, NODE_LOGS, nodePathWord, stopOnNode, sshShell } from './node-proc.js';
import { cachesFrom, nodeCacheScript } from './node-caches.js';
import { nodeOf, type NodeStep } from './ray-plan.js';
import { aliveLine, logsLine, refOf, runOnNode, stopAllContainers, type NodeContainerRef } from './node-container.js';
import type { Launched, StopClusterOutcome } from './common.js';
import type { ClusterPlan } from '../plan.js';

type RankStops = NonNullable<StopClusterOutcome['ranks']>;

/** A native rank on its node under one runtime. */
export interface RankOps {
  /**
   * rank `rank` of the plan on its step's node (`marker`: the launch's; the API key goes to rank 0 alone, never in
   * argv)
   */
  launch(
    plan: ClusterPlan,
    step: NodeStep,
    rank: number,
    marker: string,
    signal?: AbortSignal,
    clock?: StartClock,
  ): Promise<Launched<ClusterRank>>;
  /** every recorded rank stopped (the head's first, so its API drains), `graceS` before a kill */
  stop(nf: NodesFile, ranks: ClusterRank[], graceS: number, signal?: AbortSignal): Promise<RankStops>;
  /** the shell that exits 9 on the node when the rank is gone (255 is ssh failing, not an answer) */
  aliveLine(r: Pick<ClusterRank, 'node' | 'pid' | 'containerId' | 'cli'>): string;
  /** the shell that prints the rank's last `lines` log lines on its node */
  tailLine(r: Pick<ClusterRank, 'node' | 'logFile' | 'containerId' | 'cli'>, lines: number): string;
  /**
   * what answers on the rank's port is its own group (undefined: this runtime cannot tell; the answer is trusted, as on
   * one host)
   */
  ours(
    nf: NodesFile,
    r: ClusterRank,
    port: number,
    signal?: AbortSignal,
  ): (() => Promise<boolean | undefined>) | undefined;
}

/**
 * One rank on its node's host, in its own session (the one launch on a node's host: node-proc.ts); the
 * API key (head only) through stdin, never argv.
 * The start caches' folder is made on the node first (node-caches.ts): its state goes on the rank's clock.
 */
async function launchOnHost(
  plan: ClusterPlan,
  step: NodeStep,
  rank: number,
  marker: string,
  signal?: AbortSignal,
  clock?: StartClock,
): Promise<Launched<ClusterRank>> {
  const n = nodeOf(plan.nf, step.node);
  const logFile = `${NODE_LOGS}/${plan.replica.name}-rank${rank}.log`;
  const setup = plan.caches ? nodeCacheScript(plan.caches) : undefined;
  const r = await launchOnNodeHost(plan.nf, n, {
    argv: step.argv[0]!,
    stepEnv: step.env,
    env: plan.replica.env,
    setup,
    key: rank === 0 ? plan.apiKey : undefined,
    marker,
    logFile,
    signal,
  });
  if ('error' in r) return r;
  const caches = plan.caches ? cachesFrom(r.stdout, plan.caches) : undefined;
  if (caches) clock?.cachesWere(caches);
  return { ref: { node: n.name, rank, pid: r.pid, startTime: r.startTime, marker, logFile } };
}

/**
 * Each rank's process group: TERM, `graceS`, KILL (proven ours first); the head first (its API drains), then the
 * workers together.
 */
async function stopHostRanks(
  nf: NodesFile,
  ranks: ClusterRank[],
  graceS: number,
  signal?: AbortSignal,
): Promise<RankStops> {
  const one = async (r: ClusterRank) => {
    const x = await stopOnNode(sshShell(nf, nodeOf(nf, r.node)), r, graceS, signal);
    return { node: r.node, rank: r.rank, ...x };
  };
  const head = ranks.filter((r) => r.rank === 0);
  const out = await Promise.all(head.map(one));
  return [...out, ...(await Promise.all(ranks.filter((r) => r.rank !== 0).map(one)))];
}

/** vLLM on each node's host: a process group, proven by pid, start time and marker; its log a file on the node. */
export const HOST_RANKS: RankOps = {
  launch: launchOnHost,
  stop: stopHostRanks,
  aliveLine: (r) => `kill -0 ${r.pid} 2>/dev/null || exit 9`,
  tailLine: (r, lines) => `tail -n ${Math.trunc(lines)} ${nodePathWord(r.logFile)}`,
  // the one-host path's socket-owner proof, over ssh: the head's port held by rank 0's own group
  ours: (nf, r, port, signal) => () => remoteListenerOurs(nf, nodeOf(nf, r.node), port, r.pid, signal),
};

/** A rank in a container on its node: the ID its run got back (from --cidfile) is what proves it ours later. */
async function launchInContainer(
  plan: ClusterPlan,
  step: NodeStep,
  rank: number,
  marker: string,
  signal?: AbortSignal,
): Promise<Launched<ClusterRank>> {
  const n = nodeOf(plan.nf, step.node);
  const c = await runOnNode(plan.nf, n, step, marker, rank === 0 ? plan.apiKey : undefined, signal);
  if ('error' in c) return c;
  const { containerId, cli } = c.ref;
  return {
    ref: {
      node: n.name,
      rank,
      pid: 0,
      marker,
      logFile: `${cli[0]} logs ${containerId.slice(0, 12)}`,
      containerId,
      cli,
    },
  };
}

/** Every rank's container, stopped and removed by its recorded ID: the head's first. */
async function stopContainerRanks(
  nf: NodesFile,
  ranks: ClusterRank[],
  graceS: number,
  signal?: AbortSignal,
): Promise<RankStops> {
  const out = await stopAllContainers(
    nf,
    ranks.map(refOf).filter((c): c is NodeContainerRef => !!c),
    graceS,
    signal,
  );
  return out.map((x, i) => ({
    node: x.node,
    rank: ranks.find((r) => r.containerId === x.id)?.rank ?? i,
    state: x.state,
    detail: x.detail,
  }));
}

/**
 * A rank's container as its record names it. A record that names a CLI and no ID (not one sparkctl
 * writes) gets an empty ID, which the runtime guard refuses as unproven: never a host pid of 0.
 */
const containerOf = (r: Pick<ClusterRank, 'node' | 'containerId' | 'cli'>): NodeContainerRef =>
  refOf(r) ?? { node: r.node, containerId: r.containerId ?? '', cli: r.cli ?? [] };

/** vLLM in a container on each node: proven by its recorded ID; its log the runtime's `logs`. */
export const CONTAINER_RANKS: RankOps = {
  launch: launchInContainer,
  stop: stopContainerRanks,
  aliveLine: (r) => aliveLine(containerOf(r)),
  tailLine: (r, lines) => logsLine(containerOf(r), lines),
  // its processes are the runtime's, not provable by pid here
  ours: () => undefined,
};
