// The report over a window of probe history: uptime, incidents, latency from vLLM's histograms,
// tokens, GPU temperature and memory over time. Pure: samples in, a plain object out.
import { seriesIncrease, histDelta, histAdd, histQuantile, counterDelta, type Hist, type Point } from './delta.js';
import { histOf, type Sample } from './sample.js';

interface Incident {
  target: string;
  /** when the probe first saw the state */
  at: string;
  from: Sample['verdict'] | null;
  to: Sample['verdict'];
  /** the first failing step's detail */
  cause?: string;
  /** when it was healthy again (undefined: still not) */
  until?: string;
}

export interface SeriesPoint {
  t: number;
  v: number;
}
export interface Latency {
  count: number;
  mean?: number;
  p50?: number;
  p90?: number;
  p99?: number;
}

export interface Report {
  from?: string;
  to?: string;
  samples: number;
  targets: string[];
  uptime?: number;
  verdicts: Record<Sample['verdict'], number>;
  incidents: Incident[];
  ttft: Latency;
  itl: Latency;
  tokens: { prompt: number; generation: number };
  finished: Record<string, number>;
  preemptions: number;
  prefixHitRate?: number;
  restarts: number;
  series: {
    tokensPerSecond: SeriesPoint[];
    kvCache: SeriesPoint[];
    running: SeriesPoint[];
    waiting: SeriesPoint[];
    gpuTempMax: SeriesPoint[];
    gpuMemPct: SeriesPoint[];
    ttftP50: SeriesPoint[];
    healthy: SeriesPoint[];
  };
  gpu?: { tempMin: number; tempMax: number; memPctMax: number; ecc: number; xid: number };
  /** each start the probes saw (by its launch time), oldest first: where its time went */
  starts: StartSeen[];
}

/** One start of one target, as its probes recorded it (Sample['boot']). */
interface StartSeen {
  target: string;
  at: string;
  ready?: number;
  first?: number;
  compile?: 'hit' | 'miss' | 'off';
  phases: Partial<Record<string, number>>;
}

const ms = (s: Sample) => Date.parse(s.t);
const latency = (h: Hist | undefined): Latency =>
  h && h.count > 0
    ? {
        count: h.count,
        mean: h.sum / h.count,
        p50: histQuantile(h, 0.5),
        p90: histQuantile(h, 0.9),
        p99: histQuantile(h, 0.99),
      }
    : { count: 0 };

/** What buildReport adds up over every target's samples. */
interface Totals {
  upMs: number;
  totalMs: number;
  incidents: Incident[];
  ttft?: Hist;
  itl?: Hist;
  tokens: { prompt: number; generation: number };
  finished: Record<string, number>;
  preemptions: number;
  hits: number;
  queries: number;
  restarts: number;
  series: Report['series'];
}

export function buildReport(all: Sample[]): Report {
  const samples = [...all].sort((a, b) => ms(a) - ms(b));
  const byTarget = new Map<string, Sample[]>();
  for (const s of samples) byTarget.set(s.url, [...(byTarget.get(s.url) ?? []), s]);
  const verdicts = { healthy: 0, unhealthy: 0, unreachable: 0 };
  for (const s of samples) verdicts[s.verdict]++;
  const series: Report['series'] = {
    tokensPerSecond: [],
    kvCache: [],
    running: [],
    waiting: [],
    gpuTempMax: [],
    gpuMemPct: [],
    ttftP50: [],
    healthy: [],
  };
  const t: Totals = {
    upMs: 0,
    totalMs: 0,
    incidents: [],
    tokens: { prompt: 0, generation: 0 },
    finished: {},
    preemptions: 0,
    hits: 0,
    queries: 0,
    restarts: 0,
    series,
  };
  for (const [, ss] of byTarget) {
    addUptime(t, ss);
    addIncidents(t, ss);
    addCounters(t, ss);
    addLatency(t, ss);
  }
  addGauges(series, samples);
  return {
    from: samples[0]?.t,
    to: samples[samples.length - 1]?.t,
    samples: samples.length,
    targets: [...new Set(samples.map((s) => s.target))],
    uptime: t.totalMs > 0 ? t.upMs / t.totalMs : undefined,
    verdicts,
    incidents: t.incidents,
    ttft: latency(t.ttft),
    itl: latency(t.itl),
    tokens: t.tokens,
    finished: t.finished,
    preemptions: t.preemptions,
    prefixHitRate: t.queries > 0 ? t.hits / t.queries : undefined,
    restarts: t.restarts,
    series,
    gpu: gpuSummary(samples, series),
    starts: startsOf(samples),
  };
}

/** The distinct starts in the samples (a target and its launch time), oldest launch first. */
function startsOf(samples: Sample[]): StartSeen[] {
  const seen = new Map<string, StartSeen>();
  for (const s of samples) {
    const b = s.boot;
    if (!b) continue;
    const k = `${s.url}\u0000${b.at}`;
    if (seen.has(k)) continue;
    seen.set(k, {
      target: s.target,
      at: b.at,
      ready: b.ready,
      first: b.first,
      compile: b.compile,
      phases: { ...b.ph },
    });
  }
  return [...seen.values()].sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
}

/** Uptime, time-weighted: each interval counts with the verdict the probe saw at its start. */
function addUptime(t: Totals, ss: Sample[]) {
  for (let k = 1; k < ss.length; k++) {
    const dt = ms(ss[k]!) - ms(ss[k - 1]!);
    t.totalMs += dt;
    if (ss[k - 1]!.verdict === 'healthy') t.upMs += dt;
  }
}

/** Incidents: state changes, with the cause the failing probe recorded. */
function addIncidents(t: Totals, ss: Sample[]) {
  let open: Incident | undefined;
  ss.forEach((s, k) => {
    const prev = ss[k - 1];
    if (prev && prev.verdict === s.verdict) return;
    if (!prev && s.verdict === 'healthy') return;
    if (open && s.verdict === 'healthy') {
      open.until = s.t;
      open = undefined;
      return;
    }
    const inc: Incident = {
      target: s.target,
      at: s.t,
      from: prev?.verdict ?? null,
      to: s.verdict,
      cause: s.why?.find((w) => / fail: /.test(w)) ?? s.why?.[0],
    };
    if (open) open.until = s.t;
    t.incidents.push(inc);
    open = inc;
  });
}

/** The counters' increase over the window (a server restart resets them: counted as restarts). */
function addCounters(t: Totals, ss: Sample[]) {
  const p = (get: (s: Sample) => number | undefined): Point[] =>
    ss.map((s) => ({ t: ms(s), v: get(s), start: s.start }));
  const pr = seriesIncrease(p((s) => s.c?.prompt));
  const ge = seriesIncrease(p((s) => s.c?.generation));
  t.tokens.prompt += pr.increase;
  t.tokens.generation += ge.increase;
  t.restarts += Math.max(pr.resets, ge.resets);
  t.preemptions += seriesIncrease(p((s) => s.c?.preemptions)).increase;
  t.hits += seriesIncrease(p((s) => s.c?.prefixHits)).increase;
  t.queries += seriesIncrease(p((s) => s.c?.prefixQueries)).increase;
  const reasons = new Set(ss.flatMap((s) => Object.keys(s.c?.finished ?? {})));
  for (const r of reasons) t.finished[r] = (t.finished[r] ?? 0) + seriesIncrease(p((s) => s.c?.finished?.[r])).increase;
}

/** Latency and rates: deltas between consecutive samples that both read /metrics. */
function addLatency(t: Totals, ss: Sample[]) {
  let prev: Sample | undefined;
  for (const s of ss) {
    if (!s.c) continue;
    if (prev) {
      const restarted =
        (prev.start !== undefined && s.start !== undefined && prev.start !== s.start) ||
        (s.c.generation ?? 0) < (prev.c!.generation ?? 0);
      const a = histOf(s.ttft);
      if (a) {
        const d = histDelta(histOf(prev.ttft), a, restarted);
        t.ttft = histAdd(t.ttft, d);
        const q = histQuantile(d, 0.5);
        if (q !== undefined) t.series.ttftP50.push({ t: ms(s), v: q });
      }
      const b = histOf(s.itl);
      if (b) t.itl = histAdd(t.itl, histDelta(histOf(prev.itl), b, restarted));
      const dt = (ms(s) - ms(prev)) / 1000;
      const dTok =
        (counterDelta(prev.c!.prompt, s.c.prompt, restarted) ?? 0) +
        (counterDelta(prev.c!.generation, s.c.generation, restarted) ?? 0);
      if (dt > 0) t.series.tokensPerSecond.push({ t: ms(s), v: dTok / dt });
    }
    prev = s;
  }
}

/** The gauges and GPU readings as time series, every target together. */
function addGauges(series: Report['series'], samples: Sample[]) {
  for (const s of samples) {
    const t = ms(s);
    series.healthy.push({ t, v: s.verdict === 'healthy' ? 1 : 0 });
    if (s.g?.kv !== undefined) series.kvCache.push({ t, v: s.g.kv });
    if (s.g?.running !== undefined) series.running.push({ t, v: s.g.running });
    if (s.g?.waiting !== undefined) series.waiting.push({ t, v: s.g.waiting });
    const temps = (s.gpu ?? []).map((g) => g.temp).filter((x): x is number => x !== undefined);
    if (temps.length) series.gpuTempMax.push({ t, v: Math.max(...temps) });
    const mem = (s.gpu ?? []).filter((g) => g.mem !== undefined && g.memTotal).map((g) => (g.mem! / g.memTotal!) * 100);
    if (mem.length) series.gpuMemPct.push({ t, v: Math.max(...mem) });
  }
}

function gpuSummary(samples: Sample[], series: Report['series']): Report['gpu'] {
  const gs = samples.flatMap((s) => s.gpu ?? []);
  if (!gs.length) return undefined;
  const temps = series.gpuTempMax.map((x) => x.v);
  const allTemps = gs.map((g) => g.temp).filter((x): x is number => x !== undefined);
  return {
    tempMin: allTemps.length ? Math.min(...allTemps) : NaN,
    tempMax: temps.length ? Math.max(...temps) : NaN,
    memPctMax: series.gpuMemPct.length ? Math.max(...series.gpuMemPct.map((x) => x.v)) : NaN,
    ecc: Math.max(0, ...gs.map((g) => g.ecc ?? 0)),
    xid: gs.reduce((a, g) => a + (g.xid ?? 0), 0),
  };
}

const BARS = '▁▂▃▄▅▆▇█';

/** A sparkline of `width` cells over [from, to]: each cell the max of its points; a gap is a space. */
export function sparkline(
  points: SeriesPoint[],
  from: number,
  to: number,
  width = 48,
  lo?: number,
  hi?: number,
): string {
  if (!points.length || to <= from) return '';
  const cells: Array<number | undefined> = Array.from({ length: width }, () => undefined);
  for (const p of points) {
    const k = Math.min(width - 1, Math.max(0, Math.floor(((p.t - from) / (to - from)) * width)));
    cells[k] = cells[k] === undefined ? p.v : Math.max(cells[k]!, p.v);
  }
  const vals = cells.filter((v): v is number => v !== undefined);
  const min = lo ?? Math.min(...vals);
  const max = hi ?? Math.max(...vals);
  return cells
    .map((v) =>
      v === undefined
        ? ' '
        : BARS[max > min ? Math.min(7, Math.max(0, Math.floor(((v - min) / (max - min)) * 7.999))) : 0],
    )
    .join('');
}
