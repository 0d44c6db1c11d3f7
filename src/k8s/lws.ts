// A profile over several nodes as a LeaderWorkerSet: the node count checked against the profile's
// TP x PP, the vLLM command of one replica rendered for that shape, the manifest from k8s/manifests.ts.
// The executor is the one serve --nodes picks (clusterExecutor): Ray (the leader runs the Ray head
// and vllm serve, the workers join Ray), or vLLM's own multi-node launch (executor mp, vLLM 0.12+):
// every pod runs `vllm serve` with its rank, the leader rank 0 and the API, the workers --headless.
import type { Resolved } from '../profiles/resolve.js';
import { clusterExecutor, renderReplicas } from '../profiles/render.js';
import { GIB } from '../profiles/planner.js';
import type { HostShape } from '../profiles/validate.js';
import { leaderWorkerSet, type NativeRanks, type PodImage } from './manifests.js';
import { withoutPerNode } from '../engine/cluster/native-plan.js';
import { UsageError } from '../errors.js';

/** vLLM's default rendezvous port (--master-port), the nodes file's masterPort default too. */
const LWS_MASTER_PORT = 29501;

/**
 * Each pod's argv for vLLM's native launch over `nodes` pods (pure): the same flags as serve --nodes
 * renders per node (planNative), with LWS's variables for what only the pod knows.
 */
function lwsNativeRanks(argv: string[], nodes: number): NativeRanks {
  const base = [...withoutPerNode(argv), '--distributed-executor-backend', 'mp', '--nnodes', String(nodes)];
  const master = ['--master-addr', '$(LWS_LEADER_ADDRESS)', '--master-port', String(LWS_MASTER_PORT)];
  return {
    leader: [...base, '--node-rank', '0', ...master],
    worker: [...base, '--node-rank', '$(LWS_WORKER_INDEX)', ...master, '--headless'],
  };
}

export function leaderWorkerSetFor(r: Resolved, opts: PodImage & { nodes: number; namespace: string }): string {
  const p = r.profile;
  const perNode = p.parallel.gpusPerNode ?? 8;
  const need = p.parallel.tensor * p.parallel.pipeline;
  if (opts.nodes * perNode < need)
    throw new UsageError(
      `--node-count ${opts.nodes} x ${perNode} GPUs = ${opts.nodes * perNode}; TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} needs ${need}`,
      [`--node-count ${Math.ceil(need / perNode)}`],
    );
  const native =
    clusterExecutor({ ...p, parallel: { ...p.parallel, nodes: Math.max(p.parallel.nodes, opts.nodes) } }) === 'native';
  // vLLM's native launch runs world / nnodes ranks on every node: the world must divide evenly
  if (native && need % opts.nodes !== 0)
    throw new UsageError(
      `--node-count ${opts.nodes}: parallel.executor mp runs TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} = ${need} ranks evenly over the pods (vLLM: "--nnodes ${opts.nodes} must evenly divide the total world size (${need})")`,
      [
        `--node-count ${[1, 2, 4, 8, 16].find((n) => n >= Math.ceil(need / perNode) && need % n === 0) ?? Math.ceil(need / perNode)}`,
        '--set parallel.executor=ray (Ray places ranks unevenly)',
      ],
    );
  const podGpus = native ? need / opts.nodes : perNode;
  const shape: HostShape = {
    gpus: podGpus,
    gpusSource: 'nodes',
    gpuMemoryBytes: r.platform.gpu.memoryGiB * GIB,
    multiNode: true,
    nodes: opts.nodes,
    gpusPerNode: podGpus,
  };
  const rep = renderReplicas(p, shape, { executable: ['vllm'], stateDir: '/tmp' })[0]!;
  return leaderWorkerSet(p, r.platform, {
    ...opts,
    perNode: podGpus,
    argv: rep.argv,
    native: native ? lwsNativeRanks(rep.argv, opts.nodes) : undefined,
  });
}
