// The one poll-until-deadline loop: read, and again every interval, until the reading is what the
// caller waits for, the deadline passes or the signal aborts. Every wait has a deadline; this is
// where the ones that poll keep it. A reading is taken at once, then after each pause; the pause is
// cut to what is left of the deadline, so the last reading is taken at the deadline, not one
// interval short of it. The clock is monotonic (performance.now: a wall-clock step moves nothing).
import { pause } from './pause.js';

interface PollOptions<T> {
  /** how long the poll may take, ms from its start (0: one reading) */
  deadlineMs: number;
  /** ms between readings, or a function of the last one (back off while a server refuses) */
  intervalMs: number | ((last: T) => number);
  /** ends the wait early, with reason 'aborted' */
  signal?: AbortSignal;
}

type Polled<T> =
  /** the reading was what the caller waited for */
  | { done: true; value: T; ms: number; readings: number }
  /** the last reading, and why the poll stopped before one was */
  | { done: false; reason: 'deadline' | 'aborted'; value: T; ms: number; readings: number };

export async function pollUntil<T>(
  read: () => T | Promise<T>,
  done: (v: T) => boolean,
  o: PollOptions<T>,
): Promise<Polled<T>> {
  const t0 = performance.now();
  const ms = () => performance.now() - t0;
  for (let readings = 1; ; readings++) {
    const value = await read();
    if (done(value)) return { done: true, value, ms: ms(), readings };
    if (o.signal?.aborted) return { done: false, reason: 'aborted', value, ms: ms(), readings };
    const left = o.deadlineMs - ms();
    // a deadline that is no number (NaN, undefined from a caller) is none left, never a wait without end
    if (!(left > 0)) return { done: false, reason: 'deadline', value, ms: ms(), readings };
    await pause(Math.min(typeof o.intervalMs === 'function' ? o.intervalMs(value) : o.intervalMs, left), o.signal);
    if (o.signal?.aborted) return { done: false, reason: 'aborted', value, ms: ms(), readings };
  }
}
