// How sparkctl writes a whole file it owns (registry entries, probe state, the Prometheus textfile, bundles, caches;
// history lines are appended by history/store.ts): a temp file in the same folder, created exclusively
// (O_CREAT|O_EXCL|O_NOFOLLOW) under a random name, written, fsynced, then renamed over the target. A planted symlink at
// any temp name cannot redirect the write (O_EXCL fails on an existing name, O_NOFOLLOW on a link), and a reader never
// sees a half file (rename is atomic in one folder).
import {
  openSync,
  writeSync,
  fsyncSync,
  closeSync,
  renameSync,
  unlinkSync,
  statSync,
  lstatSync,
  constants,
  type Stats,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, basename, join, resolve, sep } from 'node:path';
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

export const fsError = (code: string, message: string) => Object.assign(new Error(message), { code });

/**
 * What stands at a name, the name itself (lstat: a link is not followed); undefined: nothing is there. Other errors
 * throw.
 */
export function lstatIfAny(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/**
 * What may stand at a target name: nothing, or a regular file (replaced). A symlink is refused,
 * not followed and not silently replaced (someone put it there; as root that could be any file);
 * a folder, a device (/dev/full, /dev/null), a FIFO or a socket is refused too. lstat never follows.
 */
export function checkTarget(path: string): void {
  const st = lstatIfAny(path);
  if (!st) return;
  if (st.isSymbolicLink()) throw fsError('ELOOP', 'is a symbolic link');
  if (st.isDirectory()) throw fsError('EISDIR', 'is a folder');
  if (!st.isFile()) throw fsError('ENOTREG', 'is not a regular file');
}

/**
 * A link on the way to a file sparkctl writes is followed only when nobody but root (or the user
 * running sparkctl) could have put it there: the link is theirs, and the folder holding it takes
 * no entries from anyone else (not group/world-writable, or sticky, so another user cannot swap
 * it). /var/run -> /run, or a user's own ~/.local/state on another disk, pass; a link another user
 * planted in a folder they can write (as root, any file on the host) does not.
 */
export function trustedLink(link: Stats, holder: Stats): boolean {
  const me = process.geteuid?.() ?? 0;
  const mine = (uid: number) => uid === 0 || uid === me;
  return mine(link.uid) && mine(holder.uid) && ((holder.mode & 0o022) === 0 || (holder.mode & 0o1000) !== 0);
}

/**
 * Refuse a folder on the way to `path` that is a link someone else could have planted (see
 * trustedLink). The last name itself is checked by checkTarget. Throws ELOOP naming the link.
 */
export function checkParentLinks(path: string): void {
  const parts = resolve(path).split(sep).filter(Boolean);
  parts.pop();
  let at: string = sep;
  let holder = lstatSync(sep);
  for (const p of parts) {
    const next = join(at, p);
    const st = lstatIfAny(next);
    if (!st) return; // a missing folder: the caller says so
    if (st.isSymbolicLink() && !trustedLink(st, holder)) {
      throw Object.assign(new Error(`${next} is a symbolic link another user could have made`), {
        code: 'ELOOP',
        link: next,
      });
    }
    at = next;
    try {
      holder = statSync(next);
    } catch {
      return;
    }
  }
}

/** Writes all of content to fd (a short write goes on where it stopped), syncs it to disk, closes it. */
export function writeAllAndClose(fd: number, content: string | Uint8Array): void {
  const buf = typeof content === 'string' ? Buffer.from(content) : content;
  let off = 0;
  while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
  fsyncSync(fd);
  closeSync(fd);
}

/**
 * Write `content` to `path` atomically. A symlink, folder or device AT `path` is refused (ELOOP,
 * EISDIR, ENOTREG); if a link is planted between that check and the rename, rename replaces the
 * name and still writes nothing through it. Throws the fs error (see fsProblem for a user message).
 */
export function writeFileAtomic(path: string, content: string | Uint8Array, opts: { mode?: number } = {}): void {
  checkTarget(path);
  const { fd, tmp } = openExclusiveTemp(path, opts.mode);
  try {
    writeAllAndClose(fd, content);
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
