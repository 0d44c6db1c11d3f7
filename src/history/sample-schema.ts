// The shape of a history line, for the readers (cost, report): every line read back is hostile (a
// torn write, an edit, another version), so each is checked against this before it is used.
import { z } from 'zod';
import { SAMPLE_VERSION } from './sample-version.js';

const num = z.number().finite().nonnegative();
/**
 * A start's phases, as engine/phases.ts names them (history sits below the engine: the names are repeated, tested
 * equal).
 */
export const BOOT_PHASES = [
  'process',
  'files',
  'weights',
  'compile',
  'kv-cache',
  'cuda-graphs',
  'engine',
  'api',
  'first-token',
] as const;
const HistLine = z
  .object({ le: z.array(z.number().finite()), n: z.array(num), sum: num, count: num })
  .refine((h) => h.n.length === h.le.length + 1, 'n has one count per bound plus +Inf');

export const GpuSample = z.object({
  i: z.number().int().nonnegative(),
  util: num.optional(),
  mem: num.optional(),
  memTotal: num.optional(),
  temp: z.number().finite().optional(),
  power: num.optional(),
  ecc: num.optional(),
  xid: num.optional(),
});
export type GpuSample = z.infer<typeof GpuSample>;

export const Sample = z.object({
  v: z.literal(SAMPLE_VERSION),
  t: z.string().datetime({ offset: true }),
  target: z.string().max(500),
  url: z.string().max(500),
  profile: z.string().max(200).optional(),
  verdict: z.enum(['healthy', 'unhealthy', 'unreachable']),
  ms: num,
  steps: z.record(z.string(), num),
  /** failing and warning steps, "step status: detail" (the cause of an incident) */
  why: z.array(z.string().max(300)).optional(),
  /** GPUs the server holds (the GPU-hours of cost) */
  ngpu: z.number().int().nonnegative().optional(),
  /** the server's process_start_time_seconds: a change means a restart even if counters grew */
  start: num.optional(),
  c: z
    .object({
      prompt: num.optional(),
      generation: num.optional(),
      finished: z.record(z.string(), num).optional(),
      preemptions: num.optional(),
      prefixHits: num.optional(),
      prefixQueries: num.optional(),
      prefillS: num.optional(),
      decodeS: num.optional(),
    })
    .optional(),
  g: z.object({ running: num.optional(), waiting: num.optional(), kv: num.optional() }).optional(),
  ttft: HistLine.optional(),
  itl: HistLine.optional(),
  gpu: z.array(GpuSample).optional(),
  /** kernel-log time (s since boot) of the newest Xid seen: "Xid since the last probe" */
  xidT: num.optional(),
  /**
   * The server's last start as sparkctl measured it (engine/phases.ts, kept in its registry entry):
   * when it was launched, seconds after the launch to the API answering and to the first token, the
   * compile cache's verdict, and when each phase ended (s after the launch). One per start: the
   * report takes the starts over time from the distinct launch times.
   */
  boot: z
    .object({
      at: z.string().datetime({ offset: true }),
      ready: num.max(1e7).optional(),
      first: num.max(1e7).optional(),
      compile: z.enum(['hit', 'miss', 'off']).optional(),
      ph: z.record(z.enum(BOOT_PHASES), num.max(1e7)).optional(),
    })
    .optional(),
  /** parts dropped to keep the line one atomic write */
  trunc: z.boolean().optional(),
});
export type Sample = z.infer<typeof Sample>;
