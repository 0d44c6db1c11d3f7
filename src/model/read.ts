// Finding a model's files on this host (a folder, or the Hugging Face cache for a hub id) and reading
// them through the Host, offline and with one deadline for the whole read. Never downloads.
import { join } from 'node:path';
import { homedir } from 'node:os';
import type { Host } from '../host/host.js';
import { parseModelConfig, ModelConfigError, type ModelFacts } from './facts.js';
import { FileRefused, READ_LIMITS } from '../util/read.js';
import { parsePythonJson } from './json.js';

export type ModelReader = Pick<Host, 'readFile' | 'env'>;

// Real configs are a few KiB, an index lists every tensor (a few MiB for the largest models), a ref is a hash.
const CONFIG_MAX = READ_LIMITS.config;
const INDEX_MAX = READ_LIMITS.index;
const REF_MAX = 4096;

/** A read that may be refused for what the file is (a FIFO, a device, too large): the reason, not a silent "absent". */
async function readOr(host: ModelReader, file: string, max: number): Promise<{ text: string | null; refused?: string }> {
  try {
    return { text: await host.readFile(file, max) };
  } catch (e) {
    if (e instanceof FileRefused) return { text: null, refused: e.message };
    throw e;
  }
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
    return await Promise.race([p, new Promise<never>((_, rej) => (timer = setTimeout(() => rej(new Error(`${what}: no answer within ${ms} ms`)), ms)))]);
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
  // A host that does not bound its reads (a bundle): anything this large is not a config (and JSON.parse of it would stall the plan).
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
  try {
    out.facts = parseModelConfig(cfg, index);
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

/** Read the model's config from model.path, or from the HF cache for model.id. Never throws for a missing or bad file. */
export async function readModel(host: ModelReader, where: { id?: string; path?: string }, opts: { timeoutMs?: number } = {}): Promise<ModelRead> {
  const out: ModelRead = { searched: [] };
  try {
    await withDeadline(locate(host, where, out), opts.timeoutMs ?? 2000, 'reading the model files');
  } catch (e) {
    out.error = (e as Error).message;
  }
  return out;
}
