// Sleep and wake of registered servers through vLLM's own routes (client/sleep.ts). A server is put
// to sleep only when it was started with sleep mode (its argv has --enable-sleep-mode: the entry says
// so, not the server); a wake is done when /is_sleeping says false, and timed from the call.
import type { Instance } from './registry.js';
import { targetFromInstance } from './target.js';
import { readSleep, requestSleep, requestWake, type SleepLevel, type SleepReading } from '../client/sleep.js';
import { pollUntil } from '../util/poll.js';

export const SLEEP_FIX = 'serve the profile with server.sleepMode: true (--set server.sleepMode=true): vLLM then runs with --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1';

/** Started with sleep mode: what sparkctl rendered, read from its registry entry. */
export function sleepCapable(inst: Pick<Instance, 'argv' | 'role'>): boolean {
  return inst.role !== 'router' && inst.argv.some((a) => a === '--enable-sleep-mode' || a.replace(/_/g, '-') === '--enable-sleep-mode');
}

export interface SleepOutcome {
  name: string;
  url: string;
  /** slept / woke: done now; already: it was so before; refused: the server said no; unreachable; unsupported: not started with sleep mode */
  result: 'slept' | 'woke' | 'already' | 'refused' | 'unreachable' | 'unsupported';
  level?: SleepLevel;
  /** the call until /is_sleeping said so */
  ms: number;
  detail?: string;
}

const urlOf = (inst: Instance) => targetFromInstance(inst).url;

/** Until /is_sleeping reads `want` (the call returned first, but vLLM's FIXME says it may not be done), at most deadlineMs. */
async function until(url: string, want: 'awake' | 'sleeping', deadlineMs: number): Promise<SleepReading> {
  const r = await pollUntil(
    () => readSleep(url),
    (r) => r.state === want || r.state === 'unsupported',
    { deadlineMs, intervalMs: 25 },
  );
  return r.value;
}

export async function sleepInstance(inst: Instance, level: SleepLevel, o: { timeoutMs: number; abort?: boolean }): Promise<SleepOutcome> {
  const url = urlOf(inst);
  const base = { name: inst.name, url };
  if (!sleepCapable(inst)) return { ...base, result: 'unsupported', ms: 0, detail: `not started with sleep mode; ${SLEEP_FIX}` };
  const before = await readSleep(url);
  if (before.state === 'unreachable') return { ...base, result: 'unreachable', ms: before.ms, detail: before.detail };
  if (before.state === 'unsupported') return { ...base, result: 'unsupported', ms: before.ms, detail: before.detail };
  if (before.state === 'sleeping' && (before.level ?? 0) >= level) return { ...base, result: 'already', level: before.level, ms: 0 };
  const t0 = performance.now();
  const r = await requestSleep(url, level, { mode: o.abort ? 'abort' : 'wait', timeoutMs: o.timeoutMs });
  if (!r.ok) return { ...base, result: r.status ? 'refused' : 'unreachable', ms: r.ms, detail: r.detail };
  const after = await until(url, 'sleeping', 5000);
  const ms = Math.round(performance.now() - t0);
  if (after.state !== 'sleeping') return { ...base, result: 'refused', ms, detail: `POST /sleep answered 200 but /is_sleeping still reads ${after.state}` };
  return { ...base, result: 'slept', level: after.level ?? level, ms };
}

export async function wakeInstance(inst: Instance, o: { timeoutMs: number }): Promise<SleepOutcome> {
  const url = urlOf(inst);
  const base = { name: inst.name, url };
  if (!sleepCapable(inst)) return { ...base, result: 'unsupported', ms: 0, detail: `not started with sleep mode; ${SLEEP_FIX}` };
  const before = await readSleep(url);
  if (before.state === 'unreachable') return { ...base, result: 'unreachable', ms: before.ms, detail: before.detail };
  if (before.state === 'unsupported') return { ...base, result: 'unsupported', ms: before.ms, detail: before.detail };
  if (before.state === 'awake') return { ...base, result: 'already', ms: 0 };
  const t0 = performance.now();
  // level 2 discarded the weights: they are loaded again before the KV cache returns (requestWake)
  const r = await requestWake(url, o.timeoutMs, before.level);
  if (!r.ok) return { ...base, result: r.status ? 'refused' : 'unreachable', ms: r.ms, detail: r.detail };
  const after = await until(url, 'awake', Math.max(1000, o.timeoutMs - (performance.now() - t0)));
  const ms = Math.round(performance.now() - t0);
  if (after.state !== 'awake') return { ...base, result: 'refused', ms, detail: `POST /wake_up answered 200 but /is_sleeping still reads ${after.state}` };
  return { ...base, result: 'woke', level: before.level, ms };
}
