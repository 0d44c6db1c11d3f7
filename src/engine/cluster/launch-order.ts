// What both executors share when they start and stop the nodes: the runtime's refusal before
// anything starts (a container's: the same image everywhere, by ID; node-runtime.ts) and the stop of
// every container a launch got back (the head first, then the rest together). The start order is
// engine/groups.ts launchInOrder, the one for every placement.
import type { NodesFile } from '../../profiles/schema.js';
import { allNodes } from './ray-plan.js';
import { onNodes } from './node-runtime.js';
import { traitsOf } from '../runtime/traits.js';
import { stopOnNode, type ContainerStopState, type NodeContainerRef } from './node-container.js';
import type { NodeFailure } from './common.js';
import type { ClusterPlan } from '../plan.js';

/** Refused before anything starts, as the nodes' runtime says (a container: unless every node holds the same image, by ID). */
export function sameImage(plan: Pick<ClusterPlan, 'nf' | 'steps'>, signal?: AbortSignal): Promise<NodeFailure | undefined> {
  return onNodes(traitsOf(plan.steps[0] ?? {})).refuse(plan, signal);
}

export type Started<T> = { ref: T } | { error: string; evidence: string[] };

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
