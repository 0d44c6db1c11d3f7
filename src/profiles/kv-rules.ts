// vLLM's KV-cache arithmetic, rule by rule, for a target vLLM version: the spec each layer gets
// (vllm/v1/kv_cache_interface.py), the hybrid block size (vllm/platforms/interface.py
// _align_hybrid_block_size), the grouping and page-size unifying (vllm/v1/core/kv_cache_utils.py
// get_kv_cache_groups), the number of blocks, the blocks one max-length request needs, and the two
// numbers vLLM logs: "GPU KV cache size: N tokens" and "Maximum concurrency for L tokens per request".
// Read from upstream main at the commits of the version tables (0.11: 2025-09-26, 0.17: 2026-03-03,
// 0.25: 2026-07-08, 0.28: 2026-08-14); where a rule changed between two tables, the commit is named.
// Pure.
import type { LayerCache, Layout } from '../model/layout.js';
import { compareVersions } from './versions.js';
import { own } from '../util/own.js';

const cdiv = (a: number, b: number) => Math.ceil(a / b);

const DTYPE_BYTES: Record<string, number> = {
  float32: 4,
  float: 4,
  float16: 2,
  half: 2,
  bfloat16: 2,
  fp8: 1,
  fp8_e4m3: 1,
  fp8_e5m2: 1,
  uint8: 1,
};

/** The rules that changed across the versions sparkctl knows, each with where it changed. */
interface VersionRules {
  version: string;
  /**
   * "GPU KV cache size" = int(concurrency x max_model_len) (get_kv_cache_capacity, #42206 2026-06-12, in the 0.25
   * table); before: num_blocks // groups x min block size
   */
  tokensFromConcurrency: boolean;
  /**
   * sliding / chunked admission counts max_concurrent_batches x max_num_batched_tokens in flight
   * (VllmConfig.max_in_flight_tokens, #47728 2026-07-08, in the 0.25 table); before: max_num_batched_tokens
   */
  inFlightByBatches: boolean;
  /**
   * chunked local attention keeps the hybrid manager (VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE default 1,
   * #29627 2025-12-16); before: it was switched off and chunked layers were allocated as full attention
   */
  chunkedKeepsHybridManager: boolean;
  /**
   * hybrid (Mamba) models enable prefix caching by default (ModelConfig.is_prefix_caching_supported, #40996 2026-07-10,
   * after the 0.25 table), so MambaModelConfig sets mamba_cache_mode "align"
   */
  hybridPrefixCachingDefault: boolean;
  /**
   * NemotronH's default SSM state dtype when the config names none (models/config.py NemotronHForCausalLMConfig):
   * float32 since #39032 2026-04-06, float16 since #29978 2025-12-05, before: the model dtype
   */
  nemotronSsmDefault: 'float32' | 'float16' | 'auto';
  /**
   * Qwen3.5's config mamba_ssm_dtype is honoured (models/config.py Qwen3_5ForConditionalGenerationConfig, #34489
   * 2026-02-12)
   */
  qwen35SsmDtype: boolean;
}

const since = (v: string, w: string) => compareVersions(v, w) >= 0;

export function rulesFor(version: string): VersionRules {
  return {
    version,
    tokensFromConcurrency: since(version, '0.25.0'),
    inFlightByBatches: since(version, '0.25.0'),
    chunkedKeepsHybridManager: since(version, '0.13.0'),
    hybridPrefixCachingDefault: since(version, '0.26.0'),
    nemotronSsmDefault: since(version, '0.25.0') ? 'float32' : since(version, '0.13.0') ? 'float16' : 'auto',
    qwen35SsmDtype: since(version, '0.17.0'),
  };
}

export interface KvInputs {
  layout: Layout;
  tp: number;
  pp: number;
  /** bytes of the model dtype (the KV and conv-state dtype when kvCacheDtype is auto) */
  modelDtype: string;
  kvCacheDtype: string;
  /** --block-size, when given */
  blockSize?: number;
  maxModelLen: number;
  maxNumBatchedTokens: number;
  /** --enable-prefix-caching / --no-enable-prefix-caching, when given */
  prefixCaching?: boolean;
  /**
   * --mamba-cache-mode, when given (vLLM's MambaModelConfig still decides: "all" only for models with Mamba prefix
   * caching)
   */
  mambaCacheMode?: 'none' | 'align' | 'all';
  /** async scheduling (vLLM's default on GPUs; --no-async-scheduling, and the CPU platform, turn it off) */
  asyncScheduling?: boolean;
  availableBytes: number;
  version: string;
}

type MambaMode = 'none' | 'align' | 'all';

/** One cache spec on one layer, as vLLM builds it (sizes per rank). */
interface Spec {
  layer: number;
  kind: 'full' | 'sliding' | 'chunked' | 'mamba';
  /** what tells equal specs apart (vLLM groups by spec equality) */
  key: string;
  blockSize: number;
  pageBytes: number;
  /** blocks one request of max_model_len holds in this spec's group (max_memory_usage_bytes / page) */
  blocksPerRequest: (L: number, bs: number) => number;
  label: string;
}

export interface KvGroup {
  kind: Spec['kind'];
  label: string;
  layers: number;
  blockSize: number;
  pageBytes: number;
  blocksPerRequest: number;
}

export interface KvPlan {
  rules: VersionRules;
  blockSize: number;
  /** the attention block size vLLM raises to so a page holds the Mamba state (hybrids), with the line it logs */
  hybridBlockSizeNote?: string;
  groups: KvGroup[];
  /** layers sharing one pool slot (vLLM's group size) */
  groupSize: number;
  pageBytes: number;
  numBlocks: number;
  blocksPerRequest: number;
  maxConcurrency: number;
  kvTokens: number;
  fits: boolean;
  largestMaxModelLen: number;
  /** recurrent state one request holds (Mamba/GDN layers, this rank), bytes; 0 when none */
  stateBytesPerRequest: number;
  /** KV bytes one token adds across the per-token caches of this rank (full, sliding, chunked, MLA, indexer) */
  kvBytesPerToken: number;
  mambaCacheMode: MambaMode;
  notes: string[];
}

export class KvNotModelled extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

const dtypeBytes = (d: string, field: string) => {
  const b = own(DTYPE_BYTES, d);
  if (b === undefined)
    throw new KvNotModelled(field, `${field} ${JSON.stringify(d)}: a dtype this planner does not model`);
  return b;
};

/** vLLM shards KV heads over TP, replicating when TP exceeds them (each rank keeps one). */
const headsPerRank = (h: number, tp: number) => (tp >= h ? 1 : Math.floor(h / tp));

/** mamba_utils.py: divide() raises unless the dimension splits evenly across TP. */
function divide(a: number, tp: number, what: string): number {
  if (a % tp) throw new KvNotModelled('parallel.tensor', `TP ${tp} does not divide ${what} (${a}); vLLM refuses it`);
  return a / tp;
}

function ssmDtype(inp: KvInputs, rules: VersionRules): string {
  const l = inp.layout;
  // models/config.py per-model hooks; otherwise mamba_ssm_cache_dtype "auto" = the conv dtype = the model dtype
  // (mamba_utils._mamba_state_dtype)
  if (l.family === 'nemotron_h')
    return l.ssmDtype ?? (rules.nemotronSsmDefault === 'auto' ? inp.modelDtype : rules.nemotronSsmDefault);
  if (l.family === 'qwen3_5' && rules.qwen35SsmDtype && l.ssmDtype) return l.ssmDtype;
  return inp.modelDtype;
}

/** The Mamba/GDN page (MambaSpec.page_size_bytes): conv state + temporal state, per rank. */
function mambaPage(c: Extract<LayerCache, { kind: 'mamba2' | 'gdn' }>, inp: KvInputs, ssm: string): number {
  const conv = dtypeBytes(inp.modelDtype, 'dtype');
  const st = dtypeBytes(ssm, 'mamba_ssm_cache_dtype');
  const tp = inp.tp;
  if (c.kind === 'mamba2') {
    // mamba2_state_shape: groups extended so every head's group is on its rank; conv (kernel - 1, (I + 2 G S) / tp),
    // temporal (H / tp, P, S)
    const groups = c.groups % tp === 0 ? c.groups : c.groups + (tp - c.groups);
    const convDim = divide(c.heads * c.headDim + 2 * groups * c.stateSize, tp, 'the Mamba conv dimension');
    return (c.convKernel - 1) * convDim * conv + divide(c.heads, tp, 'mamba_num_heads') * c.headDim * c.stateSize * st;
  }
  // gated_delta_net_state_shape: conv (kernel - 1, (2 Hk Dk + Hv Dv) / tp), temporal (Hv / tp, Dv, Dk)
  const convDim = divide(2 * c.kHeads * c.kDim + c.vHeads * c.vDim, tp, 'the Gated DeltaNet conv dimension');
  return (c.convKernel - 1) * convDim * conv + divide(c.vHeads, tp, 'linear_num_value_heads') * c.vDim * c.kDim * st;
}

interface SpecCtx {
  inp: KvInputs;
  bs: number;
  mambaMode: MambaMode;
  inFlight: number;
  kvBytes: number;
  ssm: string;
  chunkedKeepsHybridManager: boolean;
  /**
   * mamba_page_size_padded: the state page padded to the attention page of the hybrid block (platforms/interface.py)
   */
  padTo?: number;
}

/**
 * An attention layer's spec: FullAttentionSpec, SlidingWindowSpec or ChunkedLocalAttentionSpec (kv_cache_interface.py).
 */
function attentionSpec(layer: number, c: Extract<LayerCache, { kind: 'attention' }>, x: SpecCtx): Spec {
  const perToken = headsPerRank(c.kvHeads, x.inp.tp) * (c.headSize + c.headSizeV) * x.kvBytes; // FullAttentionSpec.real_page_size_bytes / block_size
  const base = { layer, blockSize: x.bs, pageBytes: perToken * x.bs };
  const { inFlight } = x;
  if (c.window) {
    // SlidingWindowSpec.max_admission_blocks_per_request: cdiv(min(window - 1 + in flight, L), bs) + 1
    const w = c.window;
    return {
      ...base,
      kind: 'sliding',
      key: `sw:${w}:${perToken}`,
      blocksPerRequest: (L, b) => cdiv(Math.min(w - 1 + inFlight, L), b) + 1,
      label: `sliding window ${w}`,
    };
  }
  if (c.chunk && x.chunkedKeepsHybridManager) {
    // ChunkedLocalAttentionSpec.max_admission_blocks_per_request: cdiv(min(chunk + in flight, L), bs)
    const k = c.chunk;
    return {
      ...base,
      kind: 'chunked',
      key: `cl:${k}:${perToken}`,
      blocksPerRequest: (L, b) => cdiv(Math.min(k + inFlight, L), b),
      label: `chunked local ${k}`,
    };
  }
  return {
    ...base,
    kind: 'full',
    key: `fa:${perToken}`,
    blocksPerRequest: (L, b) => cdiv(L, b),
    label: c.chunk ? `full (chunked ${c.chunk}, allocated as full attention)` : 'full attention',
  };
}

/**
 * MLA's latent (MLAAttentionSpec), V3.2's indexer keys (an MLAAttentionSpec of uint8), a Mamba/GDN state (MambaSpec).
 */
function otherSpec(layer: number, c: Exclude<LayerCache, { kind: 'attention' }>, x: SpecCtx): Spec {
  const full = (L: number, b: number) => cdiv(L, b);
  if (c.kind === 'mla') {
    // MLAAttentionSpec.real_page_size_bytes: one head of kv_lora_rank + rope; V3.2's fp8 cache is fp8_ds_mla, 656 B a
    // token
    const fp8ds = c.sparse && x.kvBytes === 1;
    const perToken = fp8ds ? 656 : c.headSize * x.kvBytes;
    return {
      layer,
      kind: 'full',
      key: `mla:${perToken}`,
      blockSize: x.bs,
      pageBytes: perToken * x.bs,
      blocksPerRequest: full,
      label: fp8ds ? 'MLA (fp8_ds_mla)' : 'MLA latent',
    };
  }
  if (c.kind === 'indexer')
    return {
      layer,
      kind: 'full',
      key: `idx:${c.bytesPerToken}`,
      blockSize: x.bs,
      pageBytes: c.bytesPerToken * x.bs,
      blocksPerRequest: full,
      label: 'sparse-attention indexer keys',
    };
  const page = Math.max(mambaPage(c, x.inp, x.ssm), x.padTo ?? 0);
  const mode = x.mambaMode;
  // MambaSpec.max_memory_usage_bytes: one state ("none"), two ("align"), one a block of the request ("all")
  return {
    layer,
    kind: 'mamba',
    key: `mamba:${c.kind}:${page}`,
    blockSize: x.bs,
    pageBytes: page,
    blocksPerRequest: (L, b) => (mode === 'all' ? cdiv(L, b) : mode === 'align' ? 2 : 1),
    label: c.kind === 'mamba2' ? `Mamba2 state (SSM ${x.ssm})` : `Gated DeltaNet state (recurrent ${x.ssm})`,
  };
}

/** Every layer's spec on one rank, before page-size unifying. */
function buildSpecs(
  inp: KvInputs,
  rules: VersionRules,
  bs: number,
  mambaMode: MambaMode,
  inFlight: number,
  kvBytes: number,
  padTo?: number,
): Spec[] {
  const x: SpecCtx = {
    inp,
    bs,
    mambaMode,
    inFlight,
    kvBytes,
    ssm: ssmDtype(inp, rules),
    chunkedKeepsHybridManager: rules.chunkedKeepsHybridManager,
    padTo,
  };
  return inp.layout.layers.flatMap((caches, layer) =>
    caches.map((c) => (c.kind === 'attention' ? attentionSpec(layer, c, x) : otherSpec(layer, c, x))),
  );
}

/** vLLM's get_pp_indices: layers split evenly, the remainder to the partitions before the last. */
export function ppPartitions(n: number, pp: number): number[] {
  const parts = Array.from({ length: pp }, () => Math.floor(n / pp));
  const rem = n % pp;
  for (let i = 2; i < rem + 2; i++) parts[pp - i]! += 1;
  return parts;
}

interface Grouped {
  groups: Array<{ spec: Spec; layers: number[] }>;
  page: number;
}

/**
 * get_kv_cache_groups: one group for equal or same-type specs, else unify pages and split buckets into equal groups.
 */
function group(specs: Spec[]): Grouped | { uniformType: Spec[] } {
  const keys = new Set(specs.map((s) => s.key));
  if (keys.size === 1)
    return { groups: [{ spec: specs[0]!, layers: specs.map((s) => s.layer) }], page: specs[0]!.pageBytes };
  // UniformTypeKVCacheSpecs: every layer needs the same token slots (all full attention, MLA and indexer alike) -> one
  // group, page = sum
  if (specs.every((s) => s.kind === 'full')) return { uniformType: specs };
  // unify_kv_cache_spec_page_size: smaller attention pages grow their block size by the integer ratio; Mamba pages are
  // padded
  const max = Math.max(...specs.map((s) => s.pageBytes));
  const unified = specs.map((s) => {
    if (s.pageBytes === max || s.kind === 'mamba') return { ...s, pageBytes: max };
    if (max % s.pageBytes)
      throw new KvNotModelled(
        'layer sizes',
        `a ${s.label} page of ${s.pageBytes} B does not divide the largest page (${max} B); vLLM cannot unify them either`,
      );
    const ratio = max / s.pageBytes;
    return { ...s, blockSize: s.blockSize * ratio, pageBytes: max, key: `${s.key}@${s.blockSize * ratio}` };
  });
  // _get_kv_cache_groups_uniform_page_size: bucket by spec, group size = min bucket (max when within 1.5x),
  // layers[i::n] per group
  const buckets = new Map<string, Spec[]>();
  for (const s of unified) buckets.set(s.key, [...(buckets.get(s.key) ?? []), s]);
  const sizes = [...buckets.values()].map((b) => b.length);
  const min = Math.min(...sizes);
  const maxN = Math.max(...sizes);
  const groupSize = maxN < min * 1.5 ? maxN : min;
  const groups: Grouped['groups'] = [];
  for (const b of buckets.values()) {
    const n = cdiv(b.length, groupSize);
    for (let i = 0; i < n; i++)
      groups.push({ spec: b[0]!, layers: b.filter((_, j) => j % n === i).map((s) => s.layer) });
  }
  return { groups, page: max };
}

const gcd = (a: number, b: number): number => (b ? gcd(b, a % b) : a);
const lcm = (a: number, b: number) => (a / gcd(a, b)) * b;

/**
 * The hybrid block size (platforms/interface.py _align_hybrid_block_size): the attention block grows until its page
 * holds a Mamba state, and the state page is padded to that page (mamba_page_size_padded). In mode "all" the block is
 * also a multiple of the Mamba chunk (lcm(chunk, kernel alignment)).
 */
function hybridBlockSize(
  inp: KvInputs,
  rules: VersionRules,
  bs: number,
  kvBytes: number,
  mode: MambaMode,
): { bs: number; note?: string; padTo?: number } {
  const mambas = inp.layout.layers
    .flat()
    .filter((c): c is Extract<LayerCache, { kind: 'mamba2' | 'gdn' }> => c.kind === 'mamba2' || c.kind === 'gdn');
  if (!mambas.length) return { bs };
  const attn = inp.layout.layers.flat().find((c) => c.kind === 'attention' || c.kind === 'mla');
  if (!attn) return { bs };
  if (attn.kind === 'mla' && attn.sparse)
    throw new KvNotModelled(
      'index_topk',
      'a sparse-MLA + Mamba hybrid (its fp8_ds_mla and indexer pages next to a Mamba state), which this planner does not model',
    );
  // attn_page_size_1_token = FullAttentionSpec(block_size=1, get_num_kv_heads, get_head_size): K and V of the KV heads;
  // MLA: 1 head of kv_lora_rank + rope
  const page1 =
    attn.kind === 'mla'
      ? 2 * attn.headSize * kvBytes
      : headsPerRank(attn.kvHeads, inp.tp) * 2 * attn.headSize * kvBytes;
  const mamba = Math.max(...mambas.map((m) => mambaPage(m, inp, ssmDtype(inp, rules))));
  // kernel alignment: the backend's smallest kernel block (FlashAttention and the CPU backend: MultipleOf(16)), at
  // least the block size; with MLA at least 128 (the TRTLLM / FlashInfer MLA decode kernels' alignment; every MLA
  // backend's smallest block is <= 128)
  const align = Math.max(16, bs, attn.kind === 'mla' ? 128 : 0);
  let attnBs: number;
  if (mode === 'all') {
    // base chunk: mamba_block_size when given (not modelled: refused in the planner), else
    // ModelConfig.get_mamba_chunk_size()
    const chunk = lcm(inp.layout.mambaChunkSize ?? 2048, align);
    attnBs = chunk * cdiv(cdiv(mamba, page1), chunk);
  } else attnBs = align * cdiv(mamba, align * page1);
  const out = Math.max(bs, attnBs);
  return {
    bs: out,
    padTo: out * page1,
    note:
      bs >= attnBs
        ? undefined
        : `Setting attention block size to ${attnBs} tokens to ensure that attention page size is >= mamba page size (vLLM's own line; a Mamba state is ${mamba} B, an attention token ${page1} B)`,
  };
}

function capacity(specs: Spec[], inp: KvInputs, L: number, bs: number) {
  const g = group(specs);
  if ('uniformType' in g) {
    // get_kv_cache_config_from_groups, UniformTypeKVCacheSpecs: num_blocks = memory // sum of pages; a request needs
    // cdiv(L, bs)
    const page = g.uniformType.reduce((a, s) => a + s.pageBytes, 0);
    return {
      page,
      groupSize: g.uniformType.length,
      groups: [
        {
          spec: { ...g.uniformType[0]!, label: [...new Set(g.uniformType.map((s) => s.label))].join(' + ') },
          layers: g.uniformType.map((s) => s.layer),
        },
      ],
      perPool: page,
      blocksPerRequest: cdiv(L, bs),
      uniform: true,
    };
  }
  const groupSize = Math.max(...g.groups.map((x) => x.layers.length));
  const blocksPerRequest = g.groups.reduce((a, x) => a + x.spec.blocksPerRequest(L, x.spec.blockSize), 0);
  return { page: g.page, groupSize, groups: g.groups, perPool: g.page * groupSize, blocksPerRequest, uniform: false };
}

/** The KV bytes of one value: the model dtype for "auto", else the cache dtype's. */
function kvBytesOf(inp: KvInputs): number {
  if (inp.kvCacheDtype === 'auto') return dtypeBytes(inp.modelDtype, 'dtype');
  if (inp.kvCacheDtype === 'bfloat16' || inp.kvCacheDtype === 'float16') return 2;
  if (inp.kvCacheDtype.startsWith('fp8')) return 1;
  // int4 / int8 per token-head, nvfp4, turboquant: their own page layouts (TQFullAttentionSpec, kv_quant_mode), not
  // modelled
  throw new KvNotModelled(
    'engine.kvCacheDtype',
    `--kv-cache-dtype ${inp.kvCacheDtype}: a quantized KV cache layout this planner does not model`,
  );
}

/**
 * mamba_cache_mode as vLLM settles it (models/config.py MambaModelConfig.verify_and_update_config): "none" without
 * prefix caching; with it, "none" becomes "align", and "all" is kept only where the model class supports Mamba prefix
 * caching (SupportsMambaPrefixCaching: nemotron_h.py among the families read here; Qwen3-Next / Qwen3.5 fall back to
 * "align").
 */
function mambaModeOf(inp: KvInputs, rules: VersionRules, notes: string[]): MambaMode {
  if (!inp.layout.layers.some((l) => l.some((c) => c.kind === 'mamba2' || c.kind === 'gdn'))) return 'none';
  const prefix = inp.prefixCaching ?? rules.hybridPrefixCachingDefault;
  if (!prefix) return 'none';
  if (!rules.hybridPrefixCachingDefault)
    throw new KvNotModelled(
      'engine.enablePrefixCaching',
      `prefix caching on a hybrid model before vLLM 0.26 sets mamba_cache_mode "all" (block size aligned to the Mamba chunk size), which this planner does not model`,
    );
  if (inp.mambaCacheMode === 'all' && inp.layout.family === 'nemotron_h') return 'all';
  if (inp.mambaCacheMode === 'all')
    notes.push(
      `--mamba-cache-mode all: this model has no Mamba prefix caching, so vLLM falls back to "align" (its own warning)`,
    );
  return 'align';
}

/**
 * Pipeline parallelism: vLLM groups over the whole model, then each stage allocates for its own layers; the smallest
 * num_blocks wins.
 */
function stages(all: Spec[], whole: ReturnType<typeof capacity>, inp: KvInputs, bs: number) {
  const parts = ppPartitions(inp.layout.layers.length, inp.pp);
  let numBlocks = Number.POSITIVE_INFINITY;
  let start = 0;
  let stateBytes = 0;
  let kvPerToken = 0;
  for (const [stageNo, n] of parts.entries()) {
    const mine = new Set(Array.from({ length: n }, (_, i) => start + i));
    start += n;
    const stage = whole.uniform
      ? all.filter((s) => mine.has(s.layer)).reduce((a, s) => a + s.pageBytes, 0)
      : whole.page * Math.max(0, ...whole.groups.map((g) => g.layers.filter((l) => mine.has(l)).length));
    if (stage > 0) numBlocks = Math.min(numBlocks, Math.floor(inp.availableBytes / stage));
    if (stageNo === 0) {
      // a state page is padded to the common page (unify_kv_cache_spec_page_size), and that is what a request holds
      const mamba = all.filter((s) => mine.has(s.layer) && s.kind === 'mamba');
      stateBytes = mamba.reduce(
        (a, s) => a + (whole.uniform ? s.pageBytes : whole.page) * s.blocksPerRequest(inp.maxModelLen, bs),
        0,
      );
      kvPerToken = all
        .filter((s) => mine.has(s.layer) && s.kind !== 'mamba')
        .reduce((a, s) => a + s.pageBytes / s.blockSize, 0);
    }
  }
  return { numBlocks: Number.isFinite(numBlocks) ? numBlocks : 0, stateBytes, kvPerToken };
}

/**
 * _check_enough_kv_cache_memory / estimate_max_model_len: the longest max_model_len whose request still fits the
 * blocks.
 */
function largestFitting(all: Spec[], inp: KvInputs, bs: number, numBlocks: number): number {
  let lo = 0;
  let hi = inp.maxModelLen;
  while (lo < hi) {
    const mid = Math.floor((lo + hi + 1) / 2);
    if (capacity(all, inp, mid, bs).blocksPerRequest <= numBlocks) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** The plan of the KV cache vLLM will build, or KvNotModelled naming what it cannot follow. */
export function planKvCache(inp: KvInputs): KvPlan {
  const rules = rulesFor(inp.version);
  const notes: string[] = [];
  const kvBytes = kvBytesOf(inp);
  const mambaMode = mambaModeOf(inp, rules, notes);
  // VllmConfig.max_concurrent_batches: 2 with async scheduling (the default on GPUs) at PP 1, else PP
  const batches = inp.asyncScheduling === false || inp.pp > 1 ? inp.pp : 2;
  const inFlight = rules.inFlightByBatches ? batches * inp.maxNumBatchedTokens : inp.maxNumBatchedTokens;
  const hyb = hybridBlockSize(inp, rules, inp.blockSize ?? 16, kvBytes, mambaMode);
  const bs = hyb.bs;
  if (hyb.note) notes.push(hyb.note);
  const all = buildSpecs(inp, rules, bs, mambaMode, inFlight, kvBytes, hyb.padTo);
  // The chunked-local metadata builder refuses a chunk that is not a multiple of the block (the first request fails)
  const badChunk = all.find((sp) => sp.kind === 'chunked' && Number(sp.key.split(':')[1]) % bs !== 0);
  if (badChunk)
    notes.push(
      `vLLM will fail the first request: attn_chunk_size ${badChunk.key.split(':')[1]} is not divisible by block_size ${bs} (set engine.blockSize to a divisor of it)`,
    );
  if (!all.length)
    throw new KvNotModelled(
      'num_hidden_layers',
      'no layer keeps a cache (an attention-free model): vLLM gives it no KV cache figure',
    );
  const whole = capacity(all, inp, inp.maxModelLen, bs);
  const { numBlocks, stateBytes, kvPerToken } = stages(all, whole, inp, bs);
  const concurrency = numBlocks / whole.blocksPerRequest;
  const minBs = Math.min(...whole.groups.map((g) => g.spec.blockSize));
  const kvTokens = rules.tokensFromConcurrency
    ? Math.floor(concurrency * inp.maxModelLen)
    : Math.floor(numBlocks / whole.groups.length) * minBs;
  return {
    rules,
    blockSize: bs,
    hybridBlockSizeNote: hyb.note,
    groups: whole.groups.map((g) => ({
      kind: g.spec.kind,
      label: g.spec.label,
      layers: g.layers.length,
      blockSize: g.spec.blockSize,
      pageBytes: whole.uniform ? whole.page : g.spec.pageBytes,
      blocksPerRequest: g.spec.blocksPerRequest(inp.maxModelLen, g.spec.blockSize),
    })),
    groupSize: whole.groupSize,
    pageBytes: whole.page,
    numBlocks,
    blocksPerRequest: whole.blocksPerRequest,
    maxConcurrency: concurrency,
    kvTokens,
    fits: whole.blocksPerRequest <= numBlocks,
    largestMaxModelLen: largestFitting(all, inp, bs, numBlocks),
    stateBytesPerRequest: stateBytes,
    kvBytesPerToken: kvPerToken,
    mambaCacheMode: mambaMode,
    notes,
  };
}
