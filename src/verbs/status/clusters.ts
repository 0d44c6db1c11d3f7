// status's servers over nodes: each recorded cluster with its nodes' state and the head's server
// (read by the executor its record names), rendered, and the image each rank in a container runs
// against the profile's pin (engine/drift.ts clustersDrift), read over ssh.
import { stateDir } from '../../util/paths.js';
import { loadNodesFile } from '../../profiles/load.js';
import type { NodesFile } from '../../profiles/schema.js';
import type { ClusterRecord } from '../../engine/registry.js';
import { clusterStatus, type ClusterStatus } from '../../engine/cluster/index.js';
import { c, table } from '../../output/format.js';
import { shownEscaped as shown } from '../../util/control.js';

/**
 * The registry's servers over nodes (Registry.servers()), each with its nodes' Ray state and the head's server (for
 * `status`).
 */
export async function clusterStatuses(records: readonly ClusterRecord[]): Promise<ClusterStatus[]> {
  return Promise.all(
    records.map(async (rec) => {
      let nf: NodesFile | undefined;
      try {
        nf = loadNodesFile(rec.nodesFile);
      } catch {
        nf = undefined;
      }
      return clusterStatus(rec, nf);
    }),
  );
}

export function renderClusterStatus(s: ClusterStatus): string {
  const state =
    s.state === 'healthy' ? c.green('healthy') : s.state === 'degraded' ? c.yellow('degraded') : c.red('down');
  const lines = [
    `${c.bold(s.record.profile)}  cluster ${state}  head ${s.record.head}  server ${s.server === 'healthy' ? c.green('healthy') : c.red(`${s.server} (${shown(s.serverDetail ?? '')})`)}  ${s.record.url}  pid ${s.record.pid}  --nodes ${s.record.nodesFile}`,
  ];
  if (s.nodes.length)
    lines.push(
      table(
        s.nodes.map((n) => [
          `  ${n.node}`,
          n.role,
          n.address,
          n.rank
            ? n.rank.process === 'running'
              ? c.green(`rank ${n.rank.rank} running`)
              : n.rank.process === 'gone'
                ? c.red(`rank ${n.rank.rank} gone`)
                : c.yellow(`rank ${n.rank.rank} unknown`)
            : n.ray === 'up'
              ? c.green('ray up')
              : n.ray === 'missing'
                ? c.red('ray missing')
                : c.yellow('ray unknown'),
          n.gpus === undefined ? '-' : `${n.gpus} GPUs`,
        ]),
        ['  NODE', 'ROLE', 'ADDRESS', s.record.executor === 'native' ? 'VLLM' : 'RAY', 'GPUS'],
      ),
    );
  if (s.rayError) lines.push(c.yellow(`  Ray did not answer on ${s.record.head}: ${shown(s.rayError)}`));
  return lines.join('\n');
}

/**
 * The ranks of each multi-node server in containers on another image than its pin (engine/drift.ts clustersDrift), read
 * over ssh.
 */
export async function clusterDrift(records: ClusterRecord[]) {
  const { clustersDrift } = await import('../../engine/drift.js');
  if (!records.some((r) => r.ranks?.some((k) => k.containerId))) return { drift: [], unreadable: [] };
  const { ssh } = await import('../../engine/cluster/ssh.js');
  const { imageLine } = await import('../../engine/cluster/node-container.js');
  const { nodeNamed } = await import('../../engine/cluster/ray-plan.js');
  return clustersDrift(records, stateDir(), async (rec, ref) => {
    const nf = loadNodesFile(rec.nodesFile);
    const node = nodeNamed(nf, ref.node);
    if (!node) return undefined;
    const r = await ssh(nf, node, imageLine(ref), { timeoutMs: 15_000 });
    // the runtime's answer as it came: clustersDrift reads it (one rule for an image ID)
    return r.exitCode === 0 ? r.stdout : undefined;
  });
}
