// How sparkctl writes a whole file it owns (registry entries, probe state, the Prometheus
// textfile, bundles, caches; history lines are appended by history/store.ts): a temp file in the same folder, created exclusively
// (O_CREAT|O_EXCL|O_NOFOLLOW) under a random name, written, fsynced, then renamed over the target.
// A planted symlink at any temp name cannot redirect the write (O_EXCL fails on an existing name,
// O_NOFOLLOW on a link), and a reader never sees a half file (rename is atomic in one folder).
// Folders are checked the same way: a file, a dangling link or a read-only place where a folder
// must be is bad input (exit 2) that names the path and the fix, never an internal error.
import { openSync, writeSync, fsyncSync, closeSync, renameSync, unlinkSync, mkdirSync, statSync, lstatSync, accessSync, realpathSync, linkSync, constants, type Stats } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { readText, readTextOrNullSync, READ_LIMITS } from './read.js';
import { dirname, basename, join, resolve, sep } from 'node:path';
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

const fsError = (code: string, message: string) => Object.assign(new Error(message), { code });

/**
 * What may stand at a target name: nothing, or a regular file (replaced). A symlink is refused,
 * not followed and not silently replaced (someone put it there; as root that could be any file);
 * a folder, a device (/dev/full, /dev/null), a FIFO or a socket is refused too. lstat never follows.
 */
function checkTarget(path: string): void {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
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
function trustedLink(link: Stats, holder: Stats): boolean {
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
    let st: Stats;
    try {
      st = lstatSync(next);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return; // a missing folder: the caller says so
      throw e;
    }
    if (st.isSymbolicLink() && !trustedLink(st, holder)) {
      throw Object.assign(new Error(`${next} is a symbolic link another user could have made`), { code: 'ELOOP', link: next });
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
function writeAllAndClose(fd: number, content: string | Uint8Array): void {
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

const WHY: Record<string, string> = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'on a read-only file system',
  ENOTDIR: 'a part of the path is a file, not a folder',
  EEXIST: 'exists and is not a folder',
  EISDIR: 'is a folder',
  ENOENT: 'does not exist and cannot be created there',
  ELOOP: 'is a symbolic link, or a folder on its way is one that another user could have made (sparkctl never writes through links)',
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
    checkParentLinks(join(dir, 'x'));
    if (lstatSync(dir, { throwIfNoEntry: false })?.isSymbolicLink() && !trustedLink(lstatSync(dir), statSync(dirname(resolve(dir))))) throw fsError('ELOOP', 'a link');
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

/**
 * Check an output FILE named by a flag before any work is done (a bench of ten minutes must not be
 * lost to a typo in --save-result): its folder exists, is a real writable folder (not /proc, /sys),
 * a temp file can be created there, and nothing but a regular file stands at the name. The folder
 * is not created: a missing one is more often a typo than a wish. UsageError (exit 2) otherwise.
 */
export function checkOutputFile(path: string, what: string, fix = 'give a file name in an existing, writable folder'): void {
  if (!path) throw new UsageError(`${what}: an empty path`, [fix]);
  const dir = dirname(resolve(path));
  try {
    checkParentLinks(path);
    const st = statSync(dir);
    if (!st.isDirectory()) throw fsError('ENOTDIR', 'not a folder');
    if (/^\/(proc|sys)(\/|$)/.test(realpathSync(dir))) throw fsError('EINVAL', 'pseudo file system');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new UsageError(`${what} ${path}: the folder ${dir} does not exist`, [`create it first (mkdir -p ${dir}), or ${fix}`]);
    throw fsProblem(e, `${what} folder`, dir, fix);
  }
  try {
    checkTarget(path);
    // Prove the folder takes a file (EROFS, EACCES, a full quota) with the same exclusive temp the write will use.
    const { fd, tmp } = openExclusiveTemp(resolve(path));
    closeSync(fd);
    unlinkSync(tmp);
  } catch (e) {
    throw fsProblem(e, what, path, fix);
  }
}

/**
 * Write a file a user named on the command line (--html, --save-result, --out FILE): the atomic
 * writer, with every fs error as bad input (exit 2) naming the flag, the path and the fix.
 */
export function writeOutputFile(path: string, content: string | Uint8Array, what: string, fix = 'give a file name in an existing, writable folder'): void {
  try {
    writeFileAtomic(path, content);
  } catch (e) {
    throw fsProblem(e, what, path, fix);
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
 * A cache file: one JSON object of entries by key. An entry `entry` does not accept is left out
 * (the file is written by us, but whatever is on disk is read as hostile); a missing or unreadable
 * file is an empty cache.
 */
export async function readJsonCache<T>(file: string, entry: (e: unknown) => T | undefined): Promise<Record<string, T>> {
  try {
    const v = JSON.parse(await readText(file, { maxBytes: READ_LIMITS.history, noFollow: true })) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return {};
    const out: Record<string, T> = {};
    for (const [k, e] of Object.entries(v as Record<string, unknown>)) {
      const x = entry(e);
      if (x !== undefined) out[k] = x;
    }
    return out;
  } catch {
    return {};
  }
}

/**
 * Writes a cache file through writeFileAtomic, its folder made (0700) when missing, keeping the
 * newest `max` entries (the last ones in insertion order). A cache that cannot be written costs
 * only time: the failure is swallowed.
 */
export function writeJsonCache(file: string, entries: Record<string, unknown>, max = Number.POSITIVE_INFINITY): void {
  try {
    const kept = Object.entries(entries).slice(-max);
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    writeFileAtomic(file, `${JSON.stringify(Object.fromEntries(kept), null, 2)}\n`);
  } catch {
    /* a cache that cannot be written costs only time */
  }
}

export interface NewFileOptions {
  /** replace an existing regular file (never a link, folder or device) */
  force?: boolean;
  /** the fix for a bad place */
  fix?: string;
  mode?: number;
}

const FORCE_FIX = (what: string) => `pass --force to replace it, or give a new name for ${what}`;

/**
 * Check a file a user asked sparkctl to CREATE (profiles init --out) before any work: everything
 * checkOutputFile checks, and an existing file at the name is refused unless `force` (a hand-edited
 * or shipped profile is never lost silently). UsageError (exit 2) naming the flag, the path, the fix.
 */
export function checkNewFile(path: string, what: string, o: NewFileOptions = {}): void {
  checkOutputFile(path, what, o.fix);
  if (!o.force && lstatSync(path, { throwIfNoEntry: false })) throw new UsageError(`${what} ${path}: the file exists`, [FORCE_FIX(what)]);
}

/**
 * Create `path` with `content`: never over an existing file without `force`, never through a link.
 * The content goes to an exclusive temp beside it first; without force it is then hard-linked to
 * the name (link(2) fails on ANY existing name, a dangling link included, and never follows one,
 * so a file that appeared since the check is not replaced), with force it is renamed over the
 * name (checkTarget refuses a link, folder or device standing there). UsageError (exit 2) on failure.
 */
export function writeNewFile(path: string, content: string | Uint8Array, what: string, o: NewFileOptions = {}): void {
  const fix = o.fix ?? 'give a file name in an existing, writable folder';
  try {
    checkParentLinks(path);
    checkTarget(path);
    if (o.force) {
      writeFileAtomic(path, content, { mode: o.mode });
      return;
    }
    const { fd, tmp } = openExclusiveTemp(resolve(path), o.mode);
    try {
      writeAllAndClose(fd, content);
      linkSync(tmp, path);
    } finally {
      try {
        closeSync(fd);
      } catch {
        /* closed */
      }
      unlinkSync(tmp);
    }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw new UsageError(`${what} ${path}: the file exists`, [FORCE_FIX(what)]);
    throw fsProblem(e, what, path, fix);
  }
}

/**
 * A folder a user asked sparkctl to create and fill (collect --out): made 0700 when missing (a
 * bundle describes the host), an existing one must be empty, and the name itself is never a link
 * (a link to a folder would put the files wherever it points). UsageError (exit 2) otherwise.
 */
export function ensureNewDir(dir: string, what: string, fix: string): void {
  const st = lstatSync(dir, { throwIfNoEntry: false });
  if (st?.isSymbolicLink()) throw new UsageError(`${what} ${dir}: ${WHY.ELOOP} (ELOOP)`, [fix]);
  try {
    checkParentLinks(dir);
    if (!st) mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    // a missing parent: ensureDir makes the way (and says what is wrong with it)
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw fsProblem(e, what, dir, fix);
  }
  ensureDir(dir, what, fix);
}

/**
 * sparkctl's own record of files it wrote at a user-named path that it rewrites on every run (the
 * probe's node_exporter textfile, from cron): the file's identity right after the write (device,
 * inode, size, mtime). The file at that path may be replaced without --force only while it is still
 * exactly the file sparkctl left there; anything else (a file another tool or person put there,
 * or one edited since) is an existing file, refused without --force. The proof is sparkctl's own
 * record in its state folder, never what the file says about itself.
 */
const OWN_WRITES = 'own-writes.json';
interface FileId {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
}
const fileId = (st: Stats): FileId => ({ dev: st.dev, ino: st.ino, size: st.size, mtimeMs: st.mtimeMs });
const sameId = (a: FileId, b: FileId) => a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;
const isId = (v: unknown): v is FileId => typeof v === 'object' && v !== null && ['dev', 'ino', 'size', 'mtimeMs'].every((k) => typeof (v as Record<string, unknown>)[k] === 'number');

function readOwnWrites(stateDir: string): Record<string, FileId> {
  try {
    const text = readTextOrNullSync(join(stateDir, OWN_WRITES), { maxBytes: READ_LIMITS.record, noFollow: true });
    const v = text === null ? {} : (JSON.parse(text) as unknown);
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return {};
    return Object.fromEntries(Object.entries(v as Record<string, unknown>).filter((e): e is [string, FileId] => isId(e[1])));
  } catch {
    return {};
  }
}

/** Whether the regular file at `path` is, byte for byte of its identity, the one sparkctl recorded writing there. */
export function wroteItLast(stateDir: string, path: string): boolean {
  let st: Stats | undefined;
  try {
    st = lstatSync(path, { throwIfNoEntry: false });
  } catch {
    return false; // a path that cannot be a file (a file on the way): the writer says why
  }
  const rec = readOwnWrites(stateDir)[resolve(path)];
  return Boolean(st?.isFile() && rec && sameId(fileId(st), rec));
}

/** Record the file now at `path` as sparkctl's own write (after writing it). A record that cannot be written only costs a --force. */
export function recordOwnWrite(stateDir: string, path: string): void {
  try {
    const st = lstatSync(path);
    const all = { ...readOwnWrites(stateDir), [resolve(path)]: fileId(st) };
    const kept = Object.fromEntries(Object.entries(all).slice(-64));
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    writeFileAtomic(join(stateDir, OWN_WRITES), `${JSON.stringify(kept, null, 2)}\n`, { mode: 0o600 });
  } catch {
    /* the next run asks for --force */
  }
}
