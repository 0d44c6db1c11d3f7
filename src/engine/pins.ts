// What a profile runs, pinned: the image by its content (a repository digest, or the image ID of an
// image built or loaded here, which has none), the vLLM version, the executable, and the --set that
// express them. A tag moves; a digest does not. The pin is the state folder's (pins/PROFILE.json,
// written atomically, never through a link), with the pins before it, newest first, so a rollback
// knows where to go back to. Every field read back is checked: a pin file is hostile bytes too.
import { basename, dirname, join } from 'node:path';
import { existsSync } from 'node:fs';
import { wroteItLast, recordOwnWrite } from '../util/new-file.js';
import { z } from 'zod';
import { writeFileAtomic } from '../util/atomic.js';
import { ensureDir } from '../util/dirs.js';
import { readTextOrNullSync, READ_LIMITS } from '../util/read.js';
import { UsageError } from '../errors.js';
import { traitsOfProfile } from './runtime/traits.js';
import type { RuntimeImages } from './runtime/runtime.js';
import { RecordImage } from '../util/image-ref.js';

const HEX64 = /^[a-f0-9]{64}$/;
const DIGEST_REF = /^[a-z0-9][a-z0-9._/:-]*@sha256:[a-f0-9]{64}$/;

export const Pin = z.strictObject({
  at: z.string(),
  vllmVersion: z.string().max(96),
  /** the reference the operator gave (a tag may move) */
  image: RecordImage.optional(),
  /** what serve runs: REPO@sha256:DIGEST, or the 64-hex image ID (no repository digest) */
  imagePinned: z
    .string()
    .max(600)
    .refine((s) => DIGEST_REF.test(s) || HEX64.test(s), 'REPO@sha256:<64 hex> or a 64-hex image ID')
    .optional(),
  /** the image's content ID (64 hex) where it was read: a tag that now names another ID has moved */
  imageId: z.string().regex(HEX64).optional(),
  vllmBin: z.string().max(4096).optional(),
  /**
   * a host install: the vLLM version and a hash of its Python environment's packages (vllm-version.ts vllmFingerprint)
   */
  fingerprint: z
    .strictObject({
      version: z.string().max(96),
      packages: z.string().regex(/^[a-f0-9]{16}$/),
      count: z.number().int().min(0).max(100_000),
    })
    .optional(),
  /** the --set that express this pin (upgrade and rollback start from them) */
  sets: z.array(z.string().max(4096)).max(64),
});
export type Pin = z.infer<typeof Pin>;

export const PinFile = z.strictObject({
  version: z.literal(1),
  profile: z.string(),
  current: Pin,
  previous: z.array(Pin).max(20),
});
export type PinFile = z.infer<typeof PinFile>;

const pinsDir = (stateDir: string) => join(stateDir, 'pins');
const pinPath = (stateDir: string, profile: string) => join(pinsDir(stateDir), `${profile}.json`);

/**
 * Where the operator keeps the pin besides the state folder (the profile's `pinnedIn`): `lockfile` is
 * NAME.lock.json beside the profile's file (committed with it, copied to the next host); `state` (the
 * default) none. The state folder always keeps it too: it is what this host ran, and status reads it.
 */
export function lockFileOf(
  p: { pinnedIn?: 'state' | 'lockfile' },
  profileFile: string | undefined,
): string | undefined {
  if (p.pinnedIn !== 'lockfile' || !profileFile) return undefined;
  return join(dirname(profileFile), `${basename(profileFile).replace(/\.(ya?ml|json)$/i, '')}.lock.json`);
}

/** A lock file: the pin file's own shape, with a line that says who writes it. */
const LockFile = PinFile.extend({ generatedBy: z.string().max(300) });
const GENERATED_BY =
  'sparkctl: the image and vLLM this profile runs, pinned (serve --repin and sparkctl upgrade rewrite it; pinnedIn: lockfile)';

/** The profile's pin file, or undefined where none was written; a file that is not one is bad input with the fix. */
export function readPins(stateDir: string, profile: string, lock?: string): PinFile | undefined {
  return lock ? pinsAt(stateDir, profile, lock).file : readPinText(pinPath(stateDir, profile), profile, PinFile);
}

/**
 * The one reader of a profile's pin, wherever the operator keeps it: with a lock file (pinnedIn:
 * lockfile) the lock file's pin runs, and one that disagrees with the state folder's is a finding with
 * the fix; not written yet, the state folder's runs (the next pin writes the lock file).
 */
export function pinsAt(
  stateDir: string,
  profile: string,
  lock?: string,
): { file?: PinFile; from: 'state' | 'lockfile'; finding?: string } {
  const state = readPinText(pinPath(stateDir, profile), profile, PinFile);
  if (!lock) return { file: state, from: 'state' };
  const locked = readPinText(lock, profile, LockFile);
  if (!locked)
    return {
      file: state,
      from: 'state',
      ...(state
        ? {
            finding: `${lock} is not written yet (pinnedIn: lockfile): the state folder's pin runs; the next pin writes it (sparkctl serve ${profile} --repin, or an upgrade)`,
          }
        : {}),
    };
  const { generatedBy: _g, ...file } = locked as PinFile & { generatedBy: string };
  const finding = lockDisagreement(lock, file, state, pinPath(stateDir, profile));
  return { file, from: 'lockfile', ...(finding ? { finding } : {}) };
}

const pinWords = (p: Pin) =>
  [p.imagePinned ?? p.image, p.vllmBin, `vLLM ${p.fingerprint?.version ?? p.vllmVersion}`].filter(Boolean).join(', ');

/** A lock file and the state folder naming other pins: what each says, which runs, and the fix (pure). */
export function lockDisagreement(
  lock: string,
  locked: PinFile,
  state: PinFile | undefined,
  statePath: string,
): string | undefined {
  if (!state) return undefined;
  const a = locked.current;
  const b = state.current;
  if (
    a.imagePinned === b.imagePinned &&
    a.imageId === b.imageId &&
    a.vllmVersion === b.vllmVersion &&
    a.vllmBin === b.vllmBin &&
    a.fingerprint?.version === b.fingerprint?.version
  )
    return undefined;
  return (
    `${lock} pins ${pinWords(a)} (${a.at}); the state folder (${statePath}) pins ${pinWords(b)} (${b.at}): the lock file's pin runs. ` +
    `Fix: if the lock file is right (copied from the host that tested it), nothing: serve runs it and this host's state follows; ` +
    `if the state folder is right, remove the lock file (the next pin writes it again from what runs)`
  );
}

function readPinText<T extends typeof PinFile | typeof LockFile>(
  path: string,
  profile: string,
  schema: T,
): PinFile | undefined {
  const text = readTextOrNullSync(path, { maxBytes: READ_LIMITS.record });
  if (text === null) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new UsageError(`${path}: not JSON`, [`remove it (the next upgrade of ${profile} writes it again)`]);
  }
  const p = schema.safeParse(json);
  if (!p.success)
    throw new UsageError(
      `${path}: not a pin file (${p.error.issues.map((i) => `${i.path.join('.') || 'file'}: ${i.message}`).join('; ')})`,
      [`remove it (the next upgrade of ${profile} writes it again)`],
    );
  if (p.data.profile !== profile)
    throw new UsageError(`${path} pins profile "${p.data.profile}", not ${profile}`, [`remove it`]);
  return p.data;
}

/**
 * The new pin becomes current; the one before it goes first in `previous` (at most 20 kept). With a lock file, there
 * too.
 */
export function writePin(stateDir: string, profile: string, pin: Pin, lock?: string): PinFile {
  const before = readPins(stateDir, profile, lock);
  const file: PinFile = {
    version: 1,
    profile,
    current: pin,
    previous: before ? [before.current, ...before.previous].slice(0, 20) : [],
  };
  writePinFile(stateDir, file, lock);
  return file;
}

/**
 * Why sparkctl will not write the lock file (undefined: it may): a file there that sparkctl did not
 * write last (copied in, edited, another tool's) is never written over. Asked before anything acts.
 */
export function lockNotWritable(stateDir: string, lock: string | undefined): string | undefined {
  if (!lock || !existsSync(lock) || wroteItLast(stateDir, lock)) return undefined;
  return `${lock} was not written by sparkctl on this host (copied here, or edited since): sparkctl does not write over it`;
}

/** The fix for a lock file sparkctl will not write over. */
export const lockFix = (lock: string) =>
  `remove ${lock} (the state folder keeps the pin that runs; sparkctl writes the lock file again), or set pinnedIn: state in the profile`;

/** A rollback: the previous pin becomes current again (and the one rolled back from goes first in previous). */
export function rollbackPins(file: PinFile): { to: Pin; next: PinFile } | undefined {
  const [to, ...rest] = file.previous;
  if (!to) return undefined;
  return { to, next: { ...file, current: to, previous: [file.current, ...rest].slice(0, 20) } };
}

/**
 * The pin file written to the state folder, and to the lock file where the operator keeps one (never over a file
 * sparkctl did not write: refused before).
 */
export function writePinFile(stateDir: string, file: PinFile, lock?: string): void {
  const why = lockNotWritable(stateDir, lock);
  if (why) throw new UsageError(why, [lockFix(lock!)]);
  ensureDir(
    pinsDir(stateDir),
    'the pins folder',
    'sparkctl keeps what each profile runs there: check the state folder (SPARKCTL_STATE_DIR)',
  );
  writeFileAtomic(pinPath(stateDir, file.profile), `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
  if (!lock) return;
  writeFileAtomic(lock, `${JSON.stringify({ generatedBy: GENERATED_BY, ...file }, null, 2)}\n`, { mode: 0o644 });
  recordOwnWrite(stateDir, lock);
}

/** The repository of a reference, as RepoDigests write it (docker.io/library/ for bare names). */
export function repositoryOf(ref: string): string {
  const noDigest = ref.split('@')[0]!;
  const slash = noDigest.lastIndexOf('/');
  const colon = noDigest.lastIndexOf(':');
  const repo = colon > slash ? noDigest.slice(0, colon) : noDigest;
  return repo;
}

const sameRepo = (a: string, b: string) => {
  const norm = (r: string) => (r.includes('/') ? r : `library/${r}`).replace(/^docker\.io\//, '');
  return norm(a) === norm(b);
};

/**
 * `image inspect --format '{{.Id}} {{json .RepoDigests}}'`: the pinned reference for `ref`. A repository
 * digest of the same repository wins (the pin then pulls on another node); an image with none (built
 * or loaded here) is pinned by its ID. Hostile text in, a checked reference or an error out.
 */
export function pinFromInspect(
  ref: string,
  stdout: string,
): { pinned: string; how: 'digest' | 'image-id'; id: string } | { error: string } {
  const line = stdout.trim().split('\n')[0] ?? '';
  const m = /^(?:sha256:)?([a-f0-9]{64}) (.*)$/.exec(line);
  if (!m) return { error: `not an image id: ${JSON.stringify(line.slice(0, 80))}` };
  let digests: unknown;
  try {
    digests = JSON.parse(m[2]!);
  } catch {
    return { error: `RepoDigests not readable: ${JSON.stringify(m[2]!.slice(0, 80))}` };
  }
  if (digests === null) digests = [];
  if (!Array.isArray(digests)) return { error: 'RepoDigests is not a list' };
  const id = m[1]!;
  if (DIGEST_REF.test(ref)) return { pinned: ref, how: 'digest', id };
  const repo = repositoryOf(ref);
  const own = digests
    .filter((d): d is string => typeof d === 'string' && DIGEST_REF.test(d))
    .find((d) => sameRepo(repositoryOf(d), repo));
  if (own) return { pinned: `${repo}@${own.split('@')[1]}`, how: 'digest', id };
  return { pinned: id, how: 'image-id', id };
}

/**
 * Resolve an image reference to what a pin keeps, through the runtime's images (20 s); not readable: bad input with the
 * pull.
 */
export async function resolveImagePin(
  images: RuntimeImages,
  cliArgs: readonly string[],
  ref: string,
): Promise<{ pinned: string; how: 'digest' | 'image-id'; id: string }> {
  const p = await inspectForPin(images, cliArgs, ref);
  if ('error' in p)
    throw new UsageError(p.error, [
      `${images.pullCommand(ref)} (upgrade and serve never download an image unasked), then upgrade again`,
    ]);
  return p;
}

/** A reference that cannot move: REPO@sha256:DIGEST, or a 64-hex image ID. */
export const isPinnedRef = (ref: string): boolean => DIGEST_REF.test(ref) || HEX64.test(ref);

/** Every image reference a pin file was taken from or pins (a profile naming one of them runs the current pin). */
function knownRefs(file: PinFile): Set<string> {
  const out = new Set<string>();
  for (const p of [file.current, ...file.previous]) {
    if (p.image) out.add(p.image);
    if (p.imagePinned) out.add(p.imagePinned);
  }
  return out;
}

/**
 * What serve runs for the image reference a profile names, given its pin file and the reference as
 * read here (`image inspect`). The rule, stated once (docs/upgrades.md "Pinned by default"):
 * - a digest or image ID named: runs as named (it cannot move); the pin follows it;
 * - no pin yet: the reference is pinned now (its repository digest, else its image ID) and that runs;
 * - a pin, and the profile names a reference the pin was taken from (this tag, or one an upgrade
 *   moved on from): the CURRENT pin runs, whatever the tag names now; a tag that now names another
 *   image is said (moved), never followed;
 * - `--repin`: the reference is pinned anew, as it is now (the pin before it kept for a rollback);
 * - the profile names a reference the pin file never saw (the operator edited the image): pinned
 *   anew, and said;
 * - not readable here (not pulled): runs unpinned, and said (serve pins it the next time it is here).
 */
export type ImagePinDecision = (
  | { state: 'given'; ref: string; run: string }
  | {
      state: 'new' | 'repinned' | 'edited';
      ref: string;
      run: string;
      how: 'digest' | 'image-id';
      id: string;
      before?: Pin;
    }
  | { state: 'kept'; ref: string; run: string; pin: Pin; movedTo?: string; older?: boolean }
  | { state: 'unpinned'; ref: string; run: string; why: string }
) & {
  /** the pin was read from a lock file that the state folder disagrees with, or that is not written yet (pinsAt) */
  finding?: string;
  /** the lock file the pin is also written to (pinnedIn: lockfile) */
  lock?: string;
};

export function decideImagePin(
  ref: string,
  file: PinFile | undefined,
  inspected: { pinned: string; how: 'digest' | 'image-id'; id: string } | { error: string },
  repin = false,
): ImagePinDecision {
  if (isPinnedRef(ref)) return { state: 'given', ref, run: ref };
  const cur = file?.current.imagePinned ? file.current : undefined;
  if (cur && !repin && file && knownRefs(file).has(ref)) {
    const movedTo = 'id' in inspected && cur.imageId && inspected.id !== cur.imageId ? inspected.id : undefined;
    return {
      state: 'kept',
      ref,
      run: cur.imagePinned!,
      pin: cur,
      ...(movedTo ? { movedTo } : {}),
      ...(cur.image !== ref ? { older: true } : {}),
    };
  }
  if ('error' in inspected) return { state: 'unpinned', ref, run: ref, why: inspected.error };
  const state = !cur ? 'new' : repin ? 'repinned' : 'edited';
  return { state, ref, run: inspected.pinned, how: inspected.how, id: inspected.id, ...(cur ? { before: cur } : {}) };
}

/** One line for the operator: what runs and why. */
export function pinLine(d: ImagePinDecision): string {
  switch (d.state) {
    case 'given':
      return `image ${d.ref}: pinned by the profile itself`;
    case 'new':
      return `image ${d.ref}: pinned to ${d.run} (${d.how === 'digest' ? 'its repository digest' : 'its image ID: no repository digest'}); serve and every restart run this, never the tag`;
    case 'repinned':
      return `image ${d.ref}: pinned anew (--repin) to ${d.run}; before: ${d.before?.imagePinned} (sparkctl upgrade --rollback returns to it)`;
    case 'edited':
      return `image ${d.ref}: the profile names another image than the pin (${d.before?.imagePinned}, from ${d.before?.image ?? 'an earlier serve'}): pinned anew to ${d.run}`;
    case 'kept':
      return `image ${d.ref}: runs the pin ${d.run}${d.older ? ` (pinned at ${d.pin.at} from ${d.pin.image}: the profile's reference is an older one)` : ''}`;
    case 'unpinned':
      return `image ${d.ref}: not pinned (${d.why}); serve pins it once it is on this host`;
  }
}

/** The warning for a tag that moved under its pin (undefined when it did not). */
export function movedLine(d: ImagePinDecision, profile: string): string | undefined {
  if (d.state !== 'kept' || !d.movedTo) return undefined;
  return `the tag ${d.ref} moved: it now names image ${d.movedTo.slice(0, 12)}, not the pinned ${d.pin.imageId?.slice(0, 12)} (${d.run}); the pin runs. To take the new image: sparkctl upgrade ${profile} --image ${d.ref} (canary, compare, roll), or serve it with --repin`;
}

/** The pin a serve writes for its decision (undefined: nothing to write). */
export function pinOfDecision(
  d: ImagePinDecision,
  vllmVersion: string,
  at = new Date().toISOString(),
): Pin | undefined {
  if (d.state === 'new' || d.state === 'repinned' || d.state === 'edited')
    return { at, vllmVersion, image: d.ref, imagePinned: d.run, imageId: d.id, sets: [`container.image=${d.run}`] };
  return undefined;
}

/**
 * The inspect serve's pin decision reads (the reference's ID and digests, as the runtime reads them), its failure an
 * error, never a throw.
 */
export async function inspectForPin(
  images: RuntimeImages,
  cliArgs: readonly string[],
  ref: string,
): Promise<{ pinned: string; how: 'digest' | 'image-id'; id: string } | { error: string }> {
  const r = await images.inspect(ref, cliArgs);
  return 'error' in r ? r : pinFromInspect(ref, r.stdout);
}

/**
 * Multi-node: what every node runs for the reference a profile names. Where the pin was taken from
 * that reference (or an upgrade moved on from it), every node runs the pin's image ID: a node that
 * does not hold that very image is refused before anything starts (the same-image check reads it on
 * each node), whatever its copy of the tag names now. Undefined: the reference runs (no pin yet: the
 * first healthy serve --nodes pins the ID every node agreed on).
 */
export function nodesImagePin(
  ref: string | undefined,
  file: PinFile | undefined,
): { run: string; pin: Pin } | undefined {
  if (!ref || isPinnedRef(ref) || !file?.current.imageId || !knownRefs(file).has(ref)) return undefined;
  return { run: file.current.imageId, pin: file.current };
}

/**
 * runtime container over nodes: the profile's image reference, and the pin every node runs where
 * there is one (repin: none, pinned anew once healthy). serve --nodes and preflight --nodes read it alike.
 */
export function imagePinOfNodes(
  loaded: {
    profile: {
      name: string;
      engine: { runtime: 'host' | 'container' };
      container?: { image?: string };
      pinnedIn?: 'state' | 'lockfile';
    };
    file?: string;
  },
  stateDir: string,
  repin?: boolean,
): { ref?: string; pinned?: ReturnType<typeof nodesImagePin> } {
  // only where the nodes' vLLM comes from an image (the host's install has no reference to pin)
  if (traitsOfProfile(loaded.profile).vllmFrom !== 'image') return {};
  const ref = loaded.profile.container?.image;
  if (!ref || isPinnedRef(ref)) return {};
  return {
    ref,
    pinned: repin
      ? undefined
      : nodesImagePin(ref, readPins(stateDir, loaded.profile.name, lockFileOf(loaded.profile, loaded.file))),
  };
}
