// A start report as read back from a registry entry (a file: hostile until checked), by zod. Apart from
// engine/phases.ts so that what only measures or prints a start (a probe of --url targets, a cron line's
// usual form) does not load zod, nor engine/phases.ts's log readers: the probe imports this only where it read
// the registry.
import { z } from 'zod';
import type { PhaseId, StartReport } from './phases.js';

const secs = z.number().finite().min(0).max(1e7);
/** A report as read back from a registry entry (a file: hostile until checked); what does not fit is dropped. */
export const StartReportShape = z.object({
  phases: z
    .array(
      z.object({
        id: z.enum([
          'process',
          'files',
          'weights',
          'compile',
          'kv-cache',
          'cuda-graphs',
          'engine',
          'api',
          'first-token',
        ]),
        atMs: secs.max(1e10),
        seconds: secs.optional(),
        detail: z.string().max(200).optional(),
      }),
    )
    .max(20),
  compile: z
    .object({
      cache: z.enum(['hit', 'miss', 'off']).optional(),
      seconds: secs.optional(),
      clockSeconds: secs.optional(),
      dir: z.string().max(4096).optional(),
      evidence: z.string().max(400).optional(),
    })
    .optional(),
  weights: z.object({ gib: secs.optional(), seconds: secs.optional(), fileSeconds: secs.optional() }).optional(),
  readyMs: secs.max(1e10).optional(),
  firstTokenMs: secs.max(1e10).optional(),
  caches: z.object({ dir: z.string().max(4096), warm: z.boolean() }).optional(),
  readAhead: z
    .union([z.object({ bytes: secs.max(1e15), seconds: secs, gbps: secs }), z.object({ skipped: z.string().max(400) })])
    .optional(),
});

/** The start report of a registry entry, or null when there is none or it does not check. */
export function startOf(v: unknown): StartReport | null {
  const r = StartReportShape.safeParse(v);
  return r.success ? (r.data as StartReport) : null;
}

const RankStartShape = z.object({
  rank: z.number().int().min(0).max(4096),
  node: z.string().max(200),
  start: z.unknown(),
});
/**
 * A server over nodes' per-rank starts as its record kept them (a file: hostile until checked); an entry that does not
 * check is dropped, none: [].
 */
export function rankStartsOf(v: unknown): Array<{ rank: number; node: string; start: StartReport }> {
  if (!Array.isArray(v)) return [];
  return v.slice(0, 4096).flatMap((x) => {
    const r = RankStartShape.safeParse(x);
    const start = r.success ? startOf(r.data.start) : null;
    return r.success && start ? [{ rank: r.data.rank, node: r.data.node, start }] : [];
  });
}

/** Seconds per phase for a metric or a history sample: each phase's end after the launch. */
export function phaseSeconds(r: StartReport): Partial<Record<PhaseId, number>> {
  return Object.fromEntries(r.phases.map((p) => [p.id, Math.round(p.atMs) / 1000]));
}
