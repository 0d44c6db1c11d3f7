// What the watcher does about a verdict, per server: restart or not, when (exponential back-off),
// and when to stop trying (the circuit breaker). Pure: the clock is handed in.
import type { WatchBlock } from '../profiles/watch-block.js';
import type { Verdict } from './verdict.js';

export interface RestartMemory {
  /** when each restart began, ms since the epoch (the ones inside the circuit window matter) */
  restarts: number[];
  /** set when the circuit opened: no restart until an operator restarts the watcher or the server is served again */
  circuitOpenSince?: number;
}

type Decision =
  | { do: 'nothing'; why: string }
  | { do: 'alert'; why: string }
  | { do: 'wait'; why: string; untilMs: number }
  | { do: 'open-circuit'; why: string }
  | { do: 'restart'; why: string; attempt: number };

/** The wait before restart number `n` (1-based) of one server: none before the first, then backoff doubling, capped. */
export function backoffMs(n: number, p: Pick<WatchBlock, 'backoffSeconds' | 'backoffMaxSeconds'>): number {
  if (n <= 1) return 0;
  return Math.min(p.backoffMaxSeconds, p.backoffSeconds * 2 ** (n - 2)) * 1000;
}

export function decide(verdict: Verdict, mem: RestartMemory, p: WatchBlock, now: number): Decision {
  if (verdict !== 'dead' && verdict !== 'wedged') return { do: 'nothing', why: verdict };
  if (p.action === 'none') return { do: 'nothing', why: `${verdict}; watch.action none: only logged` };
  if (p.action === 'alert') return { do: 'alert', why: `${verdict}; watch.action alert: not restarted` };
  if (mem.circuitOpenSince !== undefined)
    return {
      do: 'nothing',
      why: `${verdict}; circuit open since ${new Date(mem.circuitOpenSince).toISOString()}: not restarted again`,
    };
  const windowMs = p.circuitWindowMinutes * 60_000;
  const recent = mem.restarts.filter((t) => now - t < windowMs);
  if (recent.length >= p.circuitRestarts)
    return {
      do: 'open-circuit',
      why: `${recent.length} restarts in the last ${p.circuitWindowMinutes} min (watch.circuitRestarts ${p.circuitRestarts}) and it is ${verdict} again: restarting does not fix it`,
    };
  const attempt = recent.length + 1;
  const last = recent[recent.length - 1];
  const wait = backoffMs(attempt, p);
  if (last !== undefined && now < last + wait)
    return {
      do: 'wait',
      why: `back-off: restart ${attempt} not before ${new Date(last + wait).toISOString()}`,
      untilMs: last + wait,
    };
  return { do: 'restart', why: verdict, attempt };
}
