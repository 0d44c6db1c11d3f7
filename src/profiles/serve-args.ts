// The serve settings that change memory, wherever they were written: the profile's engine fields (a shipped
// profile, an imported recipe, --set) and the vLLM flags of engine.extraArgs (a recipe's command, a user's own
// flags), which are rendered after the profile's and so win, as argparse's last value does. The plan reads the
// result, so `--quantization mxfp4` in extraArgs prices the same as engine.quantization: mxfp4. Pure.
import type { Profile } from './schema.js';
import { own } from '../util/own.js';

/**
 * A speculative decoding setting, as vLLM's SpeculativeConfig reads it (--speculative-config JSON, or
 * --spec-method/--spec-tokens).
 */
export interface SpecSetting {
  method: string;
  tokens?: number;
  model?: string;
  /** where it was written, for the plan's note */
  from: string;
}

interface MemorySettings {
  /** the profile with every memory flag of extraArgs folded into its engine and parallel blocks */
  profile: Profile;
  spec?: SpecSetting;
  /** field of the profile a flag set -> the extraArgs entry that set it, so a problem names what the user wrote */
  setBy: Record<string, string>;
  /** a flag whose value the plan cannot read: it states no figure rather than ignore the flag */
  unreadable?: { field: string; why: string };
}

type Fold = { field: string; apply: (p: Profile, v: string | true) => string | undefined };

const int = (v: string | true) => {
  if (v === true) return undefined;
  // vLLM's human-readable integers (--max-model-len 32k, 1M: config/utils.py human_readable_int): k/m/g = 10^3.., K/M/G
  // = 2^10..
  const m = /^(\d+(?:\.\d+)?)([kmgtKMGT]?)$/.exec(v.trim());
  if (!m) return undefined;
  const mult = m[2] ? (m[2] === m[2].toLowerCase() ? 1000 : 1024) ** ('kmgt'.indexOf(m[2].toLowerCase()) + 1) : 1;
  const n = Number(m[1]) * mult;
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
};

const FOLDS: Record<string, Fold> = {
  '--quantization': {
    field: 'engine.quantization',
    apply: (p, v) => (v === true ? 'a method name' : ((p.engine.quantization = v === 'None' ? null : v), undefined)),
  },
  '-q': { field: 'engine.quantization', apply: (p, v) => FOLDS['--quantization']!.apply(p, v) },
  '--kv-cache-dtype': {
    field: 'engine.kvCacheDtype',
    apply: (p, v) =>
      v === true ? 'a dtype' : ((p.engine.kvCacheDtype = v as Profile['engine']['kvCacheDtype']), undefined),
  },
  '--dtype': {
    field: 'engine.dtype',
    apply: (p, v) => (v === true ? 'a dtype' : ((p.engine.dtype = v as Profile['engine']['dtype']), undefined)),
  },
  '--max-model-len': { field: 'engine.maxModelLen', apply: (p, v) => set(v, (n) => (p.engine.maxModelLen = n)) },
  '--max-num-seqs': { field: 'engine.maxNumSeqs', apply: (p, v) => set(v, (n) => (p.engine.maxNumSeqs = n)) },
  '--max-num-batched-tokens': {
    field: 'engine.maxNumBatchedTokens',
    apply: (p, v) => set(v, (n) => (p.engine.maxNumBatchedTokens = n)),
  },
  '--kv-cache-memory-bytes': {
    field: 'engine.kvCacheMemoryBytes',
    apply: (p, v) => set(v, (n) => (p.engine.kvCacheMemoryBytes = n)),
  },
  '--block-size': {
    field: 'engine.blockSize',
    apply: (p, v) =>
      set(v, (n) => {
        p.engine.blockSize = n;
      }),
  },
  '--gpu-memory-utilization': {
    field: 'engine.gpuMemoryUtilization',
    apply: (p, v) => {
      const n = v === true ? Number.NaN : Number(v);
      if (!(n > 0 && n <= 1)) return 'a share in (0, 1]';
      p.engine.gpuMemoryUtilization = n;
    },
  },
  '--tensor-parallel-size': { field: 'parallel.tensor', apply: (p, v) => set(v, (n) => (p.parallel.tensor = n)) },
  '-tp': { field: 'parallel.tensor', apply: (p, v) => FOLDS['--tensor-parallel-size']!.apply(p, v) },
  '--pipeline-parallel-size': { field: 'parallel.pipeline', apply: (p, v) => set(v, (n) => (p.parallel.pipeline = n)) },
  '-pp': { field: 'parallel.pipeline', apply: (p, v) => FOLDS['--pipeline-parallel-size']!.apply(p, v) },
  '--enable-prefix-caching': {
    field: 'engine.enablePrefixCaching',
    apply: (p) => ((p.engine.enablePrefixCaching = true), undefined),
  },
  '--no-enable-prefix-caching': {
    field: 'engine.enablePrefixCaching',
    apply: (p) => ((p.engine.enablePrefixCaching = false), undefined),
  },
  '--enforce-eager': { field: 'engine.enforceEager', apply: (p) => ((p.engine.enforceEager = true), undefined) },
};

function set(v: string | true, put: (n: number) => string | undefined | number | void): string | undefined {
  const n = int(v);
  if (n === undefined) return 'a positive integer';
  const r = put(n);
  return typeof r === 'string' ? r : undefined;
}

const BARE = new Set(['--enable-prefix-caching', '--no-enable-prefix-caching', '--enforce-eager']);

/** Fold engine.extraArgs' memory flags into a copy of the profile; read the speculative setting. */
export function memorySettings(p: Profile): MemorySettings {
  const profile: Profile = structuredClone(p);
  const setBy: Record<string, string> = {};
  const out: MemorySettings = { profile, setBy };
  const args = p.engine.extraArgs;
  let specJson: { at: string; text: string } | undefined;
  const specFlags: Record<string, { at: string; v: string }> = {};
  let specKeys: { at: string; obj: Record<string, unknown> } | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (!a.startsWith('-')) continue;
    const eq = a.indexOf('=');
    const flag = eq > 0 ? a.slice(0, eq) : a;
    const at = `engine.extraArgs[${i}] (${flag})`;
    let value: string | true;
    if (eq > 0) value = a.slice(eq + 1);
    else if (BARE.has(flag)) value = true;
    else if (args[i + 1] !== undefined && !args[i + 1]!.startsWith('--')) value = args[++i]!;
    else value = true;
    if (flag === '--speculative-config' || flag === '-sc') {
      specJson = { at, text: value === true ? '' : value };
      continue;
    }
    // one key at a time (vLLM's "JSON keys passed individually"): --speculative-config.num_speculative_tokens 3
    const key = /^(?:--speculative-config|-sc)\.([A-Za-z_]\w*)$/.exec(flag)?.[1];
    if (key) {
      specKeys ??= { at, obj: {} };
      specKeys.obj[key] = value === true ? true : /^-?\d+$/.test(value) ? Number(value) : value;
      continue;
    }
    if (flag === '--spec-method' || flag === '--spec-tokens' || flag === '--spec-model') {
      specFlags[flag] = { at, v: value === true ? '' : value };
      continue;
    }
    const fold = own(FOLDS, flag);
    if (!fold) continue;
    const bad = fold.apply(profile, value);
    if (bad && !out.unreadable)
      out.unreadable = { field: at, why: `${JSON.stringify(value === true ? '' : value)} is not ${bad}` };
    setBy[fold.field] = at;
  }
  // vLLM merges the keys given one by one into the JSON given whole (later wins)
  if (specKeys) {
    let base: Record<string, unknown> = {};
    try {
      const j: unknown = specJson ? JSON.parse(specJson.text) : {};
      if (typeof j === 'object' && j !== null && !Array.isArray(j)) base = j as Record<string, unknown>;
    } catch {
      /* the whole JSON is unreadable: said below */
    }
    if (!specJson || Object.keys(base).length || specJson.text.trim() === '{}')
      specJson = { at: specJson?.at ?? specKeys.at, text: JSON.stringify({ ...base, ...specKeys.obj }) };
  }
  if (specJson) {
    const spec = parseSpec(specJson.text, specJson.at);
    if ('why' in spec) out.unreadable ??= spec;
    else out.spec = spec;
  } else if (specFlags['--spec-method']) {
    const tokens = int(specFlags['--spec-tokens']?.v ?? '');
    out.spec = {
      method: specFlags['--spec-method'].v,
      tokens,
      model: specFlags['--spec-model']?.v,
      from: specFlags['--spec-method'].at,
    };
  }
  return out;
}

function parseSpec(text: string, at: string): SpecSetting | { field: string; why: string } {
  let j: unknown;
  try {
    j = JSON.parse(text);
  } catch {
    return {
      field: at,
      why: `${JSON.stringify(text.slice(0, 60))} is not JSON (vLLM reads --speculative-config as a JSON object)`,
    };
  }
  if (typeof j !== 'object' || j === null || Array.isArray(j)) return { field: at, why: 'not a JSON object' };
  const o = j as Record<string, unknown>;
  const method = typeof o.method === 'string' ? o.method : typeof o.model === 'string' ? 'draft_model' : undefined;
  if (!method) return { field: at, why: 'neither a method nor a draft model' };
  const tokens =
    typeof o.num_speculative_tokens === 'number' &&
    Number.isSafeInteger(o.num_speculative_tokens) &&
    o.num_speculative_tokens > 0
      ? o.num_speculative_tokens
      : undefined;
  return { method, tokens, model: typeof o.model === 'string' ? o.model : undefined, from: at };
}

/**
 * Methods that draft from the checkpoint's own MTP / next-n layers (vLLM's SpeculativeConfig: the *_mtp methods and
 * "mtp").
 */
export const isMtpMethod = (m: string) => m === 'mtp' || m.endsWith('_mtp');
/** Methods that keep no weights or KV of their own: n-gram and suffix lookups. */
export const isFreeMethod = (m: string) => m === 'ngram' || m === 'ngram_gpu' || m === 'suffix';
