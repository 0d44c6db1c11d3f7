// Folders sparkctl makes or uses, and a file-system error as bad input: a file, a dangling link or a
// read-only place where a folder must be is exit 2 that names the path and the fix, never an
// internal error.
import { mkdirSync, statSync, lstatSync, accessSync, realpathSync, chmodSync, constants } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { UsageError } from '../errors.js';
import { checkParentLinks, trustedLink, fsError } from './atomic.js';
import { own } from './own.js';
/** The reason an fs error code gives, in words. */
export const WHY: Record<string, string> = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'on a read-only file system',
  ENOTDIR: 'a part of the path is a file, not a folder',
  EEXIST: 'exists and is not a folder',
  EISDIR: 'is a folder',
  ENOENT: 'does not exist and cannot be created there',
  ELOOP:
    'is a symbolic link, or a folder on its way is one that another user could have made (sparkctl never writes through links)',
  ENOSPC: 'the disk is full',
  EDQUOT: 'the disk quota is exhausted',
  ENAMETOOLONG: 'the name is too long',
  EINVAL: 'is not a place a file can be written (a pseudo file system?)',
  ENOTREG: 'is not a regular file (a device, pipe or socket); sparkctl writes only regular files',
};

/** An fs error as bad input (exit 2): what, where, why, and the fix. Non-fs errors are returned as they are. */
export function fsProblem(e: unknown, what: string, path: string, fix: string): unknown {
  const code = (e as NodeJS.ErrnoException)?.code;
  if (!code || !/^E[A-Z]+$/.test(code)) return e;
  return new UsageError(`${what} ${path}: ${own(WHY, code) ?? (e as Error).message} (${code})`, [fix]);
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
    checkParentLinks(join(dir, 'x'));
    if (
      lstatSync(dir, { throwIfNoEntry: false })?.isSymbolicLink() &&
      !trustedLink(lstatSync(dir), statSync(dirname(resolve(dir))))
    )
      throw fsError('ELOOP', 'a link');
    mkdirP(dir);
    const st = statSync(dir);
    if (!st.isDirectory()) throw Object.assign(new Error('not a folder'), { code: 'ENOTDIR' });
    // Writable? (EROFS even as root; EACCES for others.) /proc and /sys take no files either.
    accessSync(dir, constants.W_OK);
    if (/^\/(proc|sys)(\/|$)/.test(realpathSync(dir)))
      throw Object.assign(new Error('pseudo file system'), { code: 'EINVAL' });
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

/**
 * A folder only this user may use (a router's admin socket and replica sockets, vLLM's IPC sockets):
 * the folder and the `parents` levels above it, outermost first, each made 0700 where missing and
 * refused, naming it, when it is a link, not a folder or another user's, before the next level is
 * made in it (nothing is ever made through a link). The folder itself is put back to 0700, every
 * checked level with `allPrivate`. Above the checked levels the path is made as any state folder is.
 */
export function ensurePrivateDir(dir: string, what: string, o: { parents?: number; allPrivate?: boolean } = {}): void {
  const levels = [dir];
  for (let i = 0; i < (o.parents ?? 0); i++) levels.unshift(dirname(levels[0]!));
  mkdirP(dirname(levels[0]!));
  for (const d of levels) {
    try {
      mkdirSync(d, { mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST')
        throw fsProblem(e, what, d, 'set SPARKCTL_STATE_DIR to a writable folder');
    }
    const st = lstatSync(d);
    if (st.isSymbolicLink() || !st.isDirectory())
      throw new UsageError(`${what} ${d}: is not a plain folder (a link?)`, [`remove ${d}; sparkctl creates it`]);
    if (typeof process.getuid === 'function' && st.uid !== process.getuid())
      throw new UsageError(`${what} ${d}: belongs to uid ${st.uid}, not to this user`, [
        `remove ${d}; sparkctl creates it`,
      ]);
    if ((d === dir || o.allPrivate) && (st.mode & 0o777) !== 0o700) chmodSync(d, 0o700);
  }
}
