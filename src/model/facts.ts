// A model's architecture, as the memory planner and validation need it, parsed from the files a
// checkpoint ships (config.json, model.safetensors.index.json). Pure: the reading is in read.ts.
// What vLLM itself tells apart is kept apart here: dense MHA/GQA, MoE, MLA (DeepSeek's latent KV),
// sliding-window layers, and linear-attention layers (Gated DeltaNet) that hold a per-sequence state.
import { readLayout, type Layout, type NotModelled, type LayerCache } from './layout.js';
import type { WeightSummary } from './safetensors.js';

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
  /** where weightBytes came from: the shards' safetensors headers (exact), the index's total_size, or counted from the config */
  weightsFrom?: 'shard headers' | 'index total_size' | 'config';
  /** bytes per safetensors dtype, from the shard headers */
  weightDtypes?: Record<string, number>;
  /** the checkpoint's dtype ("bfloat16") */
  dtype?: string;
  /** quantization_config.quant_method ("fp8", "mxfp4", "awq", ...) */
  quantization?: string;
  weightBytesPerParam: number;
  /** each layer's caches as vLLM's model class reads them (layout.ts), or the field that could not be read */
  layout?: Layout | NotModelled;
  /** the KV cache dtype vLLM picks for --kv-cache-dtype auto from the checkpoint's quantization_config (ModelOpt kv_cache_scheme), when not the model dtype */
  kvCacheDtype?: string;
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
// mxfp4: 32 four-bit values share one 8-bit E8M0 scale, (32 x 4 + 8) / 32 = 4.25 bits
const QUANT_BYTES: Record<string, number> = { fp8: 1, fbgemm_fp8: 1, modelopt: 1, mxfp4: 0.53125, awq: 0.5, gptq: 0.5, bitsandbytes: 0.5, 'compressed-tensors': 1 };

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
  const v = c[field];
  throw new ModelConfigError(field, `${field}: ${v === undefined ? 'missing' : typeof v === 'number' ? String(v) : JSON.stringify(v).slice(0, 60)} (a positive integer)`);
}

/** The counts the profile-facing fields use: full (and chunked), sliding, and state (Mamba/GDN) or cache-less layers. */
function kindsOf(l: Layout): ('full' | 'sliding' | 'linear' | 'none')[] {
  return l.layers.map((caches) =>
    caches.some((x) => x.kind === 'attention' && x.window) ? 'sliding' : caches.some((x) => x.kind === 'attention' || x.kind === 'mla') ? 'full' : caches.length ? 'linear' : 'none',
  );
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

interface ParamParts {
  /** embed_tokens and lm_head (once when tied): kept in the model dtype by every quantization vLLM loads */
  embeddings: number;
  attention: number;
  /** MLPs, routed experts, routers */
  ffn: number;
  /** shared experts (a quantization may leave them in the model dtype: Qwen3.5's NVFP4 checkpoints do) */
  shared: number;
  /** Mamba2 / Gated DeltaNet mixers */
  mixers: number;
}

/**
 * Parameters from the shapes, layer by layer as the layout says (an attention layer, a Mamba2 or Gated
 * DeltaNet mixer, an MLP-only layer), with MoE experts (routed + shared + router) where the config has
 * them. Norms and biases are left out (well under 1 %).
 */
function countParameters(c: Json, f: { layers: number; heads: number; kvHeads: number; headDim: number; mla?: ModelFacts['mla']; experts?: number; layout?: Layout }): ParamParts | undefined {
  const h = posInt(c.hidden_size);
  const vocab = posInt(c.vocab_size);
  if (!h || !vocab) return undefined;
  const inter = posInt(c.intermediate_size) ?? 4 * h;
  const moeInter = posInt(c.moe_intermediate_size) ?? inter;
  const nemotron = f.layout?.family === 'nemotron_h';
  // Nemotron-H's MLPs and experts are up + down (squared ReLU); the others gate (up, gate, down)
  const mats = nemotron ? 2 : 3;
  const embeddings = vocab * h * (c.tie_word_embeddings === true ? 1 : 2);
  const attnOf = (x?: LayerCache) => {
    if (f.mla) {
      // deepseek_v2.py DeepseekV2MLAAttention: q_a (h x q_lora) + q_b (q_lora x heads x (nope + rope)), or q_proj (h x heads x
      // (nope + rope)) without q_lora_rank; kv_a (h x (kv_lora + rope)); kv_b (kv_lora x heads x (nope + v)); o (heads x v x h)
      const nope = posInt(c.qk_nope_head_dim) ?? f.headDim;
      const v = posInt(c.v_head_dim) ?? f.headDim;
      const qLora = posInt(c.q_lora_rank);
      const qHead = nope + f.mla.qkRopeHeadDim;
      const q = qLora ? h * qLora + qLora * f.heads * qHead : h * f.heads * qHead;
      // DeepSeek-V3.2's indexer (deepseek_v2.py Indexer): wq_b (q_lora x index heads x index_head_dim), wk (h x index_head_dim), weights_proj (h x index heads)
      const ih = posInt(c.index_n_heads);
      const id = posInt(c.index_head_dim);
      const indexer = c.index_topk !== undefined && ih && id ? (qLora ?? h) * ih * id + h * id + h * ih : 0;
      return q + h * (f.mla.kvLoraRank + f.mla.qkRopeHeadDim) + f.mla.kvLoraRank * f.heads * (nope + v) + f.heads * v * h + indexer;
    }
    const kvH = x?.kind === 'attention' ? x.kvHeads : f.kvHeads;
    const hs = x?.kind === 'attention' ? x.headSize : f.headDim;
    const hv = x?.kind === 'attention' ? x.headSizeV : f.headDim;
    return h * f.heads * hs + h * kvH * (hs + hv) + f.heads * hv * h;
  };
  const shared = posInt(c.shared_expert_intermediate_size) ?? posInt(c.moe_shared_expert_intermediate_size) ?? (posInt(c.n_shared_experts) ?? 0) * moeInter;
  const firstDense = posInt(c.first_k_dense_replace) ?? 0;
  const moeFfn = (f.experts ?? 0) * mats * h * moeInter + h * (f.experts ?? 0);
  const sharedFfn = mats * h * shared;
  const parts: ParamParts = { embeddings, attention: 0, ffn: 0, shared: 0, mixers: 0 };
  const pattern = typeof c.hybrid_override_pattern === 'string' ? c.hybrid_override_pattern : undefined;
  for (let i = 0; i < f.layers; i++) {
    const caches = f.layout?.layers[i];
    const mixer = caches?.find((x) => x.kind === 'mamba2' || x.kind === 'gdn');
    const attn = caches?.find((x) => x.kind === 'attention' || x.kind === 'mla');
    if (mixer?.kind === 'mamba2') {
      const inner = mixer.heads * mixer.headDim;
      const gs = 2 * mixer.groups * mixer.stateSize;
      parts.mixers += h * (2 * inner + gs + mixer.heads) + (inner + gs) * mixer.convKernel + inner * h;
    } else if (mixer?.kind === 'gdn') {
      const qk = mixer.kHeads * mixer.kDim;
      const v = mixer.vHeads * mixer.vDim;
      parts.mixers += h * (2 * qk + 2 * v + 2 * mixer.vHeads) + (2 * qk + v) * mixer.convKernel + v * h;
    } else if (attn || !caches) parts.attention += attnOf(attn);
    if (nemotron) {
      // Nemotron-H: a layer is ONE block: M (mixer), * (attention), - (MLP), E (MoE)
      const ch = pattern?.[i];
      if (ch === '-' || (!pattern && caches?.length === 0 && !f.experts)) parts.ffn += mats * h * inter;
      else if (ch === 'E') {
        parts.ffn += moeFfn;
        parts.shared += sharedFfn;
      }
      continue;
    }
    const step = posInt(c.interleave_moe_layer_step);
    if (step && f.experts !== undefined) {
      // Llama 4 (transformers Llama4TextConfig): layer i is MoE when i % step == step - 1, with one shared
      // expert of intermediate_size; the dense layers use intermediate_size_mlp
      const moe = i % step === step - 1;
      parts.ffn += moe ? f.experts * 3 * h * inter + h * f.experts : 3 * h * (posInt(c.intermediate_size_mlp) ?? inter);
      if (moe) parts.shared += 3 * h * inter;
      continue;
    }
    // moe_layer_freq as a list (MiMo-V2, mimo_v2.py: layer i is MoE when moe_layer_freq[i] is 1); else every layer past first_k_dense_replace
    const freq = Array.isArray(c.moe_layer_freq) && c.moe_layer_freq.length === f.layers ? c.moe_layer_freq : undefined;
    const moeLayer = f.experts !== undefined && (freq ? freq[i] === 1 || freq[i] === true : i >= firstDense);
    parts.ffn += moeLayer ? moeFfn : mats * h * inter;
    if (moeLayer) parts.shared += sharedFfn;
  }
  return parts;
}

const sumParts = (p: ParamParts) => p.embeddings + p.attention + p.ffn + p.shared + p.mixers;

/**
 * Which parts a quantization leaves in the model dtype: embeddings always; attention, the Mamba / Gated DeltaNet mixers,
 * the shared experts and lm_head where its config lists them (modules_to_not_convert, ignore, ...: gpt-oss-120b's
 * self_attn, Qwen3.5 NVFP4's linear_attn* and shared_expert*).
 */
function unquantizedParts(qc: Json | undefined): { attention: boolean; mixers: boolean; shared: boolean; lmHead: boolean } {
  const list = [qc?.modules_to_not_convert, qc?.ignore, qc?.ignored_layers, qc?.modules_to_not_quantize, qc?.exclude_modules].find(Array.isArray) as unknown[] | undefined;
  const names = (list ?? []).filter((x): x is string => typeof x === 'string');
  return {
    attention: names.some((n) => /self_attn|(^|\.)attn\b|(^|\.)attention\b/.test(n)),
    mixers: names.some((n) => /linear_attn|mixer|mamba/.test(n)),
    shared: names.some((n) => /shared_expert/.test(n)),
    lmHead: qc?.lm_head !== true,
  };
}

/** Bytes a quantized weight takes: the method's, or ModelOpt's algorithm's (NVFP4: 4 bits + an fp8 scale per 16 = 4.5 bits). */
function quantBytes(quantization: string, qc: Json, dtypeBytes: number): number {
  if (quantization.startsWith('modelopt')) {
    const inner = isObj(qc.quantization) ? qc.quantization : qc;
    const algo = (str(inner.quant_algo) ?? str(qc.quant_algo) ?? '').toUpperCase();
    if (algo === 'NVFP4' || quantization === 'modelopt_fp4') return 4.5 / 8;
    if (algo.startsWith('FP8')) return 1;
  }
  return QUANT_BYTES[quantization] ?? dtypeBytes;
}

/**
 * The KV cache dtype vLLM uses for --kv-cache-dtype auto with this checkpoint (engine/arg_utils.py create_engine_config ->
 * utils/torch_utils.py resolve_kv_cache_dtype_string): a ModelOpt kv_cache_scheme / kv_cache_quant_algo of fp8 makes it
 * fp8_e4m3, of 4-bit float nvfp4; otherwise "auto" (the model dtype).
 */
function checkpointKvDtype(qc: Json | undefined): string | undefined {
  const method = qc ? str(qc.quant_method) : undefined;
  if (!qc || !method?.startsWith('modelopt')) return undefined;
  const inner = isObj(qc.quantization) ? qc.quantization : qc;
  const kv = inner.kv_cache_scheme ?? qc.kv_cache_scheme ?? inner.kv_cache_quant_algo ?? qc.kv_cache_quant_algo;
  if (isObj(kv)) {
    if (kv.dynamic === false && kv.num_bits === 8 && kv.type === 'float') return 'fp8_e4m3';
    if (kv.num_bits === 4 && kv.type === 'float') return 'nvfp4';
    return undefined;
  }
  const k = typeof kv === 'string' ? kv.toLowerCase() : undefined;
  return k === 'fp8' ? 'fp8_e4m3' : k === 'nvfp4' ? 'nvfp4' : undefined;
}

/** config.json (+ the safetensors index's total_size) -> facts. Throws ModelConfigError naming the field. */
export function parseModelConfig(raw: unknown, index?: unknown, weights?: WeightSummary): ModelFacts {
  if (!isObj(raw)) throw new ModelConfigError('(root)', 'config.json is not a JSON object');
  const c = textConfig(raw);
  // Nemotron-H may give its layers only as a pattern (transformers 5 derives num_hidden_layers from it)
  const patternLength = typeof c.hybrid_override_pattern === 'string' ? c.hybrid_override_pattern.length : Array.isArray(c.layers_block_type) ? c.layers_block_type.length : 0;
  if (patternLength > LIMITS.num_hidden_layers!)
    throw new ModelConfigError('hybrid_override_pattern', `hybrid_override_pattern: ${patternLength} layers is beyond any model (at most ${LIMITS.num_hidden_layers})`);
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
  const kinds: string[] = layout && !('notModelled' in layout) ? kindsOf(layout) : layerKinds(c, layers);
  const dtype = str(c.dtype) ?? str(c.torch_dtype) ?? str(raw.dtype) ?? str(raw.torch_dtype);
  const qc = isObj(raw.quantization_config) ? raw.quantization_config : isObj(c.quantization_config) ? c.quantization_config : undefined;
  const quantization = qc ? str(qc.quant_method)?.toLowerCase() : undefined;
  const dtypeBytes = DTYPE_BYTES[dtype ?? 'bfloat16'] ?? 2;
  const expertCount = posInt(c.num_experts) ?? posInt(c.n_routed_experts) ?? posInt(c.num_local_experts);
  if (expertCount !== undefined && expertCount > 100_000) throw new ModelConfigError('num_experts', `num_experts: ${expertCount} is beyond any model (at most 100000)`);
  // Nemotron-H's config class always carries n_routed_experts; only its E layers have experts
  const experts = typeof c.hybrid_override_pattern === 'string' && !c.hybrid_override_pattern.includes('E') ? undefined : expertCount;
  const indexBytes = isObj(index) && isObj(index.metadata) ? posInt(index.metadata.total_size) : undefined;
  // exact from the shards' headers, else the index's total_size, else counted from the config
  const weightBytes = weights?.bytes || indexBytes;
  const bytesPerParam = quantization && qc ? quantBytes(quantization, qc, dtypeBytes) : dtypeBytes;
  const parts = countParameters(c, { layers, heads, kvHeads, headDim, mla, experts, layout: 'layers' in layout ? layout : undefined });
  const counted = parts ? sumParts(parts) : undefined;
  const parameters = counted ?? (weightBytes ? weightBytes / bytesPerParam : undefined);
  if (!parameters) throw new ModelConfigError('hidden_size', 'hidden_size or vocab_size missing, and no model.safetensors.index.json to size the weights');
  // Priced from the config: a quantization leaves embeddings (and attention / lm_head where its config lists them) in the model dtype
  const keep = unquantizedParts(qc);
  const lmHead = parts && c.tie_word_embeddings !== true ? (posInt(c.vocab_size) ?? 0) * (posInt(c.hidden_size) ?? 0) : 0;
  const configBytes = parts
    ? quantization
      ? (parts.embeddings - lmHead) * dtypeBytes +
        lmHead * (keep.lmHead ? dtypeBytes : bytesPerParam) +
        parts.attention * (keep.attention ? dtypeBytes : bytesPerParam) +
        parts.mixers * (keep.mixers ? dtypeBytes : bytesPerParam) +
        parts.shared * (keep.shared ? dtypeBytes : bytesPerParam) +
        parts.ffn * bytesPerParam
      : sumParts(parts) * dtypeBytes
    : undefined;
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
    kvCacheDtype: checkpointKvDtype(qc),
    weightBytesPerParam: weightBytes ? weightBytes / parameters : configBytes && parameters ? configBytes / parameters : bytesPerParam,
    weightsFrom: weights?.bytes ? 'shard headers' : indexBytes ? 'index total_size' : parts ? 'config' : 'index total_size',
    weightDtypes: weights ? Object.fromEntries(Object.entries(weights.byDtype).map(([d, v]) => [d, v.bytes])) : undefined,
    layout,
  };
}

/** KV-cache bytes per token for one full-attention layer at TP 1, before the KV dtype: values per token. */
export function kvValuesPerTokenPerLayer(f: Pick<ModelFacts, 'mla' | 'kvHeads' | 'headDim'>, tp = 1): number {
  // MLA's latent is shared by all heads and not split across TP ranks (each rank keeps it whole).
  if (f.mla) return f.mla.kvLoraRank + f.mla.qkRopeHeadDim;
  return 2 * Math.max(1, Math.floor(f.kvHeads / tp)) * f.headDim;
}
