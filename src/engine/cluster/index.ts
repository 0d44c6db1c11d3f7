// Multi-node, one interface: a plan names its executor (Ray, or vLLM's native --nnodes launch), a
// running cluster's record names the one that started it; serve, stop and status go through the
// executor either way. Library code: events and outcomes, never a print, an exit or a signal handler.
import type { NodesFile } from '../../profiles/schema.js';
import { Registry, type ClusterRecord } from '../registry.js';
import { http } from '../../client/http.js';
import { rayExecutor } from './ray-executor.js';
import { nativeExecutor } from './native.js';
import { runsOn, type ClusterExecutor, type ClusterStatus, type StopClusterOutcome } from './common.js';
import type { ExecutorKind } from '../plan.js';
import { allNodes } from './ray-plan.js';

export * from './common.js';
export { planCluster, toClusterPlan, resolveForNodes, type ClusterInputs, type PlannedCluster } from './plan.js';
export {
  allNodes,
  gpusDeclared,
  hostShapeOf,
  exportLine,
  fabricAddress,
  fabricInterface,
  nodeEnv as nodeEnvOf,
  type NodeStep,
} from './ray-plan.js';
export { readFabric, fabricEnvs, rdmaNodes, fabricEnv, type FabricReading } from './fabric.js';
export { NODE_CACHE_ROOT, type NodeCaches } from './node-caches.js';

export function executorFor(kind: ExecutorKind): ClusterExecutor {
  return kind === 'native' ? nativeExecutor : rayExecutor;
}

/** Records written before native multi-node existed are Ray's. */
const recordedExecutor = (r: ClusterRecord): ExecutorKind => r.executor ?? 'ray';

/**
 * The cluster records a verb acts on, from what the registry holds: a name picks its profile's
 * record; without one, every record that runs on these nodes (runsOn: the rule serve refuses a
 * second cluster by). The --nodes form and the one-host form read the same records this way.
 */
export function recordsFor(
  records: ClusterRecord[],
  sel: { name?: string; nodes?: { file: string; nf: NodesFile } },
): ClusterRecord[] {
  if (sel.name !== undefined) return records.filter((r) => r.profile === sel.name);
  const on = sel.nodes;
  return on ? records.filter((r) => runsOn(r, on.file, on.nf)) : records;
}

/** Every node a record names (its head and each rank's node) is a node of this file, by name. */
export function nodesMissing(record: ClusterRecord, nf: NodesFile): string[] {
  const names = new Set(allNodes(nf).map((n) => n.name));
  return [...new Set([record.head, ...(record.ranks ?? []).map((r) => r.node)])].filter((n) => !names.has(n));
}

/**
 * Stops a recorded cluster with the executor that started it. Nothing recorded (undefined): Ray's
 * stop on every node (a Ray this file's nodes run; native ranks are only ever stopped from a record).
 * The record goes once nothing of it is left unproven or unsignalled.
 */
export async function stopCluster(
  nf: NodesFile,
  stateDir: string,
  record: ClusterRecord | undefined,
  timeoutS: number,
  signal?: AbortSignal,
): Promise<StopClusterOutcome & { executor: ExecutorKind }> {
  const kind = record ? recordedExecutor(record) : 'ray';
  const out = await executorFor(kind).stop(nf, record, timeoutS, signal);
  const bad = (s: string) => s === 'failed' || s === 'unproven';
  // containers: the record is what names them; it goes only once every one of them is gone
  const containerLeft = !!record?.ranks?.some((r) => r.containerId) && out.ray.some((x) => !x.ok);
  if (record && !bad(out.engine.state) && !(out.ranks ?? []).some((r) => bad(r.state)) && !containerLeft)
    new Registry(stateDir).remove('nodes', record.profile);
  return { ...out, executor: kind };
}

export async function clusterStatus(
  record: ClusterRecord,
  nf: NodesFile | undefined,
  signal?: AbortSignal,
): Promise<ClusterStatus> {
  if (!nf) {
    const h = await http(`${record.url}/health`, { timeoutMs: 2000 });
    const server = h.ok ? (h.status === 200 ? 'healthy' : 'unhealthy') : 'unreachable';
    return {
      record,
      server,
      serverDetail: h.ok ? `HTTP ${h.status}` : h.message,
      nodes: [],
      state: server === 'healthy' ? 'degraded' : 'down',
      rayError: `nodes file ${record.nodesFile} cannot be read`,
    };
  }
  return executorFor(recordedExecutor(record)).status(record, nf, signal);
}
export { imageMismatch, readImageIds, MARKER_PLACEHOLDER } from './containers.js';
