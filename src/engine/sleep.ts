// Sleep and wake of registered servers through vLLM's own routes (client/sleep.ts). A server is put
// to sleep only when it was started with sleep mode (its argv has --enable-sleep-mode: the entry says
// so, not the server); a wake is done when /is_sleeping says false, and timed from the call.
import type { Instance } from './registry.js';
import { targetFromInstance } from './target.js';
import { readSleep, requestSleep, requestWake, type SleepLevel, type SleepReading } from '../client/sleep.js';
import { pollUntil } from '../util/poll.js';
import { compareVersions } from '../profiles/versions.js';

const SLEEP_FIX =
  'serve the profile with server.sleepMode: true (--set server.sleepMode=true): vLLM then runs with --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1';

/**
 * vLLM's sleep mode on GB10 (DGX Spark, unified memory): level 1 sleeps, but wake_up kills the EngineCore and has taken
 * the whole host down (vllm issue #50011). The fix is vLLM PR #57629; no released vLLM this build knows of is checked
 * to carry it, so on a Spark sleep and wake are refused unless the owner says the installed vLLM has it
 * (SPARKCTL_GB10_SLEEP_FIXED=1). A version that carries it goes into fixedIn, and the refusal names it.
 */
export const GB10_SLEEP = {
  issue: 50011,
  pr: 57629,
  fixedIn: undefined as string | undefined,
  override: 'SPARKCTL_GB10_SLEEP_FIXED',
};

/** Why sleep mode is refused for this server (a GB10 host whose vLLM lacks the fix), or undefined. */
export function unifiedSleepRefusal(
  inst: { launch?: { platform?: string; vllm?: { resolved?: string } } },
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  const platform = inst.launch?.platform ?? '';
  if (!/gb10|spark/i.test(platform)) return undefined;
  if (env[GB10_SLEEP.override] === '1') return undefined;
  const v = inst.launch?.vllm?.resolved;
  if (GB10_SLEEP.fixedIn && v && compareVersions(v, GB10_SLEEP.fixedIn) >= 0) return undefined;
  const fixed = GB10_SLEEP.fixedIn
    ? `vLLM ${GB10_SLEEP.fixedIn} fixes it (PR #${GB10_SLEEP.pr})`
    : `the fix is vLLM PR #${GB10_SLEEP.pr}, in no vLLM release this build knows of`;
  return `on a DGX Spark (GB10, unified memory; platform ${platform}) vLLM${v ? ` ${v}` : ''} crashes when it wakes from sleep (vllm issue #${GB10_SLEEP.issue}: the EngineCore dies, and the host has been seen to hang); ${fixed}. Stop and serve the model instead, or, with a vLLM that carries the fix, set ${GB10_SLEEP.override}=1`;
}

/** Started with sleep mode: what sparkctl rendered, read from its registry entry. */
export function sleepCapable(inst: Pick<Instance, 'argv' | 'role'>): boolean {
  return (
    inst.role !== 'router' &&
    inst.argv.some((a) => a === '--enable-sleep-mode' || a.replace(/_/g, '-') === '--enable-sleep-mode')
  );
}

export interface SleepOutcome {
  name: string;
  url: string;
  /**
   * slept / woke: done now; already: it was so before; refused: the server said no; unreachable; unsupported: not
   * started with sleep mode
   */
  result: 'slept' | 'woke' | 'already' | 'refused' | 'unreachable' | 'unsupported';
  level?: SleepLevel;
  /** the call until /is_sleeping said so */
  ms: number;
  detail?: string;
}

const urlOf = (inst: Instance) => targetFromInstance(inst).url;

/**
 * Until /is_sleeping reads `want` (the call returned first, but vLLM's FIXME says it may not be done), at most
 * deadlineMs.
 */
async function until(url: string, want: 'awake' | 'sleeping', deadlineMs: number): Promise<SleepReading> {
  const r = await pollUntil(
    () => readSleep(url),
    (r) => r.state === want || r.state === 'unsupported',
    { deadlineMs, intervalMs: 25 },
  );
  return r.value;
}

export async function sleepInstance(
  inst: Instance,
  level: SleepLevel,
  o: { timeoutMs: number; abort?: boolean },
): Promise<SleepOutcome> {
  const url = urlOf(inst);
  const base = { name: inst.name, url };
  if (!sleepCapable(inst))
    return { ...base, result: 'unsupported', ms: 0, detail: `not started with sleep mode; ${SLEEP_FIX}` };
  const gb10 = unifiedSleepRefusal(inst);
  if (gb10) return { ...base, result: 'unsupported', ms: 0, detail: gb10 };
  const before = await readSleep(url);
  if (before.state === 'unreachable') return { ...base, result: 'unreachable', ms: before.ms, detail: before.detail };
  if (before.state === 'unsupported') return { ...base, result: 'unsupported', ms: before.ms, detail: before.detail };
  if (before.state === 'sleeping' && (before.level ?? 0) >= level)
    return { ...base, result: 'already', level: before.level, ms: 0 };
  const t0 = performance.now();
  const r = await requestSleep(url, level, { mode: o.abort ? 'abort' : 'wait', timeoutMs: o.timeoutMs });
  if (!r.ok) return { ...base, result: r.status ? 'refused' : 'unreachable', ms: r.ms, detail: r.detail };
  const after = await until(url, 'sleeping', 5000);
  const ms = Math.round(performance.now() - t0);
  if (after.state !== 'sleeping')
    return {
      ...base,
      result: 'refused',
      ms,
      detail: `POST /sleep answered 200 but /is_sleeping still reads ${after.state}`,
    };
  return { ...base, result: 'slept', level: after.level ?? level, ms };
}

export async function wakeInstance(inst: Instance, o: { timeoutMs: number }): Promise<SleepOutcome> {
  const url = urlOf(inst);
  const base = { name: inst.name, url };
  if (!sleepCapable(inst))
    return { ...base, result: 'unsupported', ms: 0, detail: `not started with sleep mode; ${SLEEP_FIX}` };
  const before = await readSleep(url);
  if (before.state === 'unreachable') return { ...base, result: 'unreachable', ms: before.ms, detail: before.detail };
  if (before.state === 'unsupported') return { ...base, result: 'unsupported', ms: before.ms, detail: before.detail };
  if (before.state === 'awake') return { ...base, result: 'already', ms: 0 };
  // asleep on a Spark whose vLLM lacks the fix: a wake is what crashes it
  const gb10 = unifiedSleepRefusal(inst);
  if (gb10) return { ...base, result: 'unsupported', ms: before.ms, detail: gb10 };
  const t0 = performance.now();
  // level 2 discarded the weights: they are loaded again before the KV cache returns (requestWake)
  const r = await requestWake(url, o.timeoutMs, before.level);
  if (!r.ok) return { ...base, result: r.status ? 'refused' : 'unreachable', ms: r.ms, detail: r.detail };
  const after = await until(url, 'awake', Math.max(1000, o.timeoutMs - (performance.now() - t0)));
  const ms = Math.round(performance.now() - t0);
  if (after.state !== 'awake')
    return {
      ...base,
      result: 'refused',
      ms,
      detail: `POST /wake_up answered 200 but /is_sleeping still reads ${after.state}`,
    };
  return { ...base, result: 'woke', level: before.level, ms };
}
