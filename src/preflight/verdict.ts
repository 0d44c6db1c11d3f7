// The verdict half of preflight: which platform baseline the host is checked against. The baselines
// are precompiled (profiles/platforms.ts): no YAML or zod here. runPreflight imports it once the
// probes are running, so its loading overlaps them.
import type { Facts } from './facts.js';
import type { Ctx } from './checks.js';
import type { Platform, Profile } from '../profiles/schema.js';
import { listPlatforms, loadPlatform, DEFAULT_PLATFORM } from '../profiles/platforms.js';
import { satisfies } from '../profiles/versions.js';

export function detectPlatform(
  f: Facts,
  requested: string | undefined,
  profile?: Profile,
): { platform: Platform; reason: string } {
  if (requested && requested !== 'auto')
    return { platform: loadPlatform(requested), reason: `--platform ${requested}` };
  const name = f.gpus[0]?.name;
  const arch = f.arch;
  if (name) {
    const cands = listPlatforms().filter((p) => new RegExp(p.gpu.namePattern).test(name) && (!arch || p.arch === arch));
    const drv = f.driver.module?.version ?? f.gpus[0]?.driver_version;
    const best = cands.find((p) => drv && satisfies(drv, p.driver as never)) ?? cands[0];
    if (best) {
      return {
        platform: best,
        reason: `${f.gpus.length} x ${name}${arch ? ` on ${arch}` : ''}${drv ? `, driver ${drv}` : ''} matches ${best.name} (${best.description})`,
      };
    }
    const fallback = loadPlatform(profile?.platform ?? DEFAULT_PLATFORM);
    return {
      platform: fallback,
      reason: `no shipped baseline matches ${name}${arch ? ` on ${arch}` : ''}; checking against ${fallback.name}${profile?.platform ? " (the profile's)" : ''}`,
    };
  }
  const fallback = loadPlatform(profile?.platform ?? DEFAULT_PLATFORM);
  return {
    platform: fallback,
    reason: `no GPU visible; checking against ${fallback.name}${profile?.platform ? " (the profile's)" : ''}`,
  };
}

/** What the checks read without a profile: the facts and the baseline. */
export function baseCtx(f: Facts, platform: Platform): Ctx {
  return { facts: f, platform, groups: [], ports: [] };
}
