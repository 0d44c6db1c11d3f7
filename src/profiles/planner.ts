// The per-GPU memory budget: the numbers vLLM itself logs at start-up ("GPU KV cache size: N tokens",
// "Maximum concurrency for L tokens per request: Cx"), computed before anything is launched.
import type { Profile } from './schema.js';
import { GIB as GiB } from '../nvidia/units.js';
import type { ModelFacts } from '../model/facts.js';
import { factsFromProfile } from '../model/merge.js';
import type { Layout, LayerCache } from '../model/layout.js';
import { planKvCache, KvNotModelled, type KvGroup, type KvPlan } from './kv-rules.js';
import { parseVersion } from './versions.js';
import { FACT_VERSIONS } from './vllm-fact-versions.js';

export function weightBytesPerParam(p: Profile): number {
  const q = p.engine.quantization?.toLowerCase();
  if (q === 'fp8' || q === 'fbgemm_fp8' || q === 'modelopt') return 1;
  if (q && /awq|gptq|bitsandbytes|int4|marlin/.test(q)) return 0.5;
  if (p.engine.dtype === 'float32') return 4;
  return p.model.weightBytesPerParam ?? 2;
}

export function kvDtypeBytes(p: Profile): number {
  if (p.engine.kvCacheDtype.startsWith('fp8')) return 1;
  if (p.engine.dtype === 'float32') return 4;
  return 2;
}

/** Memory vLLM needs beyond weights and KV cache: activations, CUDA graphs, NCCL buffers, allocator slack. */
export function reserveBytes(p: Profile): number {
  const base = 1.5 * GiB;
  const graphs = p.engine.enforceEager ? 0 : 0.5 * GiB;
  const nccl = p.parallel.tensor * p.parallel.pipeline > 1 ? 0.25 * GiB : 0;
  return base + graphs + nccl;
}

export interface MemoryPlan {
  gpuMemoryBytes: number;
  gpuMemoryUtilization: number;
  budgetBytes: number;
  weightsTotalBytes: number;
  weightsPerGpuBytes: number;
  reserveBytes: number;
  kvLayersPerGpu: number;
  kvHeadsPerGpu: number;
  kvHeadsReplicated: boolean;
  /** KV-cache bytes of one token across this GPU's per-token caches (full, sliding, chunked, MLA, indexer) */
  kvBytesPerToken: number;
  availableKvBytes: number;
  /** "GPU KV cache size: N tokens", as vLLM logs it (0 when not modelled) */
  kvTokens: number;
  maxModelLen: number;
  /** "Maximum concurrency for L tokens per request: Cx" (0 when not modelled) */
  maxConcurrency: number;
  fits: boolean;
  largestMaxModelLen: number;
  /** recurrent state one request holds on this GPU (Mamba / Gated DeltaNet layers), bytes */
  stateBytesPerSeq: number;
  /** the block size vLLM will use (the hybrid alignment included) */
  blockSize: number;
  notes: string[];
  /** the vLLM version whose rules the figures follow */
  vllmRules: string;
  /** the KV cache groups vLLM will build (kv_cache_utils.get_kv_cache_groups), one row each */
  kvGroups: KvGroup[];
  /** blocks in the pool and blocks one max-length request takes, as vLLM counts them */
  numBlocks: number;
  blocksPerRequest: number;
  /** where the layout was read (a config field), or 'the profile' */
  layoutFrom: string;
  /** a config field the planner does not model: no KV or concurrency figure is stated */
  notModelled: { field: string; why: string } | null;
}

/** The target vLLM whose rules the plan follows: the profile's resolved version, else the newest table. */
export function planVersion(p: Profile): string {
  const v = p.engine.vllmVersion;
  return v && v !== 'auto' && parseVersion(v) ? v : FACT_VERSIONS[FACT_VERSIONS.length - 1]!;
}

/** vLLM's default --max-num-batched-tokens for the API server (arg_utils.py _get_default_max_num_batched_tokens, 0.28 table). */
export function defaultMaxNumBatchedTokens(gpuMemoryBytes: number): number {
  if (gpuMemoryBytes >= 160 * GiB) return 16384;
  // >= 70 GiB and not an A100: 8192; the planner does not know the GPU's name, and an A100-80GB gets 2048
  return gpuMemoryBytes >= 70 * GiB ? 8192 : 2048;
}

/** The value of `--flag V` or `--flag=V` in an argv (the last one wins, as in argparse); true for a bare flag. */
function argOf(argv: string[], flag: string): string | true | undefined {
  let v: string | true | undefined;
  for (const [i, a] of argv.entries()) {
    if (a === flag) v = argv[i + 1] !== undefined && !argv[i + 1]!.startsWith('--') ? argv[i + 1]! : true;
    else if (a.startsWith(`${flag}=`)) v = a.slice(flag.length + 1);
  }
  return v;
}

// engine.extraArgs flags that change what vLLM allocates for the KV cache. The plan follows --no-async-scheduling and
// --mamba-cache-mode; for the others it says "not modelled" (exit 2) rather than a figure that ignores them.
const KV_FLAGS: Array<[flags: string[], why: string]> = [
  [
    ['--speculative-config', '--spec-method', '--spec-model', '--spec-tokens'],
    'speculative decoding: a draft model or MTP layers keep their own KV cache (the proposer layers join the KV cache groups, and Mamba layers keep num_speculative_blocks more states: kv_cache_interface.py MambaSpec), which this planner does not model',
  ],
  [['--kv-cache-dtype'], 'the KV cache dtype: set engine.kvCacheDtype (auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16) instead; int4/int8 per token-head, nvfp4 and turboquant layouts are not modelled'],
  [['--block-size'], 'the block size: set engine.blockSize instead'],
  [['--max-model-len'], 'the context: set engine.maxModelLen instead'],
  [['--max-num-batched-tokens'], 'the step size (the sliding and chunked caps count it): set engine.maxNumBatchedTokens instead'],
  [['--enable-prefix-caching', '--no-enable-prefix-caching'], 'prefix caching (the Mamba states a request holds): set engine.enablePrefixCaching instead'],
  [['--kv-cache-memory-bytes', '--gpu-memory-utilization'], 'the KV budget: set engine.kvCacheMemoryBytes or engine.gpuMemoryUtilization instead'],
  [['--num-gpu-blocks-override'], 'a fixed number of KV blocks, which this planner does not model'],
  [['--mamba-cache-dtype', '--mamba-ssm-cache-dtype', '--mamba-block-size'], 'the Mamba state dtype or block, which the plan takes from the config and the per-model hooks of vLLM only'],
];

/** The first KV-changing flag of engine.extraArgs the plan does not follow, as a "not modelled" field. */
function unmodelledKvFlag(extra: string[]): { field: string; why: string } | undefined {
  for (const [i, a] of extra.entries()) {
    const flag = a.split('=')[0]!;
    const hit = KV_FLAGS.find(([fs]) => fs.includes(flag));
    if (hit) return { field: `engine.extraArgs[${i}] (${flag})`, why: hit[1] };
  }
  const mode = argOf(extra, '--mamba-cache-mode');
  if (mode !== undefined && mode !== 'none' && mode !== 'align' && mode !== 'all')
    return { field: 'engine.extraArgs (--mamba-cache-mode)', why: `${JSON.stringify(mode)} is not a mode vLLM has (none, align, all)` };
  return undefined;
}

/** A layout from the counts alone (facts from a profile, or a profile that overrides the layer facts). */
function layoutFromCounts(m: ModelFacts): Layout {
  const attn = (window?: number): LayerCache => ({ kind: 'attention', kvHeads: m.kvHeads, headSize: m.headDim, headSizeV: m.headDim, window });
  const layers: LayerCache[][] = [];
  for (let i = 0; i < m.kvLayers; i++) layers.push(m.mla ? [{ kind: 'mla', headSize: m.mla.kvLoraRank + m.mla.qkRopeHeadDim, sparse: false }] : [attn()]);
  for (let i = 0; i < m.slidingLayers; i++) layers.push([attn(m.slidingWindow)]);
  // linear layers whose state size is not known hold nothing the plan can count (said in the notes)
  for (let i = 0; i < m.linearLayers; i++) layers.push([]);
  return { layers, readFrom: 'the profile' };
}

type PlanBase = Pick<
  MemoryPlan,
  | 'gpuMemoryBytes'
  | 'gpuMemoryUtilization'
  | 'budgetBytes'
  | 'weightsTotalBytes'
  | 'weightsPerGpuBytes'
  | 'reserveBytes'
  | 'kvHeadsPerGpu'
  | 'kvHeadsReplicated'
  | 'availableKvBytes'
  | 'maxModelLen'
  | 'vllmRules'
>;

/** The plan that states no KV or concurrency figure: a field it does not model (the budget and weights still stand). */
function declinedPlan(base: PlanBase, p: Profile, field: string, why: string): MemoryPlan {
  return {
    ...base,
    kvLayersPerGpu: 0,
    kvBytesPerToken: 0,
    kvTokens: 0,
    maxConcurrency: 0,
    fits: false,
    largestMaxModelLen: 0,
    stateBytesPerSeq: 0,
    blockSize: p.engine.blockSize ?? 16,
    notes: [`not modelled: ${field} (${why}); no KV cache or concurrency figure is stated`],
    kvGroups: [],
    numBlocks: 0,
    blocksPerRequest: 0,
    layoutFrom: field,
    notModelled: { field, why },
  };
}

/** What the figures rest on, said under the plan: hybrid states, local-attention caps, MLA, replicated heads, a fixed KV size. */
function planNotes(p: Profile, m: ModelFacts, layout: Layout, kv: KvPlan, kvHeadsReplicated: boolean): string[] {
  const notes: string[] = [];
  const kvLayers = layout.layers.filter((l) => l.some((c) => c.kind === 'attention' || c.kind === 'mla')).length;
  const stateLayers = layout.layers.filter((l) => l.some((c) => c.kind === 'mamba2' || c.kind === 'gdn')).length;
  if (stateLayers) {
    notes.push(
      `only ${kvLayers} of ${layout.layers.length} layers keep a KV cache (hybrid); the ${stateLayers} Mamba/Gated-DeltaNet layers keep a fixed state per request: ${(kv.stateBytesPerRequest / 1024 ** 2).toFixed(2)} MiB per request per GPU (mamba_cache_mode ${kv.mambaCacheMode})`,
    );
  } else if (m.linearLayers)
    notes.push(`only ${kvLayers} of ${m.layers} layers keep a KV cache; the ${m.linearLayers} linear-attention layers keep a state per sequence that the profile's facts do not size`);
  const local = kv.groups.filter((g) => g.kind === 'sliding' || g.kind === 'chunked');
  if (local.length) notes.push(`${[...new Set(local.map((g) => g.label))].join(', ')}: a request holds at most window + in-flight tokens of those layers`);
  if (m.mla) notes.push(`MLA: ${m.mla.kvLoraRank} + ${m.mla.qkRopeHeadDim} cached values per token per layer (the latent, not heads x head_dim), the same on every TP rank`);
  if (kvHeadsReplicated) notes.push(`TP ${p.parallel.tensor} is above the ${m.kvHeads} KV heads: each GPU keeps a full copy of one KV head`);
  if (p.engine.kvCacheMemoryBytes !== undefined) notes.push(`the KV cache is engine.kvCacheMemoryBytes (${p.engine.kvCacheMemoryBytes} B), not a share of GPU memory`);
  return notes;
}

export function planMemory(p: Profile, gpuMemoryBytes: number, facts?: ModelFacts): MemoryPlan {
  const tp = p.parallel.tensor;
  const pp = p.parallel.pipeline;
  const m = facts ?? factsFromProfile(p.model);
  if (!m) throw new Error(`profile ${p.name}: planMemory needs the model's facts (resolve the profile first)`);
  const weightsTotal = weightsBytes(p, m);
  const budget = gpuMemoryBytes * p.engine.gpuMemoryUtilization;
  const reserve = reserveBytes(p);
  const kvHeadsReplicated = !m.mla && tp > m.kvHeads;
  const availableKv = p.engine.kvCacheMemoryBytes ?? Math.max(0, budget - weightsTotal / (tp * pp) - reserve);
  const maxModelLen = p.engine.maxModelLen ?? m.maxContext;
  const base: PlanBase = {
    gpuMemoryBytes,
    gpuMemoryUtilization: p.engine.gpuMemoryUtilization,
    budgetBytes: budget,
    weightsTotalBytes: weightsTotal,
    weightsPerGpuBytes: weightsTotal / (tp * pp),
    reserveBytes: reserve,
    kvHeadsPerGpu: m.mla ? 1 : Math.max(1, Math.floor(m.kvHeads / tp)),
    kvHeadsReplicated,
    availableKvBytes: availableKv,
    maxModelLen,
    vllmRules: planVersion(p),
  };
  if (m.layout && 'notModelled' in m.layout) return declinedPlan(base, p, m.layout.notModelled, m.layout.why);
  const flag = unmodelledKvFlag(p.engine.extraArgs);
  if (flag) return declinedPlan(base, p, flag.field, flag.why);
  const layout = m.layout ?? layoutFromCounts(m);
  const notes: string[] = [];
  const isMla = layout.layers.some((l) => l.some((c) => c.kind === 'mla'));
  // MLA backends pick their own block: FlashMLA (Hopper) supports only 64 (v1/attention/backends/mla/flashmla.py)
  const blockSize = p.engine.blockSize ?? (isMla ? 64 : undefined);
  if (isMla && p.engine.blockSize === undefined) notes.push('MLA: block size 64 (FlashMLA, Hopper); other MLA backends choose their own (engine.blockSize sets it)');
  // --kv-cache-dtype auto with a ModelOpt checkpoint whose quantization_config names a KV scheme: vLLM uses that
  // (engine/arg_utils.py create_engine_config, utils/torch_utils.py resolve_kv_cache_dtype_string)
  const kvDtype = p.engine.kvCacheDtype === 'auto' && m.kvCacheDtype ? m.kvCacheDtype : p.engine.kvCacheDtype;
  if (kvDtype !== p.engine.kvCacheDtype) notes.push(`KV cache ${kvDtype}: --kv-cache-dtype auto takes the checkpoint's quantization_config kv_cache_scheme, as vLLM does`);
  let kv: KvPlan;
  try {
    kv = planKvCache({
      layout,
      tp,
      pp,
      modelDtype: modelDtype(p, m),
      kvCacheDtype: kvDtype,
      blockSize,
      maxModelLen,
      maxNumBatchedTokens: p.engine.maxNumBatchedTokens ?? defaultMaxNumBatchedTokens(gpuMemoryBytes),
      prefixCaching: p.engine.enablePrefixCaching,
      // the flags vLLM reads, where the profile passes them through
      asyncScheduling: p.engine.extraArgs.includes('--no-async-scheduling') ? false : undefined,
      mambaCacheMode: argOf(p.engine.extraArgs, '--mamba-cache-mode') as 'none' | 'align' | 'all' | undefined,
      availableBytes: availableKv,
      version: base.vllmRules,
    });
  } catch (e) {
    if (e instanceof KvNotModelled) return declinedPlan(base, p, e.field, e.message);
    throw e;
  }
  const kvLayers = layout.layers.filter((l) => l.some((c) => c.kind === 'attention' || c.kind === 'mla')).length;
  return {
    ...base,
    kvLayersPerGpu: Math.ceil(kvLayers / pp),
    kvBytesPerToken: kv.kvBytesPerToken,
    kvTokens: kv.kvTokens,
    maxConcurrency: kv.maxConcurrency,
    fits: kv.fits,
    largestMaxModelLen: kv.largestMaxModelLen,
    stateBytesPerSeq: kv.stateBytesPerRequest,
    blockSize: kv.blockSize,
    notes: [...notes, ...kv.notes, ...planNotes(p, m, layout, kv, kvHeadsReplicated)],
    kvGroups: kv.groups,
    numBlocks: kv.numBlocks,
    blocksPerRequest: kv.blocksPerRequest,
    layoutFrom: layout.readFrom,
    notModelled: null,
  };
}

/** The dtype vLLM runs the model in (--dtype, else the checkpoint's). */
function modelDtype(p: Profile, m: ModelFacts): string {
  const d = p.engine.dtype === 'auto' ? (m.dtype ?? 'bfloat16') : p.engine.dtype;
  return d === 'half' ? 'float16' : d === 'float' ? 'float32' : d;
}

/** Bytes the checkpoint's weights take: the safetensors index's size, unless the engine quantizes them differently. */
export function weightsBytes(p: Profile, m: ModelFacts): number {
  const q = p.engine.quantization?.toLowerCase();
  const online = (q && q !== m.quantization) || p.engine.dtype === 'float32';
  if (m.weightBytes && !online) return m.weightBytes;
  return m.parameters * (q || p.engine.dtype === 'float32' ? weightBytesPerParam(p) : m.weightBytesPerParam);
}

/** re-exported for the planner's callers; the definition is src/nvidia/units.ts */
export { GIB } from '../nvidia/units.js';
