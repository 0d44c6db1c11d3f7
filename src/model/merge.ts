// The model facts a plan uses: what the model's own config.json says, with the profile's `model:`
// facts as overrides. Where both exist and differ, the profile wins and a warning names the field,
// both values and the file. Where no config is on the host, the profile's facts stand alone and the
// plan says so. Pure.
import type { ModelFacts } from './facts.js';
import type { ModelRead } from './read.js';

/** The profile fields that are model facts (schema.ts ModelBlock), and the config.json key each mirrors. */
const FACT_FIELDS = {
  parameters: 'parameter count',
  layers: 'num_hidden_layers',
  kvLayers: 'full-attention layers (layer_types)',
  attentionHeads: 'num_attention_heads',
  kvHeads: 'num_key_value_heads',
  headDim: 'head_dim',
  hiddenSize: 'hidden_size',
  maxContext: 'max_position_embeddings',
  weightBytesPerParam: 'weight bytes per parameter',
} as const;
export type FactField = keyof typeof FACT_FIELDS;

type ProfileFacts = Partial<Record<FactField, number>>;

type FactSource = 'config' | 'profile';

export interface ResolvedModel {
  facts: ModelFacts;
  /** where each fact the planner uses came from */
  sources: Record<FactField, FactSource>;
  /** the config.json read, when there was one */
  file?: string;
  /** one line for the plan: where the facts came from */
  note: string;
}

interface FactProblem {
  path: string;
  message: string;
  severity: 'error' | 'warning';
  fix?: string;
}

const REQUIRED: FactField[] = ['parameters', 'layers', 'attentionHeads', 'kvHeads', 'headDim', 'maxContext'];
// Counted parameters are an estimate from the shapes (norms, biases left out); within this share they agree.
const TOLERANCE: Partial<Record<FactField, number>> = { parameters: 0.1, weightBytesPerParam: 0.1 };

/** The profile's facts alone as ModelFacts (dense attention, every layer full unless kvLayers says less). */
export function factsFromProfile(m: ProfileFacts): ModelFacts | undefined {
  if (REQUIRED.some((k) => m[k] === undefined)) return undefined;
  const layers = m.layers!;
  const kvLayers = m.kvLayers ?? layers;
  return {
    parameters: m.parameters!,
    layers,
    attention: m.kvHeads === m.attentionHeads ? 'mha' : 'gqa',
    kvLayers,
    slidingLayers: 0,
    linearLayers: layers - kvLayers,
    attentionHeads: m.attentionHeads!,
    kvHeads: m.kvHeads!,
    headDim: m.headDim!,
    hiddenSize: m.hiddenSize,
    maxContext: m.maxContext!,
    weightBytesPerParam: m.weightBytesPerParam ?? 2,
  };
}

function differs(field: FactField, a: number, b: number): boolean {
  const tol = TOLERANCE[field];
  return tol ? Math.abs(a - b) > tol * Math.max(a, b) : a !== b;
}

const show = (field: FactField, v: number) =>
  field === 'parameters'
    ? v.toExponential(2)
    : field === 'weightBytesPerParam'
      ? String(Math.round(v * 100) / 100)
      : String(v);

/** What the file says for a profile field (undefined when the file does not say it). */
function fileValue(f: ModelFacts, field: FactField): number | undefined {
  if (field === 'kvLayers') return f.kvLayers + f.slidingLayers;
  return f[field];
}

/**
 * config facts + profile overrides -> the facts a plan uses, their sources, and the problems:
 * a warning per fact that differs, an error when neither the host nor the profile has the facts.
 */
export function resolveModelFacts(
  profileFacts: ProfileFacts,
  read: ModelRead | undefined,
  where: { id?: string; path?: string; name: string },
): { model?: ResolvedModel; problems: FactProblem[] } {
  const problems: FactProblem[] = [];
  const fromFile = read?.facts;
  const sources = {} as Record<FactField, FactSource>;
  if (!fromFile) {
    const facts = factsFromProfile(profileFacts);
    const why =
      read?.error ??
      (read?.searched.length
        ? `no config.json on this host (looked at ${read.searched.join(', ')})`
        : 'the model files were not read');
    if (!facts) {
      const missing = REQUIRED.filter((k) => profileFacts[k] === undefined).map((k) => `model.${k}`);
      problems.push({
        path: 'model',
        severity: 'error',
        message: `the model's facts are unknown: ${why}, and the profile does not give ${missing.join(', ')}`,
        fix: unknownFactsFix(where, read, missing),
      });
      return { problems };
    }
    for (const k of Object.keys(FACT_FIELDS) as FactField[]) sources[k] = 'profile';
    return { model: { facts, sources, note: `model facts from the profile (${why})` }, problems };
  }
  const facts: ModelFacts = { ...fromFile };
  let overridden = 0;
  for (const k of Object.keys(FACT_FIELDS) as FactField[]) {
    const mine = profileFacts[k];
    const theirs = fileValue(fromFile, k);
    sources[k] = 'config';
    if (mine === undefined) continue;
    if (theirs !== undefined && !differs(k, mine, theirs)) continue;
    sources[k] = 'profile';
    overridden++;
    if (theirs !== undefined)
      problems.push({
        path: `model.${k}`,
        severity: 'warning',
        message: `the profile says ${show(k, mine)}, ${read!.file} says ${show(k, theirs)} (${FACT_FIELDS[k]}); the profile's value is used`,
        fix: `remove model.${k} from the profile to use the model's own value`,
      });
    applyOverride(facts, k, mine);
  }
  const note = `model facts from ${read!.file}${overridden ? ` (${overridden} overridden by the profile)` : ''}`;
  return { model: { facts, sources, file: read!.file, note }, problems };
}

/**
 * The fix for facts nobody gave. A local folder (model.path) is never downloaded: the fix names the
 * folder and what it lacks (its config.json); only a hub id is something to pull.
 */
function unknownFactsFix(
  where: { id?: string; path?: string; name: string },
  read: ModelRead | undefined,
  missing: string[],
): string {
  const write = `or write ${missing.join(', ')} into the profile`;
  if (where.path) {
    const file = read?.file ?? `${where.path.replace(/\/+$/, '')}/config.json`;
    const pull = where.id
      ? `; sparkctl pull ${where.id} --config-only puts one in the cache, then point model.path at that snapshot or remove model.path`
      : '';
    return `model.path is ${where.path}: it needs the model's config.json (${file}${read?.error ? ', readable and a regular file' : ''})${pull}; put it there, point model.path at the folder that has it, ${write}`;
  }
  if (where.id)
    return `download it first (sparkctl pull ${where.id} --config-only is enough to plan), set model.path to the folder with its config.json, ${write}`;
  return `set model.id (a Hugging Face id) or model.path (the folder with its config.json), ${write}`;
}

function applyOverride(f: ModelFacts, k: FactField, v: number): void {
  // A profile that overrides the layer facts replaces the config's layout with its own counts.
  if (k === 'kvLayers' || k === 'kvHeads' || k === 'headDim' || k === 'layers') f.layout = undefined;
  if (k === 'kvLayers') {
    // The profile's count of layers with a KV cache; the rest hold no per-token cache.
    f.kvLayers = v;
    f.slidingLayers = 0;
    f.linearLayers = Math.max(0, f.layers - v);
    return;
  }
  if (k === 'weightBytesPerParam') {
    f.weightBytesPerParam = v;
    f.weightBytes = undefined;
    return;
  }
  if (k === 'parameters') f.weightBytes = undefined;
  (f as unknown as Record<string, number>)[k] = v;
  if (k === 'kvHeads' || k === 'attentionHeads')
    f.attention = f.mla ? 'mla' : f.kvHeads === f.attentionHeads ? 'mha' : 'gqa';
}
