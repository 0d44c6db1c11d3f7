// GPU readings for probe and prewarm, where GPUs are visible (a real nvidia-smi on this host).
import { RealHost } from '../host/real.js';
import { parseQueryGpu, decodeThrottle } from '../nvidia/smi.js';

export interface GpuReading {
  index: number;
  usedMiB: number;
  totalMiB: number;
  throttle: Array<{ reason: string; severity: 'ok' | 'warn' | 'fail' }>;
}

const FIELDS = ['index', 'memory.used', 'memory.total', 'clocks_event_reasons.active'];

export async function readGpus(timeoutMs = 3000): Promise<GpuReading[] | undefined> {
  const r = await new RealHost(timeoutMs).run(['nvidia-smi', `--query-gpu=${FIELDS.join(',')}`, '--format=csv,noheader,nounits']);
  if (r.exitCode !== 0) return undefined;
  return parseQueryGpu(r.stdout, FIELDS).map((g) => ({
    index: Number(g.index),
    usedMiB: Number(g['memory.used'] ?? NaN),
    totalMiB: Number(g['memory.total'] ?? NaN),
    throttle: decodeThrottle(g['clocks_event_reasons.active']),
  }));
}
