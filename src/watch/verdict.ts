// A server's readings, oldest first -> what it is doing, with the evidence. Pure: the table tests
// (test/unit/watch-verdict.test.ts) feed it recorded sequences.
//
// The rule that matters: a wedge is never a timeout alone. It is called only when the engine holds
// requests (running or waiting), NO engine-reported value has changed for a window, and a second,
// independent signal agrees (the engine process is stopped, or the deep 1-token probe sent after the
// stall began did not answer). The window is the policy's floor raised by what this server has shown
// it needs: twice its slowest first token (TTFT histogram) and twice the longest quiet spell it has
// had that ended in progress (a long one-step prefill on a slow host). Busy, saturated, preempting,
// loading, sleeping and draining servers are never wedged: each has its own verdict.
import { moved, type EngineNumbers } from './signals.js';

export const VERDICTS = [
  'healthy',
  'busy',
  'saturated',
  'preempting',
  'loading',
  'sleeping',
  'draining',
  'wedged',
  'dead',
  'unknown',
] as const;
export type Verdict = (typeof VERDICTS)[number];

/** Someone else owns the server's life right now (the gateway, a rolling restart, serve). */
export type Owner =
  | { by: 'gateway'; state: 'starting' | 'sleeping' | 'stopping' | 'evicting' }
  | { by: 'serve'; state: 'loading' }
  | { by: 'router'; state: 'drain' | 'maint' };

export interface Reading {
  /** ms since the epoch */
  at: number;
  /** the instance's processes, proven by identity: alive, gone, or alive but stopped (SIGSTOP: state T) */
  process: 'alive' | 'gone' | 'stopped' | 'unknown';
  /** the member that is stopped, or the ranks lost */
  processDetail?: string;
  /** a multi-node server: ranks alive of ranks started */
  ranks?: { alive: number; total: number };
  /** GET /health: 200, another status (vLLM answers 503 when its engine died), or no answer */
  health: 'ok' | 'fail' | 'unreachable';
  healthDetail?: string;
  /** GET /metrics read (undefined: unreadable or not asked) */
  metrics?: EngineNumbers;
  /** why /metrics gave no numbers (no answer, a status, an answer no server gives) */
  metricsDetail?: string;
  /** GET /is_sleeping said true */
  asleep?: boolean;
  owner?: Owner;
  /** the deep probe, sent when the cheap signals disagreed */
  probe?: { ok: boolean; ms: number; detail: string };
}

interface Policy {
  /** the wedge window's floor, s */
  windowS: number;
  /** the window never grows past this, s (a server that once took 10 min for a token would never be called wedged) */
  maxWindowS: number;
  /** no /health answer (or a failing one) for this long, on two readings at least: dead, s */
  deadAfterS: number;
  /** KV cache usage at or above this, with requests waiting: saturated */
  kvSaturated: number;
}

export const DEFAULT_POLICY: Policy = { windowS: 20, maxWindowS: 600, deadAfterS: 10, kvSaturated: 0.95 };

interface Evidence {
  signal: string;
  value: string | number | boolean;
  /** ISO time of the reading it comes from */
  at?: string;
  note?: string;
}

export interface Judgement {
  verdict: Verdict;
  /** one line an operator reads */
  why: string;
  evidence: Evidence[];
  /** the window this server's evidence sets, s */
  windowS: number;
  /** how long nothing the engine reports has moved while it held requests, s (0: it moved) */
  stalledS: number;
  /** the cheap signals disagree and no probe since the stall began: send the deep probe, then judge again */
  wantProbe: boolean;
}

const iso = (ms: number) => new Date(ms).toISOString();
const s1 = (ms: number) => Math.round(ms / 100) / 10;
const holds = (m: EngineNumbers | undefined) => (m?.running ?? 0) + (m?.waiting ?? 0) > 0;

/** The metric readings, each with the time it was read (readings without /metrics left out). */
function metricReadings(rs: readonly Reading[]): Array<{ at: number; m: EngineNumbers; probe?: Reading['probe'] }> {
  return rs.filter((r) => r.metrics).map((r) => ({ at: r.at, m: r.metrics!, probe: r.probe }));
}

/**
 * When the current quiet spell began (the first reading of the run of unchanged values at the end), and the longest
 * earlier spell that ended in progress while the engine held requests.
 */
function quietSpells(rs: readonly Reading[]): { since?: number; sinceIndex?: number; longestEndedMs: number } {
  const ms = metricReadings(rs);
  if (!ms.length) return { longestEndedMs: 0 };
  let start = 0;
  let longest = 0;
  for (let i = 1; i < ms.length; i++) {
    if (moved(ms[i - 1]!.m, ms[i]!.m).length) {
      if (holds(ms[i - 1]!.m)) longest = Math.max(longest, ms[i]!.at - ms[start]!.at);
      start = i;
    }
  }
  return { since: ms[start]!.at, sinceIndex: start, longestEndedMs: longest };
}

/**
 * The wedge window: the policy's floor, raised by twice this server's slowest first token and twice its longest quiet
 * spell that ended in progress; capped.
 */
export function windowOf(rs: readonly Reading[], p: Policy): { windowS: number; because: Evidence[] } {
  const because: Evidence[] = [];
  let w = p.windowS;
  const last = [...rs].reverse().find((r) => r.metrics)?.metrics;
  const ttft = last?.ttftMaxS === Infinity ? (last.ttftAtLeastS ?? 0) * 2 : last?.ttftMaxS;
  if (ttft && 2 * ttft > w) {
    w = 2 * ttft;
    because.push({
      signal: 'vllm:time_to_first_token_seconds',
      value: ttft,
      note: `slowest first token so far up to ${ttft} s: window at least twice that`,
    });
  }
  const gap = quietSpells(rs).longestEndedMs / 1000;
  if (2 * gap > w) {
    w = 2 * gap;
    because.push({
      signal: 'quiet spell',
      value: s1(gap * 1000),
      note: `this server was once quiet ${s1(gap * 1000)} s with requests and then moved: window at least twice that`,
    });
  }
  if (w > p.maxWindowS) {
    because.push({
      signal: 'window cap',
      value: p.maxWindowS,
      note: `window capped at watch.maxWindowSeconds (${p.maxWindowS} s)`,
    });
    w = p.maxWindowS;
  }
  return { windowS: Math.round(w * 10) / 10, because };
}

function j(
  verdict: Verdict,
  why: string,
  evidence: Evidence[],
  windowS: number,
  stalledS = 0,
  wantProbe = false,
): Judgement {
  return { verdict, why, evidence, windowS, stalledS, wantProbe };
}

/** How long the API has not answered well, over the trailing readings that all failed (0 when the last answered). */
function apiDownFor(rs: readonly Reading[]): { ms: number; n: number; first?: Reading } {
  let n = 0;
  let first: Reading | undefined;
  for (let i = rs.length - 1; i >= 0 && rs[i]!.health !== 'ok'; i--) {
    n++;
    first = rs[i];
  }
  return { ms: first ? rs[rs.length - 1]!.at - first.at : 0, n, first };
}

/** Someone else's, gone, or down: the verdicts that need no counters. */
function lifeVerdict(rs: readonly Reading[], p: Policy, windowS: number): Judgement | undefined {
  const r = rs[rs.length - 1]!;
  const at = iso(r.at);
  if (r.owner?.by === 'gateway') {
    const v: Verdict =
      r.owner.state === 'starting' ? 'loading' : r.owner.state === 'sleeping' ? 'sleeping' : 'draining';
    return j(
      v,
      `the gateway is ${r.owner.state} it: the gateway's to manage`,
      [{ signal: 'gateway', value: r.owner.state, at }],
      windowS,
    );
  }
  if (r.owner?.by === 'serve')
    return j(
      'loading',
      'serve is starting it (not ready yet)',
      [{ signal: 'registry', value: 'not ready', at }],
      windowS,
    );
  if (r.owner?.by === 'router')
    return j(
      'draining',
      `its router holds it in ${r.owner.state} (a rolling restart or an operator)`,
      [{ signal: 'haproxy admin state', value: r.owner.state, at }],
      windowS,
    );
  if (r.process === 'gone')
    return j(
      'dead',
      'its processes are gone',
      [{ signal: 'process', value: 'gone', at, note: r.processDetail }],
      windowS,
    );
  if (r.ranks && r.ranks.alive < r.ranks.total)
    return j(
      'dead',
      `${r.ranks.total - r.ranks.alive} of ${r.ranks.total} ranks gone`,
      [{ signal: 'ranks', value: `${r.ranks.alive}/${r.ranks.total}`, at, note: r.processDetail }],
      windowS,
    );
  const down = apiDownFor(rs);
  if (down.n >= 2 && down.ms >= p.deadAfterS * 1000)
    return j(
      'dead',
      `its API has not answered /health for ${s1(down.ms)} s (${down.n} readings)`,
      [
        {
          signal: '/health',
          value: r.health,
          at: iso(down.first!.at),
          note: `${r.healthDetail ?? ''} until ${at}`.trim(),
        },
      ],
      windowS,
    );
  if (down.n)
    return j(
      'unknown',
      `/health ${r.health} (${r.healthDetail ?? 'no detail'}): waiting for a second reading`,
      [{ signal: '/health', value: r.health, at, note: r.healthDetail }],
      windowS,
    );
  if (r.asleep || r.metrics?.awake === 0)
    return j(
      'sleeping',
      'asleep (vLLM sleep mode): not wedged',
      [
        {
          signal: r.asleep ? '/is_sleeping' : 'vllm:engine_sleep_state{sleep_state="awake"}',
          value: r.asleep ? true : 0,
          at,
        },
      ],
      windowS,
    );
  return undefined;
}

/** The verdict of the last reading, given the readings before it (oldest first, bounded by the caller). */
export function judge(rs: readonly Reading[], p: Policy = DEFAULT_POLICY): Judgement {
  if (!rs.length) return j('unknown', 'no reading yet', [], p.windowS);
  const { windowS, because } = windowOf(rs, p);
  const life = lifeVerdict(rs, p, windowS);
  if (life) return life;
  const r = rs[rs.length - 1]!;
  const at = iso(r.at);
  const m = r.metrics;
  if (!m) {
    const stopped = r.process === 'stopped';
    const probe = stopped ? stoppedProbe(rs) : r.probe;
    if (stopped && probe && !probe.ok)
      return stoppedWedge(r, windowS, 0, [{ signal: 'probe', value: probe.detail, at }]);
    return j(
      'unknown',
      `/metrics unreadable${r.metricsDetail ? `: ${r.metricsDetail}` : ''}`,
      [{ signal: '/metrics', value: 'unreadable', at, note: r.metricsDetail }],
      windowS,
      0,
      stopped && !probe,
    );
  }
  const spell = quietSpells(rs);
  const stalledMs = holds(m) ? r.at - (spell.since ?? r.at) : 0;
  const numbers: Evidence[] = [
    { signal: 'vllm:num_requests_running', value: m.running ?? 'absent', at },
    { signal: 'vllm:num_requests_waiting', value: m.waiting ?? 'absent', at },
    { signal: 'vllm:generation_tokens_total', value: m.generation ?? 'absent', at },
    { signal: 'vllm:kv_cache_usage_perc', value: m.kv ?? 'absent', at },
  ];
  if (stalledMs >= windowS * 1000) return stalled(rs, spell.sinceIndex!, stalledMs, windowS, [...numbers, ...because]);
  // an engine process is stopped (before the window is out, or idle): the next request would hang; the
  // probe sent since it stopped decides (one probe per stop, not one per reading: each unanswered
  // probe is one more request held by a stuck server)
  if (r.process === 'stopped') {
    const probe = stoppedProbe(rs);
    if (probe && !probe.ok)
      return stoppedWedge(r, windowS, stalledMs, [
        { signal: 'probe', value: 'no answer', at, note: `${probe.detail} (${probe.ms} ms)` },
        ...numbers,
      ]);
    if (!probe)
      return j(
        'unknown',
        `${holds(m) ? 'requests held' : 'idle'}, but ${r.processDetail ?? 'an engine process'} is stopped: probing`,
        [{ signal: 'process', value: 'stopped', at, note: r.processDetail }],
        windowS,
        0,
        true,
      );
  }
  return loadVerdict(rs, p, windowS, stalledMs, numbers);
}

/** The latest probe sent while the same member has been stopped (the run of stopped readings at the end). */
function stoppedProbe(rs: readonly Reading[]): Reading['probe'] {
  const last = rs[rs.length - 1]!;
  for (
    let i = rs.length - 1;
    i >= 0 && rs[i]!.process === 'stopped' && rs[i]!.processDetail === last.processDetail;
    i--
  )
    if (rs[i]!.probe) return rs[i]!.probe;
  return undefined;
}

function stoppedWedge(r: Reading, windowS: number, stalledMs: number, more: Evidence[]): Judgement {
  return j(
    'wedged',
    `${r.processDetail ?? 'an engine process'} is stopped (state T) and the engine serves nothing`,
    [{ signal: 'process', value: 'stopped', at: iso(r.at), note: r.processDetail }, ...more],
    windowS,
    s1(stalledMs),
  );
}

/** Requests held and nothing moved for the window: wedged when a second signal agrees, else ask for the probe. */
function stalled(
  rs: readonly Reading[],
  sinceIndex: number,
  stalledMs: number,
  windowS: number,
  evidence: Evidence[],
): Judgement {
  const r = rs[rs.length - 1]!;
  const ms = metricReadings(rs);
  const since = ms[sinceIndex]!.at;
  const frozen: Evidence = {
    signal: 'frozen',
    value: s1(stalledMs),
    at: iso(since),
    note: `no engine-reported value changed for ${s1(stalledMs)} s (window ${windowS} s) while it held ${(r.metrics!.running ?? 0) + (r.metrics!.waiting ?? 0)} request(s)`,
  };
  if (r.process === 'stopped') return stoppedWedge(r, windowS, stalledMs, [frozen, ...evidence]);
  // the probe sent after the spell began: the latest one decides
  const probe = [...rs].reverse().find((x) => x.at >= since && x.probe);
  if (!probe)
    return j(
      'busy',
      `nothing moved for ${s1(stalledMs)} s while it holds requests: probing before any verdict`,
      [frozen, ...evidence],
      windowS,
      s1(stalledMs),
      true,
    );
  const pe: Evidence = {
    signal: 'probe',
    value: probe.probe!.ok ? 'answered' : 'no answer',
    at: iso(probe.at),
    note: `${probe.probe!.detail} (${probe.probe!.ms} ms)`,
  };
  if (probe.probe!.ok)
    return j(
      'busy',
      `nothing moved for ${s1(stalledMs)} s, but the deep probe was answered: a long step, not a wedge`,
      [frozen, pe, ...evidence],
      windowS,
      s1(stalledMs),
    );
  return j(
    'wedged',
    `nothing moved for ${s1(stalledMs)} s (window ${windowS} s) while it held requests, /health 200, and the deep probe was not answered`,
    [frozen, pe, ...evidence],
    windowS,
    s1(stalledMs),
  );
}

/** Moving (or idle): healthy, busy, saturated or preempting. */
function loadVerdict(
  rs: readonly Reading[],
  p: Policy,
  windowS: number,
  stalledMs: number,
  numbers: Evidence[],
): Judgement {
  const r = rs[rs.length - 1]!;
  const m = r.metrics!;
  const at = iso(r.at);
  const base = metricReadings(rs).find((x) => x.at >= r.at - windowS * 1000)?.m;
  const preempted =
    base && m.preemptions !== undefined && base.preemptions !== undefined ? m.preemptions - base.preemptions : 0;
  if (preempted > 0)
    return j(
      'preempting',
      `${preempted} preemption(s) in the last ${windowS} s: the KV cache is too small for the load`,
      [{ signal: 'vllm:num_preemptions_total', value: m.preemptions!, at, note: `+${preempted}` }, ...numbers],
      windowS,
      s1(stalledMs),
    );
  if ((m.waiting ?? 0) > 0 || (m.kv ?? 0) >= p.kvSaturated)
    return j(
      'saturated',
      `${m.waiting ?? 0} waiting, KV cache ${Math.round((m.kv ?? 0) * 100)} %: at capacity, and moving`,
      numbers,
      windowS,
      s1(stalledMs),
    );
  if ((m.running ?? 0) > 0)
    return j(
      'busy',
      `${m.running} running${stalledMs ? `, quiet for ${s1(stalledMs)} s of a ${windowS} s window` : ', moving'}`,
      numbers,
      windowS,
      s1(stalledMs),
    );
  return j('healthy', 'idle, API answering', numbers, windowS);
}
