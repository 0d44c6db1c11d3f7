// The one duration syntax of every verb's timeout flag: "500ms", "30s", "15m", "1h", or a bare
// number of seconds. A bad value is bad input (exit 2) that names the flag, the value and the fix.
import { UsageError } from '../errors.js';

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
/** setTimeout fires at once for delays above 2^31-1 ms (~24.8 days): refuse them instead. */
export const MAX_DURATION_MS = 2 ** 31 - 1;

interface DurationRule {
  /** 0 is a meaningful value (e.g. stop: SIGKILL at once); otherwise a duration must be > 0 */
  allowZero?: boolean;
}

/** Milliseconds of "500ms", "30s", "15m", "1h", "1.5h" or "600" (seconds). Throws UsageError. */
export function parseDuration(text: string, flag: string, rule: DurationRule = {}): number {
  const fix = ['write it like 500ms, 30s, 15m or 1h (a bare number is seconds)'];
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)?$/.exec(String(text).trim());
  if (!m) throw new UsageError(`${flag}: "${text}" is not a duration`, fix);
  const ms = Math.round(Number(m[1]) * UNIT_MS[(m[2] ?? 's') as keyof typeof UNIT_MS]);
  if (ms === 0 && !rule.allowZero)
    throw new UsageError(`${flag}: "${text}" is zero; a deadline must be longer than that`, fix);
  if (ms > MAX_DURATION_MS) throw new UsageError(`${flag}: "${text}" is too long (at most 24 days)`, fix);
  return ms;
}
