// How sparkctl reads a file it is handed or finds (a model's files, a dataset, a bundle, history):
// only a regular file, only up to a size bound.
// A FIFO, a device or a socket where a file is expected (a model's config.json, refs/main, a
// dataset, a history file) would hang an open or a read past every deadline (a FIFO blocks the
// open until a writer comes; Node's thread pool then keeps the process alive) or fill memory
// (/dev/zero never ends). So: stat (following links, as the HF cache's snapshots are links into
// blobs/) and refuse anything but a regular file; open O_NONBLOCK (a FIFO swapped in after the stat
// cannot block the open); fstat the open file and check it is the one stat saw; read at most
// `maxBytes` + 1 bytes, so a file that grows, or a /proc file that says size 0, is still bounded.
import { openSync, fstatSync, readSync, closeSync, statSync, lstatSync, constants, type Stats } from 'node:fs';
import { open, stat, lstat } from 'node:fs/promises';
import { UsageError } from '../errors.js';

/** A read refused for what the file is, not for a missing file: bad input (exit 2) naming the path and the fix. */
export class FileRefused extends UsageError {
  constructor(
    readonly path: string,
    readonly code: 'ENOTREG' | 'EFBIG',
    why: string,
    fix: string,
  ) {
    super(`${path}: ${why}`, [fix]);
  }
}

interface ReadOptions {
  /** the most bytes read; a larger file is refused (EFBIG) */
  maxBytes: number;
  /** what the file is for, in the message ("--dataset", "the model's config.json") */
  what?: string;
  /** O_NOFOLLOW: for files sparkctl wrote itself, where a link can only be a plant */
  noFollow?: boolean;
}

const MiB = 1024 * 1024;
/** Bounds for the kinds of file sparkctl reads, so each caller does not invent one. */
export const READ_LIMITS = {
  /** a JSON record sparkctl wrote: a registry entry, a lock, a cache */
  record: 1 * MiB,
  /** a model's config.json (a few KiB), a refs/main (a hash) */
  config: 4 * MiB,
  /** a safetensors index (a few MiB for the largest models) */
  index: 64 * MiB,
  /** a profile, a baseline, a manifest */
  profile: 4 * MiB,
  /** a bench dataset (ShareGPT's largest public file is about 650 MB) */
  dataset: 1024 * MiB,
  /** one history file (rotated long before this) */
  history: 256 * MiB,
  /** a /proc or /sys file */
  proc: 4 * MiB,
} as const;

function kind(st: Stats): string {
  if (st.isDirectory()) return 'a folder';
  if (st.isFIFO()) return 'a named pipe (FIFO)';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  if (st.isSymbolicLink()) return 'a symbolic link';
  return 'not a regular file';
}

const label = (path: string, o: ReadOptions) => (o.what ? `${o.what} ${path}` : path);

function refuseKind(path: string, st: Stats, o: ReadOptions): never {
  if (st.isSymbolicLink())
    throw new FileRefused(
      label(path, o),
      'ENOTREG',
      'is a symbolic link (sparkctl reads its own files only where it wrote them)',
      'remove the link; sparkctl writes this file itself',
    );
  throw new FileRefused(
    label(path, o),
    'ENOTREG',
    `is ${kind(st)}, not a regular file; sparkctl reads only regular files (a pipe or device would never end)`,
    'point it at a regular file',
  );
}

function refuseSize(path: string, size: number, o: ReadOptions): never {
  throw new FileRefused(
    label(path, o),
    'EFBIG',
    `is larger than ${o.maxBytes} bytes${size > o.maxBytes ? ` (${size})` : ''}, too large for what it should be`,
    `point it at the right file, or one under ${o.maxBytes} bytes`,
  );
}

function checkStat(path: string, st: Stats, o: ReadOptions) {
  if (!st.isFile()) refuseKind(path, st, o);
  if (st.size > o.maxBytes) refuseSize(path, st.size, o);
}

const flags = (o: ReadOptions) => constants.O_RDONLY | constants.O_NONBLOCK | (o.noFollow ? constants.O_NOFOLLOW : 0);

function sameFile(a: Stats, b: Stats) {
  return a.dev === b.dev && a.ino === b.ino;
}

/** Open `path` for reading after the checks; the caller closes the fd (for streaming a large regular file). */
export function openRegularFile(path: string, o: ReadOptions): { fd: number; size: number } {
  const before = o.noFollow ? lstatSync(path) : statSync(path);
  checkStat(path, before, o);
  const fd = openSync(path, flags(o));
  try {
    const st = fstatSync(fd);
    checkStat(path, st, o);
    if (!sameFile(before, st))
      throw new FileRefused(label(path, o), 'ENOTREG', 'changed while it was opened', 'run the command again');
    return { fd, size: st.size };
  } catch (e) {
    closeSync(fd);
    throw e;
  }
}

/**
 * Read a regular file of at most `o.maxBytes` bytes. fs errors (ENOENT, EACCES) pass through; what the file IS throws
 * FileRefused.
 */
export function readRegularFileSync(path: string, o: ReadOptions): Buffer {
  const { fd } = openRegularFile(path, o);
  try {
    return readBounded((buf, off, len, pos) => readSync(fd, buf, off, len, pos), path, o);
  } finally {
    closeSync(fd);
  }
}

function readBounded(
  read: (buf: Buffer, off: number, len: number, pos: number) => number,
  path: string,
  o: ReadOptions,
): Buffer {
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    const buf = Buffer.allocUnsafe(Math.min(64 * 1024, o.maxBytes + 1 - total));
    const n = read(buf, 0, buf.length, total);
    if (n <= 0) break;
    chunks.push(n === buf.length ? buf : buf.subarray(0, n));
    total += n;
    if (total > o.maxBytes) refuseSize(path, total, o);
  }
  return Buffer.concat(chunks, total);
}

export function readTextSync(path: string, o: ReadOptions): string {
  return readRegularFileSync(path, o).toString('utf8');
}

/** The async twin of readRegularFileSync (the model reader and the Host read through it). */
async function readRegularFile(path: string, o: ReadOptions): Promise<Buffer> {
  const before = o.noFollow ? await lstat(path) : await stat(path);
  checkStat(path, before, o);
  const fh = await open(path, flags(o));
  try {
    const st = await fh.stat();
    checkStat(path, st, o);
    if (!sameFile(before, st))
      throw new FileRefused(label(path, o), 'ENOTREG', 'changed while it was opened', 'run the command again');
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(Math.min(64 * 1024, o.maxBytes + 1 - total));
      const { bytesRead } = await fh.read(buf, 0, buf.length, total);
      if (bytesRead <= 0) break;
      chunks.push(bytesRead === buf.length ? buf : buf.subarray(0, bytesRead));
      total += bytesRead;
      if (total > o.maxBytes) refuseSize(path, total, o);
    }
    return Buffer.concat(chunks, total);
  } finally {
    await fh.close();
  }
}

export async function readText(path: string, o: ReadOptions): Promise<string> {
  return (await readRegularFile(path, o)).toString('utf8');
}

/**
 * A file's text, or null where it is missing or unreadable (ENOENT, EACCES, ENOTDIR): for readers
 * where absence is an answer. A file that is there but is not a regular file, or is too large,
 * still throws FileRefused: silence would turn "a FIFO is planted here" into "nothing is here".
 */
export async function readTextOrNull(path: string, o: ReadOptions): Promise<string | null> {
  try {
    return await readText(path, o);
  } catch (e) {
    if (e instanceof FileRefused) throw e;
    return null;
  }
}

export function readTextOrNullSync(path: string, o: ReadOptions): string | null {
  try {
    return readTextSync(path, o);
  } catch (e) {
    if (e instanceof FileRefused) throw e;
    return null;
  }
}

/**
 * The bytes of a regular file from `from` to its end, at most the last `maxBytes` of them (a log
 * that grew by gigabytes since the last look costs only its tail). `size` is the file's size when
 * read; `skipped` how many bytes past `from` were left out. A file smaller than `from` (truncated,
 * rotated) is read from its start.
 */
export function readTail(
  path: string,
  from: number,
  maxBytes: number,
  o: { noFollow?: boolean } = {},
): { buf: Buffer; size: number; skipped: number } {
  const { fd, size } = openRegularFile(path, { maxBytes: Number.MAX_SAFE_INTEGER, noFollow: o.noFollow });
  try {
    const begin = size < from ? 0 : from;
    const start = Math.max(begin, size - maxBytes);
    const buf = Buffer.alloc(Math.max(0, size - start));
    let off = 0;
    while (off < buf.length) {
      const n = readSync(fd, buf, off, buf.length - off, start + off);
      if (n <= 0) break;
      off += n;
    }
    return { buf: buf.subarray(0, off), size: start + off, skipped: start - begin };
  } finally {
    closeSync(fd);
  }
}

/**
 * The checks of a read without the read (a flag's file, checked before any work): fs errors pass through, what the file
 * IS throws FileRefused.
 */
export function checkRegularFile(path: string, o: ReadOptions): void {
  checkStat(path, o.noFollow ? lstatSync(path) : statSync(path), o);
}
