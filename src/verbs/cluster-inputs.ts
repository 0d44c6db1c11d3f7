// What plan --nodes and profiles init --nodes read, as serve --nodes does: the profile (or a model
// id's profile generated for every GPU of the nodes) and the nodes' shape on their platform.
import { loadNodesFile, loadPlatform, DEFAULT_PLATFORM, type LoadedProfile } from '../profiles/load.js';
import { readForNodes, type ClusterTarget } from '../engine/inputs.js';
import { allNodes, hostShapeOf } from '../engine/cluster/ray-plan.js';
import type { HostShape } from '../profiles/validate.js';
import { note } from '../output/log.js';

interface ClusterInputs {
  loaded: LoadedProfile;
  platform: string;
  host: HostShape;
  generated?: ClusterTarget['generated'];
}

export async function clusterInputs(
  name: string,
  opts: { set?: string[]; profiles?: string; platform?: string; nodes: string; json?: boolean },
): Promise<ClusterInputs> {
  const nf = loadNodesFile(opts.nodes);
  const nodes = allNodes(nf);
  const t = await readForNodes(name, { nodes: nodes.length, gpusPerNode: Math.min(...nodes.map((n) => n.gpus)) }, opts);
  if (t.platformNote && !opts.json) note(t.platformNote);
  const platform = loadPlatform(opts.platform ?? t.platform ?? t.loaded.profile.platform ?? DEFAULT_PLATFORM);
  const host = {
    ...hostShapeOf(nf),
    gpuMemoryBytes: platform.gpu.memoryGiB * 1024 ** 3,
    computeCapability: platform.gpu.computeCapability,
    gpuName: platform.gpu.displayName,
  };
  return { loaded: t.loaded, platform: platform.name, host, generated: t.generated };
}
