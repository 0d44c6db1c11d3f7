// Several vLLM servers on one GPU, pure: what each needs (the planner's per-server figures) added up
// against what the GPU has, and a verdict with the numbers.
//
// What one server takes (vLLM V1, gpu_worker.py determine_available_memory / the free-memory check at
// start): with engine.gpuMemoryUtilization u, its own budget u x TOTAL (a per-instance limit since the
// V1 engine: "if you have two vLLM instances running on the same GPU, you can set the GPU memory
// utilization to 0.5 for each", vLLM's EngineArgs help), and it refuses to start when the GPU has
// less than that free ("Free memory on device ... is less than desired GPU memory utilization").
// With engine.kvCacheMemoryBytes the share is not used for the KV cache: it takes its weights, that
// many bytes of KV cache and its reserve (activations, CUDA graphs, NCCL).
//
// What the GPU has: a discrete GPU its total less what the driver keeps (total - free with nothing
// running: 615 MiB of 143,771 on the H200 capture). That is also the total vLLM's share multiplies:
// torch.cuda.mem_get_info's total on the real H200 was 143,157 MiB, nvidia-smi's 143,771 (measured
// with scripts/device-colocate.py, test/fixtures/device/colocate-h200). Each process holds about
// 520 MiB beyond its share there (its CUDA context: nvidia-smi showed 64,940 MiB for a 0.45 share of
// 64,421), counted per server. What is free now: nvidia-smi's memory.free. DGX Spark's
// GB10 has no memory of its own: the shares are of the 128 GB the CPU uses too, so the OS and the
// page cache need room. NVIDIA's Spark playbooks give vLLM 0.4 to 0.8 of it and drop the page cache
// before a large load; the sum of the servers on a Spark is held to 0.8 of MemTotal (the most
// the playbooks give), and what is free now is MemAvailable.
import type { Profile } from './schema.js';
import type { ModelFacts } from '../model/facts.js';
import { planMemory, GIB } from './planner.js';

export interface GpuMemory {
  /** the GPU's memory (a Spark: MemTotal of /proc/meminfo) */
  totalBytes: number;
  /** free now (nvidia-smi memory.free; a Spark: MemAvailable), when read */
  freeBytes?: number;
  /** a discrete GPU's memory the driver keeps (total - free with nothing running); default 615 MiB */
  driverBytes?: number;
  /** unified memory (DGX Spark): shared with the CPU */
  unified?: boolean;
}

/** The most of a Spark's unified memory the servers together may take (NVIDIA's playbooks go up to 0.8). */
export const SPARK_MAX_SHARE = 0.8;
export const DEFAULT_DRIVER_BYTES = 615 * 2 ** 20;
/** What one process holds beyond its share (CUDA context), measured on the H200: 64,940 - 64,421 MiB. */
export const CONTEXT_BYTES = 520 * 2 ** 20;

/** The total a share is of: what CUDA reports (a discrete GPU's memory less the driver's part; a Spark's MemTotal). */
export function shareBase(gpu: Pick<GpuMemory, 'totalBytes' | 'driverBytes' | 'unified'>): number {
  return gpu.unified ? gpu.totalBytes : gpu.totalBytes - (gpu.driverBytes ?? DEFAULT_DRIVER_BYTES);
}

export interface ServerNeed {
  name: string;
  /** engine.gpuMemoryUtilization */
  share: number;
  /** engine.kvCacheMemoryBytes, when set */
  kvCacheMemoryBytes?: number;
  /** the planner's weights per GPU and reserve, bytes */
  weightsBytes: number;
  reserveBytes: number;
}

/** What one server takes of this GPU, bytes (its CUDA context included). Pure. */
export function needBytes(s: ServerNeed, gpu: Pick<GpuMemory, 'totalBytes' | 'driverBytes' | 'unified'>): number {
  return (
    (s.kvCacheMemoryBytes !== undefined
      ? s.weightsBytes + s.kvCacheMemoryBytes + s.reserveBytes
      : s.share * shareBase(gpu)) + CONTEXT_BYTES
  );
}

/** The servers' room on this GPU: its total less the driver's part, or (a Spark) 0.8 of it. */
export function usableBytes(gpu: GpuMemory): number {
  return gpu.unified ? SPARK_MAX_SHARE * gpu.totalBytes : gpu.totalBytes - (gpu.driverBytes ?? DEFAULT_DRIVER_BYTES);
}

/** A profile's need on a GPU of this size, from the planner's figures. */
export function serverNeed(name: string, p: Profile, gpuBytes: number, facts?: ModelFacts): ServerNeed {
  const plan = planMemory(p, gpuBytes, facts);
  return {
    name,
    share: p.engine.gpuMemoryUtilization,
    kvCacheMemoryBytes: p.engine.kvCacheMemoryBytes,
    weightsBytes: plan.weightsPerGpuBytes,
    reserveBytes: plan.reserveBytes,
  };
}

interface Colocation {
  fits: boolean;
  /** every server's need and the sum, against the room: the numbers a person checks */
  needs: Array<{ name: string; bytes: number; how: string }>;
  sumBytes: number;
  usableBytes: number;
  /** free now, and what the newcomer needs of it (vLLM's own check at its start) */
  freeBytes?: number;
  problems: string[];
  /** one line: "a 0.45 + b 0.40 = 121.9 of 142.4 GiB" */
  summary: string;
}

const g = (b: number) => `${(b / GIB).toFixed(1)} GiB`;

/**
 * Whether `newcomer` fits on a GPU that `running` already use. Two rules, both with numbers: the sum
 * of every server's need within the room (the plan), and the newcomer's need within what is free
 * now (what vLLM checks as it starts; the running servers' use is already out of it).
 */
export function judgeColocation(gpu: GpuMemory, running: ServerNeed[], newcomer: ServerNeed): Colocation {
  const all = [...running, newcomer];
  const needs = all.map((s) => ({
    name: s.name,
    bytes: needBytes(s, gpu),
    how: `${s.kvCacheMemoryBytes !== undefined ? `weights ${g(s.weightsBytes)} + KV ${g(s.kvCacheMemoryBytes)} + reserve ${g(s.reserveBytes)}` : `${s.share} x ${g(shareBase(gpu))}`} + context ${g(CONTEXT_BYTES)}`,
  }));
  const sum = needs.reduce((n, x) => n + x.bytes, 0);
  const room = usableBytes(gpu);
  const problems: string[] = [];
  const mine = needs.at(-1)!;
  const listed = needs.map((x) => `${x.name} ${g(x.bytes)} (${x.how})`).join(' + ');
  if (sum > room)
    problems.push(
      `${listed} = ${g(sum)}, more than the ${g(room)} ${gpu.unified ? `the servers may take of this Spark's ${g(gpu.totalBytes)} unified memory (${SPARK_MAX_SHARE} of it: the OS and the page cache need the rest)` : `this GPU has for them (${g(gpu.totalBytes)} less the driver's ${g(gpu.driverBytes ?? DEFAULT_DRIVER_BYTES)})`}`,
    );
  // vLLM's own check at its start: free >= share x total (the context it creates comes out of that)
  const startNeed = mine.bytes - CONTEXT_BYTES;
  if (gpu.freeBytes !== undefined && startNeed > gpu.freeBytes)
    problems.push(
      `${mine.name} needs ${g(startNeed)} at its start and the GPU has ${g(gpu.freeBytes)} free now: vLLM would refuse ("Free memory on device ... is less than desired GPU memory utilization")`,
    );
  // a share too small for its own weights and reserve is the planner's finding, said here too
  for (const s of all)
    if (s.kvCacheMemoryBytes === undefined && s.share * shareBase(gpu) <= s.weightsBytes + s.reserveBytes)
      problems.push(
        `${s.name}: ${s.share} x ${g(shareBase(gpu))} = ${g(s.share * shareBase(gpu))} leaves no KV cache after ${g(s.weightsBytes)} of weights and ${g(s.reserveBytes)} of reserve`,
      );
  const summary = `${needs.map((x) => `${x.name} ${g(x.bytes)}`).join(' + ')} = ${g(sum)} of ${g(room)}${gpu.freeBytes !== undefined ? ` (${g(gpu.freeBytes)} free now)` : ''}`;
  return {
    fits: problems.length === 0,
    needs,
    sumBytes: sum,
    usableBytes: room,
    freeBytes: gpu.freeBytes,
    problems,
    summary,
  };
}

/** The largest share that would still fit next to `running` (for the fix a refusal prints). */
export function largestShare(gpu: GpuMemory, running: ServerNeed[]): number {
  const left = usableBytes(gpu) - running.reduce((n, s) => n + needBytes(s, gpu), 0);
  const now = gpu.freeBytes !== undefined ? Math.min(left - CONTEXT_BYTES, gpu.freeBytes) : left - CONTEXT_BYTES;
  return Math.max(0, Math.floor((now / shareBase(gpu)) * 100) / 100);
}
