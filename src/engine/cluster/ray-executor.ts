// The Ray executor: on the hosts (ray.ts), or in a container per node as vLLM's run_cluster.sh
// does it (ray-containers.ts). The plan says which placement serve's one loop runs; the record (its containers) for a
// stop or a status.
import type { ClusterRecord } from '../registry.js';
import type { ClusterExecutor } from './common.js';
import { rayPlacement, stopRay, rayStatus } from './ray.js';
import { rayContainersPlacement, stopRayContainers, statusRayContainers } from './ray-containers.js';
import { rankRuns, stepRuns } from './node-container.js';

// where the cluster's Ray runs, as the Runtime of the plan's head step (or of the record's head rank) says it
const IMPL = {
  host: { placement: rayPlacement, stop: stopRay, status: rayStatus },
  container: { placement: rayContainersPlacement, stop: stopRayContainers, status: statusRayContainers },
} as const;
const ofRecord = (r: ClusterRecord | undefined) => (r?.ranks?.[0] ? rankRuns(r.ranks[0]) : 'host');

export const rayExecutor: ClusterExecutor = {
  kind: 'ray',
  placement: (plan, ctx) => IMPL[stepRuns(plan.steps[0]!)].placement(plan, ctx),
  // a record of Ray in containers always holds its containers (ranks); a host one none
  stop: (nf, record, timeoutS, signal) => IMPL[ofRecord(record)].stop(nf, record as ClusterRecord, timeoutS, signal),
  status: (record, nf, signal) => IMPL[ofRecord(record)].status(record, nf, signal),
};
