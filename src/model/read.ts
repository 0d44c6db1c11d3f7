// Finding a model's files on this host (a folder, or the Hugging Face cache for a hub id) and reading
// them through the Host, offline and with one deadline for the whole read. Never downloads.
import { join, basename } from 'node:path';
import { homedir } from 'node:os';
import { open, stat } from 'node:fs/promises';
import type { Host } from '../host/host.js';
import { parseModelConfig, ModelConfigError, type ModelFacts } from './facts.js';
import { FileRefused, READ_LIMITS } from '../util/read.js';
import { parsePythonJson } from './json.js';
import { isMtpTensor } from './modules.js';
import {
  parseSafetensorsHeader,
  safetensorsHeaderLength,
  summarizeWeights,
  type SafetensorsHeader,
  type WeightSummary,
} from './safetensors.js';

/**
 * The host reads text with a bound (util/read.ts); a real host's shard headers are read here, bounded, from regular
 * files only.
 */
export type ModelReader = Pick<Host, 'readFile' | 'env'> & { kind?: Host['kind'] };

// Real configs are a few KiB, an index lists every tensor (a few MiB for the largest models), a ref is a hash.
const CONFIG_MAX = READ_LIMITS.config;
const INDEX_MAX = READ_LIMITS.index;
const REF_MAX = 4096;
// Shards whose headers are read (a 1T-parameter checkpoint has about 200); past this the index's total_size stands
// alone.
const MAX_SHARDS = 512;
// A shard's header is a few hundred KiB at most in real checkpoints; the format allows 100 MB.
const HEADER_MAX_BYTES = 32 * 1024 * 1024;

/** A read that may be refused for what the file is (a FIFO, a device, too large): the reason, not a silent "absent". */
async function readOr(
  host: ModelReader,
  file: string,
  max: number,
): Promise<{ text: string | null; refused?: string }> {
  try {
    return { text: await host.readFile(file, max) };
  } catch (e) {
    if (e instanceof FileRefused) return { text: null, refused: e.message };
    throw e;
  }
}

/** The first bytes of a regular file, at most `length`. */
async function readHead(path: string, length: number): Promise<Uint8Array | null> {
  const st = await stat(path).catch(() => null);
  if (!st?.isFile()) return null;
  const fh = await open(path, 'r');
  try {
    const buf = new Uint8Array(Math.min(length, st.size));
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/** One shard's header from a local file: 8 bytes, then the header (bounded). */
async function shardHeader(path: string): Promise<SafetensorsHeader | { error: string } | null> {
  const first = await readHead(path, 8);
  if (!first) return null;
  try {
    const n = safetensorsHeaderLength(first);
    if (n > HEADER_MAX_BYTES) return { error: `${path}: a ${n}-byte header is past the ${HEADER_MAX_BYTES} read here` };
    const head = await readHead(path, 8 + n);
    return head ? parseSafetensorsHeader(head) : null;
  } catch (e) {
    return { error: `${path}: ${(e as Error).message}` };
  }
}

/** num_hidden_layers of the text model (for telling MTP layers apart in the tensor names). */
function numLayers(cfg: Record<string, unknown>): number | undefined {
  for (const c of [cfg.text_config, cfg.llm_config, cfg.language_config, cfg]) {
    const n = typeof c === 'object' && c !== null ? (c as Record<string, unknown>).num_hidden_layers : undefined;
    if (typeof n === 'number' && Number.isSafeInteger(n) && n > 0) return n;
  }
  return undefined;
}

/**
 * The shards' headers (the index's weight_map, or model.safetensors alone): exact weight bytes and dtypes, and what the
 * MTP tensors take.
 */
async function readWeights(
  host: ModelReader,
  dir: string,
  index: unknown,
  layers?: number,
): Promise<(WeightSummary & { mtpBytes?: number }) | undefined> {
  if (host.kind !== 'real') return undefined;
  const map = typeof index === 'object' && index !== null ? (index as { weight_map?: unknown }).weight_map : undefined;
  const files =
    typeof map === 'object' && map !== null
      ? [...new Set(Object.values(map as Record<string, unknown>).filter((f): f is string => typeof f === 'string'))]
      : index === undefined
        ? ['model.safetensors']
        : [];
  // a shard name is a file in this folder, never a path that walks out of it
  if (!files.length || files.length > MAX_SHARDS || files.some((f) => basename(f) !== f || !f.endsWith('.safetensors')))
    return undefined;
  const headers: SafetensorsHeader[] = [];
  for (const f of files) {
    const h = await shardHeader(join(dir, f));
    if (!h || 'error' in h) return undefined; // a shard not downloaded, or unreadable: the index's total_size stands
    headers.push(h);
  }
  // vLLM's main model does not load MTP / next-n layers (deepseek_v2.py, qwen3_5.py load_weights skip them)
  let mtpBytes = 0;
  if (layers)
    for (const h of headers)
      for (const [n, t] of Object.entries(h.tensors)) if (isMtpTensor(n, layers)) mtpBytes += t.bytes;
  return { ...summarizeWeights(headers), mtpBytes };
}

export interface ModelRead {
  /** the facts, when a config.json was found and parsed */
  facts?: ModelFacts;
  /** the folder the files were read from */
  dir?: string;
  /** the config.json that was read */
  file?: string;
  /** every place looked at, in order (for the "not found" note) */
  searched: string[];
  /** why the files that were found could not be used (unreadable, bad JSON, a missing field) */
  error?: string;
}

/** Where the Hugging Face cache keeps hub models, in the order huggingface_hub itself resolves it. */
export function hfCacheRoots(env: Record<string, string | undefined>): string[] {
  const roots: string[] = [];
  if (env.HF_HUB_CACHE) roots.push(env.HF_HUB_CACHE);
  if (env.HF_HOME) roots.push(join(env.HF_HOME, 'hub'));
  const home = env.HOME ?? homedir();
  roots.push(join(env.XDG_CACHE_HOME ?? join(home, '.cache'), 'huggingface', 'hub'));
  return [...new Set(roots)];
}

/** "Qwen/Qwen3.5-9B" -> models--Qwen--Qwen3.5-9B (the cache's folder name). */
export function hubFolder(id: string): string {
  return `models--${id.split('/').join('--')}`;
}

export const isHubId = (s: string) => /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(s);

async function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>(
        (_, rej) => (timer = setTimeout(() => rej(new Error(`${what}: no answer within ${ms} ms`)), ms)),
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function readDir(host: ModelReader, dir: string, out: ModelRead): Promise<boolean> {
  const file = join(dir, 'config.json');
  out.searched.push(file);
  const { text, refused } = await readOr(host, file, CONFIG_MAX);
  if (refused) {
    out.dir = dir;
    out.file = file;
    out.error = refused;
    return true;
  }
  if (text === null) return false;
  out.dir = dir;
  out.file = file;
  // A host that does not bound its reads (a bundle): anything this large is not a config (and JSON.parse of it would
  // stall the plan).
  if (text.length > CONFIG_MAX) {
    out.error = `${file}: ${text.length} bytes is not a model config (they are a few KiB)`;
    return true;
  }
  let cfg: unknown;
  try {
    cfg = parsePythonJson(text);
  } catch (e) {
    out.error = `${file}: not valid JSON (${(e as Error).message})`;
    return true;
  }
  // A refused or oversized index only loses the weight size; the config still counts.
  const indexText = (await readOr(host, join(dir, 'model.safetensors.index.json'), INDEX_MAX)).text;
  let index: unknown;
  if (indexText !== null && indexText.length < INDEX_MAX) {
    try {
      index = parsePythonJson(indexText);
    } catch {
      index = undefined; // a bad index only loses the weight size; the config still counts
    }
  }
  // hf_quant_config.json (ModelOpt <= 0.29): vLLM reads it only when config.json has no quantization_config
  // (transformers_utils/config.py)
  const hasQc =
    typeof cfg === 'object' && cfg !== null && ('quantization_config' in cfg || 'compression_config' in cfg);
  let hfQuantConfig: unknown;
  if (!hasQc) {
    const q = (await readOr(host, join(dir, 'hf_quant_config.json'), CONFIG_MAX)).text;
    if (q !== null && q.length < CONFIG_MAX) {
      try {
        hfQuantConfig = parsePythonJson(q);
      } catch (e) {
        out.error = `${join(dir, 'hf_quant_config.json')}: not valid JSON (${(e as Error).message}); vLLM would refuse it too`;
        return true;
      }
    }
  }
  const map = typeof index === 'object' && index !== null ? (index as { weight_map?: unknown }).weight_map : undefined;
  const weightNames = typeof map === 'object' && map !== null ? Object.keys(map) : undefined;
  const layers = typeof cfg === 'object' && cfg !== null ? numLayers(cfg as Record<string, unknown>) : undefined;
  const weights = await readWeights(host, dir, indexText !== null ? (index ?? null) : undefined, layers);
  try {
    out.facts = parseModelConfig(cfg, index, weights, { hfQuantConfig, weightNames });
  } catch (e) {
    if (!(e instanceof ModelConfigError)) throw e;
    out.error = `${file}: ${e.message}`;
  }
  return true;
}

async function locate(host: ModelReader, where: { id?: string; path?: string }, out: ModelRead): Promise<void> {
  if (where.path) {
    await readDir(host, where.path, out);
    return;
  }
  if (!where.id || !isHubId(where.id)) return;
  for (const root of hfCacheRoots(host.env())) {
    const base = join(root, hubFolder(where.id));
    const refFile = join(base, 'refs', 'main');
    out.searched.push(refFile);
    const read = await readOr(host, refFile, REF_MAX);
    if (read.refused) {
      out.error = read.refused;
      return;
    }
    const ref = read.text?.trim();
    // A commit hash only: refs/main is a file anyone could write; it must not walk out of snapshots/.
    if (!ref || !/^[0-9a-f]{7,64}$/i.test(ref)) continue;
    if (await readDir(host, join(base, 'snapshots', ref), out)) return;
  }
}

/**
 * Read the model's config from model.path, or from the HF cache for model.id. Never throws for a missing or bad file.
 */
export async function readModel(
  host: ModelReader,
  where: { id?: string; path?: string },
  opts: { timeoutMs?: number } = {},
): Promise<ModelRead> {
  const out: ModelRead = { searched: [] };
  try {
    await withDeadline(locate(host, where, out), opts.timeoutMs ?? 2000, 'reading the model files');
  } catch (e) {
    out.error = (e as Error).message;
  }
  return out;
}
