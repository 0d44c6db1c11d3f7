// Readiness: /health answers 200 and /v1/models lists the served name. Serve waits on it after a
// launch (engine/launch.ts, one host and nodes alike; engine/cluster/common.ts) and prewarm before its first request;
// what only the launcher knows (the process ended, the log went quiet, who holds the port) comes in
// as callbacks, so the wait itself is HTTP only and sits with the client.
import { http, type HttpResult } from './http.js';
import { servedModels } from './answers.js';
import { pause } from '../util/pause.js';

export type NotReadyReason =
  | 'exited'
  | 'timeout'
  | 'stalled'
  | 'spawn-error'
  | 'wrong-model'
  | 'not-ours'
  | 'interrupted';

export interface NotReady {
  reason: NotReadyReason;
  /** what the wait saw, e.g. "exited with code 1 before it was ready" */
  detail: string;
  ms: number;
}

export type ReadyResult = { ok: true; ms: number } | ({ ok: false } & NotReady);

interface ReadyWatch {
  url: string;
  /** /v1/models must list it; without one, /health 200 is enough */
  servedName?: string;
  apiKey?: string;
  deadlineMs: number;
  signal?: AbortSignal;
  /** the process we started: undefined while it runs, why it ended otherwise */
  ended?: () =>
    | Promise<{ reason: 'exited' | 'spawn-error'; detail: string } | undefined>
    | { reason: 'exited' | 'spawn-error'; detail: string }
    | undefined;
  /**
   * Proof that the server answering is the one we started (our process holds the listening
   * socket). false: someone else answers, keep waiting; undefined: cannot tell, trust the answer.
   */
  ours?: () => Promise<boolean | undefined> | boolean | undefined;
  /** ms since the last sign of life (log output); past stallMs the wait ends as stalled */
  quietMs?: () => number;
  stallMs?: number;
  /**
   * A hang named from the log before the stall timeout (a Ray placement-group wait, a P2P/NCCL
   * set-up hang): why, or undefined. Ends the wait as stalled within seconds, with that why.
   */
  hung?: () => string | undefined | Promise<string | undefined>;
  /** called on every round (read the log, report phases) */
  onPoll?: () => void | Promise<void>;
  /** every /health answer (or failure), e.g. to say why the wait ended */
  onHealth?: (h: HttpResult) => void;
  pollMs?: number;
}

/**
 * Ready = /health 200, /v1/models lists the served name, and (where it can be proven) the server
 * answering is ours. Races the process ending, the deadline, a stall and cancellation; never hangs.
 */
export async function waitReady(w: ReadyWatch): Promise<ReadyResult> {
  const started = Date.now();
  const elapsed = () => Date.now() - started;
  let foreign = '';
  for (;;) {
    await w.onPoll?.();
    if (w.signal?.aborted) return { ok: false, reason: 'interrupted', detail: 'interrupted', ms: elapsed() };
    const end = await w.ended?.();
    if (end) return { ok: false, ...end, ms: elapsed() };
    if (elapsed() > w.deadlineMs) {
      if (foreign)
        return {
          ok: false,
          reason: 'not-ours',
          detail: `not ready after ${Math.round(elapsed() / 1000)} s: ${foreign}`,
          ms: elapsed(),
        };
      return {
        ok: false,
        reason: 'timeout',
        detail: `not ready after ${Math.round(elapsed() / 1000)} s (ready timeout)`,
        ms: elapsed(),
      };
    }
    const quiet = w.quietMs?.();
    if (w.stallMs !== undefined && quiet !== undefined && quiet > w.stallMs) {
      return {
        ok: false,
        reason: 'stalled',
        detail: `no log output for ${Math.round(quiet / 1000)} s (stall timeout): stuck loading?`,
        ms: elapsed(),
      };
    }
    const hung = await w.hung?.();
    if (hung) return { ok: false, reason: 'stalled', detail: hung, ms: elapsed() };
    // Connection refused until the engine is up is normal for vLLM: keep polling, briefly.
    const left = Math.max(1, w.deadlineMs - elapsed());
    const h = await http(`${w.url}/health`, { timeoutMs: Math.min(1000, left) });
    w.onHealth?.(h);
    if (h.ok && h.status === 200) {
      let listed = true;
      let answered = false;
      let ids: string[] = [];
      if (w.servedName !== undefined) {
        const m = await http(`${w.url}/v1/models`, { timeoutMs: Math.min(2000, left), apiKey: w.apiKey });
        answered = m.ok && m.status === 200;
        // Every byte from a server is hostile: a wrong shape is "serves nothing", never a crash.
        const models = answered && m.ok ? servedModels(m.json, m.body) : undefined;
        ids = models?.ok ? models.models.map((d) => d.id) : [];
        listed = answered && ids.includes(w.servedName);
      }
      const mine = await w.ours?.();
      if (mine === false)
        foreign = `the server answering on ${w.url} is not the process sparkctl started (another process holds the port)`;
      else if (listed) {
        // The log lines written just before the server answered (uvicorn's "Application startup
        // complete" comes before it serves) are read too, so the last phases are not lost to the race.
        await w.onPoll?.();
        return { ok: true, ms: elapsed() };
      } else if (answered)
        return {
          ok: false,
          reason: 'wrong-model',
          detail: `the server on ${w.url} serves ${ids.join(', ') || 'nothing'}, not ${w.servedName}${mine ? '' : ': another server holds the port?'}`,
          ms: elapsed(),
        };
    }
    await pause(w.pollMs ?? (h.ok ? 50 : 40), w.signal);
  }
}
