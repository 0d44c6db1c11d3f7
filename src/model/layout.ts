// Which cache each decoder layer keeps, read from config.json the way vLLM's model class reads it
// (vllm/model_executor/models/<arch>.py, as of upstream 2026-08-14, the 0.28 table's commit). What a
// layer keeps decides the KV-cache spec vLLM builds for it (vllm/v1/kv_cache_interface.py); the sizes
// that depend on TP, dtype and the vLLM version are computed by the planner (profiles/kv-rules.ts).
// A field this reader cannot follow is returned as `notModelled` and no cache figure is given for it:
// never a confident wrong number. Pure.

type Json = Record<string, unknown>;
import { own } from '../util/own.js';

/** One decoder layer's cache, before TP and dtype. */
export type LayerCache =
  /** Attention, vLLM's FullAttentionSpec / SlidingWindowSpec / ChunkedLocalAttentionSpec (kv_cache_interface.py) */
  | { kind: 'attention'; kvHeads: number; headSize: number; headSizeV: number; window?: number; chunk?: number }
  /** MLA's latent, MLAAttentionSpec: one "head" of kv_lora_rank + qk_rope_head_dim, the same on every TP rank */
  | { kind: 'mla'; headSize: number; sparse: boolean }
  /** DeepSeek-V3.2's indexer keys (deepseek_v2.py DeepseekV32IndexerCache): MLAAttentionSpec of uint8, head + scales */
  | { kind: 'indexer'; bytesPerToken: number }
  /** Mamba2 (mamba_utils.py MambaStateShapeCalculator.mamba2_state_shape) */
  | { kind: 'mamba2'; heads: number; headDim: number; groups: number; stateSize: number; convKernel: number }
  /** Gated DeltaNet (mamba_utils.py gated_delta_net_state_shape) */
  | { kind: 'gdn'; kHeads: number; vHeads: number; kDim: number; vDim: number; convKernel: number };

export interface Layout {
  /** per decoder layer, the caches it keeps (none for an MLP-only layer; two for a V3.2 layer) */
  layers: LayerCache[][];
  /** the config field the layout was read from, for the plan's note */
  readFrom: string;
  /** the vLLM model family whose per-model hooks apply (models/config.py) */
  family?: 'nemotron_h' | 'qwen3_5' | 'qwen3_next' | 'deepseek_v32' | 'llama4' | 'mimo_v2' | 'gemma4' | 'decilm';
  /**
   * the checkpoint's own recurrent-state dtype, where its config names one (NemotronH mamba_ssm_cache_dtype, Qwen3.5
   * mamba_ssm_dtype)
   */
  ssmDtype?: string;
  /**
   * ModelConfig.get_mamba_chunk_size(): mamba_chunk_size, else chunk_size, else 2048 (mamba_cache_mode "all" aligns to
   * it)
   */
  mambaChunkSize?: number;
}

export interface NotModelled {
  notModelled: string;
  why: string;
}

const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const int = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isSafeInteger(v) && v > 0 && v <= 10_000_000 ? v : undefined;
const nonneg = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= 10_000_000 ? v : undefined;
const str = (v: unknown): string | undefined => (typeof v === 'string' && v ? v : undefined);
/** A value from the config as a reason quotes it: JSON, cut at 40 characters (a config's text is hostile). */
const quote = (v: unknown): string => (JSON.stringify(v) ?? String(v)).slice(0, 40);
/** A model_type in a reason: as written when it is a plain name, else quoted and cut. */
const typeName = (t: string): string => (/^[\w.-]{1,64}$/.test(t) ? t : quote(t));

class Missing extends Error {
  constructor(
    readonly field: string,
    readonly why: string,
  ) {
    super(why);
  }
}

function need(c: Json, field: string, ...alts: string[]): number {
  for (const k of [field, ...alts]) {
    const v = int(c[k]);
    if (v !== undefined) return v;
  }
  throw new Missing(field, `${field}: ${c[field] === undefined ? 'missing' : quote(c[field])} (a positive integer)`);
}

/**
 * A field whose absence (or null) has a default: absent, undefined; present, a positive integer or refused. A value
 * that is there but unreadable ("8", 0, 1.5) is never taken for absent: the default (every head a KV head) gave four
 * times the KV cache of a model whose num_key_value_heads was written as a string.
 */
function optional(c: Json, field: string): number | undefined {
  if (c[field] === undefined || c[field] === null) return undefined;
  const v = int(c[field]);
  if (v === undefined) throw new Missing(field, `${field}: ${quote(c[field])} (a positive integer)`);
  return v;
}

/** Attention of the usual kind: heads and head size as vLLM's Attention layer gets them. */
function attention(c: Json, extra: { window?: number; chunk?: number } = {}): LayerCache {
  const heads = need(c, 'num_attention_heads', 'n_head');
  const kvHeads = optional(c, 'num_key_value_heads') ?? heads;
  const hidden = int(c.hidden_size);
  const headSize = optional(c, 'head_dim') ?? (hidden ? Math.floor(hidden / heads) : need(c, 'head_dim'));
  // K and V sizes differ only where the model class passes head_size_v (mimo_v2.py); elsewhere V = K.
  return { kind: 'attention', kvHeads, headSize, headSizeV: headSize, ...extra };
}

function mamba2(c: Json): LayerCache {
  // nemotron_h.py get_mamba_state_shape_from_config: mamba_num_heads, mamba_head_dim, n_groups, ssm_state_size,
  // conv_kernel
  return {
    kind: 'mamba2',
    heads: need(c, 'mamba_num_heads'),
    headDim: need(c, 'mamba_head_dim'),
    groups: need(c, 'n_groups', 'mamba_n_groups'),
    stateSize: need(c, 'ssm_state_size'),
    convKernel: need(c, 'conv_kernel', 'mamba_d_conv'),
  };
}

function gdn(c: Json): LayerCache {
  // qwen3_next.py / qwen3_5.py get_mamba_state_shape_from_config
  return {
    kind: 'gdn',
    kHeads: need(c, 'linear_num_key_heads'),
    vHeads: need(c, 'linear_num_value_heads'),
    kDim: need(c, 'linear_key_head_dim'),
    vDim: need(c, 'linear_value_head_dim'),
    convKernel: need(c, 'linear_conv_kernel_dim'),
  };
}

/**
 * Nemotron-H (nemotron_h.py): hybrid_override_pattern M (Mamba2), * (attention), - (MLP), E (MoE); or
 * layers_block_type.
 */
function nemotronH(c: Json, n: number): Layout | NotModelled {
  const pattern = c.hybrid_override_pattern;
  const blocks = c.layers_block_type;
  let kinds: string[];
  let field: string;
  if (typeof pattern === 'string' && pattern.length) {
    field = 'hybrid_override_pattern';
    kinds = [...pattern].map((ch) => own(PATTERN_KINDS, ch) ?? `?${ch}`);
  } else if (Array.isArray(blocks) && blocks.length && blocks.every((b) => typeof b === 'string')) {
    field = 'layers_block_type';
    kinds = (blocks as string[]).map((b) => own(BLOCK_KINDS_V5, b) ?? b);
  } else
    return {
      notModelled: 'hybrid_override_pattern',
      why: 'a Nemotron-H config without a readable hybrid_override_pattern or layers_block_type',
    };
  // vLLM's NemotronHConfig asserts len(hybrid_override_pattern) == num_hidden_layers
  if (kinds.length !== n)
    return { notModelled: field, why: `${kinds.length} entries for ${n} layers (vLLM refuses that)` };
  const layers: LayerCache[][] = [];
  // NemotronHAttention (nemotron_h.py): config.head_dim, whose default in the config class is 128 (transformers'
  // NemotronHConfig head_dim = 128; the published configs may write attention_head_dim instead, which neither reads)
  const attnCfg = int(c.head_dim) ? c : { ...c, head_dim: 128 };
  for (const [i, k] of kinds.entries()) {
    if (k === 'mamba') layers.push([mamba2(c)]);
    else if (k === 'attention') layers.push([attention(attnCfg)]);
    else if (k === 'mlp' || k === 'moe') layers.push([]);
    else
      return {
        notModelled: `${field}[${i}]`,
        why: `layer kind ${quote(k.replace(/^\?/, ''))} is not one vLLM's NemotronH builds (M * - E)`,
      };
  }
  return {
    layers,
    readFrom: field,
    family: 'nemotron_h',
    ssmDtype: str(c.mamba_ssm_cache_dtype),
    mambaChunkSize: int(c.mamba_chunk_size) ?? int(c.chunk_size) ?? 2048,
  };
}

/** MiMo-V2 (mimo_v2.py): hybrid_layer_pattern[i] == 1 is a sliding-window layer with its own swa_* heads and sizes. */
function mimoV2(c: Json): Layout | NotModelled {
  const pattern = c.hybrid_layer_pattern as unknown[];
  const layers: LayerCache[][] = [];
  const hidden = int(c.hidden_size);
  for (const [i, p] of pattern.entries()) {
    if (p === 1) {
      const heads = need(c, 'swa_num_attention_heads');
      const headSize = int(c.swa_head_dim) ?? (hidden ? Math.floor(hidden / heads) : need(c, 'swa_head_dim'));
      const window = int(c.sliding_window_size) ?? int(c.sliding_window);
      if (!window)
        return { notModelled: 'sliding_window_size', why: 'a sliding layer in hybrid_layer_pattern without a window' };
      layers.push([
        {
          kind: 'attention',
          kvHeads: optional(c, 'swa_num_key_value_heads') ?? heads,
          headSize,
          headSizeV: int(c.swa_v_head_dim) ?? headSize,
          window,
        },
      ]);
    } else if (p === 0) {
      const a = attention(c) as Extract<LayerCache, { kind: 'attention' }>;
      layers.push([{ ...a, headSizeV: int(c.v_head_dim) ?? a.headSize }]);
    } else
      return {
        notModelled: `hybrid_layer_pattern[${i}]`,
        why: `${quote(p)} is neither 0 (full attention) nor 1 (sliding window)`,
      };
  }
  return { layers, readFrom: 'hybrid_layer_pattern', family: 'mimo_v2' };
}

/**
 * DeepSeek MLA (deepseek_v2.py): the cached latent is kv_lora_rank + qk_rope_head_dim; V3.2 adds an indexer key cache.
 */
function mla(c: Json, n: number): Layout {
  const kvLoraRank = need(c, 'kv_lora_rank');
  const rope = need(c, 'qk_rope_head_dim');
  const sparse = c.index_topk !== undefined;
  const caches: LayerCache[] = [{ kind: 'mla', headSize: kvLoraRank + rope, sparse }];
  if (sparse) {
    // Indexer: DeepseekV32IndexerCache(head_dim = index_head_dim + index_head_dim // quant_block_size(128) * 4, dtype
    // uint8)
    const d = need(c, 'index_head_dim');
    caches.push({ kind: 'indexer', bytesPerToken: d + Math.floor(d / 128) * 4 });
  }
  return {
    layers: Array.from({ length: n }, () => caches),
    readFrom: sparse ? 'kv_lora_rank, index_head_dim (sparse attention)' : 'kv_lora_rank',
    family: sparse ? 'deepseek_v32' : undefined,
  };
}

/** hybrid_override_pattern's letters (NemotronHConfig): M Mamba, * attention, - MLP, E MoE. */
const PATTERN_KINDS: Record<string, string> = { M: 'mamba', '*': 'attention', '-': 'mlp', E: 'moe' };
/** transformers 5 writes the Mamba layers as linear_attention and the attention layers as full_attention. */
const BLOCK_KINDS_V5: Record<string, string> = { linear_attention: 'mamba', full_attention: 'attention' };
const GDN_FAMILIES: Record<string, Layout['family']> = {
  qwen3_next: 'qwen3_next',
  qwen3_5_text: 'qwen3_5',
  qwen3_5_moe_text: 'qwen3_5',
  qwen3_5: 'qwen3_5',
  qwen3_5_moe: 'qwen3_5',
};

/** Qwen3-Next / Qwen3.5 (qwen3_next.py, qwen3_5.py): layer_types, or every full_attention_interval-th layer full. */
function gatedDeltaNet(c: Json, n: number, family: Layout['family']): Layout | NotModelled {
  const lt = c.layer_types;
  let kinds: string[];
  let field = 'layer_types';
  if (Array.isArray(lt) && lt.length === n && lt.every((x) => typeof x === 'string')) kinds = lt as string[];
  else if (int(c.full_attention_interval)) {
    const k = int(c.full_attention_interval)!;
    field = 'full_attention_interval';
    kinds = Array.from({ length: n }, (_, i) => ((i + 1) % k === 0 ? 'full_attention' : 'linear_attention'));
  } else
    return {
      notModelled: 'layer_types',
      why: `a ${family} config needs layer_types (${n} entries) or full_attention_interval`,
    };
  const layers: LayerCache[][] = [];
  for (const [i, k] of kinds.entries()) {
    if (k === 'linear_attention') layers.push([gdn(c)]);
    else if (k === 'full_attention') layers.push([attention(c)]);
    else
      return {
        notModelled: `layer_types[${i}]`,
        why: `${quote(k)} is not a layer kind vLLM's ${family} builds`,
      };
  }
  return { layers, readFrom: field, family, ssmDtype: family === 'qwen3_5' ? str(c.mamba_ssm_dtype) : undefined };
}

/**
 * Llama 4 (llama4.py): a layer with RoPE (no_rope_layers[i] != 0) is chunked local attention when attention_chunk_size
 * is set.
 */
function llama4(c: Json, n: number): Layout | NotModelled {
  const chunk = int(c.attention_chunk_size)!;
  let rope: number[];
  const nr = c.no_rope_layers;
  if (Array.isArray(nr) && nr.length === n && nr.every((x) => x === 0 || x === 1)) rope = nr as number[];
  else if ((Array.isArray(nr) && nr.length === 0) || nr === undefined) {
    // transformers' Llama4TextConfig: no_rope_layers default [int((i + 1) % no_rope_layer_interval != 0)], interval 4
    const every = int(c.no_rope_layer_interval) ?? 4;
    rope = Array.from({ length: n }, (_, i) => ((i + 1) % every !== 0 ? 1 : 0));
  } else return { notModelled: 'no_rope_layers', why: `no_rope_layers must be ${n} entries of 0/1` };
  const layers = rope.map((r) => [attention(c, r ? { chunk } : {})]);
  return { layers, readFrom: 'attention_chunk_size, no_rope_layers', family: 'llama4' };
}

/**
 * Gemma 4 (gemma4.py Gemma4DecoderLayer): layer_types; a full-attention layer has head_dim global_head_dim and, with
 * attention_k_eq_v, num_global_key_value_heads KV heads (K is also written as V: the cache still keeps both); a sliding
 * layer has head_dim and num_key_value_heads with sliding_window. KV sharing (num_kv_shared_layers > 0: the last layers
 * read an earlier layer's cache) is not modelled.
 */
function gemma4(c: Json, n: number): Layout | NotModelled {
  // vLLM's transformers_utils/configs/gemma4.py gemma4_layer_config resolves the flat attributes read here; a config
  // that carries the per-layer form itself (per_layer_config, transformers >= 5.15) is not read by this planner
  if (c.per_layer_config !== undefined && c.per_layer_config !== null)
    return {
      notModelled: 'per_layer_config',
      why: 'a Gemma 4 config with per-layer sub-configs, which this planner does not read',
    };
  const shared = c.num_kv_shared_layers;
  if (shared !== undefined && shared !== null && shared !== 0)
    return {
      notModelled: 'num_kv_shared_layers',
      why: `${quote(shared)}: the last layers share an earlier layer's KV cache (Gemma4Attention kv_sharing_target_layer_name), which this planner does not model`,
    };
  const lt = c.layer_types;
  if (!Array.isArray(lt) || lt.length !== n || !lt.every((x) => typeof x === 'string'))
    return { notModelled: 'layer_types', why: `a Gemma 4 config needs layer_types (${n} entries)` };
  const window = int(c.sliding_window);
  const globalHead = int(c.global_head_dim) ?? need(c, 'head_dim');
  const globalKv =
    c.attention_k_eq_v === true
      ? (optional(c, 'num_global_key_value_heads') ?? need(c, 'num_key_value_heads'))
      : need(c, 'num_key_value_heads');
  const layers: LayerCache[][] = [];
  for (const [i, k] of (lt as string[]).entries()) {
    if (k === 'full_attention')
      layers.push([{ kind: 'attention', kvHeads: globalKv, headSize: globalHead, headSizeV: globalHead }]);
    else if (k === 'sliding_attention' && window)
      layers.push([attention({ ...c, head_dim: need(c, 'head_dim') }, { window })]);
    else if (k === 'sliding_attention')
      return {
        notModelled: 'sliding_window',
        why: `layer_types[${i}] is sliding_attention but sliding_window is ${quote(c.sliding_window)}`,
      };
    else
      return {
        notModelled: `layer_types[${i}]`,
        why: `${quote(k)} is not a layer kind vLLM's Gemma 4 builds`,
      };
  }
  return { layers, readFrom: 'layer_types, global_head_dim', family: 'gemma4' };
}

/**
 * DeciLM / Nemotron-NAS (nemotron_nas.py DeciLMDecoderLayer): block_configs[i].attention.no_op builds no attention (no
 * KV cache on that layer); otherwise num_attention_heads // n_heads_in_group KV heads. replace_with_linear (a linear in
 * place of attention or the FFN) is not built by vLLM's class, and a window in a block is not read: both not modelled.
 */
function decilm(c: Json, n: number): Layout | NotModelled {
  const blocks = c.block_configs as unknown[];
  if (blocks.length !== n)
    return { notModelled: 'block_configs', why: `${blocks.length} block configs for ${n} layers` };
  const heads = need(c, 'num_attention_heads', 'n_head');
  const hidden = int(c.hidden_size);
  const headSize = int(c.head_dim) ?? (hidden ? Math.floor(hidden / heads) : need(c, 'head_dim'));
  const layers: LayerCache[][] = [];
  for (const [i, b] of blocks.entries()) {
    const a = isObj(b) && isObj(b.attention) ? b.attention : undefined;
    const f = isObj(b) && isObj(b.ffn) ? b.ffn : undefined;
    if (!a || !f) return { notModelled: `block_configs[${i}]`, why: 'a block config needs attention and ffn' };
    for (const [part, x] of [
      ['attention', a],
      ['ffn', f],
    ] as const) {
      if (x.replace_with_linear === true)
        return {
          notModelled: `block_configs[${i}].${part}.replace_with_linear`,
          why: "a linear layer in place of the block, which vLLM's DeciLM class does not build",
        };
      if (x.sparsify !== undefined && x.sparsify !== null)
        return {
          notModelled: `block_configs[${i}].${part}.sparsify`,
          why: 'a sparsified block, which this planner does not model',
        };
    }
    if (a.window_length !== undefined && a.window_length !== null)
      return {
        notModelled: `block_configs[${i}].attention.window_length`,
        why: 'a windowed attention block, which vLLM does not read',
      };
    if (a.no_op === true) {
      layers.push([]);
      continue;
    }
    const g = int(a.n_heads_in_group);
    if (!g || heads % g)
      return {
        notModelled: `block_configs[${i}].attention.n_heads_in_group`,
        why: `${quote(a.n_heads_in_group)} does not divide the ${heads} attention heads`,
      };
    layers.push([{ kind: 'attention', kvHeads: heads / g, headSize, headSizeV: headSize }]);
  }
  return { layers, readFrom: 'block_configs', family: 'decilm' };
}

/**
 * Generic layer_types (Gemma 3, gpt-oss, Qwen2/3, Cohere2, ...): full_attention or sliding_attention with
 * sliding_window.
 */
function layerTypes(c: Json, n: number): Layout | NotModelled {
  const lt = c.layer_types as string[];
  const window = int(c.sliding_window);
  const layers: LayerCache[][] = [];
  for (const [i, k] of lt.entries()) {
    if (k === 'full_attention') layers.push([attention(c)]);
    else if (k === 'sliding_attention' && window) layers.push([attention(c, { window })]);
    else if (k === 'sliding_attention')
      return {
        notModelled: 'sliding_window',
        why: `layer_types[${i}] is sliding_attention but sliding_window is ${quote(c.sliding_window)}`,
      };
    else
      return {
        notModelled: `layer_types[${i}]`,
        why: `${quote(k)} is a layer kind this planner does not model`,
      };
  }
  return { layers, readFrom: 'layer_types' };
}

// Fields that mean a recurrent state or a cache layout the readers above do not follow (Jamba, Bamba,
// Falcon-H1, Granite 4 hybrids, Zamba, MiniMax, Kimi Linear, encoder-decoder models, ...).
// Families whose caches vLLM lays out in a way these readers do not follow: DeepSeek-V4's compressed
// sliding MLA (SlidingWindowMLASpec, packed groups), Gemma 3n's KV sharing across layers, attention-free
// and short-conv models, and the hybrids with their own state layouts.
const UNMODELLED_TYPES = [
  'deepseek_v4',
  'gemma3n',
  'gemma3n_text',
  'falcon_h1',
  'jamba',
  'bamba',
  'granitemoehybrid',
  'zamba',
  'zamba2',
  'plamo2',
  'mamba',
  'mamba2',
  'falcon_mamba',
  'lfm2',
  'lfm2_moe',
  'kimi_linear',
  'minimax',
  'minimax_text_01',
  'rwkv',
  'rwkv7',
  'xlstm',
  // found in vLLM's model registry (models/registry.py) among the IsHybrid classes or with caches of their own:
  // Ling/Bailing linear hybrids (bailing_moe_linear.py, bailing_moe_v3.py), OLMo hybrid (olmo_hybrid.py), LongCat-Flash
  // (longcat_flash.py: two MLA attentions a layer, zero-compute experts)
  'olmo_hybrid',
  'bailing_moe_linear',
  'bailing_moe_v2_5',
  'bailing_moe_v3',
  'longcat_flash',
];
// The same families by architecture (models/registry.py), for configs whose model_type is spelled otherwise
const UNMODELLED_ARCHS = [
  'BailingMoeV2_5ForCausalLM',
  'BailingMoeV3ForCausalLM',
  'OlmoHybridForCausalLM',
  'LongcatFlashForCausalLM',
  'LongcatFlashNgramForCausalLM',
  'KimiLinearForCausalLM',
  'MiniMaxText01ForCausalLM',
  'JambaForCausalLM',
  'FalconH1ForCausalLM',
  'GraniteMoeHybridForCausalLM',
  'Zamba2ForCausalLM',
  'Lfm2ForCausalLM',
  'Lfm2MoeForCausalLM',
];
const ENCODER_ONLY_TYPES = [
  'bert',
  'roberta',
  'xlm-roberta',
  'distilbert',
  'electra',
  'deberta',
  'deberta-v2',
  'modernbert',
  'nomic_bert',
  'new',
  'camembert',
  'albert',
];
const UNMODELLED_FIELDS = [
  'num_kv_shared_layers',
  'attn_layer_period',
  'attn_layer_offset',
  'mamba_d_state',
  'mamba_n_heads',
  'mamba_d_ssm',
  'ssm_state_size',
  'linear_num_value_heads',
  'linear_attn_config',
  'layers_block_type',
  'hybrid_override_pattern',
  'hybrid_layer_pattern',
  'attention_chunk_size',
  'cross_attention_layers',
  // HunYuan's cross-layer attention (hunyuan_v1.py: use_cla, a layer reads the KV cache of the one before)
  'use_cla',
];

/** Why a family's caches are not modelled (by architecture or model_type, encoder-only, encoder-decoder), if so. */
function unmodelledFamily(c: Json, type: string): NotModelled | undefined {
  const arch = Array.isArray(c.architectures) ? str(c.architectures[0]) : undefined;
  if (arch && UNMODELLED_ARCHS.includes(arch) && !UNMODELLED_TYPES.includes(type))
    return {
      notModelled: 'architectures',
      why: `${arch}: its cache layout (vLLM's own spec for it, models/registry.py) is not modelled here`,
    };
  if (UNMODELLED_TYPES.includes(type)) {
    const field = UNMODELLED_FIELDS.find((k) => c[k] !== undefined && c[k] !== null && c[k] !== false) ?? 'model_type';
    return {
      notModelled: field,
      why: `${typeName(type)}: its cache layout (vLLM's own spec for it) is not modelled here`,
    };
  }
  // Encoder-only models (BERT and its kin) run as pooling models: bidirectional attention keeps no KV cache
  // (EncoderOnlyAttentionSpec.max_memory_usage_bytes is 0; Attention.get_kv_cache_spec returns None for ENCODER_ONLY)
  if (ENCODER_ONLY_TYPES.includes(type))
    return {
      notModelled: 'model_type',
      why: `${type || 'this model'} is encoder-only: vLLM serves it as a pooling model with no KV cache, so there is no KV or concurrency figure to give`,
    };
  if (c.is_encoder_decoder === true)
    return {
      notModelled: 'is_encoder_decoder',
      why: 'encoder-decoder models keep a cross-attention cache (CrossAttentionSpec) sized by the encoder, which this planner does not model',
    };
  return undefined;
}

/**
 * The per-layer caches of the text model `c` (the text_config of a multimodal checkpoint), with `n`
 * decoder layers, or the field that could not be followed.
 */
export function readLayout(c: Json, n: number): Layout | NotModelled {
  try {
    const type = str(c.model_type) ?? '';
    const unmodelled = unmodelledFamily(c, type);
    if (unmodelled) return unmodelled;
    if (type.startsWith('nemotron_h') || c.hybrid_override_pattern !== undefined) return nemotronH(c, n);
    if (Array.isArray(c.block_configs)) return decilm(c, n);
    if (c.block_configs !== undefined && c.block_configs !== null)
      return { notModelled: 'block_configs', why: 'block_configs is not a list of per-layer blocks' };
    if (Array.isArray(c.hybrid_layer_pattern)) {
      if ((c.hybrid_layer_pattern as unknown[]).length !== n)
        return {
          notModelled: 'hybrid_layer_pattern',
          why: `${(c.hybrid_layer_pattern as unknown[]).length} entries for ${n} layers`,
        };
      return mimoV2(c);
    }
    if (c.kv_lora_rank !== undefined && c.kv_lora_rank !== null) return mla(c, n);
    const family = own(GDN_FAMILIES, type);
    if (family) return gatedDeltaNet(c, n, family);
    if (type === 'gemma4_text' || type === 'gemma4') return gemma4(c, n);
    if (c.attention_chunk_size !== undefined && c.attention_chunk_size !== null) {
      if (!int(c.attention_chunk_size))
        return {
          notModelled: 'attention_chunk_size',
          why: `${quote(c.attention_chunk_size)} is not a chunk size`,
        };
      return llama4(c, n);
    }
    const odd = UNMODELLED_FIELDS.find((k) => c[k] !== undefined && c[k] !== null && c[k] !== false);
    if (odd)
      return {
        notModelled: odd,
        why: `${type || 'this model'} has ${odd}, a layer layout this planner does not model`,
      };
    const lt = c.layer_types;
    if (Array.isArray(lt)) {
      if (lt.length !== n || !lt.every((x) => typeof x === 'string'))
        return { notModelled: 'layer_types', why: `${lt.length} entries for ${n} layers` };
      if (lt.some((x) => /linear|mamba|deltanet|conv|recurrent/.test(x as string)))
        return {
          notModelled: 'layer_types',
          why: `${type || 'this model'} has recurrent layers (${lt.find((x) => /linear|mamba|deltanet|conv|recurrent/.test(x as string))}) this planner does not model`,
        };
      return layerTypes(c, n);
    }
    // Mistral-style: one window for every layer (use_sliding_window false switches it off, as in Qwen2/3)
    const window = int(c.sliding_window);
    if (window && c.use_sliding_window !== false)
      return { layers: Array.from({ length: n }, () => [attention(c, { window })]), readFrom: 'sliding_window' };
    if (
      c.sliding_window !== undefined &&
      c.sliding_window !== null &&
      !window &&
      c.use_sliding_window !== false &&
      nonneg(c.sliding_window) !== 0
    )
      return { notModelled: 'sliding_window', why: `${quote(c.sliding_window)} is not a window in tokens` };
    return { layers: Array.from({ length: n }, () => [attention(c)]), readFrom: 'num_hidden_layers' };
  } catch (e) {
    if (e instanceof Missing) return { notModelled: e.field, why: e.why };
    throw e;
  }
}

export { isObj as isJsonObject };
