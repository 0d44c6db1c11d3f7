// The bench's HTML page: latency/throughput curve, TTFT and ITL distributions, server metrics over time.
import type { Page, Section } from '../output/html.js';
import type { BenchResult, SparkctlExtras } from './report.js';
import { latencyRows, summaryRows } from './report.js';
import type { SweepPoint } from './sweep.js';

/** Histogram of values (ms) in `n` equal buckets: x = bucket start, y = count. */
export function histogram(values: number[], n = 30): { x: number[]; y: number[] } {
  if (!values.length) return { x: [0], y: [0] };
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  const w = hi > lo ? (hi - lo) / n : 1;
  const y = new Array<number>(n).fill(0);
  for (const v of values) y[Math.min(n - 1, Math.floor((v - lo) / w))]!++;
  return { x: y.map((_, i) => +(lo + i * w).toFixed(3)), y };
}

type Sweep = { by: string; points: SweepPoint[] };

export function benchPage(title: string, result: BenchResult, pcts: number[], sweep?: Sweep): Page {
  const r = result as Record<string, any>;
  const s = result.sparkctl;
  const sections: Section[] = [
    ...summarySections(r, s, pcts),
    ...(sweep?.points.length ? sweepSections(sweep) : [runPointSection(r, pcts)]),
    ...distributionSections(r),
    ...metricsSections(s.metrics_timeline),
  ];
  return {
    title,
    subtitle: `${r.model_id} at ${s.server ? (r.sparkctl_config?.url ?? '') : ''} — ${r.date}`,
    sections,
  };
}

/** The summary (with why the run is invalid, if it is) and the latency table. */
function summarySections(r: Record<string, any>, s: SparkctlExtras, pcts: number[]): Section[] {
  return [
    {
      heading: 'Summary',
      text: s.valid ? undefined : `INVALID RUN: ${s.invalid_reasons.join('; ')}`,
      table: {
        header: ['metric', 'value'],
        rows: [
          ...summaryRows(r, pcts),
          ['Completed / failed', `${r.completed} / ${r.failed}`],
          ['Duration', `${Number(r.duration).toFixed(2)} s`],
        ],
      },
    },
    { heading: 'Latency', table: latencyRows(r, pcts) },
  ];
}

/** A sweep: p99 latency against throughput, level by level, and the levels' table. */
function sweepSections(sweep: Sweep): Section[] {
  const pts = [...sweep.points].sort((a, b) => a.throughput - b.throughput);
  return [
    {
      heading: `Latency against throughput (sweep by ${sweep.by})`,
      chart: {
        kind: 'points',
        x: pts.map((p) => +p.throughput.toFixed(3)),
        series: [
          { label: 'p99 TTFT (ms)', values: pts.map((p) => p.ttftP99Ms) },
          { label: 'p99 E2EL (ms)', values: pts.map((p) => p.e2elP99Ms) },
        ],
        xLabel: 'throughput (req/s)',
        yLabel: 'ms',
      },
    },
    {
      heading: 'Sweep levels',
      table: {
        header: [sweep.by, 'req/s', 'p99 TTFT ms', 'p99 TPOT ms', 'p99 E2EL ms', 'max waiting', 'failed'],
        rows: sweep.points.map((p) => [
          String(p.level),
          p.throughput.toFixed(2),
          p.ttftP99Ms.toFixed(1),
          p.tpotP99Ms.toFixed(1),
          p.e2elP99Ms.toFixed(1),
          p.maxWaiting === undefined ? '-' : String(p.maxWaiting),
          String(p.failed),
        ]),
      },
    },
  ];
}

/** One run, no sweep: its own point, the highest percentile's TTFT (p99 when asked) against its throughput. */
function runPointSection(r: Record<string, any>, pcts: number[]): Section {
  const p = pcts.includes(99) ? 99 : pcts[pcts.length - 1];
  return {
    heading: 'Latency against throughput',
    chart: {
      kind: 'points',
      x: [+Number(r.request_throughput).toFixed(3)],
      series: [{ label: `p${p} TTFT (ms)`, values: [r[`p${p}_ttft_ms`]] }],
      xLabel: 'throughput (req/s)',
      yLabel: 'ms',
    },
  };
}

/** TTFT of the requests that succeeded, and every gap between tokens (ITL), as histograms. */
function distributionSections(r: Record<string, any>): Section[] {
  const ttfts = (r.ttfts as number[]).filter((_, i) => !(r.errors as string[])[i]).map((x) => x * 1000);
  const th = histogram(ttfts);
  const itls = (r.itls as number[][]).flat().map((x) => x * 1000);
  const ih = histogram(itls);
  return [
    {
      heading: 'TTFT distribution',
      chart: {
        kind: 'bars',
        x: th.x,
        series: [{ label: 'requests', values: th.y }],
        xLabel: 'TTFT (ms)',
        yLabel: 'requests',
      },
    },
    {
      heading: 'ITL distribution',
      chart: { kind: 'bars', x: ih.x, series: [{ label: 'gaps', values: ih.y }], xLabel: 'ITL (ms)', yLabel: 'gaps' },
    },
  ];
}

/** The server's /metrics over the run (running and waiting, KV-cache use), or a line saying they could not be read. */
function metricsSections(tl: SparkctlExtras['metrics_timeline']): Section[] {
  if (tl.length < 2)
    return [{ heading: 'Server metrics over time', text: "The server's /metrics could not be read during the run." }];
  return [
    {
      heading: 'Server metrics over time (/metrics)',
      chart: {
        kind: 'line',
        x: tl.map((p) => p.t),
        series: [
          { label: 'running', values: tl.map((p) => p.running ?? null) },
          { label: 'waiting', values: tl.map((p) => p.waiting ?? null) },
        ],
        xLabel: 'seconds',
        yLabel: 'requests',
      },
    },
    {
      heading: 'KV-cache usage',
      chart: {
        kind: 'line',
        x: tl.map((p) => p.t),
        series: [
          {
            label: 'KV cache used (%)',
            values: tl.map((p) => (p.kvUsage === undefined ? null : +(p.kvUsage * 100).toFixed(2))),
          },
        ],
        xLabel: 'seconds',
        yLabel: '%',
      },
    },
  ];
}
