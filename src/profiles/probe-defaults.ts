// The probe: block's defaults without its schema: `sparkctl probe --url` needs only these, and the
// schema (zod) is a fifth of a probe's start-up. profiles/probe-block.ts builds its defaults from here.
export const PROBE_DEFAULTS = {
  timeoutMs: 5000,
  kvCacheUsageMax: 0.85,
  waitingMax: 32,
  gpuMemoryHeadroomPct: 5,
  tempWarnC: 75,
  tempUnhealthyC: 82,
  tempCriticalC: 88,
} as const;

/** What a parsed probe: block holds (ProbeBlock's output). */
export interface ProbeBlockValues {
  timeoutMs: number;
  kvCacheUsageMax: number;
  waitingMax: number;
  gpuMemoryHeadroomPct: number;
  tempWarnC: number;
  tempUnhealthyC: number;
  tempCriticalC: number;
  gpuHourPriceUsd?: number;
}

/** A fresh copy of the defaults (each target's settings are its own object). */
export const probeDefaults = (): ProbeBlockValues => ({ ...PROBE_DEFAULTS });
