// Which files of a Hub repository vLLM loads, from the repository's tree listing. Pure.
// vLLM reads the config, tokenizer and generation files from the repository root and one weight
// format: the safetensors shards (those named by model.safetensors.index.json when there is one),
// else the PyTorch *.bin files, else *.pt. Duplicates in other formats (*.bin beside safetensors,
// Meta's original/*.pth, GGUF, ONNX, Flax) and anything in a subfolder are left on the Hub.

export interface TreeFile {
  path: string;
  size: number;
  /** the git blob SHA-1 (the blob name for a file not in LFS) */
  oid: string;
  /** LFS files: the SHA-256 of the content (the blob name) and the real size */
  lfs?: { oid: string; size: number };
}

export interface Selection {
  files: TreeFile[];
  /** the weight format chosen, or none (--config-only, or a repository without weights) */
  weights: 'safetensors' | 'bin' | 'pt' | 'none';
  /** files left out on purpose, with why (shown under --verbose and in --json) */
  skipped: Array<{ path: string; why: string }>;
  /** what the index names that the tree does not hold: an incomplete repository */
  missing: string[];
}

export const SAFETENSORS_INDEX = 'model.safetensors.index.json';
const BIN_INDEX = 'pytorch_model.bin.index.json';
const WEIGHT = /\.(safetensors|bin|pth|pt|ckpt|h5|msgpack|onnx|onnx_data|gguf|ot|tflite|npz)$/i;
/** Root files that are not needed to load the model (and the repository's own git bookkeeping). */
const NOT_LOADED = /^(\.gitattributes|\.gitignore)$/;

const isRoot = (p: string) => !p.includes('/');

/** The shard names of a safetensors (or bin) index: the values of weight_map. Throws on a malformed index. */
export function indexShards(index: unknown, file = SAFETENSORS_INDEX): string[] {
  const map = (index as { weight_map?: unknown } | null)?.weight_map;
  if (typeof map !== 'object' || map === null || Array.isArray(map)) throw new Error(`${file}: no weight_map object`);
  const shards = new Set<string>();
  for (const v of Object.values(map)) {
    if (typeof v !== 'string' || !v) throw new Error(`${file}: a weight_map value is not a file name`);
    shards.add(v);
  }
  return [...shards].sort();
}

/**
 * The files to fetch. `index` is the parsed model.safetensors.index.json when the tree has one (the
 * caller reads it first, since only it names the shards); `configOnly` keeps the non-weight files.
 */
export function selectFiles(
  tree: TreeFile[],
  opts: { configOnly?: boolean; index?: unknown; binIndex?: unknown } = {},
): Selection {
  const skipped: Selection['skipped'] = [];
  const keep: TreeFile[] = [];
  const weights: TreeFile[] = [];
  for (const f of tree) {
    if (!isRoot(f.path)) skipped.push({ path: f.path, why: 'not in the repository root (vLLM loads the root)' });
    else if (NOT_LOADED.test(f.path)) skipped.push({ path: f.path, why: 'git metadata' });
    else if (WEIGHT.test(f.path)) weights.push(f);
    else keep.push(f);
  }
  const byName = new Map(weights.map((f) => [f.path, f]));
  const st = weights.filter((f) => /\.safetensors$/i.test(f.path));
  const bin = weights.filter((f) => /\.bin$/i.test(f.path));
  const pt = weights.filter((f) => /\.pt$/i.test(f.path));
  let chosen: TreeFile[] = [];
  let kind: Selection['weights'] = 'none';
  const missing: string[] = [];
  const fromIndex = (index: unknown, file: string, pool: TreeFile[]) => {
    const names = indexShards(index, file);
    for (const n of names) if (!byName.has(n)) missing.push(n);
    const wanted = new Set(names);
    return pool.filter((f) => wanted.has(f.path));
  };
  if (st.length) {
    kind = 'safetensors';
    chosen = opts.index !== undefined ? fromIndex(opts.index, SAFETENSORS_INDEX, st) : st;
  } else if (bin.length) {
    kind = 'bin';
    chosen = opts.binIndex !== undefined ? fromIndex(opts.binIndex, BIN_INDEX, bin) : bin;
  } else if (pt.length) {
    kind = 'pt';
    chosen = pt;
  }
  const chosenSet = new Set(chosen.map((f) => f.path));
  for (const w of weights) {
    if (chosenSet.has(w.path)) continue;
    const why =
      kind === 'safetensors' && /\.safetensors$/i.test(w.path)
        ? `not named by ${SAFETENSORS_INDEX}`
        : `another weight format (${kind} is loaded)`;
    skipped.push({ path: w.path, why });
  }
  // The index of a format not loaded is noise too (pytorch_model.bin.index.json beside safetensors).
  const files = keep.filter((f) => {
    if (kind === 'safetensors' && f.path === BIN_INDEX) {
      skipped.push({ path: f.path, why: 'the index of the .bin files (safetensors are loaded)' });
      return false;
    }
    return true;
  });
  if (opts.configOnly) {
    for (const w of chosen) skipped.push({ path: w.path, why: '--config-only' });
    return { files: sortFiles(files), weights: 'none', skipped, missing };
  }
  return { files: sortFiles([...files, ...chosen]), weights: kind, skipped, missing };
}

const sortFiles = (fs: TreeFile[]) => fs.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));

/** The size on disk of a tree entry (an LFS file's listed size is its real size on the Hub's tree API). */
export const fileSize = (f: TreeFile) => f.lfs?.size ?? f.size;

/**
 * A listing checked whole before any byte is written: one path listed twice (two entries would race
 * for one snapshot link, or write one blob from two answers), or one blob name listed with two sizes
 * (the file could match neither), is the server's error. Returns the reason, or undefined. Pure.
 */
export function checkListing(tree: TreeFile[]): string | undefined {
  const paths = new Set<string>();
  const sizes = new Map<string, number>();
  for (const f of tree) {
    if (paths.has(f.path)) return `${JSON.stringify(f.path).slice(0, 200)} is listed twice`;
    paths.add(f.path);
    const blob = f.lfs?.oid ?? f.oid;
    const size = fileSize(f);
    const had = sizes.get(blob);
    if (had !== undefined && had !== size)
      return `the blob ${blob} is listed with two sizes (${had} and ${size} bytes)`;
    sizes.set(blob, size);
  }
  return undefined;
}
