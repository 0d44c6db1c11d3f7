// vLLM's start caches, kept by sparkctl between starts: one folder per profile and vLLM version (and
// container image), so a restart pays only for what changed, and a changed vLLM or image never reads
// an entry another one wrote. What goes in it (the caches vLLM and its libraries write between runs):
//  - VLLM_CACHE_ROOT (vllm/envs.py, default ~/.cache/vllm or $XDG_CACHE_HOME/vllm): the torch.compile
//    cache (torch_compile_cache/<hash>, with the inductor and Triton caches vLLM points inside it,
//    compilation/compiler_interface.py), the GPU P2P access cache (gpu_p2p_access_cache_for_<gpus>.json,
//    distributed/device_communicators/all_reduce_utils.py), FlashInfer's autotune results
//    (flashinfer_autotune_cache/, model_executor/warmup/flashinfer_autotune_cache.py) and vLLM's assets;
//  - TRITON_CACHE_DIR (Triton's own, ~/.triton/cache), for kernels compiled outside torch.compile;
//  - FLASHINFER_WORKSPACE_BASE (flashinfer/jit/env.py: $BASE/.cache/flashinfer, JIT-built kernels);
//  - CUDA_CACHE_PATH (the driver's PTX JIT cache, ~/.nv/ComputeCache);
//  - TORCHINDUCTOR_CACHE_DIR (inductor's own, /tmp/torchinductor_<user>, where vLLM does not set it).
// The model's files are not here: they stay pull's (the Hugging Face cache).
// A variable the profile's env: already sets is the operator's choice and is left alone.
import { lstatSync, mkdirSync, readdirSync, rmSync, statSync, type Stats } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve, sep } from 'node:path';
import { createHash } from 'node:crypto';
import { stateDir } from '../util/paths.js';
import { UsageError } from '../errors.js';

/** The variables that point each cache into the folder, with the sub-folder each gets. */
export const CACHE_VARS: ReadonlyArray<readonly [name: string, sub: string]> = [
  ['VLLM_CACHE_ROOT', 'vllm'],
  ['TRITON_CACHE_DIR', 'triton'],
  ['FLASHINFER_WORKSPACE_BASE', 'flashinfer'],
  ['CUDA_CACHE_PATH', 'cuda'],
  ['TORCHINDUCTOR_CACHE_DIR', 'inductor'],
];

/**
 * Where the caches live: $SPARKCTL_CACHE_DIR; else beside an explicit state folder
 * ($SPARKCTL_STATE_DIR/cache, so a test's or a second install's stay apart); else
 * $XDG_CACHE_HOME/sparkctl, else ~/.cache/sparkctl.
 */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SPARKCTL_CACHE_DIR) return resolve(env.SPARKCTL_CACHE_DIR);
  if (env.SPARKCTL_STATE_DIR) return join(stateDir(env), 'cache');
  return join(env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache'), 'sparkctl');
}

/** What a cache entry is for: never shared across any of these. */
export interface CacheKey {
  profile: string;
  /** the vLLM that runs, as read (installed or in the image): 0.27.2.dev0+g6adad0876 */
  vllm: string;
  /** a container's image: its content id where read (sha256:...), else its reference */
  image?: string;
}

/** A name safe as one path component: the readable part kept, anything else replaced; a hash keeps two names apart. */
function component(s: string): string {
  const clean = s
    .replace(/[^A-Za-z0-9._+-]/g, '_')
    .replace(/^\.+/, '_')
    .slice(0, 80);
  return clean === s ? s : `${clean}-${createHash('sha256').update(s).digest('hex').slice(0, 8)}`;
}

/** The folder of one key, under the root: vllm/<profile>/<version>[@<image hash>]. */
export function cacheDirOf(root: string, k: CacheKey): string {
  const image = k.image ? `@${createHash('sha256').update(k.image).digest('hex').slice(0, 12)}` : '';
  return join(root, 'vllm', component(k.profile), component(k.vllm) + image);
}

export interface CachePlan {
  key: CacheKey;
  dir: string;
  /** the variables set for the server (absolute paths under dir) */
  env: Record<string, string>;
  /** variables the profile sets itself (kept, said) */
  kept: string[];
  /** what else was set for the caches' sake, in sentences */
  notes: string[];
}

/** The cache plan of a profile: the folder, and the variables not already set by the profile's env. */
export function planCaches(k: CacheKey, profileEnv: Record<string, unknown> = {}, root = cacheRoot()): CachePlan {
  const dir = cacheDirOf(root, k);
  const env: Record<string, string> = {};
  const kept: string[] = [];
  for (const [name, sub] of CACHE_VARS) {
    if (profileEnv[name] !== undefined) kept.push(name);
    else env[name] = join(dir, sub);
  }
  return { key: k, dir, env, kept, notes: [] };
}

const mine = (st: Stats) => typeof process.getuid !== 'function' || st.uid === process.getuid();

/**
 * Make the plan's folders, each created 0700 by sparkctl. Every component from the root down must be
 * a real folder (not a link) owned by this user and not writable by others; a path sparkctl did not
 * make that way is refused (UsageError naming it), never written through.
 */
export function ensureCaches(plan: CachePlan, root = cacheRoot()): void {
  const base = resolve(root);
  const parent = resolve(base, '..');
  mkdirSync(parent, { recursive: true, mode: 0o700 });
  const chain = [base, ...relParts(base, plan.dir).map((_, i, a) => join(base, ...a.slice(0, i + 1)))];
  for (const sub of Object.values(plan.env)) chain.push(sub);
  for (const d of chain) makeOwnDir(d);
}

function relParts(base: string, dir: string): string[] {
  const r = resolve(dir);
  if (!r.startsWith(base + sep))
    throw new UsageError(`cache folder ${dir} is not under ${base}`, [
      'leave SPARKCTL_CACHE_DIR out, or name a folder of your own',
    ]);
  return r.slice(base.length + 1).split(sep);
}

function makeOwnDir(d: string): void {
  let st = lstatSync(d, { throwIfNoEntry: false });
  if (!st) {
    try {
      mkdirSync(d, { mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    st = lstatSync(d);
  }
  const fix = `remove it (sparkctl cache rm, or rm -r ${d}) and start again; sparkctl makes its cache folders itself`;
  if (st.isSymbolicLink())
    throw new UsageError(`cache folder ${d} is a symbolic link: sparkctl never writes through one`, [fix]);
  if (!st.isDirectory()) throw new UsageError(`cache folder ${d} is not a folder`, [fix]);
  if (!mine(st)) throw new UsageError(`cache folder ${d} belongs to uid ${st.uid}, not to this user`, [fix]);
  if (st.mode & 0o022)
    throw new UsageError(`cache folder ${d} is writable by others (mode ${(st.mode & 0o777).toString(8)})`, [fix]);
}

export interface CacheEntry {
  profile: string;
  /** the version folder's name (the vLLM version, with @<image hash> for a container's) */
  version: string;
  dir: string;
  bytes: number;
  files: number;
  /** the newest file's time, ISO */
  lastUsed?: string;
  /** what is in it, by sub-folder: bytes */
  parts: Record<string, number>;
}

/** Size and file count of a tree, without following links; bounded by `limit` entries. */
function treeSize(dir: string, limit = 200_000): { bytes: number; files: number; newest: number } {
  let bytes = 0;
  let files = 0;
  let newest = 0;
  let seen = 0;
  const walk = (d: string) => {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      return;
    }
    for (const n of names) {
      if (++seen > limit) return;
      const p = join(d, n);
      const st = lstatSync(p, { throwIfNoEntry: false });
      if (!st) continue;
      if (st.isDirectory()) walk(p);
      else if (st.isFile()) {
        bytes += st.size;
        files++;
        newest = Math.max(newest, st.mtimeMs);
      }
    }
  };
  walk(dir);
  return { bytes, files, newest };
}

const dirsOf = (d: string) => {
  try {
    return readdirSync(d).filter((n) => lstatSync(join(d, n), { throwIfNoEntry: false })?.isDirectory());
  } catch {
    return [];
  }
};

/** Every cache entry under the root (profile, version), with its size; optionally one profile's. */
export function listCaches(root = cacheRoot(), profile?: string): CacheEntry[] {
  const out: CacheEntry[] = [];
  const base = join(root, 'vllm');
  for (const p of dirsOf(base)) {
    if (profile && p !== component(profile)) continue;
    for (const v of dirsOf(join(base, p))) {
      const dir = join(base, p, v);
      const t = treeSize(dir);
      const parts = Object.fromEntries(dirsOf(dir).map((s) => [s, treeSize(join(dir, s)).bytes]));
      out.push({
        profile: p,
        version: v,
        dir,
        bytes: t.bytes,
        files: t.files,
        ...(t.newest ? { lastUsed: new Date(t.newest).toISOString() } : {}),
        parts,
      });
    }
  }
  return out.sort((a, b) => a.profile.localeCompare(b.profile) || a.version.localeCompare(b.version));
}

/**
 * Remove entries (a profile's, or one version of it). Only folders under the root that are real
 * folders of this user are removed; rmSync does not follow links inside them.
 */
export function removeCaches(entries: CacheEntry[], root = cacheRoot()): string[] {
  const base = resolve(root);
  const removed: string[] = [];
  for (const e of entries) {
    relParts(base, e.dir);
    const st = lstatSync(e.dir, { throwIfNoEntry: false });
    if (!st || st.isSymbolicLink() || !st.isDirectory() || !mine(st)) continue;
    rmSync(e.dir, { recursive: true, force: true });
    removed.push(e.dir);
  }
  return removed;
}

/** Whether a folder exists and holds anything (a warm cache). */
export function hasEntries(dir: string): boolean {
  try {
    return statSync(dir).isDirectory() && treeSize(dir, 50).files > 0;
  } catch {
    return false;
  }
}
