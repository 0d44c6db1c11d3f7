// Launch one replica in its own process group with its own log, then supervise it until it is
// really ready. Supervision races the child's exit, the deadline and a stall timer that log
// activity resets; readiness is /health 200 and /v1/models listing the served name.
import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, writeSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { ReplicaPlan } from '../profiles/render.js';
import { randomUUID } from 'node:crypto';
import { processStartTime, INSTANCE_ENV } from './proc.js';
import { http } from '../client/http.js';
import { servedModels } from '../client/shapes.js';
import { phaseOf } from './classify.js';
import { LogTail } from './logtail.js';

export interface Launched {
  plan: ReplicaPlan;
  child: ChildProcess;
  pid: number;
  /** = pid: every replica is the leader of its own process group */
  pgid: number;
  startTime: number;
  /** SPARKCTL_INSTANCE of every process of this launch: what proves a process is ours before it is signalled */
  marker: string;
  exit: { code: number | null; signal: NodeJS.Signals | null; error?: string } | undefined;
  exited: Promise<void>;
}

export function launchReplica(plan: ReplicaPlan, secrets: Record<string, string>): Launched {
  mkdirSync(dirname(plan.logFile), { recursive: true });
  const fd = openSync(plan.logFile, 'a');
  // argv never holds a secret (the key travels in the environment), so it may be logged.
  writeSync(fd, `=== sparkctl ${new Date().toISOString()} launch: ${plan.argv.join(' ')}\n`);
  const marker = randomUUID();
  const env: NodeJS.ProcessEnv = { ...process.env, ...plan.env, ...secrets, [INSTANCE_ENV]: marker };
  for (const k of plan.unsetEnv ?? []) delete env[k];
  const child = spawn(plan.argv[0]!, plan.argv.slice(1), {
    detached: true, // its own process group: stop signals the whole group, EngineCore included
    stdio: ['ignore', fd, fd],
    env,
  });
  closeSync(fd);
  const l: Launched = { plan, child, pid: child.pid ?? -1, pgid: child.pid ?? -1, startTime: child.pid ? processStartTime(child.pid) ?? 0 : 0, marker, exit: undefined, exited: Promise.resolve() };
  l.exited = new Promise<void>((resolve) => {
    child.once('error', (e: NodeJS.ErrnoException) => {
      l.exit = { code: null, signal: null, error: e.code === 'ENOENT' ? `${plan.argv[0]} not found (is vLLM installed? --vllm-bin PATH)` : e.message };
      resolve();
    });
    child.once('exit', (code, signal) => {
      l.exit ??= { code, signal };
      resolve();
    });
  });
  return l;
}

export type ReadyResult =
  | { ok: true; ms: number }
  | { ok: false; reason: 'exited' | 'timeout' | 'stalled' | 'spawn-error' | 'wrong-model' | 'interrupted'; detail: string; ms: number };

export async function waitReady(
  l: Launched,
  opts: { url: string; servedName: string; apiKey?: string; deadlineMs: number; stallMs: number; onPhase?: (phase: string) => void; signal?: AbortSignal },
): Promise<ReadyResult> {
  const started = Date.now();
  const tail = new LogTail(l.plan.logFile);
  (l as Launched & { tail?: LogTail }).tail = tail;
  let lastPhase = '';
  for (;;) {
    for (const line of tail.poll()) {
      const p = phaseOf(line);
      if (p && p !== lastPhase) {
        lastPhase = p;
        opts.onPhase?.(p);
      }
    }
    const ms = Date.now() - started;
    if (opts.signal?.aborted) return { ok: false, reason: 'interrupted', detail: 'interrupted', ms };
    if (l.exit) {
      tail.poll();
      if (l.exit.error) return { ok: false, reason: 'spawn-error', detail: l.exit.error, ms };
      return { ok: false, reason: 'exited', detail: `exited with ${l.exit.signal ?? `code ${l.exit.code}`} before it was ready`, ms };
    }
    if (ms > opts.deadlineMs) return { ok: false, reason: 'timeout', detail: `not ready after ${Math.round(ms / 1000)} s (ready timeout)`, ms };
    if (Date.now() - tail.lastActivity > opts.stallMs) return { ok: false, reason: 'stalled', detail: `no log output for ${Math.round((Date.now() - tail.lastActivity) / 1000)} s (stall timeout): stuck loading?`, ms };
    // Connection refused until the engine is up is normal for vLLM: keep polling, briefly.
    const h = await http(`${opts.url}/health`, { timeoutMs: 1000 });
    if (h.ok && h.status === 200) {
      const m = await http(`${opts.url}/v1/models`, { timeoutMs: 2000, apiKey: opts.apiKey });
      if (m.ok && m.status === 200) {
        const listed = servedModels(m.json, m.body);
        const ids = listed.ok ? listed.models.map((d) => d.id) : [];
        if (ids.includes(opts.servedName)) return { ok: true, ms: Date.now() - started };
        return { ok: false, reason: 'wrong-model', detail: `the server on ${opts.url} serves ${ids.join(', ') || 'nothing'}, not ${opts.servedName}: another server holds the port?`, ms: Date.now() - started };
      }
    }
    await new Promise((r) => setTimeout(r, h.ok ? 50 : 40));
  }
}
