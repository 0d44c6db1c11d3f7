// Where the model is, told to every node (pure). On one host vLLM inherits sparkctl's environment, so
// it reads the Hugging Face cache sparkctl checked; over nodes every rank (the head's too) starts from
// an ssh login, which has its own HOME and none of sparkctl's variables: a rank then looked in its
// login's default cache, and either downloaded the model again or failed, while `pull --nodes` had
// put it at the path of this host's cache ("the same path is used on every node", model-sync.ts).
// So everything the head resolved that a rank's vLLM reads a path or a switch from is rendered into
// every node's launch, the same for the native launch and Ray, on the host and in a container:
//  - HF_HUB_CACHE: this host's hub cache, resolved as huggingface_hub resolves it (HF_HUB_CACHE, else
//    HF_HOME/hub, else XDG_CACHE_HOME or ~/.cache/huggingface/hub: model/cache.ts hubCacheDir), which
//    huggingface_hub reads before HF_HOME (constants.py), so HF_HOME itself is not sent: its other
//    content (the token file) is not the ranks' business;
//  - HF_HUB_OFFLINE=1 when the model is whole in that cache (serve's gate, as on one host);
//  - model.path: by its absolute path on this host (a relative one would mean the login's home), the
//    name clients use kept with --served-model-name;
//  - folders the profile's env names (vLLM's and torch's caches, HF_HOME, ...) are sent as they are
//    (they were already in the profile's env; a container now mounts them at the same path).
// A container gets every such folder mounted at the same path: the model read-only, cache folders
// read-write. No secret is among these: HF_TOKEN is never sent (the gate makes a rank's download the
// exception; a profile's env may not carry it: profiles/validate.ts).
import { isAbsolute, resolve } from 'node:path';
import type { Profile } from '../../profiles/schema.js';
import { hubCacheDir } from '../../model/cache.js';
import { CACHE_VARS } from '../caches.js';

/** Variables of a profile's env that name a folder a rank reads or writes (mounted in a container at the same path). */
const FOLDER_VARS = new Set([
  ...CACHE_VARS.map(([name]) => name),
  'HF_HOME',
  'HF_HUB_CACHE',
  'HUGGINGFACE_HUB_CACHE',
  'HF_MODULES_CACHE',
  'TRANSFORMERS_CACHE',
  'VLLM_CONFIG_ROOT',
  'VLLM_ASSETS_CACHE',
  'XDG_CACHE_HOME',
]);
/** Of those, the ones a rank writes into (the rest are mounted read-only). */
const WRITTEN = new Set([
  ...CACHE_VARS.map(([name]) => name),
  'HF_MODULES_CACHE',
  'VLLM_ASSETS_CACHE',
  'XDG_CACHE_HOME',
  'VLLM_CONFIG_ROOT',
]);

export interface NodeModel {
  /** set for every rank, on every node */
  env: Record<string, string>;
  /** what a container on a node mounts, at the same path */
  mounts: Array<{ path: string; readOnly: boolean; why: string }>;
  /** model.path as every node reads it (absolute) */
  modelPath?: string;
  /** one line each, for the dry run */
  notes: string[];
}

interface NodeModelInputs {
  /** sparkctl's environment here (where pull and pull --nodes put the model) */
  env: Record<string, string | undefined>;
  /** sparkctl's working folder (a relative model.path is relative to it, as on one host) */
  cwd: string;
  /** the model is whole in this host's cache (serve's gate): the ranks must not reach the network for it */
  offline?: boolean;
  /**
   * the container runtime with its own container.hfCache: the node's folder is mounted as the container's cache instead
   */
  containerHfCache?: boolean;
}

export function nodeModel(p: Profile, x: NodeModelInputs): NodeModel {
  const out: NodeModel = { env: {}, mounts: [], notes: [] };
  if (p.model.path) {
    const abs = resolve(x.cwd, p.model.path);
    out.modelPath = abs;
    out.mounts.push({ path: abs, readOnly: true, why: 'model.path' });
    out.notes.push(
      `the model folder ${abs} is read at that path on every node (pull --nodes does not copy a folder; preflight --nodes checks it: nodes.model-path)`,
    );
  } else if (p.model.id) {
    if (x.containerHfCache) {
      out.notes.push(
        `the model ${p.model.id} is read from container.hfCache (${p.container!.hfCache}) on every node, mounted as the container's cache`,
      );
    } else if (p.env.HF_HUB_CACHE === undefined && p.env.HUGGINGFACE_HUB_CACHE === undefined) {
      const hub = hubCacheDir(x.env);
      out.env.HF_HUB_CACHE = hub;
      out.mounts.push({ path: hub, readOnly: true, why: 'HF_HUB_CACHE' });
      out.notes.push(
        `the model ${p.model.id} is read from HF_HUB_CACHE=${hub} on every node: this host's cache, where pull --nodes copies it`,
      );
    }
  }
  if (x.offline && p.env.HF_HUB_OFFLINE === undefined) {
    out.env.HF_HUB_OFFLINE = '1';
    out.notes.push(
      'HF_HUB_OFFLINE=1 on every node: the model is whole in the cache here, so no rank reaches the Hub for it',
    );
  }
  for (const [k, v] of Object.entries(p.env)) {
    if (!FOLDER_VARS.has(k) || typeof v !== 'string' || !isAbsolute(v)) continue;
    if (!out.mounts.some((m) => m.path === v)) out.mounts.push({ path: v, readOnly: !WRITTEN.has(k), why: `env ${k}` });
  }
  return out;
}

/**
 * A rank's argv with the model by its absolute path: `argv[at]` is the model argument (after
 * `serve`); the name clients use stays the one the profile gave.
 */
export function withAbsoluteModel(
  argv: string[],
  at: number,
  given: string | undefined,
  abs: string | undefined,
): string[] {
  if (!given || !abs || given === abs || argv[at] !== given) return argv;
  const named = argv.includes('--served-model-name');
  return [...argv.slice(0, at), abs, ...(named ? [] : ['--served-model-name', given]), ...argv.slice(at + 1)];
}
