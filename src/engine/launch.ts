// The one watch after a launch, wherever the server runs (a replica here, the head and ranks of a
// server over nodes): readiness raced against the launch ending, the deadline, a stall timer that log
// activity resets, a known hang named from the log, and the start-up phases; readiness is /health
// 200, /v1/models listing the served name, and (where the runtime can tell) the listening socket held
// by what was launched (its `ours`), not a server that held the port before us. The launch itself is
// the runtime's (runtime/) or the executor's (cluster/).
import { phaseOf, classifyStall } from './classify.js';
import { waitReady, type ReadyResult } from '../client/ready.js';
import type { Launched } from './runtime/child.js';
import type { StartClock } from './phases.js';
import { own } from '../util/own.js';

/**
 * How long a log must be quiet at a known hang line before the wait names it. vLLM logs every few
 * seconds while it works; a Ray placement-group line already means 10 s of waiting, but building the
 * P2P access cache of 8 GPUs can legitimately be quiet for tens of seconds, so that one waits longer.
 */
const HANG_QUIET_MS: Record<string, number> = { 'ray-placement-group': 15_000, 'p2p-hang': 60_000 };
const DEFAULT_HANG_QUIET_MS = 60_000;
/** No hang is named before the log has been quiet this long. */
const LEAST_HANG_QUIET_MS = Math.min(DEFAULT_HANG_QUIET_MS, ...Object.values(HANG_QUIET_MS));

/** Why a launch ended before it was ready (undefined while it runs). */
export type Ended = { reason: 'exited' | 'spawn-error'; detail: string } | undefined;

/**
 * What the watch after a launch reads of it, wherever it runs: a child of this process (localView),
 * or a server on a node read over ssh (cluster/remote-view.ts). One watch reads them all the same way.
 */
export interface LaunchView {
  /** when its log last grew (ms since the epoch) */
  lastActivity(): number;
  /** its log's recent text: where a known hang is named from */
  text(): string;
  /** the lines its log completed since the last call (`now`: read at once, past any rate limit of the view) */
  poll(now?: boolean): string[] | Promise<string[]>;
  /** why it ended, or undefined while it runs */
  ended(): Ended | Promise<Ended>;
}

export interface WatchOptions {
  url: string;
  servedName: string;
  apiKey?: string;
  deadlineMs: number;
  stallMs: number;
  onPhase?: (phase: string) => void;
  signal?: AbortSignal;
  /** proof that what answers is what was launched (ReadyWatch.ours) */
  ours?: () => Promise<boolean | undefined> | boolean | undefined;
  /** a hang only the caller can see (Ray's cluster losing capacity), asked before the log's */
  hung?: () => Promise<string | undefined> | string | undefined;
  pollMs?: number;
  /** the start's phase clock (phases.ts), fed every log line as it is read */
  clock?: StartClock;
}

/**
 * The one watch after a launch, for a replica on this host and a server over nodes alike: readiness
 * (waitReady) raced against the launch ending, the deadline, the stall timer that log output resets,
 * a known hang named from where the log stopped, and the start-up phases the log shows.
 */
export function watchReady(v: LaunchView, opts: WatchOptions): Promise<ReadyResult> {
  let lastPhase = '';
  // The log's verdict while it is quiet: the same text gives the same answer, so it is classified
  // once per quiet spell, not on every readiness round (20+ a second).
  let judged: { at: number; h: ReturnType<typeof classifyStall> } | undefined;
  const logHung = () => {
    const at = v.lastActivity();
    const quiet = Date.now() - at;
    if (quiet < Math.min(LEAST_HANG_QUIET_MS, opts.stallMs)) return undefined;
    if (judged?.at !== at) judged = { at, h: classifyStall(v.text()) };
    const h = judged.h;
    if (!h?.stall || quiet < Math.min(own(HANG_QUIET_MS, h.id) ?? DEFAULT_HANG_QUIET_MS, opts.stallMs))
      return undefined;
    return `no log output for ${Math.round(quiet / 1000)} s, stopped at a known hang: ${h.cause}`;
  };
  const read = async (now?: boolean) => {
    for (const line of await v.poll(now)) {
      opts.clock?.line(line);
      const p = phaseOf(line);
      if (p && p !== lastPhase) {
        lastPhase = p;
        opts.onPhase?.(p);
      }
    }
  };
  // ready: the log is read once more first, so the lines written since the last read are timed before
  // the API's answer, not after it (a node's log is read every 1.5 s: CI's quick start over nodes showed
  // the head's weights, compile and KV cache missing from its report, or read after "API up")
  const drained = async (r: ReadyResult) => {
    if (r.ok) await read(true).catch(() => undefined);
    return r;
  };
  return waitReady({
    url: opts.url,
    servedName: opts.servedName,
    apiKey: opts.apiKey,
    deadlineMs: opts.deadlineMs,
    signal: opts.signal,
    pollMs: opts.pollMs,
    stallMs: opts.stallMs,
    quietMs: () => Date.now() - v.lastActivity(),
    // A log that stopped at a known hang is named after a short quiet spell, not the stall timeout.
    hung: async () => (await opts.hung?.()) ?? logHung(),
    onPoll: () => read(),
    ended: () => v.ended(),
    // Ready only if what we launched holds the listening socket: a server that held the port first
    // answers /health too, while ours dies with EADDRINUSE. The runtime says what "ours" is.
    ours: opts.ours,
  }).then(drained);
}

/** A replica launched here: its log tail and its child's exit, as the watch reads them. */
export function localView(l: Launched): LaunchView {
  return {
    lastActivity: () => l.tail.lastActivity,
    text: () => l.tail.text(),
    poll: () => l.tail.poll(),
    ended: () => {
      if (!l.exit) return undefined;
      l.tail.poll();
      if (l.exit.error) return { reason: 'spawn-error', detail: l.exit.error };
      return { reason: 'exited', detail: `exited with ${l.exit.signal ?? `code ${l.exit.code}`} before it was ready` };
    },
  };
}

/** Supervise a replica launched here until ready: the one watch over its child. */
export function superviseReady(l: Launched, opts: WatchOptions & { ours: () => boolean }): Promise<ReadyResult> {
  return watchReady(localView(l), opts);
}
