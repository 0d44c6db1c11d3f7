// A serve plan as a list of server groups, whatever its placement: each group is placed on a node
// (this host, or a node of the nodes file) and run by a Runtime (on the host, or in a container).
// A replica is one group on the local node; a native cluster (vLLM's --nnodes) is one endpoint whose
// groups are its ranks, one per node; Ray is the same with its per-node `ray start` before the
// head's group. The one Plan (plan.ts) keeps each placement's own fields (ServePlan.replicas is read
// in ~40 places: router, co-location, systemd, upgrade); this is the one view serve.ts walks over
// either (`groupsOf`), so a difference between the placements is a field of a group here, not a
// second path. Pure.
import type { Plan } from './plan.js';
import type { ReplicaPlan } from '../profiles/render.js';
import type { NodeStep } from './cluster/ray-plan.js';
import { runtimeFor } from './runtime/index.js';
import { failedBefore, type Diagnosis } from './diagnose.js';

/** Where a group runs: this host ('local'), or the node of the nodes file it names. */
type GroupNode = { kind: 'local' } | { kind: 'node'; name: string; address: string };

export interface ServerGroup {
  /** its place in the plan's start order (a replica's index; a node's rank) */
  index: number;
  /** the endpoint it serves, or helps serve (a replica's name; a cluster's one replica) */
  server: string;
  node: GroupNode;
  /** replica: serves its own endpoint; head: serves the cluster's, for every rank; worker: joins the head */
  role: 'replica' | 'head' | 'worker';
  /** where its processes run, as the Runtime says it */
  runtime: 'host' | 'container';
  /**
   * when it is launched: 'first' (the start), 'after-previous' (a replica: one by one, each
   * registered before the next), 'after-head' (a worker: together, once the head is up)
   */
  starts: 'first' | 'after-previous' | 'after-head';
  /**
   * what runs on its node before the group's vLLM: Ray's `ray start` (the head's must answer before any worker starts)
   */
  before?: 'ray-start';
  /** whether a vLLM of its own runs in the group (a Ray worker's GPUs are the head's vLLM's, through Ray) */
  vllm: boolean;
  /** the port its API answers on (a replica, a head); a worker serves none */
  port?: number;
  /** readiness is asked of this group's API; every group's end is raced against it */
  ready: boolean;
  /** what the group was planned from (the loop launches from it; a view, not a copy) */
  of: { replica: ReplicaPlan } | { step: NodeStep };
}

/** Every server group of a plan, in start order. */
export function groupsOf(plan: Plan): ServerGroup[] {
  if (plan.placement === 'local') {
    const runtime = runtimeFor(plan).runtime;
    return plan.replicas.map((r, i) => ({
      index: r.index,
      server: r.name,
      node: { kind: 'local' },
      role: 'replica',
      runtime,
      starts: i === 0 ? 'first' : 'after-previous',
      vllm: true,
      port: r.port,
      ready: true,
      of: { replica: r },
    }));
  }
  const ray = plan.executor === 'ray';
  return plan.steps.map((s, i) => {
    const head = s.role === 'head';
    return {
      index: i,
      server: plan.replica.name,
      node: { kind: 'node', name: s.node, address: s.address },
      role: s.role,
      runtime: runtimeFor(s).runtime,
      starts: head ? 'first' : 'after-head',
      ...(ray ? { before: 'ray-start' as const } : {}),
      // native: a vLLM per rank (workers --headless); Ray: the head's alone
      vllm: !ray || head,
      ...(head ? { port: plan.replica.port } : {}),
      ready: head,
      of: { step: s },
    };
  });
}

/** The node step a group over nodes was planned from (a replica on this host has none). */
export function stepOf(g: ServerGroup): NodeStep {
  if (!('step' in g.of)) throw new Error(`internal: replica ${g.server} on this host in a plan over nodes`);
  return g.of.step;
}

/** The node a group runs on, by name ('local': this host). */
export const nodeName = (g: ServerGroup): string => (g.node.kind === 'node' ? g.node.name : 'local');

/** The groups that serve an endpoint of the plan (readiness, prewarm and the probe are asked of them). */
export const endpointsOf = (plan: Plan): ServerGroup[] => groupsOf(plan).filter((g) => g.ready);

/** A group's launch: what it got back (its handle), or why not (the message names the group's node). */
export type GroupStarted<H> = { ref: H } | { error: string; evidence: string[] };

/**
 * Groups launched in their `starts` order: the first alone; an 'after-previous' group once the one
 * before it started; every 'after-head' group together, once the first started. A failure ends the
 * order: `refs` is everything that started (the caller stops it), `failure` every group that did not,
 * a concurrent group's evidence named by its node. `started` is told of each start, in group order.
 * `cancel`: once aborted, no further group is launched (`refs` then holds fewer than `groups`).
 * `afterFirst`: what must hold once the first group started and before the rest start (Ray in
 * containers: the head's Ray answering); its failure ends the order. A launch that throws ends the
 * order with that throw, once every group that started is told to `started`.
 */
export async function launchInOrder<H>(
  groups: ServerGroup[],
  launch: (g: ServerGroup) => Promise<GroupStarted<H>>,
  started: (h: H, g: ServerGroup) => void = () => {},
  cancel?: AbortSignal,
  afterFirst?: (first: H) => Promise<Diagnosis | undefined>,
): Promise<{ refs: H[]; failure?: Diagnosis }> {
  const refs: H[] = [];
  for (const g of groups.filter((x) => x.starts !== 'after-head')) {
    if (cancel?.aborted) return { refs };
    const r = await launch(g);
    if ('error' in r) return { refs, failure: failedBefore('not-started', r.error, r.evidence, placedOn(g)) };
    refs.push(r.ref);
    started(r.ref, g);
    const wait = refs.length === 1 ? await afterFirst?.(r.ref) : undefined;
    if (wait) return { refs, failure: wait };
  }
  const together = groups.filter((x) => x.starts === 'after-head');
  if (cancel?.aborted) return { refs };
  // a launch that throws (a bug) must not hide the ones beside it that started: each is told to `started` (the caller
  // stops it) before the throw goes on
  const rest = await Promise.all(
    together.map(async (g) => ({ g, r: await launch(g).catch((thrown: unknown) => ({ thrown })) })),
  );
  const failed: Array<{ g: ServerGroup; error: string; evidence: string[] }> = [];
  const threw: unknown[] = [];
  for (const { g, r } of rest) {
    if ('thrown' in r) threw.push(r.thrown);
    else if ('error' in r) failed.push({ g, ...r });
    else {
      refs.push(r.ref);
      started(r.ref, g);
    }
  }
  if (threw.length) throw threw[0];
  if (!failed.length) return { refs };
  return {
    refs,
    failure: failedBefore(
      'not-started',
      failed.map((f) => f.error).join('\n'),
      failed.flatMap((f) => f.evidence.map((l) => `${nodeName(f.g)}: ${l}`)),
      failed.length === 1 ? placedOn(failed[0]!.g) : {},
    ),
  };
}

/** The node a failure names: a group's on a node (absent: this host). */
const placedOn = (g: ServerGroup): { node?: string } => (g.node.kind === 'local' ? {} : { node: nodeName(g) });
