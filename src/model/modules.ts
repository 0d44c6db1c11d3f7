// The weight-bearing modules of a checkpoint, read from config.json the way vLLM's model classes build
// them: one record per linear (experts counted once with their number), with the names the checkpoint's
// quantization lists use, so a scheme can price each module as vLLM loads it (quant.ts). Norms and biases
// are left out (well under 1 %). Pure.
import type { Layout, LayerCache } from './layout.js';

type Json = Record<string, unknown>;
const posInt = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined;

/** What a module is: a scheme quantizes linears (and experts); the rest stay in the model dtype (see quant.ts). */
export type ModuleRole =
  | 'embed'
  | 'lm_head'
  | 'attn'
  | 'mlp'
  | 'expert'
  | 'shared'
  | 'router'
  | 'mixer'
  | 'conv'
  | 'vision'
  | 'mtp';

export interface WeightModule {
  /** the checkpoint's name of it (HF naming; quant.ts also tries the other prefixes vLLM maps) */
  name: string;
  role: ModuleRole;
  /** input and output features of one copy (a linear is out x in) */
  in: number;
  out: number;
  /** copies (routed experts: their number) */
  count: number;
  layer?: number;
}

export const moduleParams = (m: WeightModule) => m.in * m.out * m.count;

interface ModuleShape {
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  mla?: { kvLoraRank: number; qkRopeHeadDim: number };
  experts?: number;
  layout?: Layout;
  /** the text model sits under text_config (a multimodal wrapper): its layers are named model.language_model.layers */
  nested?: boolean;
}

/**
 * The modules of the text model `c`, layer by layer as the layout says (an attention layer, a Mamba2 or Gated DeltaNet
 * mixer, an MLP-only layer), with MoE experts (routed + shared + router) where the config has them; undefined when
 * hidden_size or vocab_size is missing.
 */
export function textModules(c: Json, f: ModuleShape): WeightModule[] | undefined {
  const h = posInt(c.hidden_size);
  const vocab = posInt(c.vocab_size);
  if (!h || !vocab) return undefined;
  const inter = posInt(c.intermediate_size) ?? 4 * h;
  const moeInter = posInt(c.moe_intermediate_size) ?? inter;
  const nemotron = f.layout?.family === 'nemotron_h';
  const root = nemotron ? 'backbone' : f.nested ? 'model.language_model' : 'model';
  const out: WeightModule[] = [];
  const add = (name: string, role: ModuleRole, inF: number, outF: number, count = 1, layer?: number) => {
    if (inF > 0 && outF > 0 && count > 0) out.push({ name, role, in: inF, out: outF, count, layer });
  };
  add(nemotron ? `${root}.embeddings` : `${root}.embed_tokens`, 'embed', vocab, h);
  if (c.tie_word_embeddings !== true) add('lm_head', 'lm_head', h, vocab);
  const experts = f.experts ?? 0;
  // NemotronH (nemotron_h.py NemotronHMoE): moe_shared_expert_intermediate_size x n_shared_experts
  const shared = nemotron
    ? (posInt(c.moe_shared_expert_intermediate_size) ?? moeInter) * (posInt(c.n_shared_experts) ?? 0)
    : (posInt(c.shared_expert_intermediate_size) ??
      posInt(c.moe_shared_expert_intermediate_size) ??
      (posInt(c.n_shared_experts) ?? 0) * moeInter);
  const firstDense = posInt(c.first_k_dense_replace) ?? 0;
  const pattern = typeof c.hybrid_override_pattern === 'string' ? c.hybrid_override_pattern : undefined;
  // NemotronH latent MoE (nemotron_h.py NemotronHMoE): experts run in moe_latent_size, behind fc1/fc2 latent
  // projections
  const latent = nemotron ? posInt(c.moe_latent_size) : undefined;
  for (let i = 0; i < f.layers; i++) {
    const L = `${root}.layers.${i}`;
    const caches = f.layout?.layers[i];
    const mixer = caches?.find((x) => x.kind === 'mamba2' || x.kind === 'gdn');
    const attn = caches?.find((x) => x.kind === 'attention' || x.kind === 'mla');
    if (mixer) mixerModules(mixer, L, h, i, add);
    else if (attn || !caches) attentionModules(c, f, h, `${L}.${nemotron ? 'mixer' : 'self_attn'}`, i, attn, add);
    const mlp = `${L}.${nemotron ? 'mixer' : 'mlp'}`;
    const block: FfnBlock = { add, mlp, h, i, nemotron, experts, latent };
    if (f.layout?.family === 'decilm') {
      // nemotron_nas.py: no FFN where ffn.no_op; else intermediate_size, or _ffn_mult_to_intermediate_size(ffn_mult, h)
      const ffn = (c.block_configs as Json[])[i]?.ffn as Json | undefined;
      if (ffn?.no_op === true) continue;
      const mult = typeof ffn?.ffn_mult === 'number' && ffn.ffn_mult > 0 ? ffn.ffn_mult : undefined;
      const width = mult !== undefined ? ffnMultToIntermediate(mult, h) : (posInt(ffn?.intermediate_size) ?? inter);
      denseModules(block, width);
      continue;
    }
    if (nemotron) {
      // Nemotron-H: a layer is ONE block: M (mixer), * (attention), - (MLP), E (MoE)
      const ch = pattern?.[i];
      if (ch === '-' || (!pattern && caches?.length === 0 && !experts)) denseModules(block, inter);
      else if (ch === 'E') moeModules(block, moeInter, shared);
      continue;
    }
    const step = posInt(c.interleave_moe_layer_step);
    if (step && f.experts !== undefined) {
      // Llama 4 (transformers Llama4TextConfig): layer i is MoE when i % step == step - 1, with one shared expert of
      // intermediate_size; the dense layers use intermediate_size_mlp
      if (i % step === step - 1) moeModules(block, inter, inter);
      else denseModules(block, posInt(c.intermediate_size_mlp) ?? inter);
      continue;
    }
    // moe_layer_freq as a list (MiMo-V2, mimo_v2.py: layer i is MoE when moe_layer_freq[i] is 1); else every layer past
    // first_k_dense_replace
    const freq = Array.isArray(c.moe_layer_freq) && c.moe_layer_freq.length === f.layers ? c.moe_layer_freq : undefined;
    const moeLayer = f.experts !== undefined && (freq ? freq[i] === 1 || freq[i] === true : i >= firstDense);
    if (moeLayer) moeModules(block, moeInter, shared);
    else denseModules(block, inter);
  }
  return out;
}

/** Where one layer's MLP or MoE modules go, and the sizes they are built from. */
interface FfnBlock {
  add: Add;
  /** the modules' name prefix (model.layers.3.mlp, backbone.layers.3.mixer) */
  mlp: string;
  h: number;
  i: number;
  nemotron: boolean;
  experts: number;
  /** NemotronH latent MoE: the experts' width behind the latent projections */
  latent?: number;
}

/** A dense MLP of intermediate size `width` (gate, up and down projections; Nemotron-H has no gate). */
function denseModules(
  { add, mlp, h, i, nemotron }: FfnBlock,
  width: number,
  names = nemotron ? ['up_proj', 'down_proj'] : ['gate_proj', 'up_proj', 'down_proj'],
) {
  for (const n of names) add(`${mlp}.${n}`, 'mlp', n === 'down_proj' ? width : h, n === 'down_proj' ? h : width, 1, i);
}

/** An MoE block: the routed experts of intermediate size `width`, the router, and shared experts of `sharedWidth`. */
function moeModules(
  { add, mlp, h, i, nemotron, experts, latent }: FfnBlock,
  width: number,
  sharedWidth: number,
  mats = nemotron ? ['up_proj', 'down_proj'] : ['gate_proj', 'up_proj', 'down_proj'],
) {
  const eh = latent ?? h;
  if (latent) {
    add(`${mlp}.fc1_latent_proj`, 'mlp', h, latent, 1, i);
    add(`${mlp}.fc2_latent_proj`, 'mlp', latent, h, 1, i);
  }
  for (const n of mats)
    add(`${mlp}.experts.0.${n}`, 'expert', n === 'down_proj' ? width : eh, n === 'down_proj' ? eh : width, experts, i);
  add(`${mlp}.gate`, 'router', h, experts, 1, i);
  if (sharedWidth)
    for (const n of mats)
      add(
        `${mlp}.shared_expert.${n}`,
        'shared',
        n === 'down_proj' ? sharedWidth : h,
        n === 'down_proj' ? h : sharedWidth,
        1,
        i,
      );
}

/**
 * A Mamba2 mixer's (in_proj, conv1d, out_proj) or a Gated DeltaNet's (linear_attn: in_proj_qkvz, in_proj_ba, conv1d,
 * out_proj) modules of layer `i`.
 */
function mixerModules(
  mixer: Extract<LayerCache, { kind: 'mamba2' | 'gdn' }>,
  L: string,
  h: number,
  i: number,
  add: Add,
) {
  if (mixer.kind === 'mamba2') {
    const inner = mixer.heads * mixer.headDim;
    const gs = 2 * mixer.groups * mixer.stateSize;
    add(`${L}.mixer.in_proj`, 'mixer', h, 2 * inner + gs + mixer.heads, 1, i);
    add(`${L}.mixer.conv1d`, 'conv', mixer.convKernel, inner + gs, 1, i);
    add(`${L}.mixer.out_proj`, 'mixer', inner, h, 1, i);
    return;
  }
  const qk = mixer.kHeads * mixer.kDim;
  const v = mixer.vHeads * mixer.vDim;
  add(`${L}.linear_attn.in_proj_qkvz`, 'mixer', h, 2 * qk + 2 * v, 1, i);
  add(`${L}.linear_attn.in_proj_ba`, 'mixer', h, 2 * mixer.vHeads, 1, i);
  add(`${L}.linear_attn.conv1d`, 'conv', mixer.convKernel, 2 * qk + v, 1, i);
  add(`${L}.linear_attn.out_proj`, 'mixer', v, h, 1, i);
}

/** nemotron_nas.py _ffn_mult_to_intermediate_size: int(2 x ffn_mult x h / 3), rounded up to a multiple of 256. */
function ffnMultToIntermediate(mult: number, h: number): number {
  const n = Math.trunc((2 * mult * h) / 3);
  return n % 256 === 0 ? n : n + 256 - (n % 256);
}

type Add = (name: string, role: ModuleRole, inF: number, outF: number, count?: number, layer?: number) => void;

function attentionModules(
  c: Json,
  f: ModuleShape,
  h: number,
  A: string,
  i: number,
  x: LayerCache | undefined,
  add: Add,
): void {
  if (f.mla) {
    // deepseek_v2.py DeepseekV2MLAAttention: q_a (h x q_lora) + q_b (q_lora x heads x (nope + rope)), or q_proj (h x
    // heads x (nope + rope)) without q_lora_rank; kv_a (h x (kv_lora + rope)); kv_b (kv_lora x heads x (nope + v)); o
    // (heads x v x h)
    const nope = posInt(c.qk_nope_head_dim) ?? f.headDim;
    const v = posInt(c.v_head_dim) ?? f.headDim;
    const qLora = posInt(c.q_lora_rank);
    const qHead = nope + f.mla.qkRopeHeadDim;
    if (qLora) {
      add(`${A}.q_a_proj`, 'attn', h, qLora, 1, i);
      add(`${A}.q_b_proj`, 'attn', qLora, f.heads * qHead, 1, i);
    } else add(`${A}.q_proj`, 'attn', h, f.heads * qHead, 1, i);
    add(`${A}.kv_a_proj_with_mqa`, 'attn', h, f.mla.kvLoraRank + f.mla.qkRopeHeadDim, 1, i);
    add(`${A}.kv_b_proj`, 'attn', f.mla.kvLoraRank, f.heads * (nope + v), 1, i);
    add(`${A}.o_proj`, 'attn', f.heads * v, h, 1, i);
    // DeepSeek-V3.2's indexer (deepseek_v2.py Indexer): wq_b (q_lora x index heads x index_head_dim), wk (h x
    // index_head_dim), weights_proj (h x index heads)
    const ih = posInt(c.index_n_heads);
    const id = posInt(c.index_head_dim);
    if (c.index_topk !== undefined && ih && id) {
      add(`${A}.indexer.wq_b`, 'attn', qLora ?? h, ih * id, 1, i);
      add(`${A}.indexer.wk`, 'attn', h, id, 1, i);
      add(`${A}.indexer.weights_proj`, 'attn', h, ih, 1, i);
    }
    return;
  }
  const kvH = x?.kind === 'attention' ? x.kvHeads : f.kvHeads;
  const hs = x?.kind === 'attention' ? x.headSize : f.headDim;
  const hv = x?.kind === 'attention' ? x.headSizeV : f.headDim;
  add(`${A}.q_proj`, 'attn', h, f.heads * hs, 1, i);
  add(`${A}.k_proj`, 'attn', h, kvH * hs, 1, i);
  add(`${A}.v_proj`, 'attn', h, kvH * hv, 1, i);
  add(`${A}.o_proj`, 'attn', f.heads * hv, h, 1, i);
}

/**
 * The MTP / next-n layers a checkpoint carries (DeepSeek-V3 num_nextn_predict_layers, Qwen3.5/Qwen3-Next
 * mtp_num_hidden_layers, GLM-4.5 num_nextn_predict_layers): vLLM's main model does not load them (deepseek_v2.py
 * load_weights skips get_spec_layer_idx_from_weight_name), only a speculative MTP proposer does. One decoder layer
 * each, plus its eh_proj (2h x h).
 */
export function mtpLayers(c: Json): number {
  return posInt(c.num_nextn_predict_layers) ?? posInt(c.mtp_num_hidden_layers) ?? posInt(c.num_mtp_layers) ?? 0;
}

/**
 * Whether a checkpoint tensor name belongs to an MTP layer: mtp.* (Qwen3.5, Qwen3-Next) or model.layers.N with N >=
 * num_hidden_layers (DeepSeek, GLM).
 */
export function isMtpTensor(name: string, layers: number): boolean {
  if (/(^|\.)mtp\./.test(name)) return true;
  const m = /(?:^|\.)layers\.(\d+)\./.exec(name);
  return !!m && Number(m[1]) >= layers && !/vision|visual|vit\b|audio/.test(name);
}

/**
 * The vision tower of a multimodal checkpoint, from its vision_config: transformer blocks (q, k, v, o of hidden x
 * hidden; an MLP of up + down, gated with a third matrix where the activation is silu), the patch embedding, learned
 * position embeddings and, where the config names them (Qwen-VL: spatial_merge_size, out_hidden_size), the patch
 * merger. An estimate: each family adds its own small parts (norms, extra mergers), and the plan says so. Undefined
 * when the config has no vision_config or not enough of it.
 */
export function visionModules(raw: Json): WeightModule[] | undefined {
  const v = raw.vision_config;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const c = v as Json;
  const depth = posInt(c.depth) ?? posInt(c.num_hidden_layers);
  const h = posInt(c.hidden_size) ?? posInt(c.embed_dim);
  const inter = posInt(c.intermediate_size) ?? (h ? 4 * h : undefined);
  if (!depth || !h || !inter) return undefined;
  const mats = typeof c.hidden_act === 'string' && /silu|swiglu/.test(c.hidden_act) ? 3 : 2;
  const out: WeightModule[] = [];
  const add = (name: string, inF: number, outF: number, count = 1) =>
    out.push({ name, role: 'vision', in: inF, out: outF, count });
  add('visual.blocks.0.attn.qkv', h, 3 * h, depth);
  add('visual.blocks.0.attn.proj', h, h, depth);
  add('visual.blocks.0.mlp.fc', h, inter * (mats - 1), depth);
  add('visual.blocks.0.mlp.down', inter, h, depth);
  const patch = posInt(c.patch_size) ?? 14;
  add(
    'visual.patch_embed',
    (posInt(c.in_channels) ?? posInt(c.num_channels) ?? 3) * (posInt(c.temporal_patch_size) ?? 1) * patch * patch,
    h,
  );
  const img = posInt(c.image_size);
  const positions = posInt(c.num_position_embeddings) ?? (img ? (img / patch) ** 2 : 0);
  if (positions) add('visual.pos_embed', positions, h);
  const merge = posInt(c.spatial_merge_size);
  const outH = posInt(c.out_hidden_size);
  if (merge && outH) {
    add('visual.merger.fc1', h * merge * merge, h * merge * merge);
    add('visual.merger.fc2', h * merge * merge, outH);
  }
  return out;
}
