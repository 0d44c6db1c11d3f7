// The deep probe: live, identity, a real 1-token generation, metrics, GPUs, auth. Every step has
// its own deadline and its own line; /health 200 alone proves nothing (vLLM issues 39863, 16259).
import { http } from '../client/http.js';
import { servedModels, completionAnswer, errorMessage } from '../client/shapes.js';
import { claudeCodeCheck, openaiCheck } from './client-check.js';
import { parseVllmMetrics } from '../client/metrics.js';
import type { Target } from './target.js';
import { readGpuRows, readXid, judgeGpus, type GpuVerdict, type XidEvent } from './gpu.js';
import { readVllm, type VllmReading } from '../history/vllm.js';
import { RealHost } from '../host/real.js';
import type { Host } from '../host/host.js';

export type StepStatus = 'pass' | 'warn' | 'fail' | 'skip';
export interface Step {
  step: 'live' | 'identity' | 'inference' | 'metrics' | 'gpu' | 'auth' | 'client' | 'router';
  status: StepStatus;
  detail: string;
  ms: number;
}
export interface ProbeResult {
  target: string;
  url: string;
  state: 'healthy' | 'unhealthy' | 'unreachable';
  steps: Step[];
  ms: number;
  inferenceMs?: number;
  metrics?: { kvCacheUsage?: number; waiting?: number; running?: number; preemptions?: number };
  /** every number history keeps (counters, gauges, latency histograms) */
  vllm?: VllmReading;
  /** the GPU step's findings, each naming its GPU, and the per-GPU readings */
  gpu?: GpuVerdict;
  /** kernel-log time of the newest Xid seen (the next probe's "since") */
  xidT?: number;
}

export interface ProbeSettings {
  timeoutMs: number;
  kvCacheUsageMax: number;
  waitingMax: number;
  gpuMemoryHeadroomPct: number;
  gpuMemoryUtilization?: number;
  client?: 'claude-code' | 'openai';
  /** preemption counter at the previous probe of this target (from the state folder) */
  lastPreemptions?: number;
  /** read GPUs (false: not visible, e.g. the simulator or a URL target) */
  gpus?: boolean;
  /** where GPUs are read: this host (default) or a replayed support bundle (probe --gpu-from) */
  gpuHost?: Host;
  tempWarnC?: number;
  tempUnhealthyC?: number;
  tempCriticalC?: number;
  /** kernel-log time of the newest Xid the previous probe saw (from history) */
  lastXidT?: number;
  /** the run's deadline (probe --deadline): no further step starts once it fired */
  signal?: AbortSignal;
}

export async function probe(t: Target, s: ProbeSettings): Promise<ProbeResult> {
  const started = performance.now();
  const steps: Step[] = [];
  const add = (step: Step['step'], status: StepStatus, detail: string, ms = 0) => steps.push({ step, status, detail, ms: Math.round(ms) });
  const done = (state: ProbeResult['state'], extra: Partial<ProbeResult> = {}): ProbeResult => ({ target: t.name, url: t.url, state, steps, ms: Math.round(performance.now() - started), ...extra });

  // 1. live
  const h = await http(`${t.url}/health`, { timeoutMs: s.timeoutMs, signal: s.signal });
  if (!h.ok) {
    add('live', 'fail', `${t.url}/health: ${h.message}`, h.ms);
    return done(h.error === 'refused' || h.error === 'timeout' || h.error === 'reset' || h.error === 'unresolved' ? 'unreachable' : 'unhealthy');
  }
  if (h.status === 503) {
    add('live', 'fail', 'engine dead: /health answers 503 (EngineDeadError)', h.ms);
    return done('unhealthy');
  }
  if (h.status !== 200) {
    add('live', 'fail', `/health answers HTTP ${h.status}`, h.ms);
    return done('unhealthy');
  }
  add('live', 'pass', '/health 200', h.ms);

  if (s.signal?.aborted) return done('unreachable');
  // 2. identity: the expected model, not whatever else holds the port
  const m = await http(`${t.url}/v1/models`, { timeoutMs: s.timeoutMs, signal: s.signal, apiKey: t.apiKey });
  let served = t.servedName;
  if (!m.ok || m.status !== 200) {
    add(
      'identity',
      'fail',
      m.ok ? `/v1/models answers HTTP ${m.status}${m.status === 401 ? ` (API key${t.apiKeyEnv ? ` from $${t.apiKeyEnv}` : ''} missing or wrong)` : ''}` : `/v1/models: ${m.message}`,
      m.ms,
    );
    return done('unhealthy');
  }
  const listed = servedModels(m.json, m.body);
  if (!listed.ok) {
    add('identity', 'fail', listed.problem, m.ms);
    return done('unhealthy');
  }
  const ids = listed.models.map((d) => d.id);
  if (served && !ids.includes(served)) {
    add('identity', 'fail', `serves ${ids.join(', ') || 'nothing'}, expected ${served}: another server on the port?`, m.ms);
    return done('unhealthy');
  }
  served ??= ids[0];
  const maxModelLen = listed.models.find((d) => d.id === served)?.max_model_len ?? t.maxModelLen;
  add('identity', 'pass', `serves ${served}`, m.ms);

  if (s.signal?.aborted) return done('unreachable');
  // 3. inference: a real 1-token generation with its own deadline (catches the hung engine)
  const gen = await http(`${t.url}/v1/completions`, { body: { model: served, prompt: 'ping', max_tokens: 1, temperature: 0 }, timeoutMs: s.timeoutMs, signal: s.signal, apiKey: t.apiKey });
  let inferenceMs: number | undefined;
  if (!gen.ok) {
    add('inference', 'fail', gen.error === 'timeout' ? `no token within ${s.timeoutMs} ms while /health was 200: the engine is hung` : `1-token completion: ${gen.message}`, gen.ms);
    return done('unhealthy');
  }
  if (gen.status !== 200) {
    const msg = errorMessage(gen.json, gen.body).slice(0, 200);
    add('inference', 'fail', `1-token completion answered HTTP ${gen.status}: ${msg}${/EngineDead/.test(msg) ? ' (engine dead)' : ''}`, gen.ms);
    return done('unhealthy');
  }
  // The answer a client would parse: a non-empty list of text choices, usage counts whole.
  const answer = completionAnswer(gen.json, gen.body);
  if (!answer.ok) {
    add('inference', 'fail', answer.problem, gen.ms);
    return done('unhealthy');
  }
  inferenceMs = Math.round(gen.ms);
  add('inference', 'pass', `1 token in ${inferenceMs} ms`, gen.ms);

  if (s.signal?.aborted) return done('unreachable');
  // 4. metrics
  let metrics: ProbeResult['metrics'];
  let vllm: VllmReading | undefined;
  const mt = await http(`${t.url}/metrics`, { timeoutMs: s.timeoutMs, signal: s.signal });
  if (!mt.ok || mt.status !== 200) add('metrics', 'warn', `/metrics: ${mt.ok ? `HTTP ${mt.status}` : mt.message}`, mt.ms);
  else {
    try {
      const v = parseVllmMetrics(mt.body);
      metrics = { kvCacheUsage: v.kvCacheUsage, waiting: v.waiting, running: v.running, preemptions: v.preemptions };
      vllm = readVllm(mt.body);
      const notes: string[] = [];
      let status: StepStatus = 'pass';
      if (v.kvCacheUsage !== undefined && v.kvCacheUsage >= s.kvCacheUsageMax) {
        status = 'warn';
        notes.push(`KV cache ${(v.kvCacheUsage * 100).toFixed(1)} % >= ${(s.kvCacheUsageMax * 100).toFixed(0)} %`);
      }
      if (v.waiting !== undefined && v.waiting > s.waitingMax) {
        status = 'warn';
        notes.push(`${v.waiting} requests waiting > ${s.waitingMax}`);
      }
      if (v.preemptions !== undefined && s.lastPreemptions !== undefined && v.preemptions > s.lastPreemptions) {
        status = 'warn';
        notes.push(`preemptions rising (+${v.preemptions - s.lastPreemptions} since the last probe)`);
      }
      if (v.invalid.length) {
        status = 'warn';
        notes.push(`impossible readings ignored: ${v.invalid.join(', ')}`);
      }
      const base = `KV cache ${v.kvCacheUsage !== undefined ? (v.kvCacheUsage * 100).toFixed(1) + ' %' : '?'}, ${v.running ?? '?'} running, ${v.waiting ?? '?'} waiting`;
      add('metrics', status, notes.length ? `${base}: ${notes.join('; ')}` : base, mt.ms);
    } catch (e) {
      add('metrics', 'warn', `/metrics does not parse: ${(e as Error).message}`, mt.ms);
    }
  }

  if (s.signal?.aborted) return done('unreachable');
  // 5. GPUs: preflight's rules, temperature, memory relative to what the profile reserves
  // (a healthy server holds ~92 % of each GPU), Xid since the last probe
  let gpu: GpuVerdict | undefined;
  let xidT: number | undefined;
  if (!s.gpuHost && (s.gpus === false || !t.gpus?.length)) add('gpu', 'skip', t.engine === 'sim' ? 'simulated GPUs (engine sim)' : 'GPUs not known for this target');
  else {
    const gs = performance.now();
    const host = s.gpuHost ?? new RealHost(s.timeoutMs);
    const [rows, xid] = await Promise.all([readGpuRows(host, s.timeoutMs), readXid(host, s.timeoutMs)]);
    if (!rows) add('gpu', 'skip', s.gpuHost ? `no nvidia-smi answer in ${host.name}` : 'nvidia-smi not available here', performance.now() - gs);
    else {
      let xidNew: XidEvent[] | undefined;
      if (xid.readable) {
        const times = xid.events.map((e) => e.ts).filter((x): x is number => x !== undefined);
        const newest = times.length ? Math.max(...times) : undefined;
        // a kernel clock behind the last probe's means a reboot: every Xid in the log is new
        const rebooted = s.lastXidT !== undefined && newest !== undefined && newest < s.lastXidT;
        xidNew = s.lastXidT === undefined || rebooted ? xid.events : xid.events.filter((e) => e.ts === undefined || e.ts > s.lastXidT!);
        xidT = newest ?? s.lastXidT;
      }
      const reserved = s.gpuMemoryUtilization ?? 0.9;
      gpu = judgeGpus(rows, {
        mine: s.gpuHost && !t.gpus?.length ? undefined : t.gpus,
        thresholds: { tempWarnC: s.tempWarnC ?? 75, tempUnhealthyC: s.tempUnhealthyC ?? 82, tempCriticalC: s.tempCriticalC ?? 88 },
        memLimit: Math.min(1, reserved + s.gpuMemoryHeadroomPct / 100),
        reserved,
        xidNew,
        xidUnreadable: xid.readable ? undefined : xid.why,
      });
      add('gpu', gpu.status, gpu.detail, performance.now() - gs);
    }
  }

  if (s.signal?.aborted) return done('unreachable');
  // 6. auth: with a key configured, /v1 without it must be refused
  const open = await http(`${t.url}/v1/models`, { timeoutMs: s.timeoutMs, signal: s.signal });
  if (t.apiKeyEnv || t.apiKey) {
    if (open.ok && open.status === 401) add('auth', 'pass', '/v1 refuses requests without the key', open.ms);
    else add('auth', 'fail', `/v1/models answered ${open.ok ? `HTTP ${open.status}` : open.message} without the key: the server is open`, open.ms);
  } else if (open.ok && open.status === 200) {
    add('auth', 'warn', 'no API key configured: anyone who reaches the port can use the server', open.ms);
  } else add('auth', 'pass', `/v1 answers HTTP ${open.ok ? open.status : open.message} without a key`, open.ms);

  if (s.signal?.aborted) return done('unreachable');
  // 7. what a client needs: a request shaped like the client's own, read as that client reads it
  if (s.client === 'claude-code' || s.client === 'openai') {
    const c = s.client === 'claude-code' ? await claudeCodeCheck(t, served!, maxModelLen, s) : await openaiCheck(t, served!, s);
    add('client', c.status, c.detail, c.ms);
  }

  const state = steps.some((x) => x.status === 'fail') ? 'unhealthy' : 'healthy';
  return done(state, { inferenceMs, metrics, vllm, gpu, xidT });
}
