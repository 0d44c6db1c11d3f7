// What both executors share when they start and stop the nodes: the runtime's refusal before
// anything starts (a container's: the same image everywhere, by ID; node-runtime.ts), the start order (the head first and whatever it must be before
// the others start, then every worker concurrently, each failure named by node), and the stop of
// every container a launch got back (the head first, then the rest together).
import type { NodesFile } from '../../profiles/schema.js';
import { allNodes, type NodeStep } from './ray-plan.js';
import { onNodes } from './node-runtime.js';
import { traitsOf } from '../runtime/traits.js';
import { stopOnNode, type ContainerStopState, type NodeContainerRef } from './node-container.js';
import type { NodeFailure, ClusterPlan } from './common.js';

/** Refused before anything starts, as the nodes' runtime says (a container: unless every node holds the same image, by ID). */
export function sameImage(plan: Pick<ClusterPlan, 'nf' | 'steps'>, signal?: AbortSignal): Promise<NodeFailure | undefined> {
  return onNodes(traitsOf(plan.steps[0] ?? {})).refuse(plan, signal);
}

export type Started<T> = { ref: T } | { error: string; evidence: string[] };

/**
 * The start order of a cluster: step 0 (the head) alone, then `afterHead` (e.g. until the head's Ray
 * answers), then every other step concurrently. `refs`: everything that was started, also when a
 * failure follows (the caller stops them); `failure`: every step that failed, named by `named`.
 */
export async function startInOrder<T>(
  steps: NodeStep[],
  launch: (s: NodeStep, index: number) => Promise<Started<T>>,
  afterHead: (head: T) => Promise<NodeFailure | undefined>,
  named: (s: NodeStep, error: string) => string,
  started: (ref: T, index: number) => void = () => {},
): Promise<{ refs: T[]; failure?: NodeFailure }> {
  const head = await launch(steps[0]!, 0);
  if ('error' in head) return { refs: [], failure: { message: named(steps[0]!, head.error), evidence: head.evidence } };
  started(head.ref, 0);
  const refs = [head.ref];
  const wait = await afterHead(head.ref);
  if (wait) return { refs, failure: wait };
  const rest = await Promise.all(steps.slice(1).map(async (s, i) => ({ s, r: await launch(s, i + 1), i: i + 1 })));
  const failed: Array<{ s: NodeStep; error: string; evidence: string[] }> = [];
  for (const { s, r, i } of rest) {
    if ('error' in r) failed.push({ s, ...r });
    else {
      refs.push(r.ref);
      started(r.ref, i);
    }
  }
  if (!failed.length) return { refs };
  return {
    refs,
    failure: {
      message: failed.map((f) => named(f.s, f.error)).join('\n'),
      evidence: failed.flatMap((f) => f.evidence.map((l) => `${f.s.node}: ${l}`)),
    },
  };
}

/** Every container stopped and removed, each proven by its recorded ID: the head's first, then the rest together. */
export async function stopAllContainers(
  nf: NodesFile,
  refs: NodeContainerRef[],
  graceS: number,
  signal?: AbortSignal,
): Promise<Array<{ node: string; id: string; state: ContainerStopState; detail?: string }>> {
  const one = async (r: NodeContainerRef) => {
    const n = allNodes(nf).find((x) => x.name === r.node)!;
    const x = await stopOnNode(nf, n, r, graceS, signal);
    return { node: r.node, id: r.containerId, state: x.state, detail: x.detail };
  };
  const first = refs.filter((r) => r.node === nf.head.name);
  const out = await Promise.all(first.map(one));
  return [...out, ...(await Promise.all(refs.filter((r) => r.node !== nf.head.name).map(one)))];
}
