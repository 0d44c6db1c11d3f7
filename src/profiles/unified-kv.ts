// A DGX Spark's KV cache in bytes: on GB10's unified memory vLLM sizes the KV cache from what MemAvailable does while
// it profiles (utils/mem_utils.py MemorySnapshot.measure takes psutil's available memory on an integrated GPU), so the
// page cache of the weights it reads and the compiler's heap are counted as non-torch memory and subtracted from the KV
// cache for good (eugr/spark-vllm-docker PR #286: 9.5 GiB of KV where 40 were expected). --kv-cache-memory-bytes skips
// that sizing (v1/worker/gpu_worker.py determine_available_memory), so serve passes the planned figure where the target
// vLLM takes the flag and the profile does not set it. Pure.
import type { Platform, Profile } from './schema.js';
import type { ModelFacts } from '../model/facts.js';
import { planMemory, GIB } from './planner.js';
import { optionStatus } from './vllm-flags.js';

interface UnifiedKv {
  bytes: number;
  note: string;
}

/**
 * The KV bytes serve fixes on a unified-memory GPU, or undefined (not unified, already set, unknown version or facts,
 * nothing left).
 */
export function unifiedKvBytes(
  p: Profile,
  platform: Pick<Platform, 'name' | 'gpu'>,
  gpuMemoryBytes: number | undefined,
  facts: ModelFacts | undefined,
): UnifiedKv | undefined {
  if (!platform.gpu.unifiedMemory || p.engine.kvCacheMemoryBytes !== undefined || !facts) return undefined;
  const v = p.engine.vllmVersion;
  if (v === 'auto' || optionStatus(v, '--kv-cache-memory-bytes') !== 'yes') return undefined;
  const total = gpuMemoryBytes ?? platform.gpu.memoryGiB * GIB;
  const plan = planMemory(p, total, facts);
  if (plan.notModelled || plan.weightsTotalBytes <= 0 || plan.availableKvBytes <= 0) return undefined;
  const bytes = Math.floor(plan.availableKvBytes);
  return {
    bytes,
    note: `${platform.name}: unified memory: the KV cache is fixed at ${(bytes / GIB).toFixed(2)} GiB (--kv-cache-memory-bytes ${bytes}, what ${p.engine.gpuMemoryUtilization} of ${(total / GIB).toFixed(1)} GiB leaves after the weights) so vLLM's profiling cannot count the page cache against it (eugr/spark-vllm-docker PR #286); --set engine.kvCacheMemoryBytes=BYTES chooses another size`,
  };
}
