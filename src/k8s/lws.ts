// A profile over several nodes as a LeaderWorkerSet: the node count checked against the profile's
// TP x PP, the vLLM command of one replica rendered for that shape, the manifest from k8s/manifests.ts.
import type { Resolved } from '../profiles/resolve.js';
import { renderReplicas } from '../profiles/render.js';
import { GIB } from '../profiles/planner.js';
import type { HostShape } from '../profiles/validate.js';
import { leaderWorkerSet, type PodImage } from './manifests.js';
import { UsageError } from '../errors.js';

export function leaderWorkerSetFor(r: Resolved, opts: PodImage & { nodes: number; namespace: string }): string {
  const p = r.profile;
  const perNode = p.parallel.gpusPerNode ?? 8;
  const need = p.parallel.tensor * p.parallel.pipeline;
  if (opts.nodes * perNode < need)
    throw new UsageError(`--node-count ${opts.nodes} x ${perNode} GPUs = ${opts.nodes * perNode}; TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} needs ${need}`, [
      `--node-count ${Math.ceil(need / perNode)}`,
    ]);
  const shape: HostShape = { gpus: perNode, gpusSource: 'nodes', gpuMemoryBytes: r.platform.gpu.memoryGiB * GIB, multiNode: true, nodes: opts.nodes, gpusPerNode: perNode };
  const rep = renderReplicas(p, shape, { executable: ['vllm'], stateDir: '/tmp' })[0]!;
  return leaderWorkerSet(p, r.platform, { ...opts, perNode, argv: rep.argv });
}
