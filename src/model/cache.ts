// The Hugging Face cache as huggingface_hub lays it out and reads it (so vLLM, transformers and
// `hf` find what sparkctl pulled, offline):
//   $HF_HUB_CACHE/models--ORG--NAME/blobs/<etag>                   the bytes (SHA-256 for LFS files, git SHA-1 otherwise)
//                                   snapshots/<commit>/<path>      relative symlinks ../../blobs/<etag>
//                                   refs/<branch or tag>           the commit it was resolved to
// A blob is written under blobs/<etag>.sparkctl.incomplete (never inside snapshots/), verified, then
// renamed to its name; only then does a snapshot link point at it. Nothing half-written is visible.
// Every name we create is checked first: a symlink or a non-regular file where ours must go is refused.
import { hasControl } from '../util/control.js';
import { lstat, mkdir, readlink, rename, symlink, unlink, open, statfs } from 'node:fs/promises';
import { constants, type Stats } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { homedir } from 'node:os';
import { writeFileAtomic } from '../util/atomic.js';
import { readTextOrNull } from '../util/read.js';

/** The hub cache folder, resolved exactly as huggingface_hub's constants.py does. */
export function hubCacheDir(env: Record<string, string | undefined>): string {
  const explicit = env.HF_HUB_CACHE || env.HUGGINGFACE_HUB_CACHE;
  if (explicit) return resolve(expandHome(explicit, env));
  const home = env.HF_HOME
    ? expandHome(env.HF_HOME, env)
    : join(env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache'), 'huggingface');
  return resolve(home, 'hub');
}

const expandHome = (p: string, env: Record<string, string | undefined>) =>
  p === '~' || p.startsWith('~/') ? join(env.HOME || homedir(), p.slice(1)) : p;

/** "Qwen/Qwen3.5-9B" -> models--Qwen--Qwen3.5-9B */
export const repoFolderName = (id: string) => `models--${id.split('/').join('--')}`;

export const COMMIT = /^[0-9a-f]{40}$/;
const SHA256 = /^[0-9a-f]{64}$/;
const SHA1 = /^[0-9a-f]{40}$/;
/** A repo id as the Hub allows it: ORG/NAME, no path tricks. */
const REPO_ID = /^[A-Za-z0-9][\w.-]{0,95}\/[\w.-]{1,96}$/;
/** A branch or tag name: what may stand under refs/ (huggingface_hub writes refs/<revision>, slashes included). */
const REF = /^[\w.-]+(\/[\w.-]+)*$/;

export function checkRepoId(id: string): string | undefined {
  if (!REPO_ID.test(id) || id.includes('..'))
    return `"${id}" is not a Hub model id (ORG/NAME, letters, digits, '-', '_', '.')`;
  return undefined;
}

export function checkRevision(rev: string): string | undefined {
  if (rev.length > 200 || !REF.test(rev) || rev.split('/').some((s) => s === '.' || s === '..'))
    return `"${rev}" is not a branch, tag or commit name`;
  return undefined;
}

/**
 * A repository path from the Hub's tree listing, made safe to join under snapshots/<commit>/:
 * relative, '/'-separated, no empty, '.' or '..' segment, no backslash or NUL (the rules of
 * huggingface_hub's _validate_relative_filename, stricter). Returns a reason when refused.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function checkRepoPath(p: string): string | undefined {
  if (!p || p.length > 1000) return 'an empty or over-long name';
  if (p.startsWith('/') || /[\\\0]/.test(p) || /^[A-Za-z]:/.test(p)) return 'an absolute or drive path';
  if (p.split('/').some((s) => s === '' || s === '.' || s === '..')) return 'an empty, "." or ".." path segment';
  // a name is printed (progress, the summary, errors): an escape sequence there would rewrite the terminal
  if (hasControl(p)) return 'a control character in the name';
  // legal in JSON (an escaped \ud800), not in a file name nor a URL: encodeURIComponent throws on it
  if (LONE_SURROGATE.test(p))
    return 'a lone UTF-16 surrogate in the name (not a valid Unicode string, so no file name)';
  return undefined;
}

/** The blob name a tree entry must have: the LFS SHA-256, else the git blob SHA-1. */
export function blobName(f: { oid: string; lfs?: { oid: string } }): string | undefined {
  if (f.lfs) return SHA256.test(f.lfs.oid) ? f.lfs.oid : undefined;
  return SHA1.test(f.oid) ? f.oid : undefined;
}

export interface RepoCache {
  root: string;
  dir: string;
  blobs: string;
  snapshots: string;
  refs: string;
}

export function repoCache(root: string, id: string): RepoCache {
  const dir = join(root, repoFolderName(id));
  return { root, dir, blobs: join(dir, 'blobs'), snapshots: join(dir, 'snapshots'), refs: join(dir, 'refs') };
}

async function lstatOrNull(p: string): Promise<Stats | null> {
  try {
    return await lstat(p);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}

export class CacheRefused extends Error {}

/**
 * mkdir -p, refusing a symlink or a file anywhere from `root` down to `dir` (root itself may be a link the operator
 * made).
 */
export async function ensureDirUnder(root: string, dir: string): Promise<void> {
  const rel = relative(root, dir);
  if (rel.startsWith('..') || resolve(root, rel) !== resolve(dir))
    throw new CacheRefused(`${dir} is outside the cache ${root}`);
  await mkdir(root, { recursive: true });
  let cur = root;
  for (const part of rel ? rel.split(sep) : []) {
    cur = join(cur, part);
    const st = await lstatOrNull(cur);
    if (!st) {
      try {
        await mkdir(cur, { mode: 0o755 });
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      const again = await lstat(cur);
      if (!again.isDirectory()) throw new CacheRefused(`${cur} is not a folder`);
    } else if (st.isSymbolicLink())
      throw new CacheRefused(
        `${cur} is a symbolic link sparkctl did not make; remove it or choose another HF_HUB_CACHE`,
      );
    else if (!st.isDirectory()) throw new CacheRefused(`${cur} is not a folder`);
  }
}

/** What a blob name holds now: absent, complete (a regular file of the right size), or something else. */
export async function blobState(c: RepoCache, etag: string, size: number): Promise<'absent' | 'present' | 'wrong'> {
  const st = await lstatOrNull(join(c.blobs, etag));
  if (!st) return 'absent';
  return st.isFile() && st.size === size ? 'present' : 'wrong';
}

/**
 * Whether the blob file holds the bytes its name says: the SHA-256 of the content for an LFS file,
 * git's blob SHA-1 ("blob <size>\0" + content) otherwise. A blob of the right size is not trusted
 * for its size (anyone who can write the cache could have put it there, or a disk error changed it):
 * it is read, never through a link, and hashed.
 */
export async function blobMatches(c: RepoCache, etag: string, size: number, lfs: boolean): Promise<boolean> {
  const fh = await open(join(c.blobs, etag), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(
    () => null,
  );
  if (!fh) return false;
  try {
    const st = await fh.stat();
    if (!st.isFile() || st.size !== size) return false;
    const h = lfs ? createHash('sha256') : createHash('sha1').update(`blob ${size}\0`);
    const buf = Buffer.allocUnsafe(8 << 20);
    let off = 0;
    while (off < size) {
      const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, size - off), off);
      if (bytesRead === 0) return false;
      h.update(buf.subarray(0, bytesRead));
      off += bytesRead;
    }
    return h.digest('hex') === etag;
  } finally {
    await fh.close();
  }
}

export const incompletePath = (c: RepoCache, etag: string) => join(c.blobs, `${etag}.sparkctl.incomplete`);

/**
 * Open the partial download of a blob for appending, never through a link: O_NOFOLLOW, and the
 * opened file must be a regular file. Returns the handle and the bytes already there.
 */
export async function openIncomplete(c: RepoCache, etag: string) {
  const p = incompletePath(c, etag);
  let fh: import('node:fs/promises').FileHandle;
  try {
    fh = await open(
      p,
      constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_APPEND | constants.O_NONBLOCK,
      0o644,
    );
  } catch (e) {
    // what an earlier run or someone else left there is a finding, never an internal error
    const code = (e as NodeJS.ErrnoException).code;
    const what =
      code === 'ELOOP'
        ? 'a symbolic link sparkctl did not make'
        : code === 'EISDIR'
          ? 'a folder'
          : code === 'EACCES' || code === 'EPERM'
            ? 'not writable'
            : undefined;
    if (what) throw new CacheRefused(`${p} (a partial download) is ${what}; remove it and pull again`);
    throw e;
  }
  const st = await fh.stat();
  if (!st.isFile()) {
    await fh.close();
    throw new CacheRefused(`${p} is not a regular file`);
  }
  return { fh, path: p, have: st.size };
}

/**
 * The verified partial file becomes the blob (atomic rename in one folder). A blob already there with the right size is
 * kept.
 */
export async function commitBlob(c: RepoCache, etag: string): Promise<void> {
  const target = join(c.blobs, etag);
  const st = await lstatOrNull(target);
  if (st && !st.isFile()) throw new CacheRefused(`${target} is not a regular file; remove it and pull again`);
  await rename(incompletePath(c, etag), target);
}

/**
 * snapshots/<commit>/<path> -> ../../blobs/<etag> (relative, as huggingface_hub writes it), made
 * at a random name and renamed into place, so a reader sees the old link or the new, never none.
 * A regular file or folder at the name is refused; a link is replaced (links are what we make there).
 */
export async function linkSnapshot(c: RepoCache, commit: string, path: string, etag: string): Promise<void> {
  const link = join(c.snapshots, commit, ...path.split('/'));
  await ensureDirUnder(c.root, dirname(link));
  const target = relative(dirname(link), join(c.blobs, etag));
  const st = await lstatOrNull(link);
  if (st && !st.isSymbolicLink()) throw new CacheRefused(`${link} is not a link to a blob; remove it and pull again`);
  if (st && (await readlink(link)) === target) return;
  const tmp = join(dirname(link), `.${randomBytes(6).toString('hex')}.sparkctl-link`);
  await symlink(target, tmp);
  try {
    await rename(tmp, link);
  } catch (e) {
    await unlink(tmp).catch(() => {});
    throw e;
  }
}

/** refs/<revision> = commit (atomic; huggingface_hub writes the bare hash, no newline). */
export async function writeRef(c: RepoCache, revision: string, commit: string): Promise<void> {
  const file = join(c.refs, ...revision.split('/'));
  await ensureDirUnder(c.root, dirname(file));
  writeFileAtomic(file, commit);
}

/** The commit refs/<revision> names, if it is a commit hash (the file is anyone's: nothing else is trusted). */
export async function readRef(c: RepoCache, revision: string): Promise<string | undefined> {
  if (COMMIT.test(revision)) return revision;
  const file = join(c.refs, ...revision.split('/'));
  const text = await readTextOrNull(file, { maxBytes: 100, what: 'a refs/ file of the Hugging Face cache' }).catch(
    () => null,
  );
  const v = text?.trim();
  return v && COMMIT.test(v) ? v : undefined;
}

/** Free bytes where `dir` is (or would be made: the nearest folder that exists). */
export async function freeBytes(dir: string): Promise<{ at: string; free: number }> {
  let cur = resolve(dir);
  for (;;) {
    try {
      const s = await statfs(cur);
      return { at: cur, free: Number(s.bavail) * Number(s.bsize) };
    } catch (e) {
      const up = dirname(cur);
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || up === cur) throw e;
      cur = up;
    }
  }
}
