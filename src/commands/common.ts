// Shared by the verbs: resolving a profile against a host shape, the state folder, sizes.
import { homedir } from 'node:os';
import { join } from 'node:path';
import { UsageError } from '../errors.js';
import { loadProfile, loadPlatform, formatProblem, BUILTIN_DIR, type Problem } from '../profiles/load.js';
import type { Platform, Profile } from '../profiles/schema.js';
import { hostFromPlatform, validateProfile, type HostShape } from '../profiles/validate.js';
import { GIB } from '../profiles/planner.js';

export function stateDir(): string {
  if (process.env.SPARKCTL_STATE_DIR) return process.env.SPARKCTL_STATE_DIR;
  const base = process.env.XDG_STATE_HOME || join(homedir(), '.local', 'state');
  return join(base, 'sparkctl');
}

/** "80GiB", "141GB", "80G", "81920MiB" -> bytes. */
export function parseSize(text: string, field: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(GiB|GB|G|MiB|MB|M|TiB|TB)?$/i.exec(text.trim());
  if (!m) throw new UsageError(`${field}: "${text}" is not a size`, ['write it like 80GiB, 141GB or 81920MiB']);
  const n = Number(m[1]);
  const unit = (m[2] ?? 'GiB').toLowerCase();
  const mult: Record<string, number> = { gib: GIB, g: GIB, gb: 1e9, mib: 1024 ** 2, m: 1024 ** 2, mb: 1e6, tib: 1024 ** 4, tb: 1e12 };
  return n * mult[unit]!;
}

export interface Resolved {
  profile: Profile;
  file: string;
  platform: Platform;
  host: HostShape;
  problems: Problem[];
  hostNote?: string;
}

export interface ResolveOptions {
  profilesDir?: string;
  sets?: string[];
  gpus?: number;
  platform?: string;
  gpuMemoryBytes?: number;
  host?: HostShape;
}

export function resolveProfile(name: string, opts: ResolveOptions): Resolved {
  const { profile, file } = loadProfile(name, { profilesDir: opts.profilesDir, sets: opts.sets });
  const platformName = opts.platform ?? profile.platform ?? 'hopper-cuda13';
  const platform = loadPlatform(platformName);
  let host = opts.host ?? hostFromPlatform(platform, opts.gpus);
  if (opts.gpuMemoryBytes) host = { ...host, gpuMemoryBytes: opts.gpuMemoryBytes };
  const hostNote =
    host.gpusSource === 'platform'
      ? `GPU count not read from a host: assuming the ${host.gpus} x ${platform.gpu.displayName} of platform ${platform.name} (say --gpus N otherwise)`
      : undefined;
  return { profile, file, platform, host, problems: validateProfile(profile, host), hostNote };
}

/** Errors stop the command with exit 2, listing every problem; warnings are returned. */
export function requireValid(r: Resolved): string[] {
  const errors = r.problems.filter((p) => p.severity === 'error');
  if (errors.length) {
    throw new UsageError(`profile ${r.profile.name} cannot run as planned: ${errors.length} problem(s)`, errors.map(formatProblem));
  }
  return r.problems.filter((p) => p.severity === 'warning').map(formatProblem);
}

export function sparkctlBin(): string {
  return join(BUILTIN_DIR, '..', 'bin', 'sparkctl.js');
}
