// A pull: read (resolve the revision to a commit once, list the tree, read the index) -> plan (which
// files, what is already here, the disk it needs) -> act (download in parallel, verify, commit each
// blob, link it into the snapshot, and only at the end write refs/<revision>). Reports progress as
// events; never prints, exits or installs a signal handler (cancellation is the AbortSignal).
import { lstat } from 'node:fs/promises';
import { lockFile } from '../util/lock.js';
import { join } from 'node:path';
import { selectFiles, checkListing, fileSize, SAFETENSORS_INDEX, type Selection, type TreeFile } from './select.js';
import {
  blobName,
  blobMatches,
  blobState,
  checkRepoPath,
  commitBlob,
  ensureDirUnder,
  freeBytes,
  incompletePath,
  linkSnapshot,
  repoCache,
  writeRef,
  COMMIT,
  CacheRefused,
  type RepoCache,
  repoFolderName,
} from './cache.js';
import { downloadFile, fetchSmall, HubError, listTree, resolveCommit, type Hub } from './hub.js';
import { writeFileAtomic } from '../util/atomic.js';

interface PullRequest {
  repo: string;
  revision: string;
  configOnly?: boolean;
  cacheRoot: string;
  hub: Hub;
  /** files fetched at once (huggingface_hub's snapshot_download uses 8) */
  jobs?: number;
  signal?: AbortSignal;
  onEvent?: (e: PullEvent) => void;
}

type FileStatus = 'present' | 'downloaded' | 'resumed';

interface PlannedFile {
  path: string;
  size: number;
  blob: string;
  /** bytes already in blobs/ (complete) or in its .incomplete file (a resumable start) */
  have: number;
  present: boolean;
}

export type PullEvent =
  | { type: 'resolved'; revision: string; commit: string }
  | { type: 'planned'; files: PlannedFile[]; totalBytes: number; haveBytes: number; skipped: Selection['skipped'] }
  | { type: 'bytes'; path: string; delta: number }
  | { type: 'file'; path: string; status: FileStatus; bytes: number };

export interface PullResult {
  repo: string;
  revision: string;
  commit: string;
  cache: string;
  snapshot: string;
  weights: Selection['weights'];
  files: Array<{ path: string; size: number; blob: string; status: FileStatus }>;
  skipped: Selection['skipped'];
  bytesFetched: number;
  ms: number;
}

/** Not enough room for the files: the folder, what is needed and what is free. */
export class DiskFull extends Error {
  constructor(
    readonly folder: string,
    readonly need: number,
    readonly free: number,
  ) {
    super(`not enough disk space in ${folder}: the pull needs ${need} bytes, ${free} are free`);
  }
}

export class PullRefused extends Error {
  constructor(
    message: string,
    readonly fix: string,
  ) {
    super(message);
  }
}

/** The plan: what the selection needs and what the cache already holds. Validates every name the Hub sent. */
export async function planFiles(c: RepoCache, sel: Selection): Promise<PlannedFile[]> {
  const out: PlannedFile[] = [];
  for (const f of sel.files) {
    const bad = checkRepoPath(f.path);
    if (bad)
      throw new HubError(
        'protocol',
        `the Hub lists a file named ${JSON.stringify(f.path).slice(0, 200)}: ${bad}; refused`,
      );
    const blob = blobName(f);
    if (!blob)
      throw new HubError(
        'protocol',
        `${f.path}: the Hub's listing gives no valid ${f.lfs ? 'SHA-256' : 'git SHA-1'} for it`,
      );
    const size = fileSize(f);
    let st = await blobState(c, blob, size);
    if (st === 'wrong')
      throw new CacheRefused(
        `${join(c.blobs, blob)} is there but is not a regular file of ${size} bytes; remove it and pull again`,
      );
    // the right size is not the right bytes: a blob that does not hash to its name is fetched again (and replaced by
    // rename)
    if (st === 'present' && !(await blobMatches(c, blob, size, Boolean(f.lfs)))) st = 'absent';
    let have = st === 'present' ? size : 0;
    if (!have) {
      const inc = await lstat(incompletePath(c, blob)).catch(() => null);
      if (inc?.isFile() && inc.size <= size) have = inc.size;
    }
    out.push({ path: f.path, size, blob, have, present: st === 'present' });
  }
  return out;
}

/** Two entries of one blob are fetched once. */
const needBytes = (files: PlannedFile[]) => {
  const seen = new Map<string, number>();
  for (const f of files) if (!f.present) seen.set(f.blob, f.size - f.have);
  return [...seen.values()].reduce((a, b) => a + b, 0);
};

/**
 * The commit's listing (checked: a file listed twice is a bad mirror) and the files vLLM loads from it; throws before
 * anything is written.
 */
async function listAndSelect(
  hub: Hub,
  repo: string,
  commit: string,
  configOnly: boolean | undefined,
  signal?: AbortSignal,
): Promise<{ tree: TreeFile[]; sel: Selection }> {
  const tree = await listTree(hub, repo, commit, signal);
  const bad = checkListing(tree);
  if (bad)
    throw new HubError(
      'protocol',
      `${repo}@${commit}: the tree listing is inconsistent: ${bad}; nothing was written`,
      'check the mirror (HF_ENDPOINT); the Hub never lists a file twice',
    );
  const sel = await selectWithIndex(hub, repo, commit, tree, configOnly, signal);
  if (sel.missing.length)
    throw new HubError(
      'protocol',
      `${repo}@${commit}: ${SAFETENSORS_INDEX} names ${sel.missing.length} file(s) the repository does not hold (${sel.missing.slice(0, 3).join(', ')})`,
    );
  if (!sel.files.length)
    throw new HubError(
      'not-found',
      `${repo}@${commit}: no files vLLM loads (config, tokenizer, weights)`,
      'check the model id',
    );
  return { tree, sel };
}

export async function pull(req: PullRequest): Promise<PullResult> {
  const t0 = Date.now();
  const { hub, repo, signal } = req;
  const emit = req.onEvent ?? (() => {});
  const c = repoCache(req.cacheRoot, repo);
  const commit = COMMIT.test(req.revision) ? req.revision : await resolveCommit(hub, repo, req.revision, signal);
  emit({ type: 'resolved', revision: req.revision, commit });
  const { tree, sel } = await listAndSelect(hub, repo, commit, req.configOnly, signal);
  const files = await planFiles(c, sel);
  const totalBytes = files.reduce((a, f) => a + f.size, 0);
  emit({ type: 'planned', files, totalBytes, haveBytes: files.reduce((a, f) => a + f.have, 0), skipped: sel.skipped });
  // Before the first byte: the room for what is still missing, where the blobs go.
  const need = needBytes(files);
  if (need > 0) {
    const { at, free } = await freeBytes(c.blobs);
    if (need > free) throw new DiskFull(at, need, free);
  }
  await ensureDirUnder(c.root, c.blobs);
  await ensureDirUnder(c.root, join(c.snapshots, commit));
  tagCache(c.root);
  const unlock = await lockRepo(c, repo);
  try {
    const status = new Map<string, FileStatus>();
    let fetched = 0;
    const byBlob = new Map<string, Promise<FileStatus>>();
    const fetchBlob = (f: PlannedFile, tf: TreeFile): Promise<FileStatus> => {
      let p = byBlob.get(f.blob);
      if (!p) {
        p = (async () => {
          if (f.present) return 'present';
          const d = await downloadFile(hub, c, repo, commit, tf, f.blob, {
            signal,
            onBytes: (delta) => emit({ type: 'bytes', path: f.path, delta }),
          });
          fetched += d.fetched;
          await commitBlob(c, f.blob);
          return d.resumedFrom > 0 ? 'resumed' : 'downloaded';
        })();
        byBlob.set(f.blob, p);
      }
      return p;
    };
    const treeByPath = new Map(sel.files.map((f) => [f.path, f]));
    // Small files first (a config-only reader is served soonest), then the shards largest first.
    const order = [...files].sort((a, b) =>
      a.size < 1 << 20 === b.size < 1 << 20 ? b.size - a.size : a.size < 1 << 20 ? -1 : 1,
    );
    await pool(
      order,
      Math.max(1, req.jobs ?? 8),
      async (f) => {
        const st = await fetchBlob(f, treeByPath.get(f.path)!);
        await linkSnapshot(c, commit, f.path, f.blob);
        status.set(f.path, st);
        emit({ type: 'file', path: f.path, status: st, bytes: f.size });
      },
      signal,
    );
    // The snapshot is whole: only now does the branch or tag name it.
    if (!COMMIT.test(req.revision)) await writeRef(c, req.revision, commit);
    // huggingface_hub 1.x keeps the commit's listing in trees/<commit>.json and, offline, calls a
    // snapshot missing any listed file incomplete. Written only when every file is here: a pull
    // that left *.bin duplicates on the Hub must still read as complete to vLLM offline.
    if (!sel.skipped.length) await writeTreeCache(c, commit, tree);
    return {
      repo,
      revision: req.revision,
      commit,
      cache: c.dir,
      snapshot: join(c.snapshots, commit),
      weights: sel.weights,
      files: files.map((f) => ({ path: f.path, size: f.size, blob: f.blob, status: status.get(f.path)! })),
      skipped: sel.skipped,
      bytesFetched: fetched,
      ms: Date.now() - t0,
    };
  } finally {
    unlock();
  }
}

async function selectWithIndex(
  hub: Hub,
  repo: string,
  commit: string,
  tree: TreeFile[],
  configOnly: boolean | undefined,
  signal?: AbortSignal,
): Promise<Selection> {
  const idx = tree.find((f) => f.path === SAFETENSORS_INDEX);
  if (!idx || configOnly) return selectFiles(tree, { configOnly });
  const bytes = await fetchSmall(hub, repo, commit, idx, 64 * 1024 * 1024, signal);
  let index: unknown;
  try {
    index = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new HubError('protocol', `${repo}@${commit}: ${SAFETENSORS_INDEX} is not JSON`);
  }
  try {
    return selectFiles(tree, { index });
  } catch (e) {
    throw new HubError('protocol', `${repo}@${commit}: ${(e as Error).message}`);
  }
}

/** trees/<commit>.json in huggingface_hub's format (format_version 1, files sorted by path). */
async function writeTreeCache(c: RepoCache, commit: string, tree: TreeFile[]): Promise<void> {
  const files: Record<string, unknown> = {};
  for (const f of [...tree].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) {
    files[f.path] = f.lfs
      ? { size: f.size, blob_id: f.oid, lfs_sha256: f.lfs.oid, lfs_size: f.lfs.size }
      : { size: f.size, blob_id: f.oid };
  }
  await ensureDirUnder(c.root, join(c.dir, 'trees'));
  writeFileAtomic(join(c.dir, 'trees', `${commit}.json`), JSON.stringify({ format_version: 1, files }, null, 1));
}

/** Run `work` over `items`, `n` at a time; the first failure stops the rest from starting and is thrown. */
async function pool<T>(items: T[], n: number, work: (t: T) => Promise<void>, signal?: AbortSignal): Promise<void> {
  let next = 0;
  let failed: unknown;
  const worker = async () => {
    while (failed === undefined && next < items.length) {
      if (signal?.aborted) throw signal.reason;
      const item = items[next++] as T;
      try {
        await work(item);
      } catch (e) {
        failed ??= e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  if (failed !== undefined) throw failed;
}

const CACHEDIR_TAG =
  'Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag (https://bford.info/cachedir/), as huggingface_hub writes it.\n';

/** CACHEDIR.TAG at the cache root, as huggingface_hub writes it, when absent (backup tools skip the folder). */
function tagCache(root: string): void {
  try {
    writeFileAtomic(join(root, 'CACHEDIR.TAG'), CACHEDIR_TAG);
  } catch {
    /* a read-only or odd root: the tag is a courtesy */
  }
}

/**
 * One pull of a repository at a time on this cache: two would write the same .incomplete file.
 * The lock is a file under .locks/ (where huggingface_hub keeps its own), taken with the shared lock
 * (util/lock.ts): it holds our pid and its start time, so a lock left by a kill -9, or one whose pid
 * the kernel has since given to another process, is taken over; a live holder refuses at once.
 */
export async function lockRepo(c: RepoCache, repo: string): Promise<() => void> {
  const dir = join(c.root, '.locks', repoFolderName(repo));
  await ensureDirUnder(c.root, dir);
  const file = join(dir, 'sparkctl-pull.lock');
  return lockFile(
    file,
    0,
    (pid) =>
      new PullRefused(
        `another sparkctl pull of this repository is running (pid ${pid}, lock ${file})`,
        'wait for it to finish, or stop it; an interrupted pull resumes',
      ),
    {
      what: 'model cache',
      fix: 'make the model cache writable (HF_HUB_CACHE, HF_HOME)',
      notALock: (p) => new CacheRefused(`${p} is not a sparkctl lock; remove it`),
    },
  );
}
