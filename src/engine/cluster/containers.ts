// Containers on every node (engine.runtime: container over nodes), rendered the way the DGX Spark
// owners run them: one container per node, the same image everywhere, the host's network (vLLM's
// rendezvous, Ray and NCCL bind the node's own addresses), that node's GPUs, the RDMA devices
// (/dev/infiniband) and the memlock limit RDMA needs (NVIDIA's --ulimit memlock=-1), --ipc=host for
// NCCL's shared memory. Native: the container runs that node's `vllm serve` rank. Ray, as vLLM's
// examples/online_serving/run_cluster.sh does it: each container runs `ray start --block` (head or
// worker) and vLLM is started inside the head's container with `exec`.
// The one function that renders a node's container is nodeContainer(): the container runtime's run
// line (src/engine/runtime/container.ts runArgv) plus what only a cluster node needs.
import type { NodesFile, NodeEntry, Profile, Platform } from '../../profiles/schema.js';
import {
  runArgv,
  imageFor,
  imageStart,
  containerName,
  containerGpuUse,
  settingsOf,
  CONTAINER_HF_CACHE,
  type ContainerCli,
  type Mount,
  containerCliArgs,
} from '../runtime/container.js';
import { allNodes, type NodeStep } from './ray-plan.js';
import type { ExecutorKind } from '../plan.js';

/** Stands for the launch's instance marker in a plan; the launch puts the real one in its place. */
export const MARKER_PLACEHOLDER = '<marker>';

const RDMA_DEVICES = '/dev/infiniband';

/** Where the head container's shell keeps vLLM's pid (inside the container: its own /tmp). */
export const VLLM_PID_FILE = '/tmp/sparkctl-vllm.pid';

/**
 * Ray in containers: the `sh -c` script vLLM is exec'd with in the head's container: its pid kept
 * for the stop, its output into the container's own (PID 1's stdout), so `logs` shows Ray and vLLM
 * together and keeps them after the container ended. "$@": vllm serve ARGS.
 */
const VLLM_IN_HEAD = `echo $$ > ${VLLM_PID_FILE}; exec "$@" > /proc/1/fd/1 2>&1`;

interface NodeContainer {
  cli: ContainerCli;
  cliArgs: string[];
  image: string;
  name: string;
}

export interface ContainerInputs {
  profile: Profile;
  platform: Pick<Platform, 'name'>;
  /** the simulator uses no GPU (and the test hosts have none) */
  engine: 'vllm' | 'sim';
  /** how many leading argv elements are the host executable (vllm, or sparkctl sim) */
  executableLen: number;
  /**
   * folders every rank reads at the same path as here (the model, its cache, the profile's env folders: model-env.ts)
   */
  mounts?: Array<{ path: string; readOnly: boolean }>;
}

/** Where the Hugging Face cache is on a node: the profile's container.hfCache, else the ssh user's home. */
function nodeHfCache(p: Profile, n: NodeEntry): string {
  return (
    settingsOf(p).hfCache ??
    (n.sshUser === 'root' ? '/root/.cache/huggingface' : `/home/${n.sshUser}/.cache/huggingface`)
  );
}

/** One node's container run line: the runtime's, with the node's GPUs, the RDMA devices and its command. */
function nodeContainer(
  x: ContainerInputs,
  n: NodeEntry,
  role: { rank: number; gpus: number },
  env: Record<string, string>,
  command: { vllmArgs: string[] } | { shell: string },
  envByName: string[] = [],
  rdma = true,
): { argv: string[]; container: NodeContainer } {
  const p = x.profile;
  const s = settingsOf(p);
  // a node has no PATH here to detect a CLI on: docker, where the profile names none
  const cli: ContainerCli = s.cli ?? 'docker';
  const image = imageFor(p, x.platform);
  const name = containerName(`${p.name}-rank${role.rank}`);
  const mounts: Mount[] = [{ host: nodeHfCache(p, n), container: CONTAINER_HF_CACHE, readOnly: true }];
  const same = x.mounts ?? (p.model.path?.startsWith('/') ? [{ path: p.model.path, readOnly: true }] : []);
  for (const m of s.mounts) mounts.push({ host: m.source, container: m.target, readOnly: m.readOnly });
  // at the same path as here, unless the profile's own mounts already put something there
  for (const m of same)
    if (!mounts.some((o) => o.container === m.path))
      mounts.push({ host: m.path, container: m.path, readOnly: m.readOnly });
  const isShell = 'shell' in command;
  const argv = runArgv({
    cli,
    cliArgs: containerCliArgs(p),
    image,
    name,
    marker: MARKER_PLACEHOLDER,
    gpus: containerGpuUse(p, x.engine).gpu ? Array.from({ length: role.gpus }, (_, i) => i) : [],
    network: { mode: 'host' },
    mounts,
    ipc: 'host',
    env: { ...env },
    envByName,
    vllmArgs: isShell ? [] : command.vllmArgs,
    stopTimeoutS: p.server.shutdownTimeoutSeconds ?? 30,
    labels: { 'io.sparkctl.profile': p.name, 'io.sparkctl.rank': String(role.rank) },
    // RDMA registers memory: on a node with RDMA devices the memlock limit is lifted, whatever else the profile sets
    ulimits: { ...s.ulimits, ...(rdma ? { memlock: '-1' } : {}) },
    start: isShell ? 'command' : imageStart(image),
  });
  // RDMA: the node's verbs devices, before the image (run_cluster.sh users add the same)
  if (rdma) argv.splice(argv.lastIndexOf(image), 0, '--device', RDMA_DEVICES);
  if (isShell) {
    // run_cluster.sh: the image's shell runs `ray start --block`, so the container lives as long as Ray
    const at = argv.lastIndexOf(image);
    argv.splice(at, argv.length - at, '--entrypoint', '/bin/bash', image, '-c', command.shell);
  }
  return { argv, container: { cli, cliArgs: containerCliArgs(p), image, name } };
}

/** The arguments after `vllm serve` of a host argv. */
const serveArgs = (argv: string[], executableLen: number) => argv.slice(executableLen + 1);

/**
 * The planned host steps, as containers (`rdmaNodes`: the nodes whose fabric shows RDMA devices, read at launch;
 * /dev/infiniband is passed only there; undefined, in a plan nothing was read for: every node): native, one `run` per
 * node (its rank); Ray, one `run` per node whose shell runs `ray start --block`, then `exec` of vLLM in the head's
 * container.
 */
export function containerSteps(
  x: ContainerInputs,
  nf: NodesFile,
  executor: ExecutorKind,
  steps: NodeStep[],
  perNode: number,
  rdmaNodes?: Set<string>,
): NodeStep[] {
  const nodes = allNodes(nf);
  return steps.map((s, rank) => {
    const n = nodes.find((m) => m.name === s.node)!;
    if (executor === 'native') {
      const byName = rank === 0 && x.profile.server.apiKeyEnv ? ['VLLM_API_KEY'] : [];
      const rdma = !rdmaNodes || rdmaNodes.has(n.name);
      const { argv, container } = nodeContainer(
        x,
        n,
        { rank, gpus: perNode },
        s.env,
        { vllmArgs: serveArgs(s.argv[0]!, x.executableLen) },
        byName,
        rdma,
      );
      return { ...s, argv: [argv], container };
    }
    const [ray, vllm] = s.argv as [string[], string[] | undefined];
    const shell = [...ray.slice(0, 2), '--block', ...ray.slice(2)].join(' ');
    const { argv, container } = nodeContainer(
      x,
      n,
      { rank, gpus: n.gpus },
      s.env,
      { shell },
      [],
      !rdmaNodes || rdmaNodes.has(n.name),
    );
    const out: string[][] = [argv];
    if (vllm) {
      const key = x.profile.server.apiKeyEnv ? ['--env', 'VLLM_API_KEY'] : [];
      out.push([
        container.cli,
        ...container.cliArgs,
        'exec',
        '--detach',
        ...key,
        container.name,
        '/bin/sh',
        '-c',
        VLLM_IN_HEAD,
        'sh',
        'vllm',
        'serve',
        ...serveArgs(vllm, x.executableLen),
      ]);
    }
    return { ...s, argv: out, container };
  });
}

/**
 * The same image on every node, by content ID: undefined when it holds, else which nodes differ and
 * both IDs (or where the image is missing).
 */
export function imageMismatch(
  image: string,
  ids: Array<{ node: string; id?: string; error?: string }>,
): string | undefined {
  const missing = ids.filter((x) => !x.id);
  if (missing.length)
    return `${image} is not on ${missing.map((x) => `${x.node}${x.error ? ` (${x.error})` : ''}`).join(', ')}`;
  const by = new Map<string, string[]>();
  for (const x of ids) by.set(x.id!, [...(by.get(x.id!) ?? []), x.node]);
  if (by.size <= 1) return undefined;
  const groups = [...by.entries()].sort((a, b) => b[1].length - a[1].length);
  return `${image} differs between the nodes: ${groups.map(([id, ns]) => `${ns.join(', ')} ${id.replace(/^sha256:/, '').slice(0, 12)}`).join('; ')}`;
}

/** The shell that prints an image's ID on a node (the runtime's own inspect). */
export const imageIdLine = (c: Pick<NodeContainer, 'cli' | 'cliArgs' | 'image'>) =>
  [c.cli, ...c.cliArgs, 'image', 'inspect', '--format', '{{.Id}}', c.image]
    .map((a) => (/^[\w./:={}-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`))
    .join(' ');

/** An ID as docker/podman print it (sha256:<64 hex> or 64 hex); anything else is not one. */
export function parseImageId(text: string): string | undefined {
  const t = text.trim().split('\n').pop()?.trim() ?? '';
  return /^(sha256:)?[a-f0-9]{64}$/.test(t) ? t.replace(/^sha256:/, '') : undefined;
}

/** Each node's ID of the image its step runs, read with the node's own runtime over ssh. */
export async function readImageIds(
  nf: NodesFile,
  steps: NodeStep[],
  signal?: AbortSignal,
): Promise<Array<{ node: string; id?: string; error?: string }>> {
  const { ssh, remoteWhy } = await import('./ssh.js');
  return Promise.all(
    steps.map(async (s) => {
      const n = allNodes(nf).find((m) => m.name === s.node)!;
      const r = await ssh(nf, n, imageIdLine(s.container!), { timeoutMs: 30_000, signal });
      const id = r.exitCode === 0 ? parseImageId(r.stdout) : undefined;
      return { node: s.node, id, error: id ? undefined : remoteWhy(r, 1) };
    }),
  );
}
