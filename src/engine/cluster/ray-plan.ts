// Ray planning, pure: what runs on which node, what Ray says about its cluster, and how that compares
// with the nodes file. No I/O here (the ssh transport and the orchestration live in ssh.ts and
// cluster.ts), so every rule is table-tested.
import type { NodesFile, NodeEntry } from '../../profiles/schema.js';
import type { HostShape } from '../../profiles/validate.js';
import { shellQuote } from '../../output/format.js';

export const allNodes = (nf: NodesFile): NodeEntry[] => [nf.head, ...nf.workers];
/** The node of this name (undefined: the file does not name it). */
export const nodeNamed = (nf: NodesFile, name: string): NodeEntry | undefined =>
  allNodes(nf).find((n) => n.name === name);
/** A recorded or planned node, which the file names (checked before anything runs: nodesMissing, planCluster). */
export const nodeOf = (nf: NodesFile, name: string): NodeEntry => nodeNamed(nf, name)!;
export const gpusDeclared = (nf: NodesFile) => allNodes(nf).reduce((a, n) => a + n.gpus, 0);

/** The address the node's ranks talk over: its fabric address when the nodes file names one, else its ssh address. */
export const fabricAddress = (n: NodeEntry) => n.fabric?.address ?? n.address;
/** The netdev that carries NCCL/Gloo traffic: the fabric interface when named, else `interface`. */
export const fabricInterface = (n: NodeEntry) => n.fabric?.interface ?? n.interface;

/**
 * What vLLM and NCCL need to know on each node: its own address and the NIC that carries traffic;
 * `read` adds what was read from the node's fabric (NCCL_IB_HCA, NCCL_IB_GID_INDEX, UCX_NET_DEVICES);
 * `shared`: what every rank needs alike (the profile's env, where the model is: model-env.ts).
 */
export function nodeEnv(
  node: NodeEntry,
  read: Record<string, string> = {},
  shared: Record<string, string> = {},
): Record<string, string> {
  const ifname = fabricInterface(node);
  return {
    ...shared,
    VLLM_HOST_IP: fabricAddress(node),
    NCCL_SOCKET_IFNAME: ifname,
    GLOO_SOCKET_IFNAME: ifname,
    ...read,
  };
}
export const exportLine = (env: Record<string, string>) =>
  `export ${Object.entries(env)
    .map(([k, v]) => `${k}=${shellQuote(v)}`)
    .join(' ')}`;

export interface NodeStep {
  node: string;
  role: 'head' | 'worker';
  address: string;
  env: Record<string, string>;
  argv: string[][];
  /** engine.runtime container: what runs there is this container (argv: its run line, then any exec) */
  container?: { cli: 'docker' | 'podman'; cliArgs: string[]; image: string; name: string };
}

export function hostShapeOf(nf: NodesFile): HostShape {
  return {
    gpus: nf.head.gpus,
    gpusSource: 'nodes',
    gpuMemoryBytes: 0,
    multiNode: true,
    nodes: allNodes(nf).length,
    gpusPerNode: Math.min(...allNodes(nf).map((n) => n.gpus)),
  };
}

/**
 * The plan, node by node, in the order it runs: Ray head, Ray workers, then vLLM on the head. `shared`
 * goes to every node's `ray start`: Ray's workers inherit the raylet's environment, and vLLM copies
 * from the driver to them only the variables of its own list (vllm/ray/ray_env.py, get_env_vars_to_copy).
 */
export function planNodes(
  nf: NodesFile,
  vllmArgv: string[],
  fabricEnv: Record<string, Record<string, string>> = {},
  shared: Record<string, string> = {},
): NodeStep[] {
  const head = nf.head;
  const headIp = fabricAddress(head);
  const steps: NodeStep[] = [
    {
      node: head.name,
      role: 'head',
      address: head.address,
      env: nodeEnv(head, fabricEnv[head.name], shared),
      argv: [
        [
          'ray',
          'start',
          '--head',
          '--port',
          String(nf.rayPort),
          '--node-ip-address',
          headIp,
          '--num-gpus',
          String(head.gpus),
        ],
      ],
    },
  ];
  for (const w of nf.workers) {
    steps.push({
      node: w.name,
      role: 'worker',
      address: w.address,
      env: nodeEnv(w, fabricEnv[w.name], shared),
      argv: [
        [
          'ray',
          'start',
          '--address',
          `${headIp}:${nf.rayPort}`,
          '--node-ip-address',
          fabricAddress(w),
          '--num-gpus',
          String(w.gpus),
        ],
      ],
    });
  }
  steps[0]!.argv.push(vllmArgv);
  return steps;
}

// `ray status` text is parsed in the neutral module of tool-output parsers.
export { parseRayStatus, type RayStatusCounts } from '../../nvidia/ray.js';
import type { RayStatusCounts } from '../../nvidia/ray.js';

/** One node as Ray's GCS reports it (node state from the autoscaler's cluster status). */
export interface RayNode {
  id: string;
  ip: string;
  state: string;
  gpus: number;
}

/**
 * Python that prints Ray's nodes as JSON, through Ray's own API (the GCS's cluster status, which
 * `ray status` also reads; `ray list nodes` needs the dashboard that `pip install ray` lacks).
 * Run with the interpreter that runs the node's `ray`. argv[1]: the GCS address.
 */
export const RAY_NODES_PY = [
  'import json, sys',
  'from ray.autoscaler.v2.sdk import get_cluster_status',
  's = get_cluster_status(sys.argv[1])',
  'print(json.dumps({"nodes": [{"id": n.node_id, "ip": n.ip_address, "state": str(n.node_status), "gpus": n.total_resources().get("GPU", 0)} for n in list(s.active_nodes) + list(s.idle_nodes)]}))',
].join('\n');

/** The shell line that runs a Python snippet with the interpreter of the node's `ray` (same venv). */
export function rayPython(script: string, args: string[]): string {
  return `R=$(command -v ray) || { echo "ray: command not found" >&2; exit 127; }; P="$(dirname "$R")/python"; [ -x "$P" ] || P=python3; "$P" -c ${shellQuote(script)} ${args.map(shellQuote).join(' ')}`;
}

/** Every byte is hostile: a node list of the right shape, or undefined. */
export function parseRayNodes(text: string): RayNode[] | undefined {
  let j: unknown;
  try {
    j = JSON.parse(text.trim().split('\n').pop() ?? '');
  } catch {
    return undefined;
  }
  const list = (j as { nodes?: unknown })?.nodes;
  if (!Array.isArray(list)) return undefined;
  const out: RayNode[] = [];
  for (const n of list) {
    if (
      typeof n?.id !== 'string' ||
      typeof n?.ip !== 'string' ||
      typeof n?.gpus !== 'number' ||
      !Number.isFinite(n.gpus)
    )
      return undefined;
    out.push({ id: n.id, ip: n.ip, state: typeof n.state === 'string' ? n.state : 'unknown', gpus: n.gpus });
  }
  return out;
}

/** What Ray shows against what the nodes file declares: exact, never `>=`. */
export interface ClusterView {
  nodes: number;
  gpus: number;
  /** nodes of the file that Ray does not list (by address); undefined when Ray's list is unknown */
  missing?: NodeEntry[];
  /** Ray nodes that are not in the file (a stray `ray start` that joined late) */
  extra?: RayNode[];
  /** nodes present with another GPU count than the file says */
  wrongGpus?: Array<{ node: NodeEntry; gpus: number }>;
  complete: boolean;
}

export function compareCluster(
  nf: NodesFile,
  counts: RayStatusCounts | undefined,
  nodes: RayNode[] | undefined,
): ClusterView {
  const want = allNodes(nf);
  if (nodes) {
    const byIp = new Map(nodes.map((n) => [n.ip, n]));
    const missing = want.filter((w) => !byIp.has(fabricAddress(w)));
    const extra = nodes.filter((n) => !want.some((w) => fabricAddress(w) === n.ip));
    const wrongGpus = want.flatMap((w) => {
      const n = byIp.get(fabricAddress(w));
      return n && n.gpus !== w.gpus ? [{ node: w, gpus: n.gpus }] : [];
    });
    const gpus = nodes.reduce((a, n) => a + n.gpus, 0);
    return {
      nodes: nodes.length,
      gpus,
      missing,
      extra,
      wrongGpus,
      complete: !missing.length && !extra.length && !wrongGpus.length,
    };
  }
  const c = counts ?? { nodes: 0, gpus: 0 };
  return { nodes: c.nodes, gpus: c.gpus, complete: c.nodes === want.length && c.gpus === gpusDeclared(nf) };
}

/** One line an operator can act on: which node, how many GPUs, against what the file declares. */
export function describeShortfall(nf: NodesFile, v: ClusterView): string {
  const parts = [
    `the Ray cluster has ${v.nodes} node(s) with ${v.gpus} GPUs; the nodes file declares ${allNodes(nf).length} with ${gpusDeclared(nf)}`,
  ];
  if (v.missing?.length) parts.push(`missing: ${v.missing.map((n) => `${n.name} (${n.address})`).join(', ')}`);
  if (v.extra?.length)
    parts.push(`not in the nodes file: ${v.extra.map((n) => `${n.ip} (${n.gpus} GPUs)`).join(', ')}`);
  if (v.wrongGpus?.length)
    parts.push(
      v.wrongGpus.map((w) => `${w.node.name} has ${w.gpus} GPUs in Ray, ${w.node.gpus} in the nodes file`).join('; '),
    );
  if (!v.missing && v.nodes < allNodes(nf).length)
    parts.push('which node is missing is unknown (ray status lists node ids only)');
  return parts.join('; ');
}
