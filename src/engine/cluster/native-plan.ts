// vLLM's own multi-node launch, planned (pure): one `vllm serve` per node, the same model and TP x PP
// everywhere, each with its rank. Read from vLLM's source (0.12 and later: engine/arg_utils.py,
// config/parallel.py, entrypoints/cli/serve.py, v1/executor/multiproc_executor.py):
// - `--nnodes N --node-rank R --master-addr HEAD --master-port PORT` on every node; the world
//   (TP x PP) must divide evenly by N ("`--nnodes N` must evenly divide the total world size"),
//   each node runs world / N local ranks;
// - rank 0 serves the API and hosts torch.distributed's store on HEAD:PORT; the others run with
//   `--headless` (no API server: "headless multiproc executor, with head node address ...");
// - `--distributed-executor-backend mp` (vLLM also picks mp itself when nnodes > 1; ray refuses
//   nnodes > 1: "nnodes > 1 can only be set when distributed executor backend is mp, uni or
//   external_launcher").
import type { NodesFile } from '../../profiles/schema.js';
import { allNodes, fabricAddress, nodeEnv, type NodeStep } from './ray-plan.js';

/** The flags a rank's argv must not carry twice: rendered here, per node. */
const PER_NODE = new Set([
  '--nnodes',
  '--node-rank',
  '--master-addr',
  '--master-port',
  '--headless',
  '--distributed-executor-backend',
]);

/** A profile's argv without what planNative sets per node (a value-taking flag drops its value too). */
export function withoutPerNode(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const name = a.split('=')[0]!;
    if (!PER_NODE.has(name)) {
      out.push(a);
      continue;
    }
    if (name !== '--headless' && !a.includes('=')) i++;
  }
  return out;
}

/** Why TP x PP cannot run natively over these nodes (undefined: it can), naming the node. */
export function nativeProblem(nf: NodesFile, tensor: number, pipeline: number): string | undefined {
  const nodes = allNodes(nf);
  const world = tensor * pipeline;
  if (world % nodes.length !== 0)
    return `TP ${tensor} x PP ${pipeline} = ${world} ranks do not divide evenly over ${nodes.length} nodes (vLLM: "--nnodes ${nodes.length} must evenly divide the total world size (${world})")`;
  const perNode = world / nodes.length;
  const short = nodes.filter((n) => n.gpus < perNode);
  if (short.length)
    return `each node runs ${perNode} of the ${world} ranks; ${short.map((n) => `${n.name} has ${n.gpus} GPUs`).join(', ')} in the nodes file`;
  return undefined;
}

/** The plan, node by node: rank 0 on the head (serves the API), then every worker with --headless. */
export function planNative(
  nf: NodesFile,
  vllmArgv: string[],
  fabricEnv: Record<string, Record<string, string>> = {},
  shared: Record<string, string> = {},
): NodeStep[] {
  const nodes = allNodes(nf);
  const base = withoutPerNode(vllmArgv);
  const master = fabricAddress(nf.head);
  return nodes.map((n, rank) => ({
    node: n.name,
    role: rank === 0 ? 'head' : 'worker',
    address: n.address,
    env: nodeEnv(n, fabricEnv[n.name], shared),
    argv: [
      [
        ...base,
        '--distributed-executor-backend',
        'mp',
        '--nnodes',
        String(nodes.length),
        '--node-rank',
        String(rank),
        '--master-addr',
        master,
        '--master-port',
        String(nf.masterPort),
        ...(rank === 0 ? [] : ['--headless']),
      ],
    ],
  }));
}
