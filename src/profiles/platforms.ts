// The shipped platform baselines, already parsed and validated at build time (shipped-platforms.ts,
// generated from profiles/platforms/*.yaml): preflight reads them with neither js-yaml nor zod, which
// cost about 10 ms of its start-up on the H200 host after the probes answered.
import type { Platform } from './schema.js';
import { SHIPPED_PLATFORMS } from './shipped-platforms.js';
import { UsageError } from '../errors.js';

/** The baseline of a profile (or a host) that names none: H100/H200 with CUDA 13, what the shipped profiles target. */
export const DEFAULT_PLATFORM = 'hopper-cuda13';

export function listPlatforms(): Platform[] {
  return SHIPPED_PLATFORMS as Platform[];
}

export function loadPlatform(name: string): Platform {
  const p = SHIPPED_PLATFORMS.find((x) => x.name === name);
  if (!p)
    throw new UsageError(`unknown platform "${name}"`, [
      `known platforms: ${SHIPPED_PLATFORMS.map((x) => x.name).join(', ')}`,
    ]);
  return p as Platform;
}
