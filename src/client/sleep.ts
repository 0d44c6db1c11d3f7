// vLLM's sleep-mode routes (present only with VLLM_SERVER_DEV_MODE=1, vllm/entrypoints/serve/sleep/
// api_router.py): POST /sleep?level=N&mode=M, POST /wake_up[?tags=...], GET /is_sleeping, and the
// gauge vllm:engine_sleep_state{sleep_state=awake|weights_offloaded|discard_all} (vllm/v1/metrics/
// loggers.py). Every answer is hostile input: only the shapes vLLM sends are believed.
import { http } from './http.js';

export type SleepLevel = 1 | 2;

/** What a server says about its sleep. `unsupported`: no /is_sleeping route (dev mode off, or not vLLM). */
export type SleepReading =
  | { state: 'awake' | 'sleeping'; level?: SleepLevel; ms: number }
  | { state: 'unsupported'; detail: string; ms: number }
  | { state: 'unreachable'; detail: string; ms: number };

/** {"is_sleeping": true|false} -> the flag; anything else -> undefined. Pure. */
export function parseIsSleeping(json: unknown): boolean | undefined {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return undefined;
  const v = (json as Record<string, unknown>).is_sleeping;
  return typeof v === 'boolean' ? v : undefined;
}

/**
 * The level from /metrics: weights_offloaded = 1 -> level 1, discard_all = 1 -> level 2 (vLLM's
 * record_sleep_state). Pure; undefined when the gauge is absent or says awake.
 */
export function sleepLevelFromMetrics(text: string): SleepLevel | undefined {
  let level: SleepLevel | undefined;
  for (const line of text.split('\n')) {
    if (!line.startsWith('vllm:engine_sleep_state{')) continue;
    const m = /sleep_state="(awake|weights_offloaded|discard_all)"[^}]*\}\s+([0-9.eE+-]+)\s*$/.exec(line);
    if (!m || Number(m[2]) !== 1) continue;
    if (m[1] === 'weights_offloaded') level = 1;
    if (m[1] === 'discard_all') level = 2;
  }
  return level;
}

export async function readSleep(url: string, timeoutMs = 2000): Promise<SleepReading> {
  const r = await http(`${url}/is_sleeping`, { timeoutMs });
  if (!r.ok) return { state: 'unreachable', detail: r.message, ms: r.ms };
  if (r.status === 404) return { state: 'unsupported', detail: 'no /is_sleeping route: the server runs without VLLM_SERVER_DEV_MODE=1 (server.sleepMode)', ms: r.ms };
  const flag = r.status === 200 ? parseIsSleeping(r.json) : undefined;
  if (flag === undefined) return { state: 'unsupported', detail: `/is_sleeping answered HTTP ${r.status} ${JSON.stringify(r.body.slice(0, 80))}`, ms: r.ms };
  if (!flag) return { state: 'awake', ms: r.ms };
  const m = await http(`${url}/metrics`, { timeoutMs, maxBytes: 4 * 1024 * 1024 });
  const level = m.ok && m.status === 200 ? sleepLevelFromMetrics(m.body) : undefined;
  return { state: 'sleeping', ...(level ? { level } : {}), ms: r.ms };
}

export type SleepCall = { ok: true; ms: number } | { ok: false; status?: number; detail: string; ms: number };

async function post(url: string, timeoutMs: number): Promise<SleepCall> {
  const r = await http(url, { method: 'POST', timeoutMs });
  if (!r.ok) return { ok: false, detail: r.message, ms: r.ms };
  if (r.status !== 200) {
    const msg = (r.json as { error?: { message?: unknown } } | undefined)?.error?.message;
    return { ok: false, status: r.status, detail: `HTTP ${r.status}${typeof msg === 'string' ? `: ${msg.slice(0, 200)}` : ''}`, ms: r.ms };
  }
  return { ok: true, ms: r.ms };
}

/** POST /sleep. mode wait: the requests running finish first (vLLM's default, abort, would end them). */
export function requestSleep(url: string, level: SleepLevel, o: { mode?: 'wait' | 'abort'; timeoutMs: number }): Promise<SleepCall> {
  return post(`${url}/sleep?level=${level}&mode=${o.mode ?? 'wait'}`, o.timeoutMs);
}

/** POST /wake_up (every tag). vLLM answers once the engine is awake. */
export function requestWake(url: string, timeoutMs: number): Promise<SleepCall> {
  return post(`${url}/wake_up`, timeoutMs);
}
