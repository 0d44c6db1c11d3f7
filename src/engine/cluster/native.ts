// The native executor: vLLM's own multi-node launch (--nnodes, 0.12 and later), one `vllm serve`
// per node over ssh. Rank 0 on the head first (it serves the API and hosts torch.distributed's
// store), then every worker rank with --headless, concurrently. The head becomes ready only when
// every rank has joined (vLLM waits for the whole world before it loads), so readiness is the head's
// /health and /v1/models, raced against every node's process: a rank that ends is named by node, with
// the cause read from its own log. Stop: every rank's process group (proven ours first), the head
// first so its API drains. Nothing is launched without being recorded, and a failed launch stops
// every rank it started. The order is serve's one loop (engine/serve.ts); this file is its placement.
import type { NodesFile } from '../../profiles/schema.js';
import { diagnose, type Diagnosis } from '../diagnose.js';
import type { ClusterRecord, ClusterRank } from '../registry.js';
import { http } from '../../client/http.js';
import { RemoteView } from './remote-view.js';
import { randomUUID } from 'node:crypto';
import { ssh } from './ssh.js';
import { allNodes, nodeOf } from './ray-plan.js';
import { onRank, onStep, placed } from './node-runtime.js';
import type { StartRecord } from '../start.js';
import type { ClusterPlan } from '../plan.js';
import {
  refuseRecorded,
  headFailure,
  endedOnNodes,
  type ClusterExecutor,
  type NodesPlacement,
  type NodeWatch,
  type RunCtx,
  type ClusterStatus,
} from './common.js';

/** The record of every rank launched (rank 0 = the head's pid): what stop --nodes and status read. */
function nativeRecord(plan: ClusterPlan, ranks: ClusterRank[]): ClusterRecord {
  const { nf } = plan;
  const head = ranks[0]!;
  return {
    version: 1,
    executor: 'native',
    profile: plan.profile.name,
    nodesFile: plan.nodesFile,
    head: nf.head.name,
    pid: head.pid,
    port: plan.replica.port,
    url: `http://${nf.head.address}:${plan.replica.port}`,
    servedName: plan.servedName,
    logFile: head.logFile,
    startedAt: new Date().toISOString(),
    ...(plan.launch ? { launch: plan.launch } : {}),
    startTime: head.startTime,
    marker: head.marker,
    ranks,
  };
}

/** 9 from the node: the rank is gone, as its runtime reads it (255 is ssh failing, not an answer). */
const aliveLine = (r: ClusterRank) => onRank(r).rank.aliveLine(r);

/** The ranks whose process has ended, read on their nodes concurrently. */
async function goneRanks(nf: NodesFile, ranks: ClusterRank[]): Promise<ClusterRank[]> {
  const seen = await Promise.all(
    ranks.map(async (r) => ({ r, x: await ssh(nf, nodeOf(nf, r.node), aliveLine(r), { timeoutMs: 15_000 }) })),
  );
  return seen.filter(({ x }) => x.exitCode === 9).map(({ r }) => r);
}

/**
 * The shell that prints a rank's last n log lines on its node, as its runtime keeps them (a file, or its container's
 * logs).
 */
const rankTail = (r: ClusterRank, lines: number) => onRank(r).rank.tailLine(r, lines);

const tailOf = async (nf: NodesFile, r: ClusterRank, lines = 60) => {
  const x = await ssh(nf, nodeOf(nf, r.node), rankTail(r, lines), { timeoutMs: 15_000 });
  return x.stdout + x.stderr;
};

/**
 * A rank that ended, named by node and rank, with the cause its own log gives (its cause id and line: the one-host
 * diagnosis).
 */
async function rankFailure(plan: ClusterPlan, gone: ClusterRank[]): Promise<Diagnosis> {
  const parts = await Promise.all(
    gone.map(async (r) => {
      const n = nodeOf(plan.nf, r.node);
      const d = diagnose(
        { reason: 'exited', detail: 'exited before the cluster was ready', ms: 0 },
        await tailOf(plan.nf, r),
      );
      return { r, n, d, node: r.node };
    }),
  );
  return endedOnNodes(
    parts,
    parts
      .map(
        ({ r, n, d }) =>
          `vLLM rank ${r.rank} on ${n.name} (${n.address}) exited before the cluster was ready${d.cause ? `: ${d.cause}` : ''}`,
      )
      .join('\n'),
    parts.flatMap(({ r, d }) => d.lastLines.slice(-8).map((l) => `${r.node}: ${l}`)),
    `read its log on ${parts[0]!.n.name}: ${parts[0]!.r.logFile}; sparkctl preflight --nodes ${plan.nodesFile}`,
  );
}

/**
 * The head's log as the after-launch watch reads it, and every rank's process as its end (any rank gone ends the wait).
 */
const headView = (plan: ClusterPlan, ranks: ClusterRank[], gone: (g: ClusterRank[]) => void) => {
  const head = ranks[0]!;
  return new RemoteView(
    plan.nf,
    nodeOf(plan.nf, head.node),
    (n) => rankTail(head, n),
    async () => {
      const g = await goneRanks(plan.nf, ranks);
      gone(g);
      return g.length ? { reason: 'exited', detail: 'a rank exited' } : undefined;
    },
  );
};

/**
 * The watch on the head's endpoint, raced against every rank's process (a rank that ends is named by
 * node, with the cause its own log gives); every worker rank's log followed on its node meanwhile.
 */
function nativeWatch(plan: ClusterPlan, record: ClusterRecord, start: StartRecord, signal?: AbortSignal): NodeWatch {
  const ranks = record.ranks ?? [];
  // every worker rank's log followed on its node while the head starts (the head's is the watch's, read once more at
  // ready)
  for (const r of ranks) if (r.rank > 0) start.follow(r.rank, plan.nf, nodeOf(plan.nf, r.node), (n) => rankTail(r, n));
  start.startFollowing();
  let gone: ClusterRank[] = [];
  return {
    view: headView(plan, ranks, (g) => {
      gone = g;
    }),
    // what answers on the head's port is rank 0's own, as its runtime can prove it (on a host: the one-host path's
    // socket-owner proof), not a server that held the port first (undefined: the runtime cannot tell; the answer is
    // trusted, as on one host)
    ours: onRank(ranks[0]!).rank.ours(plan.nf, ranks[0]!, plan.replica.port, signal),
    // Every rank runs but the head never served: the head's own log says why (a rank that never joined, a stall, a
    // known hang).
    failure: async (r) =>
      gone.length ? rankFailure(plan, gone) : headFailure(plan, r, await tailOf(plan.nf, ranks[0]!)),
  };
}

/** A rank's stop after a failed start, as its cleanup line says it. */
function rankCleanup(x: { rank: number; state: string; detail?: string }, graceS: number): string {
  const what = `vLLM rank ${x.rank}`;
  if (x.state === 'stopped') return `${what} stopped`;
  if (x.state === 'killed') return `${what} killed after ${graceS} s`;
  return `${what} left: ${x.detail ?? x.state}`;
}

/** A launch's ranks all run where its plan said: stopped as the runtime of the first one's record says. */
const stopRanks = (nf: NodesFile, ranks: ClusterRank[], graceS: number, signal?: AbortSignal) =>
  (ranks[0] ? onRank(ranks[0]).rank : onStep(undefined).rank).stop(nf, ranks, graceS, signal);

/**
 * vLLM's own launch as a placement for serve's one loop: nothing before; each rank a vLLM (the head's
 * rank 0 first, then every worker --headless, together), on its host or in its container; the watch
 * races every rank; a failure stops every rank launched.
 */
function nativePlacement(plan: ClusterPlan, ctx: RunCtx): NodesPlacement<ClusterRank> {
  const marker = randomUUID();
  return placed(plan, ctx.signal, {
    refuse: async (registry) => refuseRecorded(plan, registry),
    before: async () => ({}),
    launch: async (step, rank, clock) => {
      const r = await onStep(step).rank.launch(plan, step, rank, marker, ctx.signal, clock);
      return 'error' in r
        ? {
            error: `vLLM rank ${rank} did not start on ${step.node} (${nodeOf(plan.nf, step.node).address}): ${r.error}`,
            evidence: r.evidence,
          }
        : r;
    },
    record: (ranks) => nativeRecord(plan, ranks),
    watch: (record, start) => nativeWatch(plan, record, start, ctx.signal),
    joined: (record) => {
      const view = { nodes: record.ranks!.length, gpus: plan.tensor * plan.pipeline, complete: true };
      ctx.emit?.({ type: 'ranks-joined', nodes: view.nodes, gpus: view.gpus });
      return view;
    },
    // every rank this launch started, each stop said as a cleanup on its node (as Ray says its own)
    stop: async (ranks) => {
      for (const x of await stopRanks(plan.nf, ranks, 5))
        ctx.emit?.({ type: 'cleanup', node: x.node, what: rankCleanup(x, 5) });
    },
  });
}

export const nativeExecutor: ClusterExecutor = {
  kind: 'native',
  placement: nativePlacement,

  async stop(nf, record, timeoutS, signal) {
    if (!record) return { engine: { node: nf.head.name, state: 'not-recorded' }, ray: [], ranks: [] };
    const ranks = await stopRanks(nf, record.ranks ?? [], timeoutS, signal);
    const h = ranks.find((r) => r.rank === 0);
    return { engine: { node: nf.head.name, state: h?.state ?? 'not-recorded', detail: h?.detail }, ray: [], ranks };
  },

  async status(record, nf, signal): Promise<ClusterStatus> {
    const h = await http(`${record.url}/health`, { timeoutMs: 2000 });
    const server = h.ok ? (h.status === 200 ? 'healthy' : 'unhealthy') : 'unreachable';
    const ranks = record.ranks ?? [];
    const seen = await Promise.all(
      ranks.map(async (r) => ({
        r,
        x: await ssh(nf, nodeOf(nf, r.node), aliveLine(r), { timeoutMs: 15_000, signal }),
      })),
    );
    const nodes = allNodes(nf).map((n, i) => {
      const s = seen.find((x) => x.r.node === n.name);
      const process: 'running' | 'gone' | 'unknown' = !s
        ? 'unknown'
        : s.x.exitCode === 0
          ? 'running'
          : s.x.exitCode === 9
            ? 'gone'
            : 'unknown';
      return {
        node: n.name,
        role: i === 0 ? ('head' as const) : ('worker' as const),
        address: n.address,
        ray: 'unknown' as const,
        rank: s ? { rank: s.r.rank, process } : undefined,
      };
    });
    const all = nodes.every((n) => n.rank?.process === 'running');
    const state =
      server === 'healthy' && all
        ? 'healthy'
        : server === 'unreachable' && nodes.every((n) => n.rank?.process !== 'running')
          ? 'down'
          : 'degraded';
    return { record, server, serverDetail: h.ok ? `HTTP ${h.status}` : h.message, nodes, state };
  },
};
