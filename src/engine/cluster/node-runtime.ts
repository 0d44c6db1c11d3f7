// A Runtime on the nodes of a cluster: what the runtime a profile runs under (engine/runtime, its
// traits) is when the server's ranks run on nodes reached over ssh. The planned commands are the
// host's (ray-plan.ts, native-plan.ts); each runtime says how they run on a node (as they are, or
// each in a container of the one image), what it refuses before anything starts (the same image
// by ID on every node), how a native rank launches, stops and is seen on a node (native-ranks.ts),
// and how Ray runs there (ray.ts on the hosts, ray-containers.ts in containers). plan.ts and the
// executors ask `onNodes(traits)` (a planned step: `onStep`; a recorded rank: `onRank`): a new
// runtime adds its entry to ON_NODES (the type asks for one for every engine.runtime word) and no
// executor or verb changes.
import type { NodesFile } from '../../profiles/schema.js';
import type { ClusterRank, ClusterRecord } from '../registry.js';
import { traitsOf, type RuntimeTraits } from '../runtime/traits.js';
import { isPinnedRef } from '../pins.js';
import { containerSteps, imageMismatch, readImageIds, type ContainerInputs } from './containers.js';
import type { NodeStep } from './ray-plan.js';
import type { ClusterExecutor, GroupLaunch, NodesPlacement } from './common.js';
import type { ExecutorKind } from '../plan.js';
import { failedBefore, type Diagnosis } from '../diagnose.js';
import { CONTAINER_RANKS, HOST_RANKS, type RankOps } from './native-ranks.js';
import { rayPlacement, rayStatus, stopRay } from './ray.js';
import { rayContainersPlacement, statusRayContainers, stopRayContainers } from './ray-containers.js';

/** What placing the host's commands on the nodes reads: the runtime's inputs and the nodes' shape. */
interface PlaceInputs extends ContainerInputs {
  executor: ExecutorKind;
  /** GPUs per node of a native rank (tensor x pipeline / nodes) */
  perNode: number;
  /** the nodes whose fabric shows RDMA devices (read at launch; undefined in a plan: every node) */
  rdmaNodes?: Set<string>;
}

interface NodeRuntime {
  /** the planned host steps as this runtime runs them, one per node, in start order */
  place(x: PlaceInputs, nf: NodesFile, host: NodeStep[]): NodeStep[];
  /** refused before anything starts on any node (undefined: nothing to refuse), read on the nodes over ssh */
  refuse(plan: { nf: NodesFile; steps: NodeStep[] }, signal?: AbortSignal): Promise<Diagnosis | undefined>;
  /**
   * the one image the planned steps run on every node, and its CLI (undefined: this runtime runs no image; upgrade by
   * image asks)
   */
  image(steps: NodeStep[]): NodeImage | undefined;
  /** a native rank (vLLM's own --nnodes launch) on its node under this runtime */
  rank: RankOps;
  /**
   * a Ray cluster on the nodes under this runtime, vLLM on the head: its placement for serve's loop (the runtime's
   * refusal is added by `placed`), its stop and its status
   */
  ray: Pick<ClusterExecutor, 'placement' | 'stop' | 'status'>;
}

/** What a runtime on the nodes runs vLLM from, where it runs an image. */
export type NodeImage = Pick<NonNullable<NodeStep['container']>, 'cli' | 'image'>;

/** vLLM on each node's host: the commands as planned, nothing read before the launch. */
const HOST_ON_NODES: NodeRuntime = {
  place: (_x, _nf, host) => host,
  refuse: async () => undefined,
  image: () => undefined,
  rank: HOST_RANKS,
  ray: { placement: rayPlacement, stop: stopRay, status: rayStatus },
};

/** One container per node of the one image (containers.ts), refused unless every node holds that image by ID. */
const CONTAINER_ON_NODES: NodeRuntime = {
  place: (x, nf, host) => containerSteps(x, nf, x.executor, host, x.perNode, x.rdmaNodes),
  rank: CONTAINER_RANKS,
  // a record of Ray in containers always holds its containers (ranks): onRecord picks this runtime only for one that
  // does
  ray: {
    placement: rayContainersPlacement,
    stop: (nf, record, timeoutS, signal) => stopRayContainers(nf, record!, timeoutS, signal),
    status: statusRayContainers,
  },
  image: (steps) => {
    const c = steps[0]?.container;
    return c ? { cli: c.cli, image: c.image } : undefined;
  },
  async refuse(plan, signal) {
    const c = plan.steps[0]!.container!; // onStep picked this runtime from that step's container
    const ids = await readImageIds(plan.nf, plan.steps, signal);
    const bad = imageMismatch(c.image, ids);
    if (!bad) return undefined;
    return failedBefore(
      'refused',
      bad,
      ids.map((x) => `${x.node}: ${x.id ?? x.error ?? 'no image'}`),
      {
        // an image ID or digest is already pinned (serve --nodes runs the profile's pin as its image ID): only loading
        // it helps
        fix: isPinnedRef(c.image)
          ? `load that very image on those nodes (${c.cli} save ${c.image} | ssh NODE ${c.cli} load, or sparkctl pull --nodes); it is what every node runs (the profile's pin, or its container.image)`
          : `load the same image on every node (${c.cli} save ${c.image} | ssh NODE ${c.cli} load, or sparkctl pull --nodes), or pin it by digest (container.image: REPO@sha256:...)`,
      },
    );
  },
};

const ON_NODES: Record<RuntimeTraits['runtime'], NodeRuntime> = { host: HOST_ON_NODES, container: CONTAINER_ON_NODES };

/**
 * The node part of a runtime: its traits (traitsOfProfile for a plan being made, traitsOf for a planned step or
 * record).
 */
export const onNodes = (t: Pick<RuntimeTraits, 'runtime'>): NodeRuntime => ON_NODES[t.runtime];

/**
 * The runtime a planned cluster runs under, as its first step says (every step of a plan runs under the one runtime).
 */
export const onStep = (s: Pick<NodeStep, 'container'> | undefined): NodeRuntime => onNodes(traitsOf(s ?? {}));

/** The runtime a recorded rank runs under, as its record says (a rank in a container records its CLI). */
export const onRank = (r: Pick<ClusterRank, 'cli'>): NodeRuntime => onNodes(traitsOf({ container: r.cli }));

/**
 * The runtime a recorded cluster runs under: its head rank's (a record without ranks: Ray on the hosts, which records
 * none).
 */
export const onRecord = (r: Pick<ClusterRecord, 'ranks'> | undefined): NodeRuntime =>
  r?.ranks?.[0] ? onRank(r.ranks[0]) : HOST_ON_NODES;

/** The image a planned cluster runs on every node, as its runtime says (undefined: it runs on the nodes' hosts). */
export const imageOnNodes = (plan: { steps: NodeStep[] }): NodeImage | undefined =>
  onStep(plan.steps[0]).image(plan.steps);

/**
 * An executor's placement with the runtime's refusal after its own (a cluster recorded on these
 * nodes, a Ray sparkctl did not start): read on the nodes only when the executor refuses nothing.
 */
export function placed<H extends GroupLaunch>(
  plan: { nf: NodesFile; steps: NodeStep[] },
  signal: AbortSignal | undefined,
  p: NodesPlacement<H>,
): NodesPlacement<H> {
  return {
    ...p,
    refuse: async (registry) => (await p.refuse(registry)) ?? (await onStep(plan.steps[0]).refuse(plan, signal)),
  };
}
