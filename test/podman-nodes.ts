// The container suites over the four network-namespace nodes (multinode-containers: the native
// executor, multinode-ray-containers: Ray): a profile of TP 4 over the four nodes, one GPU a node,
// each rank in a podman container of the image, and the nodes made with podman's settings.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeCluster, type Cluster } from './cluster.js';
import { PODMAN } from './podman.js';

/**
 * work/profiles/NAME.yaml serving `image` in containers over the four nodes, and the model and
 * HF cache folders under work that it names. `more` adds keys to the parallel, server and
 * container maps (as YAML flow text: `executor: ray`).
 */
export function writeNodesProfile(
  work: string,
  name: string,
  image: string,
  more: { parallel?: string; server?: string; container?: string } = {},
): void {
  const profiles = join(work, 'profiles');
  for (const d of [join(work, 'model'), join(work, 'hf'), profiles]) mkdirSync(d, { recursive: true });
  const and = (s: string | undefined) => (s ? `, ${s}` : '');
  writeFileSync(
    join(profiles, `${name}.yaml`),
    [
      `name: ${name}`,
      `model: { path: ${join(work, 'model')}, servedName: ${name}, parameters: 8.0e9, layers: 32, attentionHeads: 32, kvHeads: 8, headDim: 128, maxContext: 32768 }`,
      'engine: { vllmVersion: "0.17.0", runtime: container, maxModelLen: 4096 }',
      `parallel: { tensor: 4, pipeline: 1, nodes: 4, gpusPerNode: 1${and(more.parallel)} }`,
      `server: { port: 8000, readyTimeoutSeconds: 120${and(more.server)} }`,
      // no --ulimit: inside these test nodes runc is refused any rlimit (podman then sets them all: "error
      // setting rlimit type 6: operation not permitted"); the nodes have no RDMA, so no memlock is rendered
      `container: { cli: podman, image: ${image}, cliArgs: [${PODMAN.map((x) => `"${x}"`).join(', ')}], hfCache: ${join(work, 'hf')}, ulimits: {}${and(more.container)} }`,
      '',
    ].join('\n'),
  );
}

/**
 * The four netns nodes, podman's settings (CONTAINERS_CONF) in their environment and cgroups of their own, the nodes
 * file declaring one GPU a node.
 */
export async function podmanNodes(marker: string, containersConf: string, masterPort?: number): Promise<Cluster> {
  const cl = await makeCluster('netns', marker, {
    ...(masterPort ? { masterPort } : {}),
    env: { CONTAINERS_CONF: containersConf },
    cgroups: true,
  });
  const nf = join(cl.dir, 'nodes.yaml');
  writeFileSync(nf, readFileSync(nf, 'utf8').replaceAll('gpus: 8', 'gpus: 1'));
  return cl;
}
