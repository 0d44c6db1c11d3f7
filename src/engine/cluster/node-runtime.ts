// A Runtime on the nodes of a cluster: what the runtime a profile runs under (engine/runtime, its
// traits) is when the server's ranks run on nodes reached over ssh. The planned commands are the
// host's (ray-plan.ts, native-plan.ts); each runtime says how they run on a node (as they are, or
// each in a container of the one image) and what it refuses before anything starts (the same image
// by ID on every node). plan.ts and the executors ask `onNodes(traits)`: a new runtime adds its
// entry to ON_NODES (the type asks for one for every engine.runtime word) and no executor or verb
// changes.
import type { NodesFile } from '../../profiles/schema.js';
import { traitsOf, type RuntimeTraits } from '../runtime/traits.js';
import { isPinnedRef } from '../pins.js';
import { containerSteps, imageMismatch, readImageIds, type ContainerInputs } from './containers.js';
import type { NodeStep } from './ray-plan.js';
import type { NodeFailure } from './common.js';
import type { ExecutorKind } from '../plan.js';

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
  refuse(plan: { nf: NodesFile; steps: NodeStep[] }, signal?: AbortSignal): Promise<NodeFailure | undefined>;
  /** the one image the planned steps run on every node, and its CLI (undefined: this runtime runs no image; upgrade by image asks) */
  image(steps: NodeStep[]): NodeImage | undefined;
}

/** What a runtime on the nodes runs vLLM from, where it runs an image. */
export type NodeImage = Pick<NonNullable<NodeStep['container']>, 'cli' | 'image'>;

/** vLLM on each node's host: the commands as planned, nothing read before the launch. */
const HOST_ON_NODES: NodeRuntime = {
  place: (_x, _nf, host) => host,
  refuse: async () => undefined,
  image: () => undefined,
};

/** One container per node of the one image (containers.ts), refused unless every node holds that image by ID. */
const CONTAINER_ON_NODES: NodeRuntime = {
  place: (x, nf, host) => containerSteps(x, nf, x.executor, host, x.perNode, x.rdmaNodes),
  image: (steps) => {
    const c = steps[0]?.container;
    return c ? { cli: c.cli, image: c.image } : undefined;
  },
  async refuse(plan, signal) {
    const c = plan.steps[0]!.container!; // onNodes picked this runtime from that step's container
    const ids = await readImageIds(plan.nf, plan.steps, signal);
    const bad = imageMismatch(c.image, ids);
    if (!bad) return undefined;
    return {
      refused: true,
      message: bad,
      // an image ID or digest is already pinned (serve --nodes runs the profile's pin as its image ID): only loading it helps
      fix: isPinnedRef(c.image)
        ? `load that very image on those nodes (${c.cli} save ${c.image} | ssh NODE ${c.cli} load, or sparkctl pull --nodes); it is what every node runs (the profile's pin, or its container.image)`
        : `load the same image on every node (${c.cli} save ${c.image} | ssh NODE ${c.cli} load, or sparkctl pull --nodes), or pin it by digest (container.image: REPO@sha256:...)`,
      evidence: ids.map((x) => `${x.node}: ${x.id ?? x.error ?? 'no image'}`),
    };
  },
};

const ON_NODES: Record<RuntimeTraits['runtime'], NodeRuntime> = { host: HOST_ON_NODES, container: CONTAINER_ON_NODES };

/** The node part of a runtime: its traits (traitsOfProfile for a plan being made, traitsOf for a planned step or record). */
export const onNodes = (t: Pick<RuntimeTraits, 'runtime'>): NodeRuntime => ON_NODES[t.runtime];

/** The image a planned cluster runs on every node, as its runtime says (undefined: it runs on the nodes' hosts). */
export const imageOnNodes = (plan: { steps: NodeStep[] }): NodeImage | undefined => onNodes(traitsOf(plan.steps[0] ?? {})).image(plan.steps);
