// History on disk: one JSON Lines file per target under <state>/history. Each sample is ONE
// write(2) of one line below PIPE_BUF on an O_APPEND descriptor, so concurrent probes never
// interleave or tear a line. Rotation renames the current file to an archive (a rename is
// atomic; a probe that opened the old file still writes into the archive, which is read too),
// then drops archives past the age limit and past the segment count: bounded, nothing rewritten.
import {
  openSync,
  writeSync,
  readSync,
  closeSync,
  fstatSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  constants,
  lstatSync,
} from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { sampleLine, type Sample } from './sample.js';
import { SAMPLE_VERSION } from './sample-version.js';
import { openRegularFile, READ_LIMITS } from '../util/read.js';

interface Rotation {
  /** a file past this many bytes becomes an archive */
  maxBytes: number;
  /** archives whose newest line is older than this are removed */
  maxAgeMs: number;
  /** at most this many archives per target */
  maxArchives: number;
}
const DEFAULT_ROTATION: Rotation = { maxBytes: 4 * 1024 * 1024, maxAgeMs: 35 * 86_400_000, maxArchives: 8 };

export const historyDir = (stateDir: string) => join(stateDir, 'history');

/** A file name that is safe whatever the target is called, and unique per URL. */
function historyBase(target: string, url: string): string {
  const safe =
    target
      .replace(/^https?:\/\//, '')
      .replace(/[^A-Za-z0-9._-]+/g, '_')
      .slice(0, 60) || 'target';
  return `${safe}.${createHash('sha256').update(url).digest('hex').slice(0, 8)}`;
}

export const FILE = /^(.+\.[0-9a-f]{8})(?:\.(\d{13}-\d+))?\.jsonl$/;

function ensureDir(dir: string) {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // never write through a link someone else put where our folder should be
  if (!lstatSync(dir).isDirectory()) throw new Error(`${dir} is not a directory`);
}

/** Append one sample; rotate first when the file is full. Returns the file written. */
export function appendSample(stateDir: string, s: Sample, rot: Rotation = DEFAULT_ROTATION, now = Date.now()): string {
  const dir = historyDir(stateDir);
  ensureDir(dir);
  const base = historyBase(s.target, s.url);
  const path = join(dir, `${base}.jsonl`);
  let line = Buffer.from(sampleLine(s));
  let size = 0;
  const st = lstatSync(path, { throwIfNoEntry: false });
  // A FIFO would block the append open forever, a device or a link would take the line elsewhere.
  if (st && !st.isFile())
    throw new Error(`${path} is not a regular file; history is written only to its own files (remove it)`);
  size = st?.size ?? 0;
  // A torn tail (a probe killed mid-write, a full disk) must not swallow this line too.
  if (size > 0 && !endsWithNewline(path, size)) line = Buffer.concat([Buffer.from('\n'), line]);
  if (size > 0 && size + line.length > rot.maxBytes) {
    try {
      renameSync(path, join(dir, `${base}.${String(now).padStart(13, '0')}-${process.pid}.jsonl`));
    } catch {
      /* another probe rotated it first */
    }
  }
  prune(dir, base, rot, now);
  // O_NONBLOCK: a FIFO swapped in since the check fails the open (ENXIO) instead of blocking it.
  const fd = openSync(
    path,
    constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK,
    0o600,
  );
  try {
    if (!fstatSync(fd).isFile())
      throw new Error(`${path} is not a regular file; history is written only to its own files (remove it)`);
    const n = writeSync(fd, line);
    if (n !== line.length) throw new Error(`short write to ${path} (${n} of ${line.length} bytes)`);
  } finally {
    closeSync(fd);
  }
  return path;
}

function endsWithNewline(path: string, size: number): boolean {
  const { fd } = openRegularFile(path, { maxBytes: Number.MAX_SAFE_INTEGER, noFollow: true });
  try {
    const b = Buffer.alloc(1);
    readSync(fd, b, 0, 1, size - 1);
    return b[0] === 0x0a;
  } finally {
    closeSync(fd);
  }
}

function prune(dir: string, base: string, rot: Rotation, now: number) {
  const archives = readdirSync(dir)
    .map((f) => ({ f, m: FILE.exec(f) }))
    .filter((x) => x.m && x.m[1] === base && x.m[2])
    .map((x) => ({ f: x.f, key: x.m![2]! }))
    .sort((a, b) => (a.key < b.key ? -1 : 1));
  const drop = new Set<string>();
  for (const a of archives) {
    try {
      if (now - statSync(join(dir, a.f)).mtimeMs > rot.maxAgeMs) drop.add(a.f);
    } catch {
      /* gone already */
    }
  }
  const kept = archives.filter((a) => !drop.has(a.f));
  for (const a of kept.slice(0, Math.max(0, kept.length - rot.maxArchives))) drop.add(a.f);
  for (const f of drop) rmSync(join(dir, f), { force: true });
}

/** What a probe reads of the newest sample of one target: its time and the Xid baseline. */
interface LastSample {
  t: string;
  /** kernel-log time of the newest Xid it saw ("Xid since the last probe") */
  xidT?: number;
}

/** The bytes read from the end of a history file for the newest sample (a line is at most LINE_MAX). */
const TAIL_BYTES = 64 * 1024;

/**
 * The newest sample of one target (the baseline for "since the last probe"), read from the end of
 * its file: a history file grows to 4 MiB, and a probe runs every few minutes. A line is used when
 * what is read of it is well formed (version, time, Xid time); a torn or foreign one is passed over.
 */
export function lastSample(stateDir: string, target: string, url: string): LastSample | undefined {
  const path = join(historyDir(stateDir), `${historyBase(target, url)}.jsonl`);
  let fd: number;
  let size: number;
  try {
    ({ fd, size } = openRegularFile(path, { maxBytes: READ_LIMITS.history, noFollow: true }));
  } catch {
    return undefined;
  }
  try {
    for (let start = Math.max(0, size - TAIL_BYTES); ; start = 0) {
      const buf = Buffer.alloc(size - start);
      readSync(fd, buf, 0, buf.length, start);
      const lines = buf.toString('utf8').split('\n');
      if (start > 0) lines.shift(); // the end of a line that began before the window
      for (let k = lines.length - 1; k >= 0; k--) {
        const s = lastOf(lines[k]!);
        if (s) return s;
      }
      if (start === 0) break; // else: no good line in the tail (torn ones only): the whole file
    }
  } catch {
    /* unreadable: no baseline */
  } finally {
    closeSync(fd);
  }
  return undefined;
}

function lastOf(line: string): LastSample | undefined {
  if (!line.trim()) return undefined;
  let j: unknown;
  try {
    j = JSON.parse(line);
  } catch {
    return undefined; // a torn line: look further back
  }
  if (!j || typeof j !== 'object' || Array.isArray(j)) return undefined;
  const { v, t, xidT } = j as Record<string, unknown>;
  if (v !== SAMPLE_VERSION || typeof t !== 'string' || Number.isNaN(Date.parse(t))) return undefined;
  if (xidT !== undefined && !(typeof xidT === 'number' && Number.isFinite(xidT) && xidT >= 0)) return undefined;
  return xidT === undefined ? { t } : { t, xidT };
}
