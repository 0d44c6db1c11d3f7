// The per-GPU memory budget: the numbers vLLM itself logs at start-up ("GPU KV cache size: N tokens",
// "Maximum concurrency for L tokens per request: Cx"), computed before anything is launched.
import type { Profile } from './schema.js';
import { GIB as GiB } from '../nvidia/units.js';
import type { ModelFacts } from '../model/facts.js';
import { kvValuesPerTokenPerLayer } from '../model/facts.js';
import { factsFromProfile } from '../model/merge.js';

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
  /** KV-cache bytes of one token across this GPU's full-attention and sliding-window layers */
  kvBytesPerToken: number;
  availableKvBytes: number;
  /** "GPU KV cache size: N tokens", as vLLM logs it */
  kvTokens: number;
  maxModelLen: number;
  /** "Maximum concurrency for L tokens per request: Cx" */
  maxConcurrency: number;
  fits: boolean;
  largestMaxModelLen: number;
  /** linear-attention state per sequence on this GPU (hybrid models), bytes */
  stateBytesPerSeq: number;
  blockSize: number;
  notes: string[];
}

const cdiv = (a: number, b: number) => Math.ceil(a / b);

/** Bytes the checkpoint's weights take: the safetensors index's size, unless the engine quantizes them differently. */
export function weightsBytes(p: Profile, m: ModelFacts): number {
  const q = p.engine.quantization?.toLowerCase();
  const online = (q && q !== m.quantization) || p.engine.dtype === 'float32';
  if (m.weightBytes && !online) return m.weightBytes;
  return m.parameters * (q || p.engine.dtype === 'float32' ? weightBytesPerParam(p) : m.weightBytesPerParam);
}

/**
 * vLLM's hybrid KV-cache manager (v1/core/kv_cache_utils.py): layers of one kind form groups of
 * equal size (the smaller kind's count, or the larger's when they are within 1.5x); every group
 * draws whole blocks of one page size from one pool, num_blocks = memory / page / group size. A
 * request at max_model_len takes cdiv(L, block) blocks in a full-attention group, cdiv(min(window
 * - 1 + in-flight tokens, L), block) + 1 in a sliding one, one block (its state) in a linear one.
 * Concurrency = num_blocks / blocks per request; the logged size = concurrency x L tokens.
 */
function kvCapacity(kinds: { full: number; sliding: number; linear: number }, pagePerLayer: number, avail: number, L: number, bs: number, window: number, inFlight: number, statePage: number) {
  // A linear layer whose state size is unknown (facts from a profile) is left out, as before there were config files.
  const buckets = (['full', 'sliding', 'linear'] as const).filter((k) => kinds[k] > 0 && (k !== 'linear' || statePage > 0)).map((k) => ({ kind: k, n: kinds[k] }));
  if (!buckets.length) return { tokens: 0, concurrency: 0, blockSize: bs };
  const min = Math.min(...buckets.map((b) => b.n));
  const max = Math.max(...buckets.map((b) => b.n));
  const groupSize = max < min * 1.5 ? max : min;
  // vLLM makes every group's page the same size: a linear state larger than an attention page grows the
  // attention block (more tokens a block, in steps of 16) until its page holds the state.
  if (statePage > pagePerLayer && pagePerLayer > 0) {
    const perToken = pagePerLayer / bs;
    bs = cdiv(cdiv(statePage, perToken), 16) * 16;
    pagePerLayer = bs * perToken;
  }
  const page = Math.max(pagePerLayer, statePage);
  const blocks = Math.floor(avail / page / groupSize);
  let perRequest = 0;
  for (const b of buckets) {
    const groups = cdiv(b.n, groupSize);
    const each = b.kind === 'full' ? cdiv(L, bs) : b.kind === 'sliding' ? cdiv(Math.min(window - 1 + inFlight, L), bs) + 1 : 1;
    perRequest += groups * each;
  }
  const concurrency = blocks / perRequest;
  return { tokens: Math.floor(concurrency * L), concurrency, blockSize: bs };
}

export function planMemory(p: Profile, gpuMemoryBytes: number, facts?: ModelFacts): MemoryPlan {
  const tp = p.parallel.tensor;
  const pp = p.parallel.pipeline;
  const m = facts ?? factsFromProfile(p.model);
  if (!m) throw new Error(`profile ${p.name}: planMemory needs the model's facts (resolve the profile first)`);
  const notes: string[] = [];
  const weightsTotal = weightsBytes(p, m);
  const weightsPerGpu = weightsTotal / (tp * pp);
  const budget = gpuMemoryBytes * p.engine.gpuMemoryUtilization;
  const reserve = reserveBytes(p);
  const full = Math.ceil(m.kvLayers / pp);
  const sliding = Math.ceil(m.slidingLayers / pp);
  const linear = Math.ceil(m.linearLayers / pp);
  const kvLayersPerGpu = full + sliding;
  const kvHeadsReplicated = !m.mla && tp > m.kvHeads;
  // A TP above the KV head count replicates heads: each GPU still holds one whole head.
  const kvHeadsPerGpu = m.mla ? 1 : Math.max(1, Math.floor(m.kvHeads / tp));
  const perLayerToken = kvValuesPerTokenPerLayer(m, tp) * kvDtypeBytes(p);
  const kvBytesPerToken = kvLayersPerGpu * perLayerToken;
  const stateBytesPerSeq = m.linearStateBytes ? Math.ceil(m.linearStateBytes / pp / tp) : 0;
  const availableKv = p.engine.kvCacheMemoryBytes ?? Math.max(0, budget - weightsPerGpu - reserve);
  const blockSize = p.engine.blockSize ?? 16;
  const maxModelLen = p.engine.maxModelLen ?? m.maxContext;
  const inFlight = p.engine.maxNumBatchedTokens ?? 2048;
  const statePage = linear && stateBytesPerSeq ? stateBytesPerSeq / linear : 0;
  const cap = kvCapacity({ full, sliding, linear }, perLayerToken * blockSize, availableKv, maxModelLen, blockSize, m.slidingWindow ?? maxModelLen, inFlight, statePage);
  const perToken = kvBytesPerToken || 1;
  const largest = Math.min(Math.floor(availableKv / perToken / blockSize) * blockSize, m.maxContext);
  if (m.linearLayers) {
    notes.push(
      `only ${m.kvLayers} of ${m.layers} layers keep a KV cache (hybrid attention); the ${m.linearLayers} linear-attention layers keep a fixed state per sequence${stateBytesPerSeq ? ` (${(stateBytesPerSeq / 1024 ** 2).toFixed(2)} MiB per sequence per GPU)` : ', not counted per token'}`,
    );
  }
  if (m.slidingLayers) notes.push(`${m.slidingLayers} of ${m.layers} layers use a ${m.slidingWindow}-token sliding window: a request holds at most window + in-flight tokens of them`);
  if (m.mla) notes.push(`MLA: ${m.mla.kvLoraRank} + ${m.mla.qkRopeHeadDim} cached values per token per layer (the latent, not heads x head_dim), the same on every TP rank`);
  if (kvHeadsReplicated) notes.push(`TP ${tp} is above the ${m.kvHeads} KV heads: each GPU keeps a full copy of one KV head`);
  if (p.engine.kvCacheMemoryBytes !== undefined) notes.push(`the KV cache is engine.kvCacheMemoryBytes (${p.engine.kvCacheMemoryBytes} B), not a share of GPU memory`);
  return {
    gpuMemoryBytes,
    gpuMemoryUtilization: p.engine.gpuMemoryUtilization,
    budgetBytes: budget,
    weightsTotalBytes: weightsTotal,
    weightsPerGpuBytes: weightsPerGpu,
    reserveBytes: reserve,
    kvLayersPerGpu,
    kvHeadsPerGpu,
    kvHeadsReplicated,
    kvBytesPerToken,
    availableKvBytes: availableKv,
    kvTokens: cap.tokens,
    maxModelLen,
    maxConcurrency: cap.concurrency,
    fits: cap.concurrency >= 1,
    largestMaxModelLen: largest,
    stateBytesPerSeq,
    blockSize: cap.blockSize,
    notes,
  };
}

/** re-exported for the planner's callers; the definition is src/nvidia/units.ts */
export { GIB } from '../nvidia/units.js';
