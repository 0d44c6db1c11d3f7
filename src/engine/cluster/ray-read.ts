// What Ray says about its cluster, read on the head: `ray status` and Ray's own node list (its
// Python API), either on the head host or inside the head's container (Ray in containers: the
// head's Ray lives there, its CLI and Python with it).
import type { NodesFile } from '../../profiles/schema.js';
import { ssh, remoteWhy } from './ssh.js';
import {
  compareCluster,
  fabricAddress,
  parseRayStatus,
  parseRayNodes,
  rayPython,
  RAY_NODES_PY,
  type ClusterView,
  type RayNode,
} from './ray-plan.js';
import { execLine, type NodeContainerRef } from './node-container.js';

export interface RaySeen {
  view?: ClusterView;
  nodes?: RayNode[];
  status?: string;
  error?: string;
}

/** The shell lines that ask the head's Ray: on the host, or through `exec` in the head's container. */
export function rayReadLines(nf: NodesFile, head?: NodeContainerRef): { status: string; nodes: string } {
  const py = rayPython(RAY_NODES_PY, [`${fabricAddress(nf.head)}:${nf.rayPort}`]);
  if (!head) return { status: 'ray status', nodes: py };
  return { status: execLine(head, ['ray', 'status']), nodes: execLine(head, ['sh', '-c', py]) };
}

/**
 * Ray's view of the cluster, from the head: its node list (addresses) when Ray's Python API answers, else `ray
 * status`'s counts.
 */
export async function readCluster(nf: NodesFile, signal?: AbortSignal, head?: NodeContainerRef): Promise<RaySeen> {
  const lines = rayReadLines(nf, head);
  const [st, js] = await Promise.all([
    ssh(nf, nf.head, lines.status, { timeoutMs: 30_000, signal }),
    ssh(nf, nf.head, lines.nodes, { timeoutMs: 30_000, signal }),
  ]);
  const counts = st.exitCode === 0 ? parseRayStatus(st.stdout) : undefined;
  const nodes = js.exitCode === 0 ? parseRayNodes(js.stdout) : undefined;
  if (!counts && !nodes) return { status: st.stdout, error: remoteWhy(st) };
  return { view: compareCluster(nf, counts, nodes), nodes, status: st.stdout };
}
