// Which loader reads the weights (--load-format), chosen from what is installed beside the vLLM that
// runs, or pinned by the profile (engine.loadFormat). vLLM's default reads safetensors through the
// page cache; fastsafetensors (pip install fastsafetensors; vLLM's docs, "Loading models with
// fastsafetensors") reads the shards straight to the GPU, 12.4 -> 4.7 s in its authors' figures.
// auto picks it only where it can help and cannot hurt: its package is installed beside vLLM, the
// build is a GPU one (not a CPU build) and the profile runs on this host. Others (runai_streamer,
// instanttensor, tensorizer) are said when installed, and used only when pinned: they want settings
// of their own (object storage, a serialized model).
import { existsSync, readdirSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Python package folder -> the --load-format that uses it. */
const LOADERS: ReadonlyArray<readonly [pkg: RegExp, format: string]> = [
  [/^fastsafetensors$/, 'fastsafetensors'],
  [/^runai_model_streamer$/, 'runai_streamer'],
  [/^instanttensor$/i, 'instanttensor'],
  [/^tensorizer$/, 'tensorizer'],
];

/**
 * The load formats whose packages are installed in the Python environment of a vllm executable (undefined: not
 * readable).
 */
export function installedLoaders(vllmBin: string, path = process.env.PATH ?? ''): string[] | undefined {
  try {
    const bin = vllmBin.includes('/')
      ? vllmBin
      : path
          .split(':')
          .map((d) => join(d || '.', vllmBin))
          .find((f) => existsSync(f));
    if (!bin) return undefined;
    const venv = dirname(dirname(realpathSync(bin)));
    const lib = join(venv, 'lib');
    const out = new Set<string>();
    for (const py of readdirSync(lib).filter((n) => /^python3/.test(n))) {
      let names: string[];
      try {
        names = readdirSync(join(lib, py, 'site-packages'));
      } catch {
        continue;
      }
      for (const n of names) for (const [re, f] of LOADERS) if (re.test(n)) out.add(f);
    }
    return [...out].sort();
  } catch {
    return undefined;
  }
}

export interface LoaderChoice {
  /** the --load-format rendered; undefined: vLLM's own default */
  format?: string;
  /** the sentence that says it */
  note: string;
}

/**
 * packagesUnread: the runtime's reason the packages beside its vLLM are not read (RuntimeTraits.packagesUnread; a
 * container: the image's)
 */
export function chooseLoader(x: {
  pinned: string;
  installed?: string[];
  gpu: boolean;
  packagesUnread?: string;
  extraArgs: string[];
  engine: 'vllm' | 'sim';
}): LoaderChoice {
  if (x.extraArgs.some((a) => a === '--load-format' || a.startsWith('--load-format=')))
    return { note: 'loader: as engine.extraArgs says (--load-format there)' };
  if (x.pinned !== 'auto') return { format: x.pinned, note: `loader: ${x.pinned} (engine.loadFormat pins it)` };
  if (x.engine === 'sim') return { note: "loader: vLLM's default (the simulator reads no weights)" };
  if (x.packagesUnread)
    return { note: `loader: vLLM's default; ${x.packagesUnread} (engine.loadFormat pins one, e.g. fastsafetensors)` };
  const have = x.installed ?? [];
  const said =
    x.installed === undefined
      ? 'the Python packages beside vLLM could not be read'
      : have.length
        ? `installed: ${have.join(', ')}`
        : 'none of fastsafetensors, runai_streamer, instanttensor is installed beside vLLM';
  if (have.includes('fastsafetensors') && x.gpu)
    return {
      format: 'fastsafetensors',
      note: `loader: fastsafetensors (installed beside vLLM; engine.loadFormat: safetensors keeps vLLM's default)`,
    };
  return {
    note: `loader: vLLM's default (safetensors)${have.includes('fastsafetensors') && !x.gpu ? '; fastsafetensors is installed but this is a CPU build' : ''}; ${said}`,
  };
}
