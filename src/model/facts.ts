// A model's architecture, as the memory planner and validation need it, parsed from the files a
// checkpoint ships (config.json, model.safetensors.index.json). Pure: the reading is in read.ts.
// What vLLM itself tells apart is kept apart here: dense MHA/GQA, MoE, MLA (DeepSeek's latent KV),
// sliding-window layers, and linear-attention layers (Gated DeltaNet) that hold a per-sequence state.
import { readLayout, type Layout, type NotModelled, type LayerCache } from './layout.js';

export type AttentionKind = 'mha' | 'gqa' | 'mla';

export interface ModelFacts {
  architecture?: string;
  modelType?: string;
  /** total parameters (counted from the shapes, or from the weight bytes and dtype) */
  parameters: number;
  /** bytes of the checkpoint's weights (safetensors index metadata.total_size) when known */
  weightBytes?: number;
  layers: number;
  attention: AttentionKind;
  /** layers with a full-attention KV cache (every token of the context) */
  kvLayers: number;
  /** layers with a sliding-window KV cache, and the window in tokens */
  slidingLayers: number;
  slidingWindow?: number;
  /** linear-attention layers: no KV cache per token, a fixed state per sequence */
  linearLayers: number;
  /** bytes of that state per sequence for the whole model at TP 1 (conv + recurrent state) */
  linearStateBytes?: number;
  attentionHeads: number;
  kvHeads: number;
  headDim: number;
  hiddenSize?: number;
  maxContext: number;
  /** MLA: the cached latent per token per layer is kvLoraRank + qkRopeHeadDim values, not 2 x heads x headDim */
  mla?: { kvLoraRank: number; qkRopeHeadDim: number };
  moe?: { experts: number; expertsPerToken?: number };
  /** the checkpoint's dtype ("bfloat16") */
  dtype?: string;
  /** quantization_config.quant_method ("fp8", "mxfp4", "awq", ...) */
  quantization?: string;
  weightBytesPerParam: number;
  /** each layer's caches as vLLM's model class reads them (layout.ts), or the field that could not be read */
  layout?: Layout | NotModelled;
}

export class ModelConfigError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const posInt = (v: unknown): number | undefined => (typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' && v ? v : undefined);

const DTYPE_BYTES: Record<string, number> = { float32: 4, float: 4, float16: 2, half: 2, bfloat16: 2, float8_e4m3fn: 1, fp8: 1 };
const QUANT_BYTES: Record<string, number> = { fp8: 1, fbgemm_fp8: 1, modelopt: 1, mxfp4: 0.53, awq: 0.5, gptq: 0.5, bitsandbytes: 0.5, 'compressed-tensors': 1 };

/** The language model's part of a config: multimodal checkpoints nest it under text_config (or llm_config). */
export function textConfig(cfg: Json): Json {
  for (const k of ['text_config', 'llm_config', 'language_config']) {
    const inner = cfg[k];
    if (isObj(inner) && (posInt(inner.num_hidden_layers) || posInt(inner.num_layers))) return inner;
  }
  return cfg;
}

// A config.json is input from anywhere: numbers past these are not a model sparkctl can plan (and a
// layer count of 1e9 would make the parameter count loop for minutes).
const LIMITS: Record<string, number> = { num_hidden_layers: 10_000, num_attention_heads: 100_000, max_position_embeddings: 1e9, head_dim: 100_000 };

function need(c: Json, field: string, ...alts: string[]): number {
  for (const k of [field, ...alts]) {
    const v = posInt(c[k]);
    if (v === undefined) continue;
    const max = LIMITS[field] ?? 1e9;
    if (v > max) throw new ModelConfigError(field, `${field}: ${v} is beyond any model (at most ${max})`);
    return v;
  }
  throw new ModelConfigError(field, `${field}: ${c[field] === undefined ? 'missing' : JSON.stringify(c[field]).slice(0, 60)} (a positive integer)`);
}

/** The counts the profile-facing fields use: full (and chunked), sliding, and state (Mamba/GDN) or cache-less layers. */
function kindsOf(l: Layout): ('full' | 'sliding' | 'linear')[] {
  return l.layers.map((caches) => (caches.some((x) => x.kind === 'attention' && x.window) ? 'sliding' : caches.some((x) => x.kind === 'attention' || x.kind === 'mla') ? 'full' : 'linear'));
}

/** Per-layer attention kinds from layer_types, or from full_attention_interval (Qwen3-Next's own config). */
function layerKinds(c: Json, layers: number): ('full' | 'sliding' | 'linear')[] {
  const lt = c.layer_types;
  if (Array.isArray(lt) && lt.length === layers && lt.every((x) => typeof x === 'string')) {
    return lt.map((t) => (/linear|mamba|deltanet/.test(t as string) ? 'linear' : /sliding|local|chunked/.test(t as string) ? 'sliding' : 'full'));
  }
  const interval = posInt(c.full_attention_interval);
  if (interval) return Array.from({ length: layers }, (_, i) => ((i + 1) % interval === 0 ? 'full' : 'linear'));
  // Mistral-style: one window for every layer (use_sliding_window false switches it off, as in Qwen2/3)
  const window = posInt(c.sliding_window);
  if (window && c.use_sliding_window !== false) return Array.from({ length: layers }, () => 'sliding');
  return Array.from({ length: layers }, () => 'full');
}

/** Gated DeltaNet state per layer (vLLM's MambaSpec for it): conv state + recurrent state, in the model dtype. */
function linearStatePerLayer(c: Json, dtypeBytes: number): number | undefined {
  const kh = posInt(c.linear_num_key_heads);
  const vh = posInt(c.linear_num_value_heads);
  const kd = posInt(c.linear_key_head_dim);
  const vd = posInt(c.linear_value_head_dim);
  const conv = posInt(c.linear_conv_kernel_dim);
  if (!kh || !vh || !kd || !vd || !conv) return undefined;
  const convDim = 2 * kh * kd + vh * vd;
  return ((conv - 1) * convDim + vh * kd * vd) * dtypeBytes;
}

function countParameters(c: Json, f: { layers: number; heads: number; kvHeads: number; headDim: number; kinds: string[]; mla?: ModelFacts['mla']; experts?: number }): number | undefined {
  const h = posInt(c.hidden_size);
  const vocab = posInt(c.vocab_size);
  if (!h || !vocab) return undefined;
  const inter = posInt(c.intermediate_size) ?? 4 * h;
  const moeInter = posInt(c.moe_intermediate_size) ?? inter;
  const embed = vocab * h * (c.tie_word_embeddings === true ? 1 : 2);
  const attn = f.mla
    ? h * (posInt(c.q_lora_rank) ?? h) +
      h * (f.mla.kvLoraRank + f.mla.qkRopeHeadDim) +
      f.mla.kvLoraRank * f.heads * ((posInt(c.qk_nope_head_dim) ?? f.headDim) + (posInt(c.v_head_dim) ?? f.headDim)) +
      f.heads * (posInt(c.v_head_dim) ?? f.headDim) * h
    : 2 * h * f.heads * f.headDim + 2 * h * f.kvHeads * f.headDim;
  const shared = posInt(c.shared_expert_intermediate_size) ?? (posInt(c.n_shared_experts) ?? 0) * moeInter;
  const firstDense = posInt(c.first_k_dense_replace) ?? 0;
  let total = embed;
  for (let i = 0; i < f.layers; i++) {
    total += attn;
    const moeLayer = f.experts !== undefined && i >= firstDense;
    total += moeLayer ? 3 * h * moeInter * f.experts! + 3 * h * shared + h * f.experts! : 3 * h * inter;
  }
  return total;
}

/** config.json (+ the safetensors index's total_size) -> facts. Throws ModelConfigError naming the field. */
export function parseModelConfig(raw: unknown, index?: unknown): ModelFacts {
  if (!isObj(raw)) throw new ModelConfigError('(root)', 'config.json is not a JSON object');
  const c = textConfig(raw);
  // Nemotron-H may give its layers only as a pattern (transformers 5 derives num_hidden_layers from it)
  const patternLength = typeof c.hybrid_override_pattern === 'string' ? c.hybrid_override_pattern.length : Array.isArray(c.layers_block_type) ? c.layers_block_type.length : 0;
  const layers = c.num_hidden_layers === undefined && patternLength ? patternLength : need(c, 'num_hidden_layers', 'num_layers', 'n_layer');
  const heads = need(c, 'num_attention_heads', 'n_head');
  const kvHeads = posInt(c.num_key_value_heads) ?? heads;
  const hidden = posInt(c.hidden_size);
  const mlaRank = posInt(c.kv_lora_rank);
  const ropeDim = posInt(c.qk_rope_head_dim);
  const mla = mlaRank && ropeDim ? { kvLoraRank: mlaRank, qkRopeHeadDim: ropeDim } : undefined;
  const headDim = mla ? (posInt(c.qk_nope_head_dim) ?? 0) + ropeDim! : (posInt(c.head_dim) ?? (hidden ? Math.floor(hidden / heads) : need(c, 'head_dim')));
  const maxContext = need(c, 'max_position_embeddings', 'max_sequence_length', 'seq_length', 'n_positions');
  const layout = readLayout(c, layers);
  const kinds = layout && !('notModelled' in layout) ? kindsOf(layout) : layerKinds(c, layers);
  const dtype = str(c.dtype) ?? str(c.torch_dtype) ?? str(raw.dtype) ?? str(raw.torch_dtype);
  const qc = isObj(raw.quantization_config) ? raw.quantization_config : isObj(c.quantization_config) ? c.quantization_config : undefined;
  const quantization = qc ? str(qc.quant_method)?.toLowerCase() : undefined;
  const dtypeBytes = DTYPE_BYTES[dtype ?? 'bfloat16'] ?? 2;
  const expertCount = posInt(c.num_experts) ?? posInt(c.n_routed_experts) ?? posInt(c.num_local_experts);
  if (expertCount !== undefined && expertCount > 100_000) throw new ModelConfigError('num_experts', `num_experts: ${expertCount} is beyond any model (at most 100000)`);
  const experts = expertCount;
  const weightBytes = isObj(index) && isObj(index.metadata) ? posInt(index.metadata.total_size) : undefined;
  const bytesPerParam = quantization ? (QUANT_BYTES[quantization] ?? dtypeBytes) : dtypeBytes;
  const counted = countParameters(c, { layers, heads, kvHeads, headDim, kinds, mla, experts });
  const parameters = counted ?? (weightBytes ? weightBytes / bytesPerParam : undefined);
  if (!parameters) throw new ModelConfigError('hidden_size', 'hidden_size or vocab_size missing, and no model.safetensors.index.json to size the weights');
  const linearLayers = kinds.filter((k) => k === 'linear').length;
  const perLayerState = linearLayers ? linearStatePerLayer(c, dtypeBytes) : undefined;
  const slidingLayers = kinds.filter((k) => k === 'sliding').length;
  const window = 'layers' in layout ? layout.layers.flat().find((x): x is Extract<LayerCache, { kind: 'attention' }> => x.kind === 'attention' && !!x.window)?.window : undefined;
  return {
    architecture: Array.isArray(raw.architectures) ? str(raw.architectures[0]) : undefined,
    modelType: str(c.model_type) ?? str(raw.model_type),
    parameters,
    weightBytes,
    layers,
    attention: mla ? 'mla' : kvHeads === heads ? 'mha' : 'gqa',
    kvLayers: kinds.filter((k) => k === 'full').length,
    slidingLayers,
    slidingWindow: slidingLayers ? (window ?? posInt(c.sliding_window)) : undefined,
    linearLayers,
    linearStateBytes: perLayerState !== undefined ? perLayerState * linearLayers : undefined,
    attentionHeads: heads,
    kvHeads: mla ? 1 : kvHeads,
    headDim,
    hiddenSize: hidden,
    maxContext,
    mla,
    moe: experts ? { experts, expertsPerToken: posInt(c.num_experts_per_tok) } : undefined,
    dtype,
    quantization,
    weightBytesPerParam: weightBytes ? weightBytes / parameters : bytesPerParam,
    layout,
  };
}

/** KV-cache bytes per token for one full-attention layer at TP 1, before the KV dtype: values per token. */
export function kvValuesPerTokenPerLayer(f: Pick<ModelFacts, 'mla' | 'kvHeads' | 'headDim'>, tp = 1): number {
  // MLA's latent is shared by all heads and not split across TP ranks (each rank keeps it whole).
  if (f.mla) return f.mla.kvLoraRank + f.mla.qkRopeHeadDim;
  return 2 * Math.max(1, Math.floor(f.kvHeads / tp)) * f.headDim;
}
