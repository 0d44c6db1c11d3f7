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

const cdiv = (a: number, b: number) => Math.ceil(a / b);

export const DTYPE_BYTES: Record<string, number> = { float32: 4, float: 4, float16: 2, half: 2, bfloat16: 2, fp8: 1, fp8_e4m3: 1, fp8_e5m2: 1, uint8: 1 };

/** The rules that changed across the versions sparkctl knows, each with where it changed. */
export interface VersionRules {
  version: string;
  /** "GPU KV cache size" = int(concurrency x max_model_len) (get_kv_cache_capacity, #42206 2026-06-12, in the 0.25 table); before: num_blocks // groups x min block size */
  tokensFromConcurrency: boolean;
  /** sliding / chunked admission counts max_concurrent_batches x max_num_batched_tokens in flight (VllmConfig.max_in_flight_tokens, #47728 2026-07-08, in the 0.25 table); before: max_num_batched_tokens */
  inFlightByBatches: boolean;
  /** chunked local attention keeps the hybrid manager (VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE default 1, #29627 2025-12-16); before: it was switched off and chunked layers were allocated as full attention */
  chunkedKeepsHybridManager: boolean;
  /** hybrid (Mamba) models enable prefix caching by default (ModelConfig.is_prefix_caching_supported, #40996 2026-07-10, after the 0.25 table), so MambaModelConfig sets mamba_cache_mode "align" */
  hybridPrefixCachingDefault: boolean;
  /** NemotronH's default SSM state dtype when the config names none (models/config.py NemotronHForCausalLMConfig): float32 since #39032 2026-04-06, float16 since #29978 2025-12-05, before: the model dtype */
  nemotronSsmDefault: 'float32' | 'float16' | 'auto';
  /** Qwen3.5's config mamba_ssm_dtype is honoured (models/config.py Qwen3_5ForConditionalGenerationConfig, #34489 2026-02-12) */
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
  /** async scheduling (vLLM's default on GPUs; --no-async-scheduling, and the CPU platform, turn it off) */
  asyncScheduling?: boolean;
  availableBytes: number;
  version: string;
}

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
  mambaCacheMode: 'none' | 'align';
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
  const b = DTYPE_BYTES[d];
  if (b === undefined) throw new KvNotModelled(field, `${field} ${JSON.stringify(d)}: a dtype this planner does not model`);
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
  // models/config.py per-model hooks; otherwise mamba_ssm_cache_dtype "auto" = the conv dtype = the model dtype (mamba_utils._mamba_state_dtype)
  if (l.family === 'nemotron_h') return l.ssmDtype ?? (rules.nemotronSsmDefault === 'auto' ? inp.modelDtype : rules.nemotronSsmDefault);
  if (l.family === 'qwen3_5' && rules.qwen35SsmDtype && l.ssmDtype) return l.ssmDtype;
  return inp.modelDtype;
}

/** The Mamba/GDN page (MambaSpec.page_size_bytes): conv state + temporal state, per rank. */
function mambaPage(c: Extract<LayerCache, { kind: 'mamba2' | 'gdn' }>, inp: KvInputs, ssm: string): number {
  const conv = dtypeBytes(inp.modelDtype, 'dtype');
  const st = dtypeBytes(ssm, 'mamba_ssm_cache_dtype');
  const tp = inp.tp;
  if (c.kind === 'mamba2') {
    // mamba2_state_shape: groups extended so every head's group is on its rank; conv (kernel - 1, (I + 2 G S) / tp), temporal (H / tp, P, S)
    const groups = c.groups % tp === 0 ? c.groups : c.groups + (tp - c.groups);
    const convDim = divide(c.heads * c.headDim + 2 * groups * c.stateSize, tp, 'the Mamba conv dimension');
    return (c.convKernel - 1) * convDim * conv + divide(c.heads, tp, 'mamba_num_heads') * c.headDim * c.stateSize * st;
  }
  // gated_delta_net_state_shape: conv (kernel - 1, (2 Hk Dk + Hv Dv) / tp), temporal (Hv / tp, Dv, Dk)
  const convDim = divide(2 * c.kHeads * c.kDim + c.vHeads * c.vDim, tp, 'the Gated DeltaNet conv dimension');
  return (c.convKernel - 1) * convDim * conv + divide(c.vHeads, tp, 'linear_num_value_heads') * c.vDim * c.kDim * st;
}

/** Every layer's spec on one rank, before page-size unifying. */
function buildSpecs(inp: KvInputs, rules: VersionRules, bs: number, mambaMode: 'none' | 'align', inFlight: number, kvBytes: number): Spec[] {
  const specs: Spec[] = [];
  const ssm = ssmDtype(inp, rules);
  for (const [layer, caches] of inp.layout.layers.entries()) {
    for (const c of caches) {
      if (c.kind === 'attention') {
        const h = headsPerRank(c.kvHeads, inp.tp);
        const perToken = h * (c.headSize + c.headSizeV) * kvBytes; // FullAttentionSpec.real_page_size_bytes / block_size
        if (c.window) {
          // SlidingWindowSpec.max_admission_blocks_per_request: cdiv(min(window - 1 + in flight, L), bs) + 1
          const w = c.window;
          specs.push({
            layer,
            kind: 'sliding',
            key: `sw:${w}:${perToken}`,
            blockSize: bs,
            pageBytes: perToken * bs,
            blocksPerRequest: (L, b) => cdiv(Math.min(w - 1 + inFlight, L), b) + 1,
            label: `sliding window ${w}`,
          });
        } else if (c.chunk && rules.chunkedKeepsHybridManager) {
          // ChunkedLocalAttentionSpec.max_admission_blocks_per_request: cdiv(min(chunk + in flight, L), bs)
          const k = c.chunk;
          specs.push({
            layer,
            kind: 'chunked',
            key: `cl:${k}:${perToken}`,
            blockSize: bs,
            pageBytes: perToken * bs,
            blocksPerRequest: (L, b) => cdiv(Math.min(k + inFlight, L), b),
            label: `chunked local ${k}`,
          });
        } else
          specs.push({
            layer,
            kind: 'full',
            key: `fa:${perToken}`,
            blockSize: bs,
            pageBytes: perToken * bs,
            blocksPerRequest: (L, b) => cdiv(L, b),
            label: c.chunk ? `full (chunked ${c.chunk}, allocated as full attention)` : 'full attention',
          });
      } else if (c.kind === 'mla') {
        // MLAAttentionSpec.real_page_size_bytes: one head of kv_lora_rank + rope; V3.2's fp8 cache is fp8_ds_mla, 656 B a token
        const perToken = c.sparse && kvBytes === 1 ? 656 : c.headSize * kvBytes;
        specs.push({
          layer,
          kind: 'full',
          key: `mla:${perToken}`,
          blockSize: bs,
          pageBytes: perToken * bs,
          blocksPerRequest: (L, b) => cdiv(L, b),
          label: c.sparse && kvBytes === 1 ? 'MLA (fp8_ds_mla)' : 'MLA latent',
        });
      } else if (c.kind === 'indexer') {
        specs.push({
          layer,
          kind: 'full',
          key: `idx:${c.bytesPerToken}`,
          blockSize: bs,
          pageBytes: c.bytesPerToken * bs,
          blocksPerRequest: (L, b) => cdiv(L, b),
          label: 'sparse-attention indexer keys',
        });
      } else {
        const page = mambaPage(c, inp, ssm);
        // MambaSpec.max_memory_usage_bytes: one state ("none"), two ("align", prefix caching)
        specs.push({
          layer,
          kind: 'mamba',
          key: `mamba:${c.kind}:${page}`,
          blockSize: bs,
          pageBytes: page,
          blocksPerRequest: () => (mambaMode === 'align' ? 2 : 1),
          label: c.kind === 'mamba2' ? `Mamba2 state (SSM ${ssm})` : `Gated DeltaNet state (recurrent ${ssm})`,
        });
      }
    }
  }
  return specs;
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

/** get_kv_cache_groups: one group for equal or same-type specs, else unify pages and split buckets into equal groups. */
function group(specs: Spec[]): Grouped | { uniformType: Spec[] } {
  const keys = new Set(specs.map((s) => s.key));
  if (keys.size === 1) return { groups: [{ spec: specs[0]!, layers: specs.map((s) => s.layer) }], page: specs[0]!.pageBytes };
  // UniformTypeKVCacheSpecs: every layer needs the same token slots (all full attention, MLA and indexer alike) -> one group, page = sum
  if (specs.every((s) => s.kind === 'full')) return { uniformType: specs };
  // unify_kv_cache_spec_page_size: smaller attention pages grow their block size by the integer ratio; Mamba pages are padded
  const max = Math.max(...specs.map((s) => s.pageBytes));
  const unified = specs.map((s) => {
    if (s.pageBytes === max || s.kind === 'mamba') return { ...s, pageBytes: max };
    if (max % s.pageBytes) throw new KvNotModelled('layer sizes', `a ${s.label} page of ${s.pageBytes} B does not divide the largest page (${max} B); vLLM cannot unify them either`);
    const ratio = max / s.pageBytes;
    return { ...s, blockSize: s.blockSize * ratio, pageBytes: max, key: `${s.key}@${s.blockSize * ratio}` };
  });
  // _get_kv_cache_groups_uniform_page_size: bucket by spec, group size = min bucket (max when within 1.5x), layers[i::n] per group
  const buckets = new Map<string, Spec[]>();
  for (const s of unified) buckets.set(s.key, [...(buckets.get(s.key) ?? []), s]);
  const sizes = [...buckets.values()].map((b) => b.length);
  const min = Math.min(...sizes);
  const maxN = Math.max(...sizes);
  const groupSize = maxN < min * 1.5 ? maxN : min;
  const groups: Grouped['groups'] = [];
  for (const b of buckets.values()) {
    const n = cdiv(b.length, groupSize);
    for (let i = 0; i < n; i++) groups.push({ spec: b[0]!, layers: b.filter((_, j) => j % n === i).map((s) => s.layer) });
  }
  return { groups, page: max };
}

/** The hybrid block size (platforms/interface.py _align_hybrid_block_size, modes none/align): attention page >= Mamba page. */
function hybridBlockSize(inp: KvInputs, rules: VersionRules, bs: number, kvBytes: number): { bs: number; note?: string } {
  const mambas = inp.layout.layers.flat().filter((c): c is Extract<LayerCache, { kind: 'mamba2' | 'gdn' }> => c.kind === 'mamba2' || c.kind === 'gdn');
  if (!mambas.length) return { bs };
  const attn = inp.layout.layers.flat().find((c) => c.kind === 'attention' || c.kind === 'mla');
  if (!attn) return { bs };
  if (attn.kind === 'mla') throw new KvNotModelled('kv_lora_rank', 'an MLA + Mamba hybrid (its block alignment follows the MLA kernels), which this planner does not model');
  // attention page of one token from the model config's head size and KV heads (FullAttentionSpec(block_size=1))
  const page1 = headsPerRank(attn.kvHeads, inp.tp) * 2 * attn.headSize * kvBytes;
  const mamba = Math.max(...mambas.map((m) => mambaPage(m, inp, ssmDtype(inp, rules))));
  // kernel alignment: the backend's smallest kernel block (FlashAttention and the CPU backend: MultipleOf(16)), at least the block size
  const align = Math.max(16, bs);
  const attnBs = align * cdiv(mamba, align * page1);
  if (bs >= attnBs) return { bs };
  return {
    bs: attnBs,
    note: `Setting attention block size to ${attnBs} tokens to ensure that attention page size is >= mamba page size (vLLM's own line; a Mamba state is ${mamba} B, an attention token ${page1} B)`,
  };
}

function capacity(specs: Spec[], inp: KvInputs, L: number, bs: number) {
  const g = group(specs);
  if ('uniformType' in g) {
    // get_kv_cache_config_from_groups, UniformTypeKVCacheSpecs: num_blocks = memory // sum of pages; a request needs cdiv(L, bs)
    const page = g.uniformType.reduce((a, s) => a + s.pageBytes, 0);
    return {
      page,
      groupSize: g.uniformType.length,
      groups: [{ spec: { ...g.uniformType[0]!, label: [...new Set(g.uniformType.map((s) => s.label))].join(' + ') }, layers: g.uniformType.map((s) => s.layer) }],
      perPool: page,
      blocksPerRequest: cdiv(L, bs),
      uniform: true,
    };
  }
  const groupSize = Math.max(...g.groups.map((x) => x.layers.length));
  const blocksPerRequest = g.groups.reduce((a, x) => a + x.spec.blocksPerRequest(L, x.spec.blockSize), 0);
  return { page: g.page, groupSize, groups: g.groups, perPool: g.page * groupSize, blocksPerRequest, uniform: false };
}

/** The plan of the KV cache vLLM will build, or KvNotModelled naming what it cannot follow. */
export function planKvCache(inp: KvInputs): KvPlan {
  const rules = rulesFor(inp.version);
  const notes: string[] = [];
  const kvBytes = inp.kvCacheDtype === 'auto' || inp.kvCacheDtype === 'bfloat16' ? (inp.kvCacheDtype === 'bfloat16' ? 2 : dtypeBytes(inp.modelDtype, 'dtype')) : 1;
  const hasMamba = inp.layout.layers.some((l) => l.some((c) => c.kind === 'mamba2' || c.kind === 'gdn'));
  // Prefix caching on for a hybrid -> MambaModelConfig sets mamba_cache_mode "align" (two states a request)
  const prefix = inp.prefixCaching ?? (hasMamba ? rules.hybridPrefixCachingDefault : true);
  const mambaMode: 'none' | 'align' = hasMamba && prefix ? 'align' : 'none';
  if (hasMamba && prefix && !rules.hybridPrefixCachingDefault)
    throw new KvNotModelled(
      'engine.enablePrefixCaching',
      `prefix caching on a hybrid model before vLLM 0.26 sets mamba_cache_mode "all" (block size aligned to the Mamba chunk size), which this planner does not model`,
    );
  // VllmConfig.max_concurrent_batches: 2 with async scheduling (the default on GPUs) at PP 1, else PP
  const batches = inp.asyncScheduling === false || inp.pp > 1 ? inp.pp : 2;
  const inFlight = rules.inFlightByBatches ? batches * inp.maxNumBatchedTokens : inp.maxNumBatchedTokens;
  const hyb = hybridBlockSize(inp, rules, inp.blockSize ?? 16, kvBytes);
  const bs = hyb.bs;
  if (hyb.note) notes.push(hyb.note);
  const all = buildSpecs(inp, rules, bs, mambaMode, inFlight, kvBytes);
  // The chunked-local metadata builder refuses a chunk that is not a multiple of the block (the first request fails)
  const badChunk = all.find((sp) => sp.kind === 'chunked' && Number(sp.key.split(':')[1]) % bs !== 0);
  if (badChunk) notes.push(`vLLM will fail the first request: attn_chunk_size ${badChunk.key.split(':')[1]} is not divisible by block_size ${bs} (set engine.blockSize to a divisor of it)`);
  if (!all.length) throw new KvNotModelled('num_hidden_layers', 'no layer keeps a cache (an attention-free model): vLLM gives it no KV cache figure');
  // Pipeline parallelism: vLLM groups over the whole model, then each stage allocates for its own layers; the smallest num_blocks wins
  const parts = ppPartitions(inp.layout.layers.length, inp.pp);
  const whole = capacity(all, inp, inp.maxModelLen, bs);
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
      stateBytes = all.filter((s) => mine.has(s.layer) && s.kind === 'mamba').reduce((a, s) => a + (whole.uniform ? s.pageBytes : whole.page) * s.blocksPerRequest(0, 0), 0);
      kvPerToken = all.filter((s) => mine.has(s.layer) && s.kind !== 'mamba').reduce((a, s) => a + s.pageBytes / s.blockSize, 0);
    }
  }
  if (!Number.isFinite(numBlocks)) numBlocks = 0;
  const concurrency = numBlocks / whole.blocksPerRequest;
  const minBs = Math.min(...whole.groups.map((g) => g.spec.blockSize));
  const kvTokens = rules.tokensFromConcurrency ? Math.floor(concurrency * inp.maxModelLen) : Math.floor(numBlocks / whole.groups.length) * minBs;
  // _check_enough_kv_cache_memory / estimate: the longest max_model_len whose request still fits the blocks
  const fitsAt = (L: number) => capacity(all, inp, L, bs).blocksPerRequest <= numBlocks;
  let lo = 0;
  let hi = inp.maxModelLen;
  while (lo < hi) {
    const mid = Math.floor((lo + hi + 1) / 2);
    if (fitsAt(mid)) lo = mid;
    else hi = mid - 1;
  }
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
    largestMaxModelLen: lo,
    stateBytesPerRequest: stateBytes,
    kvBytesPerToken: kvPerToken,
    mambaCacheMode: mambaMode,
    notes,
  };
}
