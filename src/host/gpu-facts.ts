// The typed per-GPU facts that preflight hands to serve's plan (not the checks' human text), and the
// mapping from nvidia-smi's rows to them. Read by preflight (PreflightReport.gpus) and by the plan
// where it asks the host itself (src/engine/inputs.ts); consumed by src/engine/plan.ts.
import { gpuNum, type Gpu } from '../nvidia/smi.js';

interface GpuProcess {
  pid: number;
  name: string;
  usedMiB?: number;
}

export interface GpuFact {
  index: number;
  name?: string;
  uuid?: string;
  busId?: string;
  /** MiB, as nvidia-smi reports memory.total / memory.free */
  memoryTotalMiB?: number;
  memoryFreeMiB?: number;
  /** "9.0" */
  computeCapability?: string;
  /** compute processes on this GPU (holders of its memory) */
  processes: GpuProcess[];
}

/**
 * The typed per-GPU facts serve's plan reads (not the checks' human text): one per GPU nvidia-smi
 * listed, with the compute processes that hold its memory. A process is placed by its bus id; one
 * without a bus id (an older 3-field query) cannot be placed and is left out rather than guessed.
 */
export function gpuFacts(f: {
  gpus: Gpu[];
  computeApps?: Array<{ pid: number; name: string; usedMiB?: number; busId?: string }>;
}): GpuFact[] {
  const norm = (b: string | undefined) =>
    b
      ?.trim()
      .toLowerCase()
      .replace(/^0000(?=[0-9a-f]{4}:)/, '');
  return f.gpus.map((g, i) => {
    const index = gpuNum(g, 'index') ?? i;
    const bus = norm(g['pci.bus_id']);
    return {
      index,
      name: g.name,
      uuid: g.uuid,
      busId: g['pci.bus_id'],
      memoryTotalMiB: gpuNum(g, 'memory.total'),
      memoryFreeMiB: gpuNum(g, 'memory.free'),
      computeCapability: g.compute_cap,
      processes: (f.computeApps ?? [])
        .filter((a) => bus !== undefined && norm(a.busId) === bus)
        .map((a) => ({ pid: a.pid, name: a.name, usedMiB: a.usedMiB })),
    };
  });
}
