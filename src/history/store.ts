// History on disk: one JSON Lines file per target under <state>/history. Each sample is ONE
// write(2) of one line below PIPE_BUF on an O_APPEND descriptor, so concurrent probes never
// interleave or tear a line. Rotation renames the current file to an archive (a rename is
// atomic; a probe that opened the old file still writes into the archive, which is read too),
// then drops archives past the age limit and past the segment count: bounded, nothing rewritten.
import { openSync, writeSync, readSync, closeSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, constants, lstatSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { Sample, sampleLine } from './sample.js';

export interface Rotation {
  /** a file past this many bytes becomes an archive */
  maxBytes: number;
  /** archives whose newest line is older than this are removed */
  maxAgeMs: number;
  /** at most this many archives per target */
  maxArchives: number;
}
export const DEFAULT_ROTATION: Rotation = { maxBytes: 4 * 1024 * 1024, maxAgeMs: 35 * 86_400_000, maxArchives: 8 };

export const historyDir = (stateDir: string) => join(stateDir, 'history');

/** A file name that is safe whatever the target is called, and unique per URL. */
export function historyBase(target: string, url: string): string {
  const safe =
    target
      .replace(/^https?:\/\//, '')
      .replace(/[^A-Za-z0-9._-]+/g, '_')
      .slice(0, 60) || 'target';
  return `${safe}.${createHash('sha256').update(url).digest('hex').slice(0, 8)}`;
}

const FILE = /^(.+\.[0-9a-f]{8})(?:\.(\d{13}-\d+))?\.jsonl$/;

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
  try {
    size = statSync(path).size;
  } catch {
    /* first sample */
  }
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
  const fd = openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
  try {
    const n = writeSync(fd, line);
    if (n !== line.length) throw new Error(`short write to ${path} (${n} of ${line.length} bytes)`);
  } finally {
    closeSync(fd);
  }
  return path;
}

function endsWithNewline(path: string, size: number): boolean {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
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

export interface Skipped {
  file: string;
  line: number;
  why: string;
}
export interface HistoryRead {
  samples: Sample[];
  skipped: Skipped[];
  files: string[];
}

/** Every sample of the targets `match` accepts, oldest first; bad lines are skipped and reported. */
export function readHistory(stateDir: string, match: (s: Sample) => boolean = () => true, window: { from?: number; to?: number } = {}): HistoryRead {
  const dir = historyDir(stateDir);
  let names: string[];
  try {
    names = readdirSync(dir).filter((f) => FILE.test(f));
  } catch {
    return { samples: [], skipped: [], files: [] };
  }
  const samples: Sample[] = [];
  const skipped: Skipped[] = [];
  const files: string[] = [];
  for (const f of names.sort()) {
    // an archive last written before the window holds nothing in it
    if (window.from !== undefined && FILE.exec(f)![2]) {
      try {
        if (statSync(join(dir, f)).mtimeMs < window.from) continue;
      } catch {
        continue;
      }
    }
    let text: string;
    try {
      text = readFileSync(join(dir, f), 'utf8');
    } catch (e) {
      skipped.push({ file: f, line: 0, why: (e as Error).message });
      continue;
    }
    files.push(f);
    const lines = text.split('\n');
    const last = lines.pop();
    lines.forEach((l, k) => {
      if (!l.trim()) return;
      // cheap pre-filter on the time every line starts with; the full check follows, after parsing
      if (window.from !== undefined || window.to !== undefined) {
        const t = Date.parse(/^\{"v":\d+,"t":"([^"]{10,40})"/.exec(l)?.[1] ?? '');
        if (!Number.isNaN(t) && ((window.from !== undefined && t < window.from) || (window.to !== undefined && t > window.to))) return;
      }
      let raw: unknown;
      try {
        raw = JSON.parse(l);
      } catch {
        skipped.push({ file: f, line: k + 1, why: 'not JSON' });
        return;
      }
      const r = Sample.safeParse(raw);
      if (!r.success) {
        const i = r.error.issues[0]!;
        skipped.push({ file: f, line: k + 1, why: `${i.path.join('.') || 'line'}: ${i.message}` });
        return;
      }
      if (window.from !== undefined || window.to !== undefined) {
        // the window itself, for every line (one written by hand or by another tool may not start
        // the way the pre-filter reads); a sample with no readable time is outside any window
        const t = Date.parse(r.data.t);
        if (!(t >= (window.from ?? -Infinity) && t <= (window.to ?? Infinity))) return;
      }
      if (match(r.data)) samples.push(r.data);
    });
    if (last) skipped.push({ file: f, line: lines.length + 1, why: 'incomplete last line (torn or still being written)' });
  }
  samples.sort((a, b) => Date.parse(a.t) - Date.parse(b.t));
  return { samples, skipped, files };
}

/** The newest sample of one target (the baseline for "since the last probe"). */
export function lastSample(stateDir: string, target: string, url: string): Sample | undefined {
  const path = join(historyDir(stateDir), `${historyBase(target, url)}.jsonl`);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  const lines = text.split('\n');
  for (let k = lines.length - 1; k >= 0; k--) {
    if (!lines[k]!.trim()) continue;
    try {
      const r = Sample.safeParse(JSON.parse(lines[k]!));
      if (r.success) return r.data;
    } catch {
      /* a torn line: look further back */
    }
  }
  return undefined;
}
