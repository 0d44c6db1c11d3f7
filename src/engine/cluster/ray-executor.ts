// The Ray executor: on the hosts (ray.ts), or in a container per node as vLLM's run_cluster.sh
// does it (ray-containers.ts). Which one runs is the nodes' runtime's (node-runtime.ts): the plan's
// for serve's one loop, the record's (its containers) for a stop or a status.
import type { ClusterExecutor } from './common.js';
import { onRecord, onStep, placed } from './node-runtime.js';

export const rayExecutor: ClusterExecutor = {
  kind: 'ray',
  placement: (plan, ctx) => placed(plan, ctx.signal, onStep(plan.steps[0]).ray.placement(plan, ctx)),
  stop: (nf, record, timeoutS, signal) => onRecord(record).ray.stop(nf, record, timeoutS, signal),
  status: (record, nf, signal) => onRecord(record).ray.status(record, nf, signal),
};
