// vLLM's start caches on every node of a cluster, as on one host (caches.ts): one folder per profile
// and vLLM version (and image), on the node's own disk under its user's cache root
// (${XDG_CACHE_HOME:-$HOME/.cache}/sparkctl, what cacheRoot() is on a host without sparkctl's
// variables), with the same variables pointing each cache into it. A rank's restart then reuses
// what its own last start compiled (vLLM keeps a rank's compile under rank_<r>_<dp>).
// The folder is made on the node by the launch line itself, by the same rule as ensureCaches: each
// component from the root down made 0700 by sparkctl, and refused (the launch fails, naming it and
// the fix) where it is a link, not a folder, not this user's, or writable by others; nothing is
// written through it. The line reports the folder and whether it held anything (`@caches warm DIR`):
// the rank's start report says so beside vLLM's own cache hit or miss.
import { CACHE_VARS, cacheDirOf, type CacheKey } from '../caches.js';
import { shellQuote } from '../../output/format.js';

/** Where the caches live on a node, as its shell expands it. */
export const NODE_CACHE_ROOT = '${XDG_CACHE_HOME:-$HOME/.cache}/sparkctl';

export interface NodeCaches {
  key: CacheKey;
  /** the folder under the node's cache root: vllm/<profile>/<version>[@<image hash>] */
  rel: string;
  /** the variables set, with their sub-folder (the profile's own are left out: kept) */
  vars: Array<[name: string, sub: string]>;
  kept: string[];
}

/** The caches of a cluster's ranks: keyed as on one host; the profile's own variables are kept. */
export function planNodeCaches(k: CacheKey, profileEnv: Record<string, unknown> = {}): NodeCaches {
  const rel = cacheDirOf('/', k).slice(1);
  const vars: NodeCaches['vars'] = [];
  const kept: string[] = [];
  for (const [name, sub] of CACHE_VARS) {
    if (profileEnv[name] !== undefined) kept.push(name);
    else vars.push([name, sub]);
  }
  return { key: k, rel, vars, kept };
}

/** Exit status of a launch line whose cache folder was refused (never one vLLM or ssh uses: 255, 1, 127). */
export const CACHE_REFUSED_EXIT = 86;

/**
 * POSIX sh, one line for a launch joined with '; ': the folder made component by component (0700,
 * refused as above: exit CACHE_REFUSED_EXIT), the variables exported, then `@caches warm|empty DIR`.
 */
export function nodeCacheScript(c: NodeCaches): string {
  const parts = c.rel.split('/');
  const chain = parts.map((_, i) => `"$sc_r"/${shellQuote(parts.slice(0, i + 1).join('/'))}`);
  const dir = `"$sc_r"/${shellQuote(c.rel)}`;
  const subs = c.vars.map(([, sub]) => `"$sc_r"/${shellQuote(`${c.rel}/${sub}`)}`);
  const fix = 'remove it and start again; sparkctl makes its cache folders itself';
  return [
    `sc_r="${NODE_CACHE_ROOT}"`,
    'mkdir -p "${sc_r%/*}"',
    `for sc_d in "$sc_r" ${[...chain, ...subs].join(' ')}; do mkdir -m 700 "$sc_d" 2>/dev/null; ` +
      `if [ -L "$sc_d" ] || [ ! -d "$sc_d" ] || [ ! -O "$sc_d" ] || [ -n "$(find "$sc_d" -maxdepth 0 -perm /022 2>/dev/null)" ]; then ` +
      `echo "sparkctl: cache folder $sc_d on $(hostname) is a link, not a folder, not this user's, or writable by others: ${fix}" >&2; exit ${CACHE_REFUSED_EXIT}; fi; done`,
    ...c.vars.map(([name, sub]) => `export ${name}="$sc_r"/${shellQuote(`${c.rel}/${sub}`)}`),
    `if [ -n "$(find ${dir} -type f 2>/dev/null | head -n 1)" ]; then echo "@caches warm $sc_r/${c.rel}"; else echo "@caches empty $sc_r/${c.rel}"; fi`,
  ].join('; ');
}

/**
 * The folder and its state from the node's answer (hostile: only a line of the exact shape, an absolute path ending in
 * the planned folder).
 */
export function cachesFrom(stdout: string, c: NodeCaches): { dir: string; warm: boolean } | undefined {
  for (const line of stdout.split('\n')) {
    const m = /^@caches (warm|empty) (\/[^\n\0]{1,4000})$/.exec(line.trimEnd());
    if (m && m[2]!.endsWith(`/${c.rel}`)) return { dir: m[2]!, warm: m[1] === 'warm' };
  }
  return undefined;
}
