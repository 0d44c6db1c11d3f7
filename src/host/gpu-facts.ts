// The typed per-GPU facts that preflight hands to serve's plan (not the checks' human text).
// Produced by preflight (src/preflight/run.ts: PreflightReport.gpus), consumed by src/engine/plan.ts.
export interface GpuProcess {
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
