// The version guess for a profile on a platform (engine.vllmVersion auto, no vLLM read): the vLLM of the
// image the profile would run where its reference states it, else the newest table. Every verb asks
// this one function, so plan, serve, monitoring, k8s, a container's plan and the simulator tell one story.
import type { Platform, Profile } from '../profiles/schema.js';
import { defaultImage, NGC_VLLM_TAG, ownImage } from './runtime/container.js';
import { versionFromRef } from './runtime/image-version.js';
import { guessFrom, type VersionGuess } from './vllm-version.js';

/**
 * The image a profile names, else its platform's default where that does not depend on the version (NGC's on a DGX
 * baseline).
 */
function imageOf(p: Pick<Profile, 'container'>, platform: Pick<Platform, 'name'>): string | undefined {
  return (
    ownImage(p) ?? (platform.name.startsWith('dgx-') ? defaultImage(platform.name, 'auto', NGC_VLLM_TAG) : undefined)
  );
}

export function versionGuess(p: Pick<Profile, 'container'>, platform: Pick<Platform, 'name'>): VersionGuess {
  const ref = imageOf(p, platform);
  return guessFrom(ref, ref ? versionFromRef(ref) : undefined);
}
