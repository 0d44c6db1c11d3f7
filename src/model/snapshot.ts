// Is a Hub model in the cache, whole? Read offline from the cache alone: refs/<revision> (or a commit)
// -> snapshots/<commit>; the files it must hold are those of the cached listing (trees/<commit>.json,
// which sparkctl pull and huggingface_hub write) that vLLM loads, else the config plus the shards
// model.safetensors.index.json names, else any weights. Each must be a link to a blob that is there
// with the listed size; `verify` also hashes each blob against its name (a blob's name is its
// SHA-256, or its git SHA-1). Every read is bounded and no link is followed out of the cache.
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readdir, readlink, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { COMMIT, readRef, repoCache } from './cache.js';
import { readTextOrNull } from '../util/read.js';
import { indexShards, selectFiles, SAFETENSORS_INDEX, type TreeFile } from './select.js';

export interface SnapshotState {
  repo: string;
  revision: string;
  cache: string;
  commit?: string;
  snapshot?: string;
  /** every file present and whole (and, with verify, matching its hash) */
  complete: boolean;
  files: Array<{ path: string; size: number }>;
  missing: string[];
  /** files whose bytes do not match their blob name (verify only) */
  corrupt: string[];
  /** why no snapshot was found at all */
  why?: string;
}

/**
 * A small file of the cache, through the one bounded regular-file reader; undefined when absent or refused (a FIFO, too
 * large).
 */
async function readSmall(file: string, limit: number): Promise<string | undefined> {
  try {
    return (await readTextOrNull(file, { maxBytes: limit, what: 'a file of the Hugging Face cache' })) ?? undefined;
  } catch {
    return undefined;
  }
}

/** The cached listing of a commit, as huggingface_hub 1.x keeps it, when there is one. */
async function cachedTree(dir: string, commit: string): Promise<TreeFile[] | undefined> {
  const text = await readSmall(join(dir, 'trees', `${commit}.json`), 64 * 1024 * 1024);
  if (!text) return undefined;
  try {
    const j = JSON.parse(text) as {
      format_version?: unknown;
      files?: Record<string, { size?: unknown; blob_id?: unknown; lfs_sha256?: unknown; lfs_size?: unknown }>;
    };
    if (j.format_version !== 1 || typeof j.files !== 'object' || !j.files) return undefined;
    return Object.entries(j.files).map(([path, f]) => ({
      path,
      size: Number(f.size),
      oid: String(f.blob_id),
      ...(typeof f.lfs_sha256 === 'string' ? { lfs: { oid: f.lfs_sha256, size: Number(f.lfs_size) } } : {}),
    }));
  } catch {
    return undefined;
  }
}

/**
 * A snapshot entry that is a link into this repository's blobs/ (the only thing a snapshot should hold), and that
 * blob's size.
 */
async function blobOf(blobs: string, link: string): Promise<{ blob: string; size: number } | undefined> {
  const st = await lstat(link).catch(() => null);
  if (!st) return undefined;
  if (!st.isSymbolicLink()) {
    // huggingface_hub on a filesystem without links copies the file in: accept a regular file.
    return st.isFile() ? { blob: link, size: st.size } : undefined;
  }
  const target = resolve(dirname(link), await readlink(link));
  if (dirname(target) !== blobs) return undefined;
  const b = await stat(target).catch(() => null);
  return b?.isFile() ? { blob: target, size: b.size } : undefined;
}

async function hashFile(file: string, lfs: boolean, size: number): Promise<string> {
  const h = lfs ? createHash('sha256') : createHash('sha1').update(`blob ${size}\0`);
  const fh = await open(file, constants.O_RDONLY);
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    for (let off = 0; ; ) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, off);
      if (!bytesRead) break;
      h.update(buf.subarray(0, bytesRead));
      off += bytesRead;
    }
  } finally {
    await fh.close();
  }
  return h.digest('hex');
}

export async function inspectSnapshot(
  cacheRoot: string,
  repo: string,
  revision = 'main',
  opts: { verify?: boolean } = {},
): Promise<SnapshotState> {
  const c = repoCache(cacheRoot, repo);
  const out: SnapshotState = { repo, revision, cache: c.dir, complete: false, files: [], missing: [], corrupt: [] };
  const commit = COMMIT.test(revision) ? revision : await readRef(c, revision).catch(() => undefined);
  if (!commit) {
    out.why = (await lstat(c.dir).catch(() => null)) ? `no refs/${revision} in ${c.dir}` : `${c.dir} does not exist`;
    return out;
  }
  out.commit = commit;
  const snap = join(c.snapshots, commit);
  const entries = await readdir(snap).catch(() => null);
  if (!entries) {
    out.why = `no snapshot ${snap}`;
    return out;
  }
  out.snapshot = snap;
  // What must be there: the listing's files vLLM loads; else what the snapshot's own index names.
  let wanted: Array<{ path: string; size?: number; lfs?: boolean }>;
  const tree = await cachedTree(c.dir, commit);
  if (tree) {
    const idx = tree.some((f) => f.path === SAFETENSORS_INDEX)
      ? await readSmall(join(snap, SAFETENSORS_INDEX), 64 * 1024 * 1024)
      : undefined;
    let index: unknown;
    try {
      index = idx ? JSON.parse(idx) : undefined;
    } catch {
      index = undefined;
    }
    wanted = selectFiles(tree, { index }).files.map((f) => ({
      path: f.path,
      size: f.lfs?.size ?? f.size,
      lfs: Boolean(f.lfs),
    }));
  } else {
    wanted = [{ path: 'config.json' }];
    const idx = await readSmall(join(snap, SAFETENSORS_INDEX), 64 * 1024 * 1024);
    if (idx !== undefined) {
      wanted.push({ path: SAFETENSORS_INDEX });
      try {
        for (const s of indexShards(JSON.parse(idx))) wanted.push({ path: s, lfs: true });
      } catch {
        out.missing.push(`${SAFETENSORS_INDEX} (unreadable)`);
      }
    } else {
      const weights = entries.filter((e) => /\.(safetensors|bin)$/.test(e));
      if (weights.length) for (const w of weights) wanted.push({ path: w, lfs: true });
      else out.missing.push('weights (*.safetensors)');
    }
  }
  for (const w of wanted) {
    const b = await blobOf(c.blobs, join(snap, ...w.path.split('/')));
    if (!b || (w.size !== undefined && b.size !== w.size)) {
      out.missing.push(w.path);
      continue;
    }
    out.files.push({ path: w.path, size: b.size });
    if (opts.verify) {
      const name = b.blob.slice(c.blobs.length + 1);
      const lfs = /^[0-9a-f]{64}$/.test(name);
      if (!lfs && !/^[0-9a-f]{40}$/.test(name)) continue;
      // a blob that cannot be read (no permission, gone meanwhile) is a finding about that file, never a crash
      const got = await hashFile(b.blob, lfs, b.size).catch(
        (e: NodeJS.ErrnoException) => `unreadable (${e.code ?? e.message})`,
      );
      if (got !== name) out.corrupt.push(got.startsWith('unreadable') ? `${w.path}: ${got}` : w.path);
    }
  }
  out.complete = out.missing.length === 0 && out.corrupt.length === 0;
  return out;
}
