// A model's architecture, as the memory planner and validation need it, parsed from the files a
// checkpoint ships (config.json, model.safetensors.index.json). Pure: the reading is in read.ts.
// What vLLM itself tells apart is kept apart here: dense MHA/GQA, MoE, MLA (DeepSeek's latent KV),
// sliding-window layers, and linear-attention layers (Gated DeltaNet) that hold a per-sequence state.
import { readLayout, type Layout, type NotModelled, type LayerCache } from './layout.js';
import type { WeightSummary } from './safetensors.js';
import {
  textModules,
  visionModules,
  moduleParams,
  mtpLayers,
  isMtpTensor,
  type WeightModule,
  type ModuleRole,
} from './modules.js';
import { readQuantScheme, onlineScheme, resolvedMethod, type QuantScheme } from './quant.js';
import { own } from '../util/own.js';

type AttentionKind = 'mha' | 'gqa' | 'mla';

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
  /**
   * where weightBytes came from: the shards' safetensors headers (exact), the index's total_size, or counted from the
   * config
   */
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
  /** where the quantization config was read: config.json's quantization_config, or hf_quant_config.json beside it */
  quantizationFrom?: 'config.json' | 'hf_quant_config.json';
  /** the scheme as priced per module ("modelopt NVFP4", "compressed-tensors pack-quantized", ...) */
  quantScheme?: string;
  /** the weights per kind of module as vLLM loads them (from the config), parameters and bytes */
  weightParts?: WeightPart[];
  /** a quantization scheme this planner does not price, with no weight files to size it: no weight figure is stated */
  weightsNotModelled?: { field: string; why: string };
  /**
   * a multimodal checkpoint's vision tower: counted from vision_config (an estimate), or not counted (its config too
   * sparse)
   */
  visionFrom?: 'vision_config (estimated)' | 'not counted';
  /** MTP / next-n layers in the checkpoint (not loaded without speculative decoding), and what they take */
  mtpLayers?: number;
  mtpBytes?: number;
  /**
   * an unquantized checkpoint's weights under vLLM's online --quantization fp8 (each linear to fp8, embeddings kept)
   */
  onlineFp8Bytes?: number;
  /**
   * the KV cache dtype vLLM picks for --kv-cache-dtype auto from the checkpoint's quantization_config (ModelOpt
   * kv_cache_scheme), when not the model dtype
   */
  kvCacheDtype?: string;
}

interface WeightPart {
  part: ModuleRole;
  params: number;
  bytes: number;
}

/** The files beside config.json that change what vLLM loads. */
interface CheckpointFiles {
  /** hf_quant_config.json (ModelOpt <= 0.29 writes its config there), parsed */
  hfQuantConfig?: unknown;
  /** every tensor name of model.safetensors.index.json's weight_map */
  weightNames?: string[];
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
const posInt = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined;
const str = (v: unknown): string | undefined => (typeof v === 'string' && v ? v : undefined);

const DTYPE_BYTES: Record<string, number> = {
  float32: 4,
  float: 4,
  float16: 2,
  half: 2,
  bfloat16: 2,
  float8_e4m3fn: 1,
  fp8: 1,
};

/** The language model's part of a config: multimodal checkpoints nest it under text_config (or llm_config). */
function textConfig(cfg: Json): Json {
  for (const k of ['text_config', 'llm_config', 'language_config']) {
    const inner = cfg[k];
    if (isObj(inner) && (posInt(inner.num_hidden_layers) || posInt(inner.num_layers))) return inner;
  }
  return cfg;
}

// A config.json is input from anywhere: numbers past these are not a model sparkctl can plan (and a
// layer count of 1e9 would make the parameter count loop for minutes).
const LIMITS: Record<string, number> = {
  num_hidden_layers: 10_000,
  num_attention_heads: 100_000,
  max_position_embeddings: 1e9,
  head_dim: 100_000,
};

function need(c: Json, field: string, ...alts: string[]): number {
  for (const k of [field, ...alts]) {
    const v = posInt(c[k]);
    if (v === undefined) continue;
    const max = own(LIMITS, field) ?? 1e9;
    if (v > max) throw new ModelConfigError(field, `${field}: ${v} is beyond any model (at most ${max})`);
    return v;
  }
  const v = c[field];
  throw new ModelConfigError(
    field,
    `${field}: ${v === undefined ? 'missing' : typeof v === 'number' ? String(v) : JSON.stringify(v).slice(0, 60)} (a positive integer)`,
  );
}

/**
 * The counts the profile-facing fields use: full (and chunked), sliding, and state (Mamba/GDN) or cache-less layers.
 */
function kindsOf(l: Layout): ('full' | 'sliding' | 'linear' | 'none')[] {
  return l.layers.map((caches) =>
    caches.some((x) => x.kind === 'attention' && x.window)
      ? 'sliding'
      : caches.some((x) => x.kind === 'attention' || x.kind === 'mla')
        ? 'full'
        : caches.length
          ? 'linear'
          : 'none',
  );
}

/** Per-layer attention kinds from layer_types, or from full_attention_interval (Qwen3-Next's own config). */
function layerKinds(c: Json, layers: number): ('full' | 'sliding' | 'linear')[] {
  const lt = c.layer_types;
  if (Array.isArray(lt) && lt.length === layers && lt.every((x) => typeof x === 'string')) {
    return lt.map((t) =>
      /linear|mamba|deltanet/.test(t as string)
        ? 'linear'
        : /sliding|local|chunked/.test(t as string)
          ? 'sliding'
          : 'full',
    );
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

/**
 * The KV cache dtype vLLM uses for --kv-cache-dtype auto with this checkpoint (engine/arg_utils.py create_engine_config
 * -> utils/torch_utils.py resolve_kv_cache_dtype_string): a ModelOpt kv_cache_scheme / kv_cache_quant_algo of fp8 makes
 * it fp8_e4m3, of 4-bit float nvfp4; otherwise "auto" (the model dtype).
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

/**
 * The quantization config vLLM reads (transformers_utils/config.py get_config): config.json's quantization_config (or
 * compression_config), else hf_quant_config.json beside it, never both; normalized as model_arch_config_convertor.py
 * _normalize_quantization_config does (a ModelOpt producer block gets quant_method modelopt / modelopt_fp4). A
 * MIXED_PRECISION config.json without quantized_layers takes them from hf_quant_config.json (weight_utils.py
 * get_quant_config).
 */
function checkpointQuant(
  raw: Json,
  c: Json,
  hfQuant: unknown,
): { config?: Json; method?: string; from?: 'config.json' | 'hf_quant_config.json' } {
  const inFile = [raw.quantization_config, c.quantization_config, raw.compression_config].find(isObj) as
    | Json
    | undefined;
  let config = inFile ?? (isObj(hfQuant) ? hfQuant : undefined);
  if (!config) return {};
  config = { ...config };
  const producer = isObj(config.producer) ? str(config.producer.name) : undefined;
  if (producer === 'modelopt' && !str(config.quant_method)) config.quant_method = 'modelopt';
  if (typeof config.quant_method === 'string')
    config.quant_method = config.quant_method.toLowerCase().replace('compressed_tensors', 'compressed-tensors');
  if (
    inFile &&
    isObj(hfQuant) &&
    str(config.quant_algo)?.toUpperCase() === 'MIXED_PRECISION' &&
    !isObj(config.quantized_layers)
  ) {
    const legacy = isObj(hfQuant.quantization) ? hfQuant.quantization : hfQuant;
    if (isObj(legacy.quantized_layers)) config.quantized_layers = legacy.quantized_layers;
  }
  return {
    config,
    method: resolvedMethod(config) ?? str(config.quant_method),
    from: inFile ? 'config.json' : 'hf_quant_config.json',
  };
}

/** Parameters and bytes per kind of module. */
function partsOf(modules: WeightModule[], bytes: (m: WeightModule) => number): WeightPart[] {
  const by = new Map<ModuleRole, WeightPart>();
  for (const m of modules) {
    const p = by.get(m.role) ?? { part: m.role, params: 0, bytes: 0 };
    p.params += moduleParams(m);
    p.bytes += bytes(m);
    by.set(m.role, p);
  }
  return [...by.values()];
}

/** The MTP layers as priced: each like the last decoder layer, plus its eh_proj (2h -> h) in the model dtype. */
function mtpBytes(modules: WeightModule[], n: number, c: Json, dtypeBytes: number, scheme?: QuantScheme): number {
  const last = Math.max(...modules.map((m) => m.layer ?? -1));
  const layer = modules
    .filter((m) => m.layer === last)
    .reduce((a, m) => a + (scheme ? scheme.bytes(m, dtypeBytes) : moduleParams(m) * dtypeBytes), 0);
  const h = posInt(c.hidden_size) ?? 0;
  return n * (layer + 2 * h * h * dtypeBytes);
}

/**
 * The text model's shape: layers, attention heads (KV heads, MLA), hidden size, head size, context. Throws
 * ModelConfigError naming the field.
 */
function textShape(c: Json) {
  // Nemotron-H may give its layers only as a pattern (transformers 5 derives num_hidden_layers from it)
  const patternLength =
    typeof c.hybrid_override_pattern === 'string'
      ? c.hybrid_override_pattern.length
      : Array.isArray(c.layers_block_type)
        ? c.layers_block_type.length
        : 0;
  if (patternLength > LIMITS.num_hidden_layers!)
    throw new ModelConfigError(
      'hybrid_override_pattern',
      `hybrid_override_pattern: ${patternLength} layers is beyond any model (at most ${LIMITS.num_hidden_layers})`,
    );
  const layers =
    c.num_hidden_layers === undefined && patternLength
      ? patternLength
      : need(c, 'num_hidden_layers', 'num_layers', 'n_layer');
  const heads = need(c, 'num_attention_heads', 'n_head');
  const kvHeads = posInt(c.num_key_value_heads) ?? heads;
  const hidden = posInt(c.hidden_size);
  const mlaRank = posInt(c.kv_lora_rank);
  const ropeDim = posInt(c.qk_rope_head_dim);
  const mla = mlaRank && ropeDim ? { kvLoraRank: mlaRank, qkRopeHeadDim: ropeDim } : undefined;
  const headDim = mla
    ? (posInt(c.qk_nope_head_dim) ?? 0) + ropeDim!
    : (posInt(c.head_dim) ?? (hidden ? Math.floor(hidden / heads) : need(c, 'head_dim')));
  const maxContext = need(c, 'max_position_embeddings', 'max_sequence_length', 'seq_length', 'n_positions');
  return { layers, heads, kvHeads, hidden, mla, headDim, maxContext };
}

/** The text model's routed experts (undefined: none). Throws ModelConfigError for a count beyond any model. */
function textExperts(c: Json): number | undefined {
  const expertCount = posInt(c.num_experts) ?? posInt(c.n_routed_experts) ?? posInt(c.num_local_experts);
  if (expertCount !== undefined && expertCount > 100_000)
    throw new ModelConfigError('num_experts', `num_experts: ${expertCount} is beyond any model (at most 100000)`);
  // Nemotron-H's config class always carries n_routed_experts; only its E layers have experts
  return typeof c.hybrid_override_pattern === 'string' && !c.hybrid_override_pattern.includes('E')
    ? undefined
    : expertCount;
}

/** What the weights are sized from: the config's modules, its quantization config, and the files beside it. */
interface WeightInputs {
  c: Json;
  layers: number;
  modules?: WeightModule[];
  qc?: Json;
  dtypeBytes: number;
  index?: unknown;
  weights?: WeightSummary & { mtpBytes?: number };
  files?: CheckpointFiles;
}

/** The weights' parameters and bytes (shard headers, index or config), MTP layers apart. Throws ModelConfigError. */
function weightSizes({ c, layers, modules, qc, dtypeBytes, index, weights, files }: WeightInputs) {
  const counted = modules?.reduce((a, m) => a + moduleParams(m), 0);
  const scheme = qc ? readQuantScheme(qc, dtypeBytes) : undefined;
  const schemeOk = scheme && !('notModelled' in scheme) ? scheme : undefined;
  // Priced from the config, module by module as vLLM loads it (quant.ts)
  const configBytes =
    modules && (!qc || schemeOk)
      ? modules.reduce((a, m) => a + (schemeOk ? schemeOk.bytes(m, dtypeBytes) : moduleParams(m) * dtypeBytes), 0)
      : undefined;
  const weightParts =
    modules && (!qc || schemeOk)
      ? partsOf(modules, (m) => (schemeOk ? schemeOk.bytes(m, dtypeBytes) : moduleParams(m) * dtypeBytes))
      : undefined;
  // MTP / next-n layers the checkpoint carries: vLLM's main model skips them (loaded only as a speculative proposer)
  const mtp = mtpLayers(c);
  const mtpInFiles = files?.weightNames ? files.weightNames.some((n) => isMtpTensor(n, layers)) : mtp > 0;
  const mtpCounted = mtp && modules ? mtpBytes(modules, mtp, c, dtypeBytes, schemeOk) : 0;
  const indexBytes = isObj(index) && isObj(index.metadata) ? posInt(index.metadata.total_size) : undefined;
  // exact from the shards' headers (less the MTP tensors), else the index's total_size (less the MTP layers as priced),
  // else counted from the config
  const fromShards = weights?.bytes ? weights.bytes - (weights.mtpBytes ?? 0) : undefined;
  const fromIndex =
    indexBytes && mtpInFiles && mtpCounted && mtpCounted < indexBytes ? indexBytes - mtpCounted : indexBytes;
  const weightBytes = fromShards || fromIndex;
  const parameters = counted ?? (weightBytes ? weightBytes / (schemeOk ? 1 : dtypeBytes) : undefined);
  if (!parameters)
    throw new ModelConfigError(
      'hidden_size',
      'hidden_size or vocab_size missing, and no model.safetensors.index.json to size the weights',
    );
  // a scheme not modelled leaves no config figure: the files' bytes stand where there are files, else no weight figure
  // at all
  const weightsNotModelled =
    scheme && 'notModelled' in scheme && !weightBytes ? { field: scheme.notModelled, why: scheme.why } : undefined;
  // what an unquantized checkpoint takes under vLLM's online fp8 (--quantization fp8)
  const onlineFp8Bytes =
    modules && !qc ? modules.reduce((a, m) => a + onlineScheme('fp8')!.bytes(m, dtypeBytes), 0) : undefined;
  return {
    parameters,
    weightBytes,
    configBytes,
    schemeOk,
    weightParts,
    fromShards,
    fromIndex,
    mtp,
    mtpCounted,
    weightsNotModelled,
    onlineFp8Bytes,
  };
}

/** The layers by cache: full attention, sliding window (and the window), linear attention (and its state). */
function cacheLayers(c: Json, kinds: string[], layout: Layout | NotModelled, dtypeBytes: number) {
  const linearLayers = kinds.filter((k) => k === 'linear').length;
  const perLayerState = linearLayers ? linearStatePerLayer(c, dtypeBytes) : undefined;
  const slidingLayers = kinds.filter((k) => k === 'sliding').length;
  const window =
    'layers' in layout
      ? layout.layers
          .flat()
          .find((x): x is Extract<LayerCache, { kind: 'attention' }> => x.kind === 'attention' && !!x.window)?.window
      : undefined;
  return {
    kvLayers: kinds.filter((k) => k === 'full').length,
    slidingLayers,
    slidingWindow: slidingLayers ? (window ?? posInt(c.sliding_window)) : undefined,
    linearLayers,
    linearStateBytes: perLayerState !== undefined ? perLayerState * linearLayers : undefined,
  };
}

/** config.json (+ the safetensors index's total_size) -> facts. Throws ModelConfigError naming the field. */
export function parseModelConfig(
  raw: unknown,
  index?: unknown,
  weights?: WeightSummary & { mtpBytes?: number },
  files?: CheckpointFiles,
): ModelFacts {
  if (!isObj(raw)) throw new ModelConfigError('(root)', 'config.json is not a JSON object');
  const c = textConfig(raw);
  const { layers, heads, kvHeads, hidden, mla, headDim, maxContext } = textShape(c);
  const layout = readLayout(c, layers);
  const kinds: string[] = layout && !('notModelled' in layout) ? kindsOf(layout) : layerKinds(c, layers);
  const dtype = str(c.dtype) ?? str(c.torch_dtype) ?? str(raw.dtype) ?? str(raw.torch_dtype);
  const quant = checkpointQuant(raw, c, files?.hfQuantConfig);
  const qc = quant.config;
  const quantization = quant.method;
  const dtypeBytes = own(DTYPE_BYTES, dtype ?? 'bfloat16') ?? 2;
  const experts = textExperts(c);
  const text = textModules(c, {
    layers,
    heads,
    kvHeads,
    headDim,
    mla,
    experts,
    layout: 'layers' in layout ? layout : undefined,
    nested: c !== raw,
  });
  // a multimodal checkpoint's vision tower is loaded too (estimated from vision_config: modules.ts visionModules)
  const vision = c !== raw ? visionModules(raw) : undefined;
  const modules = text && vision ? [...text, ...vision] : text;
  const sizes = weightSizes({ c, layers, modules, qc, dtypeBytes, index, weights, files });
  const cache = cacheLayers(c, kinds, layout, dtypeBytes);
  return {
    architecture: Array.isArray(raw.architectures) ? str(raw.architectures[0]) : undefined,
    modelType: str(c.model_type) ?? str(raw.model_type),
    parameters: sizes.parameters,
    weightBytes: sizes.weightBytes,
    layers,
    attention: mla ? 'mla' : kvHeads === heads ? 'mha' : 'gqa',
    ...cache,
    attentionHeads: heads,
    kvHeads: mla ? 1 : kvHeads,
    headDim,
    hiddenSize: hidden,
    maxContext,
    mla,
    moe: experts ? { experts, expertsPerToken: posInt(c.num_experts_per_tok) } : undefined,
    dtype,
    quantization,
    quantizationFrom: quant.from,
    quantScheme: sizes.schemeOk?.label,
    kvCacheDtype: checkpointKvDtype(qc),
    weightBytesPerParam: sizes.weightBytes
      ? sizes.weightBytes / sizes.parameters
      : sizes.configBytes && sizes.parameters
        ? sizes.configBytes / sizes.parameters
        : dtypeBytes,
    weightsFrom: sizes.fromShards ? 'shard headers' : sizes.fromIndex ? 'index total_size' : 'config',
    weightParts: sizes.weightParts,
    weightsNotModelled: sizes.weightsNotModelled,
    mtpLayers: sizes.mtp || undefined,
    visionFrom: vision
      ? 'vision_config (estimated)'
      : c !== raw && isObj(raw.vision_config)
        ? 'not counted'
        : undefined,
    mtpBytes: sizes.mtpCounted || undefined,
    onlineFp8Bytes: sizes.onlineFp8Bytes,
    weightDtypes: weights
      ? Object.fromEntries(Object.entries(weights.byDtype).map(([d, v]) => [d, v.bytes]))
      : undefined,
    layout,
  };
}
