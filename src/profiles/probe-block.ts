// The profile's probe: block on its own, so that `sparkctl probe` (which needs only its defaults and
// limits) does not build the whole profile schema at start-up.
import { z } from 'zod';
import { PROBE_DEFAULTS as D } from './probe-defaults.js';

export const ProbeBlock = z
  .strictObject({
    timeoutMs: z.number().int().positive().default(D.timeoutMs),
    kvCacheUsageMax: z.number().min(0).max(1).default(D.kvCacheUsageMax),
    waitingMax: z.number().int().min(0).default(D.waitingMax),
    gpuMemoryHeadroomPct: z
      .number()
      .min(0)
      .max(50)
      .default(D.gpuMemoryHeadroomPct)
      .describe('GPU memory may exceed the reserved share by this many percent'),
    tempWarnC: z.number().min(0).max(150).default(D.tempWarnC).describe('GPU temperature that warns (75 C by default)'),
    tempUnhealthyC: z
      .number()
      .min(0)
      .max(150)
      .default(D.tempUnhealthyC)
      .describe('GPU temperature that makes the server unhealthy (82 C)'),
    tempCriticalC: z
      .number()
      .min(0)
      .max(150)
      .default(D.tempCriticalC)
      .describe('GPU temperature reported as critical (88 C)'),
    gpuHourPriceUsd: z
      .number()
      .positive()
      .optional()
      .describe('What one GPU-hour costs, USD (sparkctl cost; a monthly price / 730 h)'),
  })
  .refine((p) => p.tempWarnC <= p.tempUnhealthyC && p.tempUnhealthyC <= p.tempCriticalC, {
    message: 'temperatures must rise: tempWarnC <= tempUnhealthyC <= tempCriticalC',
    path: ['tempWarnC'],
  });
