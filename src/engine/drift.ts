// A running server on something else than what its profile is pinned to: a container created from
// another image than the pin (its own image ID, as the container CLI answers for the container, not
// what the record says), or a host install whose vLLM changed under it since it started (another
// version, or other packages in its Python environment: vllm-version.ts vllmFingerprint). status
// names each; restart applies the stated rule (fingerprintChange). Every answer read is hostile.
import type { ClusterRecord, Entry } from './registry.js';
import { refOf, type NodeContainerRef } from './cluster/node-container.js';
import { readLaunch } from './registry.js';
import { readPins, type PinFile } from './pins.js';
import { imageIdOf } from './runtime/ops.js';
import { runtimeOf, type RuntimeTarget } from './runtime/index.js';
import { fingerprintChange, vllmFingerprint, type VllmFingerprint } from './vllm-version.js';

interface Drift {
  name: string;
  profile: string;
  kind: 'image' | 'vllm';
  /** what it runs, and what the pin (or its start) says */
  runs: string;
  pinned: string;
  line: string;
}

/** Pure: a container on another image than its profile's pin (undefined: the same, or nothing to compare). */
export function imageDrift(
  name: string,
  profile: string,
  runningId: string | undefined,
  recordImage: string | undefined,
  pins: PinFile | undefined,
): Drift | undefined {
  const pin = pins?.current;
  if (!pin?.imagePinned) return undefined;
  const where = `the pin ${pin.imagePinned}${pin.image && pin.image !== pin.imagePinned ? ` (from ${pin.image}, ${pin.at})` : ''}`;
  if (runningId && pin.imageId) {
    if (runningId === pin.imageId) return undefined;
    return {
      name,
      profile,
      kind: 'image',
      runs: runningId,
      pinned: pin.imageId,
      line: `${name} runs image ${runningId.slice(0, 12)}, not ${where} (image ${pin.imageId.slice(0, 12)})`,
    };
  }
  if (recordImage && recordImage !== pin.imagePinned)
    return {
      name,
      profile,
      kind: 'image',
      runs: recordImage,
      pinned: pin.imagePinned,
      line: `${name} was started from ${recordImage}, not ${where}`,
    };
  return undefined;
}

/**
 * Every live server of `entries` on something else than its pin or its start (bounded: one inspect per
 * container, one readdir per install). Which check is the runtime's: one whose vLLM comes from an image
 * (Runtime.images) is compared by the image it runs; the host's install by its fingerprint.
 */
export async function driftOf(
  entries: readonly Entry[],
  stateDir: string,
  deps: {
    imageId?: (t: RuntimeTarget) => Promise<string | undefined>;
    fingerprint?: (bin: string) => Promise<VllmFingerprint | undefined>;
  } = {},
): Promise<{ drift: Drift[]; unreadable: string[] }> {
  const fingerprint = deps.fingerprint ?? ((bin: string) => vllmFingerprint(bin));
  const pinsOf = new Map<string, PinFile | undefined>();
  const unreadable: string[] = [];
  const fps = new Map<string, Promise<VllmFingerprint | undefined>>();
  const out = await Promise.all(
    entries
      .filter((e) => e.alive && e.inst.role !== 'router')
      .map(async (e): Promise<Drift | undefined> => {
        const { inst } = e;
        const rec = readLaunch('host', inst).launch;
        const images = runtimeOf(inst).images;
        if (images) {
          if (!pinsOf.has(inst.profile)) {
            try {
              pinsOf.set(inst.profile, readPins(stateDir, inst.profile));
            } catch (x) {
              pinsOf.set(inst.profile, undefined);
              unreadable.push((x as Error).message);
            }
          }
          const pins = pinsOf.get(inst.profile);
          if (!pins?.current.imagePinned) return undefined;
          return imageDrift(inst.name, inst.profile, await (deps.imageId ?? images.runningId)(inst), rec?.image, pins);
        }
        if (inst.engine !== 'vllm' || !rec?.fingerprint) return undefined;
        const bin = inst.argv[0] ?? 'vllm';
        if (!fps.has(bin)) fps.set(bin, fingerprint(bin));
        const change = fingerprintChange(rec.fingerprint, await fps.get(bin));
        if (!change) return undefined;
        return {
          name: inst.name,
          profile: inst.profile,
          kind: 'vllm',
          runs: rec.fingerprint.version,
          pinned: bin,
          line: `${inst.name}: ${change.line} (${bin}): a restart would start another server`,
        };
      }),
  );
  return { drift: out.filter((d): d is Drift => d !== undefined), unreadable: [...new Set(unreadable)] };
}

/**
 * Pure: each rank of a cluster on another image than the profile's pin, as its node's runtime answered (undefined: not
 * read).
 */
export function clusterImageDrift(
  profile: string,
  ranks: Array<{ node: string; rank: number; imageId: string | undefined }>,
  pins: PinFile | undefined,
): Drift[] {
  const pin = pins?.current;
  if (!pin?.imageId) return [];
  const where = `the pin ${pin.imagePinned ?? pin.imageId}${pin.image && pin.image !== pin.imagePinned ? ` (from ${pin.image}, ${pin.at})` : ''}`;
  return ranks
    .filter((r) => r.imageId && r.imageId !== pin.imageId)
    .map((r) => ({
      name: `${profile} on ${r.node}`,
      profile,
      kind: 'image' as const,
      runs: r.imageId!,
      pinned: pin.imageId!,
      line: `${profile}: node ${r.node} (rank ${r.rank}) runs image ${r.imageId!.slice(0, 12)}, not ${where} (image ${pin.imageId!.slice(0, 12)})`,
    }));
}

/**
 * Every multi-node server in containers whose ranks run another image than the profile's pin: each rank's container
 * asked on its node, by the ID its launch got back (one ssh per rank, bounded). `answerOf` returns what the node's
 * runtime printed, as it came (undefined: no answer); it is read here, by the one rule for an image ID (runtime/ops.ts
 * imageIdOf, as for a container on this host): anything but 64 hex is no answer. A node that does not answer is passed
 * over (status shows it unknown).
 */
export async function clustersDrift(
  records: readonly ClusterRecord[],
  stateDir: string,
  answerOf: (rec: ClusterRecord, ref: NodeContainerRef) => Promise<string | undefined>,
): Promise<{ drift: Drift[]; unreadable: string[] }> {
  const imageOf = async (rec: ClusterRecord, ref: NodeContainerRef) => {
    const answer = await answerOf(rec, ref);
    return answer === undefined ? undefined : imageIdOf(answer);
  };
  const unreadable: string[] = [];
  const out = await Promise.all(
    records.map(async (rec) => {
      const refs = (rec.ranks ?? [])
        .map((r) => ({ r, ref: refOf(r) }))
        .filter((x): x is { r: (typeof x)['r']; ref: NodeContainerRef } => x.ref !== undefined);
      if (!refs.length) return [];
      let pins: PinFile | undefined;
      try {
        pins = readPins(stateDir, rec.profile);
      } catch (x) {
        unreadable.push((x as Error).message);
        return [];
      }
      if (!pins?.current.imageId) return [];
      const ranks = await Promise.all(
        refs.map(async ({ r, ref }) => ({
          node: r.node,
          rank: r.rank,
          imageId: await imageOf(rec, ref).catch(() => undefined),
        })),
      );
      return clusterImageDrift(rec.profile, ranks, pins);
    }),
  );
  return { drift: out.flat(), unreadable };
}
