// Supervise a launched replica until it is really ready. Supervision races the child's exit, the
// deadline and a stall timer that log activity resets; readiness is /health 200, /v1/models listing
// the served name, and the listening socket held by what the runtime launched (its `ours`), not a
// server that held the port before us. The launch itself is the runtime's (runtime/).
import { phaseOf, classifyStall } from './classify.js';
import { waitReady, type ReadyResult } from '../client/ready.js';
import type { Launched } from './runtime/child.js';
import type { StartClock } from './phases.js';

/**
 * How long a log must be quiet at a known hang line before the wait names it. vLLM logs every few
 * seconds while it works; a Ray placement-group line already means 10 s of waiting, but building the
 * P2P access cache of 8 GPUs can legitimately be quiet for tens of seconds, so that one waits longer.
 */
export const HANG_QUIET_MS: Record<string, number> = { 'ray-placement-group': 15_000, 'p2p-hang': 60_000 };
const DEFAULT_HANG_QUIET_MS = 60_000;
/** No hang is named before the log has been quiet this long. */
const LEAST_HANG_QUIET_MS = Math.min(DEFAULT_HANG_QUIET_MS, ...Object.values(HANG_QUIET_MS));

/** Supervise a launched replica until ready, through the shared waitReady. */
export function superviseReady(
  l: Launched,
  opts: { url: string; servedName: string; apiKey?: string; deadlineMs: number; stallMs: number; onPhase?: (phase: string) => void; signal?: AbortSignal; ours: () => boolean; clock?: StartClock },
): Promise<ReadyResult> {
  let lastPhase = '';
  // The log's verdict while it is quiet: the same text gives the same answer, so it is classified
  // once per quiet spell, not on every readiness round (20+ a second).
  let judged: { at: number; h: ReturnType<typeof classifyStall> } | undefined;
  return waitReady({
    url: opts.url,
    servedName: opts.servedName,
    apiKey: opts.apiKey,
    deadlineMs: opts.deadlineMs,
    signal: opts.signal,
    stallMs: opts.stallMs,
    quietMs: () => Date.now() - l.tail.lastActivity,
    // A log that stopped at a known hang is named after a short quiet spell, not the stall timeout.
    hung: () => {
      const quiet = Date.now() - l.tail.lastActivity;
      if (quiet < Math.min(LEAST_HANG_QUIET_MS, opts.stallMs)) return undefined;
      if (judged?.at !== l.tail.lastActivity) judged = { at: l.tail.lastActivity, h: classifyStall(l.tail.text()) };
      const h = judged.h;
      if (!h?.stall || quiet < Math.min(HANG_QUIET_MS[h.id] ?? DEFAULT_HANG_QUIET_MS, opts.stallMs)) return undefined;
      return `no log output for ${Math.round(quiet / 1000)} s, stopped at a known hang: ${h.cause}`;
    },
    onPoll: () => {
      for (const line of l.tail.poll()) {
        opts.clock?.line(line);
        const p = phaseOf(line);
        if (p && p !== lastPhase) {
          lastPhase = p;
          opts.onPhase?.(p);
        }
      }
    },
    ended: () => {
      if (!l.exit) return undefined;
      l.tail.poll();
      if (l.exit.error) return { reason: 'spawn-error', detail: l.exit.error };
      return { reason: 'exited', detail: `exited with ${l.exit.signal ?? `code ${l.exit.code}`} before it was ready` };
    },
    // Ready only if what we launched holds the listening socket: a server that held the port first
    // answers /health too, while ours dies with EADDRINUSE. The runtime says what "ours" is.
    ours: opts.ours,
  });
}
