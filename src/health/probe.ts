// The deep probe: live, identity, a real 1-token generation, metrics, GPUs, auth. Every step has
// its own deadline and its own line; /health 200 alone proves nothing (vLLM issues 39863, 16259).
// The GPU and client checks load their modules when they run: a probe of a URL or a simulator
// reads no GPU, and its start-up is most of what a cron probe costs.
import { socketPathOf } from '../util/socket-url.js';
import { http } from '../client/http.js';
import { servedModels, completionAnswer, errorMessage } from '../client/answers.js';
import { parseVllmMetrics, readVllm } from '../client/metrics.js';
import type { Target } from './target.js';
import type { GpuVerdict, XidEvent } from './gpu.js';
import type { VllmReading } from '../history/vllm.js';
import type { Host } from '../host/host.js';

type StepStatus = 'pass' | 'warn' | 'fail' | 'skip';
export interface Step {
  step: 'live' | 'sleep' | 'identity' | 'inference' | 'metrics' | 'gpu' | 'auth' | 'client' | 'router';
  status: StepStatus;
  detail: string;
  ms: number;
}
export interface ProbeResult {
  target: string;
  url: string;
  /** sleeping: vLLM's sleep mode (its /is_sleeping says so); not probed with a generation, not a problem */
  state: 'healthy' | 'unhealthy' | 'unreachable' | 'sleeping';
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
  /** sleeping: the level vLLM's gauge names (1 weights offloaded, 2 discarded); absent when it does not say */
  sleepLevel?: 1 | 2;
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
  /**
   * The inference step's deadline for a server known to be cold (serve --no-prewarm probes one that
   * has generated nothing yet): its first token compiles and allocates, seconds to minutes, and is
   * no hang. timeoutMs still bounds every other step.
   */
  firstTokenTimeoutMs?: number;
  /**
   * The client step's deadline (probe --client): a client's first request is a long prompt (Claude Code's about
   * 20,500 tokens), whose prefill on one DGX Spark alone outlasts the 5 s other steps get. timeoutMs when unset.
   */
  clientTimeoutMs?: number;
}

/** What the checks of one probe share: the target, its settings, the steps so far, what they found. */
interface ProbeContext {
  t: Target;
  s: ProbeSettings;
  /** the served name: the target's, or the first /v1/models entry once identity passed */
  served?: string;
  /** the served context: /v1/models' max_model_len, else the registry's */
  maxModelLen?: number;
  steps: Step[];
  add: (step: Step['step'], status: StepStatus, detail: string, ms?: number) => void;
  /** what the checks read for the result beyond their steps */
  found: Pick<ProbeResult, 'inferenceMs' | 'metrics' | 'vllm' | 'gpu' | 'xidT' | 'sleepLevel'>;
}

/**
 * A check adds its step(s); it ends the probe by returning the verdict (a later check would only repeat the failure).
 */
export interface ProbeCheck {
  step: Step['step'];
  run: (ctx: ProbeContext) => Promise<ProbeResult['state'] | undefined>;
}

/** 1. live: /health 200 (503 is vLLM's EngineDeadError). */
const liveCheck: ProbeCheck = {
  step: 'live',
  async run({ t, s, add }) {
    const h = await http(`${t.url}/health`, { timeoutMs: s.timeoutMs, signal: s.signal });
    if (!h.ok) {
      add('live', 'fail', `${t.url}/health: ${h.message}`, h.ms);
      return h.error === 'refused' || h.error === 'timeout' || h.error === 'reset' || h.error === 'unresolved'
        ? 'unreachable'
        : 'unhealthy';
    }
    if (h.status === 503) {
      add('live', 'fail', 'engine dead: /health answers 503 (EngineDeadError)', h.ms);
      return 'unhealthy';
    }
    if (h.status !== 200) {
      add('live', 'fail', `/health answers HTTP ${h.status}`, h.ms);
      return 'unhealthy';
    }
    add('live', 'pass', '/health 200', h.ms);
    return undefined;
  },
};

/**
 * 1b. sleep: a server in vLLM's sleep mode answers /health 200 and queues a generation until it is
 * woken, so it is asked (GET /is_sleeping, a route only dev mode has: a 404 is an ordinary server)
 * and a sleeping one ends the probe as `sleeping`: not unhealthy, and never woken by a probe.
 */
const sleepCheck: ProbeCheck = {
  step: 'sleep',
  async run({ t, s, add, found }) {
    const r = await http(`${t.url}/is_sleeping`, { timeoutMs: s.timeoutMs, signal: s.signal });
    if (!r.ok || r.status !== 200 || (r.json as { is_sleeping?: unknown } | undefined)?.is_sleeping !== true)
      return undefined;
    const m = await http(`${t.url}/metrics`, { timeoutMs: s.timeoutMs, signal: s.signal });
    const { sleepLevelFromMetrics } = await import('../client/sleep.js');
    const level = m.ok && m.status === 200 ? sleepLevelFromMetrics(m.body) : undefined;
    if (level) found.sleepLevel = level;
    add(
      'sleep',
      'pass',
      `sleeping${level ? ` (level ${level})` : ''}: vLLM's sleep mode; not probed with a generation (sparkctl wake wakes it)`,
      r.ms,
    );
    return 'sleeping';
  },
};

/** 2. identity: the expected model, not whatever else holds the port. */
export const identityCheck: ProbeCheck = {
  step: 'identity',
  async run(ctx) {
    const { t, s, add } = ctx;
    const m = await http(`${t.url}/v1/models`, { timeoutMs: s.timeoutMs, signal: s.signal, apiKey: t.apiKey });
    if (!m.ok || m.status !== 200) {
      add(
        'identity',
        'fail',
        m.ok
          ? `/v1/models answers HTTP ${m.status}${m.status === 401 ? ` (API key${t.apiKeyEnv ? ` from $${t.apiKeyEnv}` : ''} missing or wrong)` : ''}`
          : `/v1/models: ${m.message}`,
        m.ms,
      );
      return 'unhealthy';
    }
    const listed = servedModels(m.json, m.body);
    if (!listed.ok) {
      add('identity', 'fail', listed.problem, m.ms);
      return 'unhealthy';
    }
    const ids = listed.models.map((d) => d.id);
    if (ctx.served && !ids.includes(ctx.served)) {
      add(
        'identity',
        'fail',
        `serves ${ids.join(', ') || 'nothing'}, expected ${ctx.served}: another server on the port?`,
        m.ms,
      );
      return 'unhealthy';
    }
    ctx.served ??= ids[0];
    ctx.maxModelLen = listed.models.find((d) => d.id === ctx.served)?.max_model_len ?? t.maxModelLen;
    add('identity', 'pass', `serves ${ctx.served}`, m.ms);
    return undefined;
  },
};

/**
 * A generation counts only when it produced a token and ended for a normal reason: vLLM ends a
 * request it gave up on (an engine restarting, a preempted request dropped, a client gone) with
 * finish_reason "abort" (or "error"), often with nothing out, and an answer of 200 with no token
 * is no proof the engine generates. Why it does not count, or undefined when it does.
 */
function generationEnded(a: {
  choices: Array<{ text: string; finish_reason?: string | null }>;
  usage?: { completion_tokens: number } | null;
}): string | undefined {
  const c = a.choices[0]!;
  const reason = c.finish_reason ?? null;
  const tokens = a.usage ? a.usage.completion_tokens : c.text.length ? 1 : 0;
  if (reason !== 'length' && reason !== 'stop')
    return `finish_reason ${reason === null ? 'none (the generation never ended)' : JSON.stringify(String(reason).slice(0, 40))} with ${tokens} token(s) out: not a generation that ran`;
  if (tokens < 1) return `finish_reason ${reason} with no token out`;
  return undefined;
}

/**
 * 3. inference: a real 1-token generation with its own deadline (catches the hung engine). Sampled
 * with the server's defaults, as a client that sets nothing is served: a greedy request takes
 * another path through the sampler (seen: vLLM's CPU image without a C++ compiler answered greedy
 * requests, and the first default one killed its engine in torch.compile).
 */
export const inferenceCheck: ProbeCheck = {
  step: 'inference',
  async run({ t, s, served, add, found }) {
    const timeoutMs = Math.max(s.timeoutMs, s.firstTokenTimeoutMs ?? 0);
    const gen = await http(`${t.url}/v1/completions`, {
      body: { model: served, prompt: 'ping', max_tokens: 1 },
      timeoutMs,
      signal: s.signal,
      apiKey: t.apiKey,
    });
    if (!gen.ok) {
      add(
        'inference',
        'fail',
        gen.error === 'timeout'
          ? `no token within ${timeoutMs} ms while /health was 200: the engine is hung`
          : `1-token completion: ${gen.message}`,
        gen.ms,
      );
      return 'unhealthy';
    }
    if (gen.status !== 200) {
      const msg = errorMessage(gen.json, gen.body).slice(0, 200);
      add(
        'inference',
        'fail',
        `1-token completion answered HTTP ${gen.status}: ${msg}${/EngineDead/.test(msg) ? ' (engine dead)' : ''}`,
        gen.ms,
      );
      return 'unhealthy';
    }
    // The answer a client would parse: a non-empty list of text choices, usage counts whole.
    const answer = completionAnswer(gen.json, gen.body);
    if (!answer.ok) {
      add('inference', 'fail', answer.problem, gen.ms);
      return 'unhealthy';
    }
    const ended = generationEnded(answer.value);
    if (ended) {
      add('inference', 'fail', `1-token completion: ${ended}`, gen.ms);
      return 'unhealthy';
    }
    found.inferenceMs = Math.round(gen.ms);
    add('inference', 'pass', `1 token in ${found.inferenceMs} ms`, gen.ms);
    return undefined;
  },
};

/** 4. metrics: KV cache, queue and preemptions against the profile's limits (warnings only). */
const metricsCheck: ProbeCheck = {
  step: 'metrics',
  async run({ t, s, add, found }) {
    const mt = await http(`${t.url}/metrics`, { timeoutMs: s.timeoutMs, signal: s.signal });
    if (!mt.ok || mt.status !== 200) {
      add('metrics', 'warn', `/metrics: ${mt.ok ? `HTTP ${mt.status}` : mt.message}`, mt.ms);
      return undefined;
    }
    try {
      const v = parseVllmMetrics(mt.body);
      found.metrics = {
        kvCacheUsage: v.kvCacheUsage,
        waiting: v.waiting,
        running: v.running,
        preemptions: v.preemptions,
      };
      found.vllm = readVllm(mt.body);
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
    return undefined;
  },
};

/**
 * 5. GPUs: preflight's rules, temperature, memory relative to what the profile reserves (a healthy
 * server holds ~92 % of each GPU), Xid since the last probe.
 */
const gpuCheck: ProbeCheck = {
  step: 'gpu',
  async run({ t, s, add, found }) {
    if (!s.gpuHost && (s.gpus === false || !t.gpus?.length)) {
      add('gpu', 'skip', t.engine === 'sim' ? 'simulated GPUs (engine sim)' : 'GPUs not known for this target');
      return undefined;
    }
    const gs = performance.now();
    const { readGpuRows, readXid, judgeGpus } = await import('./gpu.js');
    const host = s.gpuHost ?? new (await import('../host/real.js')).RealHost(s.timeoutMs);
    const [rows, xid] = await Promise.all([readGpuRows(host, s.timeoutMs), readXid(host, s.timeoutMs)]);
    if (!rows) {
      add(
        'gpu',
        'skip',
        s.gpuHost ? `no nvidia-smi answer in ${host.name}` : 'nvidia-smi not available here',
        performance.now() - gs,
      );
      return undefined;
    }
    let xidNew: XidEvent[] | undefined;
    if (xid.readable) {
      const times = xid.events.map((e) => e.ts).filter((x): x is number => x !== undefined);
      const newest = times.length ? Math.max(...times) : undefined;
      // a kernel clock behind the last probe's means a reboot: every Xid in the log is new
      const rebooted = s.lastXidT !== undefined && newest !== undefined && newest < s.lastXidT;
      xidNew =
        s.lastXidT === undefined || rebooted
          ? xid.events
          : xid.events.filter((e) => e.ts === undefined || e.ts > s.lastXidT!);
      found.xidT = newest ?? s.lastXidT;
    }
    const reserved = s.gpuMemoryUtilization ?? 0.9;
    found.gpu = judgeGpus(rows, {
      mine: s.gpuHost && !t.gpus?.length ? undefined : t.gpus,
      thresholds: {
        tempWarnC: s.tempWarnC ?? 75,
        tempUnhealthyC: s.tempUnhealthyC ?? 82,
        tempCriticalC: s.tempCriticalC ?? 88,
      },
      memLimit: Math.min(1, reserved + s.gpuMemoryHeadroomPct / 100),
      reserved,
      xidNew,
      xidUnreadable: xid.readable ? undefined : xid.why,
    });
    add('gpu', found.gpu.status, found.gpu.detail, performance.now() - gs);
    return undefined;
  },
};

/** 6. auth: with a key configured, /v1 without it must be refused. */
const authCheck: ProbeCheck = {
  step: 'auth',
  async run({ t, s, add }) {
    const open = await http(`${t.url}/v1/models`, { timeoutMs: s.timeoutMs, signal: s.signal });
    if (t.apiKeyEnv || t.apiKey) {
      if (open.ok && open.status === 401) add('auth', 'pass', '/v1 refuses requests without the key', open.ms);
      else
        add(
          'auth',
          'fail',
          `/v1/models answered ${open.ok ? `HTTP ${open.status}` : open.message} without the key: the server is open`,
          open.ms,
        );
    } else if (open.ok && open.status === 200) {
      add(
        'auth',
        'warn',
        `no API key configured: ${socketPathOf(t.url) ? "on its Unix socket only sparkctl's user reaches this server, but anyone who reaches the router's port can use it" : 'anyone who reaches the port can use the server'} (fix: put the key in a variable and name it in the profile, server.apiKeyEnv: VLLM_API_KEY, or --set server.apiKeyEnv=VLLM_API_KEY)`,
        open.ms,
      );
    } else add('auth', 'pass', `/v1 answers HTTP ${open.ok ? open.status : open.message} without a key`, open.ms);
    return undefined;
  },
};

/** 7. what a client needs (probe --client): a request shaped like the client's own, read as that client reads it. */
const clientCheck: ProbeCheck = {
  step: 'client',
  async run({ t, s, served, maxModelLen, add }) {
    if (s.client !== 'claude-code' && s.client !== 'openai') return undefined;
    const { claudeCodeCheck, openaiCheck } = await import('./client-check.js');
    const c =
      s.client === 'claude-code' ? await claudeCodeCheck(t, served!, maxModelLen, s) : await openaiCheck(t, served!, s);
    add('client', c.status, c.detail, c.ms);
    return undefined;
  },
};

export const PROBE_CHECKS: readonly ProbeCheck[] = [
  liveCheck,
  sleepCheck,
  identityCheck,
  inferenceCheck,
  metricsCheck,
  gpuCheck,
  authCheck,
  clientCheck,
];

export async function probe(
  t: Target,
  s: ProbeSettings,
  checks: readonly ProbeCheck[] = PROBE_CHECKS,
): Promise<ProbeResult> {
  const started = performance.now();
  const steps: Step[] = [];
  const ctx: ProbeContext = {
    t,
    s,
    served: t.servedName,
    steps,
    add: (step, status, detail, ms = 0) => steps.push({ step, status, detail, ms: Math.round(ms) }),
    found: {},
  };
  const done = (state: ProbeResult['state'], extra: Partial<ProbeResult> = {}): ProbeResult => ({
    target: t.name,
    url: t.url,
    state,
    steps,
    ms: Math.round(performance.now() - started),
    ...extra,
  });
  for (const [i, check] of checks.entries()) {
    // the run's deadline (probe --deadline) fired: no further step starts
    if (i > 0 && s.signal?.aborted) return done('unreachable');
    const end = await check.run(ctx);
    // a sleeping server ends the probe early: what the sleep check read (its level) is part of the result
    if (end) return done(end, end === 'sleeping' ? ctx.found : {});
  }
  const state = steps.some((x) => x.status === 'fail') ? 'unhealthy' : 'healthy';
  return done(state, ctx.found);
}
