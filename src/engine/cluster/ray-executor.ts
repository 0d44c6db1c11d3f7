// The Ray executor: on the hosts (ray.ts), or in a container per node as vLLM's run_cluster.sh
// does it (ray-containers.ts). The plan says which for a serve; the record (its containers) for a
// stop or a status.
import type { ClusterRecord } from '../registry.js';
import type { ClusterExecutor } from './common.js';
import { serveRay, stopRay, rayStatus } from './ray.js';
import { serveRayContainers, stopRayContainers, statusRayContainers } from './ray-containers.js';

const inContainers = (r: ClusterRecord | undefined): r is ClusterRecord => !!r?.ranks?.some((x) => x.containerId);

export const rayExecutor: ClusterExecutor = {
  kind: 'ray',
  serve: (plan, ctx) => (plan.steps[0]?.container ? serveRayContainers(plan, ctx) : serveRay(plan, ctx)),
  stop: (nf, record, timeoutS, signal) => (inContainers(record) ? stopRayContainers(nf, record, timeoutS, signal) : stopRay(nf, record, timeoutS, signal)),
  status: (record, nf, signal) => (inContainers(record) ? statusRayContainers(record, nf, signal) : rayStatus(record, nf, signal)),
};
