// The ONE way sparkctl writes a file it owns (registry entries, probe state, the Prometheus
// textfile, bundles, history): a temp file in the same folder, created exclusively
// (O_CREAT|O_EXCL|O_NOFOLLOW) under a random name, written, fsynced, then renamed over the target.
// A planted symlink at any temp name cannot redirect the write (O_EXCL fails on an existing name,
// O_NOFOLLOW on a link), and a reader never sees a half file (rename is atomic in one folder).
// Folders are checked the same way: a file, a dangling link or a read-only place where a folder
// must be is bad input (exit 2) that names the path and the fix, never an internal error.
import { openSync, writeSync, fsyncSync, closeSync, renameSync, unlinkSync, mkdirSync, statSync, lstatSync, accessSync, realpathSync, constants } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, basename, join, resolve } from 'node:path';
import { UsageError } from '../errors.js';

const FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** A fresh, unpredictable temp name beside `path`, created exclusively; returns its fd and name. */
export function openExclusiveTemp(path: string, mode = 0o644): { fd: number; tmp: string } {
  for (let i = 0; ; i++) {
    const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(8).toString('hex')}.tmp`);
    try {
      return { fd: openSync(tmp, FLAGS, mode), tmp };
    } catch (e) {
      // Someone planted this exact random name (or a link to it): try another, a few times.
      if ((e as NodeJS.ErrnoException).code === 'EEXIST' && i < 8) continue;
      throw e;
    }
  }
}

/**
 * Write `content` to `path` atomically. A symlink AT `path` is replaced by the file, never
 * followed (rename replaces the name). Throws the fs error (see fsProblem for a user message).
 */
export function writeFileAtomic(path: string, content: string | Uint8Array, opts: { mode?: number } = {}): void {
  const { fd, tmp } = openExclusiveTemp(path, opts.mode);
  try {
    const buf = typeof content === 'string' ? Buffer.from(content) : content;
    let off = 0;
    while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
    fsyncSync(fd);
    closeSync(fd);
    renameSync(tmp, path);
  } catch (e) {
    try {
      closeSync(fd);
    } catch {
      /* already closed */
    }
    try {
      unlinkSync(tmp);
    } catch {
      /* renamed or gone */
    }
    throw e;
  }
}

const WHY: Record<string, string> = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'on a read-only file system',
  ENOTDIR: 'a part of the path is a file, not a folder',
  EEXIST: 'exists and is not a folder',
  EISDIR: 'is a folder',
  ENOENT: 'does not exist and cannot be created there',
  ELOOP: 'is a symbolic link (sparkctl never writes through links)',
  ENOSPC: 'the disk is full',
  EDQUOT: 'the disk quota is exhausted',
  ENAMETOOLONG: 'the name is too long',
  EINVAL: 'is not a place a file can be written (a pseudo file system?)',
};

/** An fs error as bad input (exit 2): what, where, why, and the fix. Non-fs errors are returned as they are. */
export function fsProblem(e: unknown, what: string, path: string, fix: string): unknown {
  const code = (e as NodeJS.ErrnoException)?.code;
  if (!code || !/^E[A-Z]+$/.test(code)) return e;
  return new UsageError(`${what} ${path}: ${WHY[code] ?? (e as Error).message} (${code})`, [fix]);
}

/** mkdir -p, one level at a time (Node's recursive mkdir spins on some pseudo file systems, e.g. under /proc). */
function mkdirP(dir: string) {
  const missing: string[] = [];
  let d = resolve(dir);
  for (;;) {
    try {
      statSync(d);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      missing.unshift(d);
      const up = dirname(d);
      if (up === d) break;
      d = up;
    }
  }
  for (const m of missing) {
    try {
      mkdirSync(m);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }
}

/**
 * Make sure `dir` is a real, writable folder (created if missing). A file, a dangling link or an
 * unwritable place is a UsageError (exit 2) naming `what`, the path and `fix`.
 */
export function ensureDir(dir: string, what: string, fix: string): void {
  try {
    mkdirP(dir);
    const st = statSync(dir);
    if (!st.isDirectory()) throw Object.assign(new Error('not a folder'), { code: 'ENOTDIR' });
    // Writable? (EROFS even as root; EACCES for others.) /proc and /sys take no files either.
    accessSync(dir, constants.W_OK);
    if (/^\/(proc|sys)(\/|$)/.test(realpathSync(dir))) throw Object.assign(new Error('pseudo file system'), { code: 'EINVAL' });
  } catch (e) {
    // mkdir -p on a dangling link says EEXIST: say what it really is.
    try {
      if (lstatSync(dir).isSymbolicLink()) {
        try {
          statSync(dir);
        } catch {
          throw new UsageError(`${what} ${dir}: is a dangling symbolic link`, [fix]);
        }
      }
    } catch (e2) {
      if (e2 instanceof UsageError) throw e2;
    }
    throw fsProblem(e, what, dir, fix);
  }
}

/** Whether `dir` is a folder that already exists (follows links; a dangling one is not). */
export function isDir(dir: string): boolean {
  try {
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}
