// Files and folders a user names on the command line (--save-result, --prometheus, collect --out):
// checked before any work is done, never written through a link, an existing file replaced only
// with --force or while it is still exactly the file sparkctl recorded writing there.
import { closeSync, unlinkSync, mkdirSync, statSync, lstatSync, realpathSync, linkSync, type Stats } from 'node:fs';
import { readTextOrNullSync, READ_LIMITS } from './read.js';
import { dirname, join, resolve } from 'node:path';
import { UsageError } from '../errors.js';
import {
  openExclusiveTemp,
  checkParentLinks,
  writeFileAtomic,
  fsError,
  checkTarget,
  writeAllAndClose,
} from './atomic.js';
import { WHY, fsProblem, ensureDir } from './dirs.js';
/**
 * Check an output FILE named by a flag before any work is done (a bench of ten minutes must not be
 * lost to a typo in --save-result): its folder exists, is a real writable folder (not /proc, /sys),
 * a temp file can be created there, and nothing but a regular file stands at the name. The folder
 * is not created: a missing one is more often a typo than a wish. UsageError (exit 2) otherwise.
 */
export function checkOutputFile(
  path: string,
  what: string,
  fix = 'give a file name in an existing, writable folder',
): void {
  if (!path) throw new UsageError(`${what}: an empty path`, [fix]);
  const dir = dirname(resolve(path));
  try {
    checkParentLinks(path);
    const st = statSync(dir);
    if (!st.isDirectory()) throw fsError('ENOTDIR', 'not a folder');
    if (/^\/(proc|sys)(\/|$)/.test(realpathSync(dir))) throw fsError('EINVAL', 'pseudo file system');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT')
      throw new UsageError(`${what} ${path}: the folder ${dir} does not exist`, [
        `create it first (mkdir -p ${dir}), or ${fix}`,
      ]);
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

interface NewFileOptions {
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
  if (!o.force && lstatSync(path, { throwIfNoEntry: false }))
    throw new UsageError(`${what} ${path}: the file exists`, [FORCE_FIX(what)]);
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
    if ((e as NodeJS.ErrnoException).code === 'EEXIST')
      throw new UsageError(`${what} ${path}: the file exists`, [FORCE_FIX(what)]);
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
const sameId = (a: FileId, b: FileId) =>
  a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;
const isId = (v: unknown): v is FileId =>
  typeof v === 'object' &&
  v !== null &&
  ['dev', 'ino', 'size', 'mtimeMs'].every((k) => typeof (v as Record<string, unknown>)[k] === 'number');

function readOwnWrites(stateDir: string): Record<string, FileId> {
  try {
    const text = readTextOrNullSync(join(stateDir, OWN_WRITES), { maxBytes: READ_LIMITS.record, noFollow: true });
    const v = text === null ? {} : (JSON.parse(text) as unknown);
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return {};
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>).filter((e): e is [string, FileId] => isId(e[1])),
    );
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

/**
 * Record the file now at `path` as sparkctl's own write (after writing it). A record that cannot be written only costs
 * a --force.
 */
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
