// What the probe remembers between runs (probe-state.json): each target's last state (for change
// alerts and the preemption trend) and the alerts not yet delivered. Several probes run at once
// (cron overlap, one cron line per target), so every update is read -> change -> write under a
// lock file: no run loses another's entries. An alert stays pending until a webhook accepted it,
// and is retried by the next run; the lock is held through the delivery, so two runs never send
// the same alert.
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { writeFileAtomic } from '../util/atomic.js';
import { lockFile } from '../util/lock.js';
import { UsageError } from '../errors.js';
import { readTextSync, READ_LIMITS } from '../util/read.js';

type TargetStateName = 'healthy' | 'unhealthy' | 'unreachable';

export interface TargetState {
  state: TargetStateName;
  preemptions?: number;
  at: string;
}

export interface Alert {
  /** unique per change, so a receiver can drop a repeat (a run that died between delivery and saving) */
  id: string;
  at: string;
  target: string;
  url: string;
  from: TargetStateName | null;
  to: TargetStateName;
  failing: Array<{ step: string; detail: string }>;
}

interface ProbeState {
  targets: Record<string, TargetState>;
  pending: Alert[];
}

/**
 * Older undelivered alerts beyond this many are dropped (a webhook gone for weeks must not grow the file without end).
 */
const MAX_PENDING = 500;
const STATES = new Set(['healthy', 'unhealthy', 'unreachable']);

export const statePath = (dir: string) => join(dir, 'probe-state.json');

/**
 * The state as stored, shape-checked (the file is as hostile as any input): version 2
 * {v, targets, pending}, or the flat {url: state} of older versions. Anything unreadable is empty.
 */
export function readProbeState(dir: string): ProbeState {
  let raw: unknown;
  try {
    raw = JSON.parse(readTextSync(statePath(dir), { maxBytes: READ_LIMITS.history, noFollow: true }));
  } catch {
    return { targets: {}, pending: [] };
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return { targets: {}, pending: [] };
  const r = raw as Record<string, unknown>;
  const v2 = r.v === 2 && r.targets && typeof r.targets === 'object';
  const targets: Record<string, TargetState> = {};
  for (const [url, t] of Object.entries((v2 ? r.targets : r) as Record<string, unknown>)) {
    const x = t as Partial<TargetState> | null;
    if (!x || typeof x !== 'object' || !STATES.has(String(x.state))) continue;
    targets[url] = {
      state: x.state as TargetStateName,
      at: typeof x.at === 'string' ? x.at : '',
      ...(Number.isFinite(x.preemptions) && (x.preemptions as number) >= 0 ? { preemptions: x.preemptions } : {}),
    };
  }
  const pending =
    v2 && Array.isArray(r.pending)
      ? (r.pending as Alert[])
          .filter((a) => a && typeof a.id === 'string' && STATES.has(String(a.to)))
          .slice(-MAX_PENDING)
      : [];
  return { targets, pending };
}

/**
 * Run `fn` on the freshly read state under the probe-state lock, then save what it left (unless it
 * throws). Waits for other probes at most `timeoutMs`.
 */
export async function updateProbeState<R>(
  dir: string,
  fn: (s: ProbeState) => Promise<R> | R,
  timeoutMs = 60_000,
): Promise<R> {
  const release = await lockFile(
    join(dir, 'probe-state.lock'),
    timeoutMs,
    (pid) =>
      new UsageError(`another sparkctl probe (pid ${pid}) held the probe state for ${Math.round(timeoutMs / 1000)} s`, [
        'is a webhook hanging? --deadline bounds a run',
      ]),
  );
  try {
    const s = readProbeState(dir);
    const out = await fn(s);
    s.pending = s.pending.slice(-MAX_PENDING);
    writeFileAtomic(statePath(dir), JSON.stringify({ v: 2, targets: s.targets, pending: s.pending }, null, 2) + '\n');
    return out;
  } finally {
    release();
  }
}

export interface Observed {
  target: string;
  url: string;
  state: TargetStateName;
  preemptions?: number;
  failing: Array<{ step: string; detail: string }>;
}

/**
 * Fold this run's results into the state: each target's entry replaced, and one alert queued for
 * each change (a new target that is not healthy counts as a change). Returns the new alerts.
 */
export function recordResults(s: ProbeState, results: Observed[], now: Date, queue: boolean): Alert[] {
  const added: Alert[] = [];
  for (const r of results) {
    const before = s.targets[r.url];
    if (before ? before.state !== r.state : r.state !== 'healthy') {
      added.push({
        id: randomUUID(),
        at: now.toISOString(),
        target: r.target,
        url: r.url,
        from: before?.state ?? null,
        to: r.state,
        failing: r.failing,
      });
    }
    s.targets[r.url] = {
      state: r.state,
      ...(r.preemptions !== undefined ? { preemptions: r.preemptions } : {}),
      at: now.toISOString(),
    };
  }
  if (queue) s.pending.push(...added);
  return added;
}
