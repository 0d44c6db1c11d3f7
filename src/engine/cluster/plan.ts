// serve --nodes, planned: the profile resolved for the cluster's shape, the executor picked (Ray, or
// vLLM's native launch where the target vLLM has it), every node's command rendered. Pure but for
// reading the profile and nodes files; `--dry-run` prints this and starts nothing.
import { exposedWhat, isLoopback } from '../../util/exposure.js';
import {
  executableFor,
  simTail,
  type ClusterPlan,
  type ExecutorKind,
  type NodesReplica,
  type ReadInputs,
  type RunInputs,
} from '../plan.js';
import { resolveLoaded, requireValid, type Resolved } from '../../profiles/resolve.js';
import { loadProfile, type LoadedProfile } from '../../profiles/load.js';
import type { ModelRead } from '../../model/read.js';
import type { NodesFile } from '../../profiles/schema.js';
import { servedName, renderReplicas, clusterExecutor } from '../../profiles/render.js';
import { GIB } from '../../profiles/planner.js';
import { UsageError } from '../../errors.js';
import { allNodes, hostShapeOf, planNodes, type NodeStep } from './ray-plan.js';
import { nativeProblem, planNative } from './native-plan.js';
import { onNodes } from './node-runtime.js';
import { traitsOfProfile } from '../runtime/traits.js';
import { nodeModel, withAbsoluteModel, type NodeModel } from './model-env.js';
import { planNodeCaches, type NodeCaches } from './node-caches.js';

export type ClusterInputs = Pick<ReadInputs, 'profiles' | 'set' | 'platform'> &
  Pick<RunInputs, 'engine' | 'vllmBin' | 'simLoadSeconds' | 'prewarm' | 'readyTimeout'> & {
    nodesFile: string;
    /**
     * the profile already read (a model id's generated cluster profile, or a profile file), instead of loading by name
     */
    loaded?: LoadedProfile;
    /** the model's files as read on this host (the Hugging Face cache pull filled): the plan's facts */
    modelRead?: ModelRead;
    /** the model is whole in this host's Hugging Face cache (serve's gate): HF_HUB_OFFLINE=1 on every node */
    offline?: boolean;
    /** sparkctl's environment and folder here (where the model is: model-env.ts); default process.env, process.cwd() */
    here?: { env: Record<string, string | undefined>; cwd: string };
  };

export interface PlannedCluster {
  resolved: Resolved;
  nf: NodesFile;
  executor: ExecutorKind;
  steps: NodeStep[];
  replica: NodesReplica;
  /** where every node's ranks read the model (rendered into each node's launch) */
  model: NodeModel;
  warnings: string[];
  gpusNeeded: number;
  url: string;
  /**
   * vLLM's start caches on each node that runs vLLM on its host (node-caches.ts); none for containers on nodes, nor
   * where the profile turns them off
   */
  caches?: NodeCaches;
}

/** The profile resolved against the nodes' shape and the platform's GPU; a one-host profile is bad input. */
export function resolveForNodes(
  profileName: string,
  opts: Pick<ReadInputs, 'profiles' | 'set' | 'platform'> & Pick<ClusterInputs, 'loaded' | 'modelRead'>,
  nf: NodesFile,
): Resolved {
  const shape = hostShapeOf(nf);
  const loaded = opts.loaded ?? loadProfile(profileName, { profilesDir: opts.profiles, sets: opts.set });
  const r = resolveLoaded(loaded, { platform: opts.platform, host: shape, modelRead: opts.modelRead });
  // The memory budget is per GPU of the platform the nodes are.
  const host = {
    ...r.host,
    gpuMemoryBytes: r.platform.gpu.memoryGiB * GIB,
    computeCapability: r.platform.gpu.computeCapability,
    gpuName: r.platform.gpu.displayName,
  };
  const again = resolveLoaded(loaded, { platform: opts.platform, host, modelRead: opts.modelRead });
  if (!clusterExecutor(again.profile)) {
    throw new UsageError(`${again.profile.name} is a single-host profile`, [
      '--nodes is for profiles with parallel.nodes > 1 or parallel.executor: ray (e.g. qwen3-200b); serve it without --nodes',
    ]);
  }
  return again;
}

/**
 * The head's --host in argv (rewritten in place) where the nodes' network reaches it; the warning
 * where it does without a key, else undefined.
 */
function headOnNetwork(argv: string[], p: Resolved['profile']): string | undefined {
  // sparkctl reaches the head over the nodes' network (the nodes file's address, which may be a name
  // or an address of another namespace), so a loopback server.host (the default) listens on every
  // interface of the head, as before the loopback default; without a key that network reaches the
  // model: said at every start (one-host serve refuses it without --allow-unauthenticated; util/exposure.ts)
  const hostAt = argv.indexOf('--host');
  if (hostAt >= 0 && isLoopback(argv[hostAt + 1]!)) argv[hostAt + 1] = '0.0.0.0';
  const open = exposedWhat({
    who: `${p.name}'s head`,
    field: 'server.host',
    host: hostAt >= 0 ? argv[hostAt + 1]! : p.server.host,
    keyed: Boolean(p.server.apiKeyEnv),
    fixes: [],
  });
  if (!open) return undefined;
  return `WARNING: ${open}; server.apiKeyEnv: NAME in the profile (export NAME=...) asks every client for a key`;
}

/** Every node's command, in start order, for the executor the profile and target vLLM call for. */
export function planCluster(
  profileName: string,
  nf: NodesFile,
  opts: ClusterInputs,
  fabricEnv: Record<string, Record<string, string>> = {},
  rdmaNodes?: Set<string>,
): PlannedCluster {
  const r = resolveForNodes(profileName, opts, nf);
  const executor = clusterExecutor(r.profile)!;
  const p = r.profile;
  if (executor === 'native') {
    const why = nativeProblem(nf, p.parallel.tensor, p.parallel.pipeline);
    if (why)
      throw new UsageError(`parallel.executor: mp over ${allNodes(nf).length} nodes: ${why}`, [
        '--set parallel.executor=ray (Ray places ranks unevenly), or nodes that each hold TP x PP / nodes GPUs',
      ]);
  }
  // On every node vLLM runs under the name the nodes file gives sparkctl/vllm: the same rendering as one node.
  const exe = opts.engine === 'sim' ? [...nf.sparkctl.split(/\s+/), 'sim'] : executableFor(opts);
  const rep = renderReplicas(p, r.host, {
    executable: exe,
    stateDir: '$HOME/.local/state/sparkctl',
    tail:
      opts.engine === 'sim'
        ? simTail(r, opts).filter((x, i, a) => !(x === '--sim-profile' || a[i - 1] === '--sim-profile'))
        : [],
  })[0]!;
  const warnings = requireValid(r);
  // every rank starts from an ssh login: where the model is (and the profile's env) goes to each node
  const rt = traitsOfProfile(p);
  const here = opts.here ?? { env: process.env, cwd: process.cwd() };
  const model = nodeModel(p, {
    ...here,
    offline: opts.offline && opts.engine !== 'sim',
    containerHfCache: Boolean(rt.nodeHfCache(p)),
  });
  rep.argv = withAbsoluteModel(rep.argv, exe.length + 1, p.model.path, model.modelPath);
  const shared = { ...rep.env, ...model.env };
  const open = headOnNetwork(rep.argv, p);
  if (open) warnings.unshift(open);
  const host =
    executor === 'native' ? planNative(nf, rep.argv, fabricEnv, shared) : planNodes(nf, rep.argv, fabricEnv, shared);
  // the same commands, as the runtime runs them on each node (as they are, or each in a container: node-runtime.ts)
  const place = {
    profile: p,
    platform: r.platform,
    engine: opts.engine === 'sim' ? 'sim' : 'vllm',
    executableLen: exe.length,
    mounts: model.mounts,
  } as const;
  const steps = onNodes(rt).place(
    { ...place, executor, perNode: (p.parallel.tensor * p.parallel.pipeline) / allNodes(nf).length, rdmaNodes },
    nf,
    host,
  );
  // The start caches on every node, keyed as on one host (the profile, the vLLM version it names for
  // these nodes). Ranks in containers on nodes get none: the folder would have to be mounted into each
  // node's container, which the node container plan does not do yet (docs/cold-start.md says so).
  const caches =
    rt.nodeStartCaches && p.engine.startCaches !== false
      ? planNodeCaches({ profile: p.name, vllm: p.engine.vllmVersion }, rep.env)
      : undefined;
  return {
    resolved: r,
    nf,
    executor,
    steps,
    replica: { name: rep.name, argv: rep.argv, env: rep.env, port: rep.port },
    model,
    warnings,
    gpusNeeded: p.parallel.tensor * p.parallel.pipeline,
    url: `http://${nf.head.address}:${rep.port}`,
    ...(caches ? { caches } : {}),
  };
}

/** The plan the executor runs: the planned commands plus readiness, prewarm, probe and the key. */
export function toClusterPlan(
  pc: PlannedCluster,
  opts: ClusterInputs & { stateDir: string; joinTimeoutS?: number },
): ClusterPlan {
  const p = pc.resolved.profile;
  return {
    placement: 'nodes',
    executor: pc.executor,
    engine: opts.engine === 'sim' ? 'sim' : 'vllm',
    joinTimeoutS: opts.joinTimeoutS,
    nodesFile: opts.nodesFile,
    nf: pc.nf,
    profile: p,
    servedName: servedName(p),
    tensor: p.parallel.tensor,
    pipeline: p.parallel.pipeline,
    steps: pc.steps,
    replica: pc.replica,
    readyTimeoutMs: opts.readyTimeout ?? p.server.readyTimeoutSeconds * 1000,
    stallTimeoutMs: p.server.stallTimeoutSeconds * 1000,
    prewarm: opts.prewarm,
    // the GPUs are the nodes', not read from here
    probe: { ...p.probe, gpuMemoryUtilization: p.engine.gpuMemoryUtilization, gpus: false },
    stateDir: opts.stateDir,
    ...(pc.caches ? { caches: pc.caches } : {}),
  };
}
