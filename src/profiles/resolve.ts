// A parsed profile checked against the host it is meant for: the platform baseline, the host's
// shape (GPU count and per-GPU memory, read from the host's typed GPU facts when there are some),
// and every cross-field problem. Parsing happens once (load.ts); validation once, here.
import { readTextOrNull, READ_LIMITS } from '../util/read.js';
import { loadProfile, loadPlatform, DEFAULT_PLATFORM, type LoadedProfile } from './load.js';
import { formatProblem, type Problem } from './problem.js';
import type { Platform, Profile } from './schema.js';
import { hostFromPlatform, validateProfile, type HostShape } from './validate.js';
import { GIB } from './planner.js';
import type { GpuFact } from '../host/gpu-facts.js';
import { readModel, type ModelRead, type ModelReader } from '../model/read.js';
import { resolveModelFacts, type ResolvedModel } from '../model/merge.js';
import { UsageError } from '../errors.js';

const MIB = 1024 ** 2;

export interface Resolved {
  profile: Profile;
  file: string;
  platform: Platform;
  host: HostShape;
  problems: Problem[];
  hostNote?: string;
  /** the model facts the plan used and where each came from (undefined: none known, an error is in problems) */
  model?: ResolvedModel;
}

export interface ResolveOptions {
  profilesDir?: string;
  sets?: string[];
  gpus?: number;
  platform?: string;
  gpuMemoryBytes?: number;
  host?: HostShape;
  /** what was read of the model's files (readModelFor); without it the profile's facts stand alone */
  modelRead?: ModelRead;
}

/**
 * The host shape from the GPUs preflight read (pure). The memory a plan must fit is the smallest
 * GPU's total (vLLM budgets gpuMemoryUtilization x total on each GPU); what a GPU does not report
 * (GB10's unified memory, compute capability) comes from the platform baseline.
 * undefined when no GPU was read: the caller falls back to the platform's shape.
 */
export function hostShapeFromGpus(
  gpus: readonly GpuFact[],
  platform: Platform,
  gpusFlag?: number,
): HostShape | undefined {
  if (!gpus.length) return undefined;
  const totals = gpus
    .map((g) => g.memoryTotalMiB)
    .filter((m): m is number => typeof m === 'number' && Number.isFinite(m) && m > 0);
  const cc = gpus.find((g) => g.computeCapability)?.computeCapability;
  const free = gpus
    .map((g) => g.memoryFreeMiB)
    .filter((m): m is number => typeof m === 'number' && Number.isFinite(m) && m >= 0);
  return {
    gpus: gpusFlag ?? gpus.length,
    gpusSource: gpusFlag !== undefined ? 'flag' : 'detected',
    read: true,
    gpuMemoryBytes: totals.length ? Math.min(...totals) * MIB : platform.gpu.memoryGiB * GIB,
    computeCapability: cc ?? platform.gpu.computeCapability,
    gpuName: gpus[0]!.name ?? platform.gpu.displayName,
    gpuMemoryFreeBytes: free.length ? Math.min(...free) * MIB : undefined,
  };
}

/** Validate an already parsed profile against a platform and host shape (no file is read again). */
export function resolveLoaded(
  loaded: LoadedProfile,
  opts: Pick<ResolveOptions, 'gpus' | 'platform' | 'gpuMemoryBytes' | 'host' | 'modelRead'> = {},
): Resolved {
  const { profile, file } = loaded;
  const platform = loadPlatform(opts.platform ?? profile.platform ?? DEFAULT_PLATFORM);
  let host = opts.host ?? hostFromPlatform(platform, opts.gpus);
  if (opts.gpuMemoryBytes) host = { ...host, gpuMemoryBytes: opts.gpuMemoryBytes };
  const hostNote =
    host.gpusSource === 'platform'
      ? `GPU count not read from a host: assuming the ${host.gpus} x ${platform.gpu.displayName} of platform ${platform.name} (say --gpus N otherwise)`
      : undefined;
  const mf = resolveModelFacts(profile.model, opts.modelRead, {
    id: profile.model.id,
    path: profile.model.path,
    name: profile.name,
  });
  const problems: Problem[] = [...mf.problems, ...validateProfile(profile, host, mf.model?.facts)];
  return { profile, file, platform, host, problems, hostNote, model: mf.model };
}

export function resolveProfile(name: string, opts: ResolveOptions): Resolved {
  return resolveLoaded(loadProfile(name, { profilesDir: opts.profilesDir, sets: opts.sets }), opts);
}

/** Errors stop the command with exit 2, listing every problem; warnings are returned. */
export function requireValid(r: Resolved): string[] {
  const errors = r.problems.filter((p) => p.severity === 'error');
  if (errors.length) {
    throw new UsageError(
      `profile ${r.profile.name} cannot run as planned: ${errors.length} problem(s)`,
      errors.map(formatProblem),
    );
  }
  return r.problems.filter((p) => p.severity === 'warning').map(formatProblem);
}

/**
 * resolveLoaded with the profile's model files read first (model.path, or the cache for model.id):
 * a verb that renders a plan (systemd, k8s, router config, restart) knows the model's facts as serve
 * and plan do, instead of asking for facts that sit in the folder the profile names.
 */
export async function resolveWithModel(
  loaded: LoadedProfile,
  opts: Pick<ResolveOptions, 'gpus' | 'platform' | 'gpuMemoryBytes' | 'host'> = {},
): Promise<Resolved> {
  return resolveLoaded(loaded, { ...opts, modelRead: await readModelFor(loaded.profile) });
}

/** Read the profile's model files (model.path, or the HF cache for model.id): offline, bounded. */
export function readModelFor(profile: Profile, reader?: ModelReader, timeoutMs = 2000): Promise<ModelRead> {
  return readModel(
    reader ?? { readFile: readText, env: () => process.env },
    { id: profile.model.id, path: profile.model.path },
    { timeoutMs },
  );
}

/**
 * A file's text, or null where it is missing or unreadable: the model reader's file access on this
 * host. A FIFO, a device or a file past the bound throws FileRefused (the reader says why).
 */
export async function readText(path: string, maxBytes: number = READ_LIMITS.config): Promise<string | null> {
  return readTextOrNull(path, { maxBytes });
}
