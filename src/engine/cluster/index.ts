// Multi-node, one interface: a plan names its executor (Ray, or vLLM's native --nnodes launch), a
// running cluster's record names the one that started it; serve, stop and status go through the
// executor either way. Library code: events and outcomes, never a print, an exit or a signal handler.
import type { NodesFile } from '../../profiles/schema.js';
import { Registry, type ClusterRecord } from '../registry.js';
import { http } from '../../client/http.js';
import { rayExecutor } from './ray-executor.js';
import { nativeExecutor } from './native.js';
import type { ClusterExecutor, ClusterPlan, ClusterStatus, ExecutorKind, RunCtx, ServeClusterOutcome, StopClusterOutcome } from './common.js';

export * from './common.js';
export { planCluster, toClusterPlan, resolveForNodes, type ClusterInputs, type PlannedCluster } from './plan.js';
export { allNodes, gpusDeclared, hostShapeOf, exportLine, fabricAddress, fabricInterface, nodeEnv as nodeEnvOf, type NodeStep } from './ray-plan.js';
export { gatherNodes, runNodesChecks, type NodeReport } from './preflight.js';
export { gatherFabric, readFabric, fabricEnvs, rdmaNodes, runFabricChecks, fabricEnv, type FabricCtx, type FabricReading } from './fabric.js';

export function executorFor(kind: ExecutorKind): ClusterExecutor {
  return kind === 'native' ? nativeExecutor : rayExecutor;
}

/** Records written before native multi-node existed are Ray's. */
export const recordedExecutor = (r: ClusterRecord): ExecutorKind => r.executor ?? 'ray';

export function serveCluster(plan: ClusterPlan, ctx: RunCtx = {}): Promise<ServeClusterOutcome> {
  return executorFor(plan.executor).serve(plan, ctx);
}

/**
 * Stops the recorded cluster of `name` with the executor that started it. Nothing recorded: Ray's
 * stop on every node (a Ray this file's nodes run; native ranks are only ever stopped from a record).
 * The record goes once nothing of it is left unproven or unsignalled.
 */
export async function stopCluster(nf: NodesFile, stateDir: string, name: string | undefined, timeoutS: number, signal?: AbortSignal): Promise<StopClusterOutcome & { executor: ExecutorKind }> {
  const registry = new Registry(stateDir);
  const record = name ? registry.clusters().find((x) => x.profile === name) : undefined;
  const kind = record ? recordedExecutor(record) : 'ray';
  const out = await executorFor(kind).stop(nf, record, timeoutS, signal);
  const bad = (s: string) => s === 'failed' || s === 'unproven';
  // containers: the record is what names them; it goes only once every one of them is gone
  const containerLeft = !!record?.ranks?.some((r) => r.containerId) && out.ray.some((x) => !x.ok);
  if (name && record && !bad(out.engine.state) && !(out.ranks ?? []).some((r) => bad(r.state)) && !containerLeft) registry.removeCluster(name);
  return { ...out, executor: kind };
}

export async function clusterStatus(record: ClusterRecord, nf: NodesFile | undefined, signal?: AbortSignal): Promise<ClusterStatus> {
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
