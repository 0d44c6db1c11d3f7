// What a runtime is, apart from what it does: its engine.runtime word, what runs vLLM in a reader's
// words, and what of the host it leaves unused. Light on purpose: preflight asks it for a profile
// without loading the implementations (host.ts, container-runtime.ts spread these into the Runtime).
import { UsageError } from '../../errors.js';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { containerGpuUse, detectCli, hfCacheDir, imageFor, type ContainerCli } from './container.js';
import type { Platform, Profile } from '../../profiles/schema.js';
import { hubCacheDir } from '../../model/cache.js';

/** The runtime's part of a serve plan (ServePlan.container): its CLI and how each replica's container is rendered. */
export interface RuntimePlanPart {
  cli: ContainerCli;
  /** how many leading argv elements are the host executable (the image's vllm runs instead) */
  executableLen: number;
  pull: boolean;
  entrypoint?: string[];
}

export interface RuntimeTraits {
  /** engine.runtime's word for it (the plan's envelope; a preflight check's runsOn) */
  readonly runtime: 'host' | 'container';
  /** what runs vLLM, in a reader's words: why a check of the other runtime's is skipped */
  readonly why: string;
  /** why the host's NVIDIA driver and GPUs are not used by it (undefined: they are) */
  noHostGpu(p: Pick<Profile, 'container'>): string | undefined;
  /** where the vLLM that runs comes from: the host's install, or the image (read for its version and entrypoint) */
  readonly vllmFrom: 'host' | 'image';
  /** its part of the serve plan, refusing first what it cannot run (UsageError); undefined: the host needs none */
  planPart(
    p: Profile,
    platform: Pick<Platform, 'name'>,
    x: { executableLen: number; pull: boolean; entrypoint?: string[] },
  ): RuntimePlanPart | undefined;
  /**
   * the preflight probe that reads this runtime's own facts (the container CLI's answers); undefined: the host's facts
   * are its
   */
  readonly probe?: 'container';
  /** the Hugging Face hub cache (its hub/ folder) that the server reads, as a path on this host */
  hubCache(p: Profile, env: Record<string, string | undefined>): string;
  /** serve's warning when the server gets no Hugging Face cache at all (a container with no cache folder to mount) */
  noCacheWarning(p: Profile): string | undefined;
  /** what the `sparkctl pull` fix adds, so that the pull fills the cache the server reads (root: hubCache) */
  pullNote(root: string): string;
  /**
   * its launch line carries the server's environment (a container's --env, the key by name): no export line before it
   */
  readonly carriesEnv: boolean;
  /**
   * its replicas run under one systemd unit each (the container, attached); false: one unit per profile runs serve
   * --foreground
   */
  readonly unitPerReplica: boolean;
  /**
   * the image its vLLM comes from (container.image, else the platform's), refused where none can be named; undefined:
   * the host's install
   */
  image(p: Profile, platform: Pick<Platform, 'name'>): string | undefined;
  /** what start caches are to its server, after the folder's line ('' : the host's own folder) */
  readonly cachesNote: string;
  /**
   * why the Python packages beside vLLM are not read for the loader choice (undefined: they are, from the host's
   * install)
   */
  readonly packagesUnread?: string;
  /**
   * over nodes: the cache folder the profile names for this runtime's server on each node (a container's
   * container.hfCache; undefined: the hub cache as this host resolves it)
   */
  nodeHfCache(p: Pick<Profile, 'container'>): string | undefined;
  /**
   * over nodes: each rank gets start caches on its node (a container on a node: not yet, the node container plan mounts
   * no cache folder)
   */
  readonly nodeStartCaches: boolean;
}

export const HOST_TRAITS: RuntimeTraits = {
  runtime: 'host',
  why: 'the profile runs vLLM on the host (engine.runtime: host)',
  noHostGpu: () => undefined,
  vllmFrom: 'host',
  planPart: () => undefined,
  hubCache: (_p, env) => hubCacheDir(env),
  noCacheWarning: () => undefined,
  pullNote: () => '',
  carriesEnv: false,
  unitPerReplica: false,
  image: () => undefined,
  cachesNote: '',
  nodeHfCache: () => undefined,
  nodeStartCaches: true,
};

export const CONTAINER_TRAITS: RuntimeTraits = {
  runtime: 'container',
  // vLLM, PyTorch, their NCCL and cuDNN come with the image: the host's Python is not what runs
  why: 'the profile runs vLLM in a container (engine.runtime: container): the image brings vLLM and its libraries (container.image)',
  // a CPU build of vLLM in a container (container.gpus none) uses neither the host's driver nor its GPUs
  noHostGpu: (p) =>
    containerGpuUse(p, 'vllm').gpu
      ? undefined
      : 'container.gpus is none: the container gets no GPU device, so the host needs no NVIDIA driver or GPU',
  vllmFrom: 'image',
  planPart(p, platform, x) {
    if (p.parallel.nodes > 1)
      throw new UsageError('engine.runtime container: multi-node (parallel.nodes > 1) runs on the host only', [
        '--runtime host, or parallel.nodes=1',
      ]);
    imageFor(p, platform); // a profile without an image is refused before anything runs
    return { cli: detectCli(p), ...x };
  },
  probe: 'container',
  hubCache: containerHubCache,
  noCacheWarning: (p) =>
    existsSync(hfCacheDir(p))
      ? undefined
      : `no Hugging Face cache at ${hfCacheDir(p)} on this host: the container gets none mounted (set container.hfCache or HF_HOME to mount one)`,
  pullNote: (root) => ` (HF_HUB_CACHE=${root}: the cache the container mounts)`,
  carriesEnv: true,
  unitPerReplica: true,
  image: imageFor,
  cachesNote: ', mounted into the container',
  packagesUnread: "the image's packages are not read",
  nodeHfCache: (p) => p.container?.hfCache,
  nodeStartCaches: false,
};

/** The hub cache a container of this profile sees (mounted at /root/.cache/huggingface): its hub/ folder. */
function containerHubCache(p: Profile, env: Record<string, string | undefined>): string {
  if (!p.container?.hfCache && env.HF_HUB_CACHE) return env.HF_HUB_CACHE;
  return join(hfCacheDir(p, env as NodeJS.ProcessEnv), 'hub');
}

/** The traits of a launch step or record: a container's (it names its CLI), else the host's. */
export function traitsOf(t: { container?: unknown }): RuntimeTraits {
  return t.container ? CONTAINER_TRAITS : HOST_TRAITS;
}

/** The traits of the runtime a profile runs under (engine.runtime, or serve's --runtime). */
export function traitsOfProfile(
  p: { engine: { runtime: 'host' | 'container' } },
  flag?: 'host' | 'container',
): RuntimeTraits {
  return (flag ?? p.engine.runtime) === 'host' ? HOST_TRAITS : CONTAINER_TRAITS;
}
