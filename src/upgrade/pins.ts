// What a profile runs, pinned: the image by its content (a repository digest, or the image ID of an
// image built or loaded here, which has none), the vLLM version, the executable, and the --set that
// express them. A tag moves; a digest does not. The pin is the state folder's (pins/PROFILE.json,
// written atomically, never through a link), with the pins before it, newest first, so a rollback
// knows where to go back to. Every field read back is checked: a pin file is hostile bytes too.
import { join } from 'node:path';
import { z } from 'zod';
import { writeFileAtomic } from '../util/atomic.js';
import { ensureDir } from '../util/dirs.js';
import { readTextOrNullSync, READ_LIMITS } from '../util/read.js';
import { UsageError } from '../errors.js';
import { withCliArgs, type ContainerCli } from '../engine/runtime/container.js';
import { cliRunAsync, failureLine, type CliResult } from '../engine/runtime/ops.js';

const HEX64 = /^[a-f0-9]{64}$/;
const DIGEST_REF = /^[a-z0-9][a-z0-9._/:-]*@sha256:[a-f0-9]{64}$/;

export const Pin = z.strictObject({
  at: z.string(),
  vllmVersion: z.string().max(96),
  /** the reference the operator gave (a tag may move) */
  image: z.string().max(512).optional(),
  /** what serve runs: REPO@sha256:DIGEST, or the 64-hex image ID (no repository digest) */
  imagePinned: z
    .string()
    .max(600)
    .refine((s) => DIGEST_REF.test(s) || HEX64.test(s), 'REPO@sha256:<64 hex> or a 64-hex image ID')
    .optional(),
  vllmBin: z.string().max(4096).optional(),
  /** the --set that express this pin (upgrade and rollback start from them) */
  sets: z.array(z.string().max(4096)).max(64),
});
export type Pin = z.infer<typeof Pin>;

export const PinFile = z.strictObject({ version: z.literal(1), profile: z.string(), current: Pin, previous: z.array(Pin).max(20) });
export type PinFile = z.infer<typeof PinFile>;

export const pinsDir = (stateDir: string) => join(stateDir, 'pins');
const pinPath = (stateDir: string, profile: string) => join(pinsDir(stateDir), `${profile}.json`);

/** The profile's pin file, or undefined where none was written; a file that is not one is bad input with the fix. */
export function readPins(stateDir: string, profile: string): PinFile | undefined {
  const path = pinPath(stateDir, profile);
  const text = readTextOrNullSync(path, { maxBytes: READ_LIMITS.record });
  if (text === null) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new UsageError(`${path}: not JSON`, [`remove it (the next upgrade of ${profile} writes it again)`]);
  }
  const p = PinFile.safeParse(json);
  if (!p.success)
    throw new UsageError(`${path}: not a pin file (${p.error.issues.map((i) => `${i.path.join('.') || 'file'}: ${i.message}`).join('; ')})`, [
      `remove it (the next upgrade of ${profile} writes it again)`,
    ]);
  if (p.data.profile !== profile) throw new UsageError(`${path} pins profile "${p.data.profile}", not ${profile}`, [`remove it`]);
  return p.data;
}

/** The new pin becomes current; the one before it goes first in `previous` (at most 20 kept). */
export function writePin(stateDir: string, profile: string, pin: Pin): PinFile {
  const before = readPins(stateDir, profile);
  const file: PinFile = { version: 1, profile, current: pin, previous: before ? [before.current, ...before.previous].slice(0, 20) : [] };
  ensureDir(pinsDir(stateDir), 'the pins folder', 'sparkctl keeps what each profile runs there: check the state folder (SPARKCTL_STATE_DIR)');
  writeFileAtomic(pinPath(stateDir, profile), `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
  return file;
}

/** A rollback: the previous pin becomes current again (and the one rolled back from goes first in previous). */
export function rollbackPins(file: PinFile): { to: Pin; next: PinFile } | undefined {
  const [to, ...rest] = file.previous;
  if (!to) return undefined;
  return { to, next: { ...file, current: to, previous: [file.current, ...rest].slice(0, 20) } };
}

export function writePinFile(stateDir: string, file: PinFile): void {
  ensureDir(pinsDir(stateDir), 'the pins folder', 'check the state folder (SPARKCTL_STATE_DIR)');
  writeFileAtomic(pinPath(stateDir, file.profile), `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
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
export function pinFromInspect(ref: string, stdout: string): { pinned: string; how: 'digest' | 'image-id' } | { error: string } {
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
  if (DIGEST_REF.test(ref)) return { pinned: ref, how: 'digest' };
  const repo = repositoryOf(ref);
  const own = digests.filter((d): d is string => typeof d === 'string' && DIGEST_REF.test(d)).find((d) => sameRepo(repositoryOf(d), repo));
  if (own) return { pinned: `${repo}@${own.split('@')[1]}`, how: 'digest' };
  return { pinned: m[1]!, how: 'image-id' };
}

/** Resolve an image reference to what a pin keeps, through the container CLI (20 s). */
export async function resolveImagePin(
  cli: ContainerCli,
  cliArgs: readonly string[],
  ref: string,
  run: (argv: string[], timeoutMs: number) => Promise<CliResult> = (argv, timeoutMs) => cliRunAsync(argv, { timeoutMs }),
): Promise<{ pinned: string; how: 'digest' | 'image-id' }> {
  const r = await run(withCliArgs([cli, 'image', 'inspect', '--format', '{{.Id}} {{json .RepoDigests}}', ref], cliArgs), 20_000);
  if (r.error || r.code !== 0)
    throw new UsageError(`${cli} image inspect ${ref}: ${r.error ?? (failureLine(r.stderr) ?? `exit ${r.code}`).slice(0, 200)}`, [`${cli} pull ${ref} (or sparkctl pull --image), then upgrade again`]);
  const p = pinFromInspect(ref, r.stdout);
  if ('error' in p) throw new UsageError(`${cli} image inspect ${ref}: ${p.error}`, ['check the container CLI']);
  return p;
}
