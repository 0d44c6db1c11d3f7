// The per-GPU memory budget: the numbers vLLM itself logs at start-up ("GPU KV cache size: N tokens",
// "Maximum concurrency for L tokens per request: Cx"), computed before anything is launched.
import type { Profile } from './schema.js';
import { GIB as GiB } from '../nvidia/units.js';

export function weightBytesPerParam(p: Profile): number {
  const q = p.engine.quantization?.toLowerCase();
  if (q === 'fp8' || q === 'fbgemm_fp8' || q === 'modelopt') return 1;
  if (q && /awq|gptq|bitsandbytes|int4|marlin/.test(q)) return 0.5;
  if (p.engine.dtype === 'float32') return 4;
  return p.model.weightBytesPerParam;
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
  kvBytesPerToken: number;
  availableKvBytes: number;
  kvTokens: number;
  maxModelLen: number;
  maxConcurrency: number;
  fits: boolean;
  largestMaxModelLen: number;
  notes: string[];
}

export function planMemory(p: Profile, gpuMemoryBytes: number): MemoryPlan {
  const tp = p.parallel.tensor;
  const pp = p.parallel.pipeline;
  const m = p.model;
  const notes: string[] = [];
  const weightsTotal = m.parameters * weightBytesPerParam(p);
  const weightsPerGpu = weightsTotal / (tp * pp);
  const budget = gpuMemoryBytes * p.engine.gpuMemoryUtilization;
  const reserve = reserveBytes(p);
  const kvLayers = m.kvLayers ?? m.layers;
  const kvLayersPerGpu = Math.ceil(kvLayers / pp);
  const kvHeadsReplicated = tp > m.kvHeads;
  // A TP above the KV head count replicates heads: each GPU still holds one whole head.
  const kvHeadsPerGpu = Math.max(1, Math.floor(m.kvHeads / tp));
  const kvBytesPerToken = 2 * kvLayersPerGpu * kvHeadsPerGpu * m.headDim * kvDtypeBytes(p);
  const availableKv = Math.max(0, budget - weightsPerGpu - reserve);
  const blockSize = p.engine.blockSize ?? 16;
  const kvTokens = Math.floor(availableKv / kvBytesPerToken / blockSize) * blockSize;
  const maxModelLen = p.engine.maxModelLen ?? m.maxContext;
  const maxConcurrency = kvTokens / maxModelLen;
  const largest = Math.min(kvTokens, m.maxContext);
  if (kvLayers < m.layers) {
    notes.push(`only ${kvLayers} of ${m.layers} layers keep a KV cache (hybrid attention); the others keep a fixed per-sequence state, not counted per token`);
  }
  if (kvHeadsReplicated) notes.push(`TP ${tp} is above the ${m.kvHeads} KV heads: each GPU keeps a full copy of one KV head`);
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
    kvTokens,
    maxModelLen,
    maxConcurrency,
    fits: kvTokens >= maxModelLen,
    largestMaxModelLen: largest,
    notes,
  };
}

/** re-exported for the planner's callers; the definition is src/nvidia/units.ts */
export { GIB } from '../nvidia/units.js';
