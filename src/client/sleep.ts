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
function parseIsSleeping(json: unknown): boolean | undefined {
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
  if (r.status === 404)
    return {
      state: 'unsupported',
      detail: 'no /is_sleeping route: the server runs without VLLM_SERVER_DEV_MODE=1 (server.sleepMode)',
      ms: r.ms,
    };
  const flag = r.status === 200 ? parseIsSleeping(r.json) : undefined;
  if (flag === undefined)
    return {
      state: 'unsupported',
      detail: `/is_sleeping answered HTTP ${r.status} ${JSON.stringify(r.body.slice(0, 80))}`,
      ms: r.ms,
    };
  if (!flag) return { state: 'awake', ms: r.ms };
  const m = await http(`${url}/metrics`, { timeoutMs, maxBytes: 4 * 1024 * 1024 });
  const level = m.ok && m.status === 200 ? sleepLevelFromMetrics(m.body) : undefined;
  return { state: 'sleeping', ...(level ? { level } : {}), ms: r.ms };
}

type SleepCall = { ok: true; ms: number } | { ok: false; status?: number; detail: string; ms: number };

async function post(url: string, timeoutMs: number, body?: unknown): Promise<SleepCall> {
  const r = await http(url, { method: 'POST', timeoutMs, ...(body !== undefined ? { body } : {}) });
  if (!r.ok) return { ok: false, detail: r.message, ms: r.ms };
  if (r.status !== 200) {
    const msg = (r.json as { error?: { message?: unknown } } | undefined)?.error?.message;
    return {
      ok: false,
      status: r.status,
      detail: `HTTP ${r.status}${typeof msg === 'string' ? `: ${msg.slice(0, 200)}` : ''}`,
      ms: r.ms,
    };
  }
  return { ok: true, ms: r.ms };
}

/** POST /sleep. mode wait: the requests running finish first (vLLM's default, abort, would end them). */
export function requestSleep(
  url: string,
  level: SleepLevel,
  o: { mode?: 'wait' | 'abort'; timeoutMs: number },
): Promise<SleepCall> {
  return post(`${url}/sleep?level=${level}&mode=${o.mode ?? 'wait'}`, o.timeoutMs);
}

/**
 * Wake a server. Level 1: POST /wake_up, every tag; vLLM answers once the engine is awake. Level 2 discarded the
 * weights, and a plain wake_up maps their memory back empty (the engine then answers "!!!!"): vLLM's docs' sequence
 * instead, each step waited for: wake_up?tags=weights, POST /collective_rpc {"method":"reload_weights"} (the weights
 * read again in place), then wake_up?tags=kv_cache (scheduling resumes), and POST /reset_prefix_cache, so no block
 * computed before the reload is ever reused (vLLM's sleep drops it already; this holds for any version). A level not
 * known (no gauge before vLLM 0.12) gets the same sequence; a 404 of the two dev routes is then passed over.
 */
export async function requestWake(url: string, timeoutMs: number, level?: SleepLevel): Promise<SleepCall> {
  // level not known (a vLLM before 0.12 has no sleep gauge): the level-2 sequence, which wakes a level 1 as well
  if (level === 1) return post(`${url}/wake_up`, timeoutMs);
  const t0 = performance.now();
  const left = () => Math.max(1000, timeoutMs - (performance.now() - t0));
  const steps: Array<[string, () => Promise<SleepCall>]> = [
    ['POST /wake_up?tags=weights', () => post(`${url}/wake_up?tags=weights`, left())],
    ['POST /collective_rpc reload_weights', () => post(`${url}/collective_rpc`, left(), { method: 'reload_weights' })],
    ['POST /wake_up?tags=kv_cache', () => post(`${url}/wake_up?tags=kv_cache`, left())],
    ['POST /reset_prefix_cache', () => post(`${url}/reset_prefix_cache`, left())],
  ];
  for (const [what, step] of steps) {
    const r = await step();
    // an older vLLM without the route, asleep at a level it does not say: its weights are (most likely) in CPU memory
    if (!r.ok && r.status === 404 && level === undefined && !what.includes('tags=')) continue;
    if (!r.ok) {
      const hint =
        what.includes('collective_rpc') && r.status === 404
          ? ' (this vLLM has no /collective_rpc route: a level-2 sleep cannot get its weights back; restart the server)'
          : '';
      return { ...r, detail: `level-2 wake, ${what}: ${r.detail}${hint}`, ms: Math.round(performance.now() - t0) };
    }
  }
  return { ok: true, ms: Math.round(performance.now() - t0) };
}
