// sparkctl report NAME: uptime, incidents, latency, tokens, cost and GPU trends over a window of
// probe history, in the terminal (sparklines) and as a self-contained HTML page (--html).
import { checkNewFile, writeNewFile } from '../../util/new-file.js';
import { stateDir } from '../common.js';
import { readHistory } from '../../history/read.js';
import { buildReport, sparkline, type Report, type SeriesPoint, type Latency } from '../../history/report.js';
import { computeCost, sumCosts, type CostResult } from '../../history/cost.js';
import type { Sample } from '../../history/sample.js';
import {
  matches,
  window,
  noHistory,
  resolvePrice,
  gatewayUsageFor,
  gatewayUsageLine,
  type CostCli,
} from '../history.js';
import { renderPage, type Section } from '../../output/html.js';
import { envelope } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { UsageError } from '../../errors.js';
import { readUpgrades, type UpgradeRecord } from '../../upgrade/record.js';

interface ReportCli extends CostCli {
  html?: string;
  force?: boolean;
}

const sec = (v: number | undefined) =>
  v === undefined ? '-' : v < 1 ? `${(v * 1000).toFixed(0)} ms` : `${v.toFixed(2)} s`;
const lat = (l: Latency) =>
  l.count
    ? `p50 ${sec(l.p50)}, p90 ${sec(l.p90)}, p99 ${sec(l.p99)}, mean ${sec(l.mean)} (${Math.round(l.count).toLocaleString('en-US')} observations)`
    : 'no observations';
const when = (iso: string) => iso.replace('T', ' ').replace(/:\d\d\.\d+Z$/, 'Z');
const int = (n: number) => Math.round(n).toLocaleString('en-US');

export async function run(name: string, opts: ReportCli) {
  if (opts.html !== undefined) checkNewFile(opts.html, '--html', { force: opts.force });
  const dir = stateDir();
  const { from, to, since } = window(opts, '7d');
  const all = readHistory(dir, matches(name), { from, to });
  const samples = all.samples; // readHistory keeps only the window
  const ups = upgradesOf(dir, name, from, to);
  if (!samples.length && ups.length) return upgradesOnly(name, since, ups, opts.json);
  if (!samples.length) noHistory(name, dir, all.files.length > 0);
  if (all.skipped.length) note(`history: ${all.skipped.length} unreadable line(s) skipped (torn or edited)`);
  const r = buildReport(samples);
  const { cost, priceHow } = costOf(name, opts, dir, samples);
  if (opts.html) {
    writeNewFile(opts.html, renderPage(page(name, since, r, cost, priceHow)), '--html', { force: opts.force });
    note(`report written to ${opts.html}`);
  }
  const gateway = gatewayUsageFor(name, from ?? 0, to ?? Date.now());
  if (opts.json) {
    say(
      envelope('report', {
        target: name,
        since,
        ...r,
        cost: cost ? { price: priceHow, ...cost } : undefined,
        ...(ups.length ? { upgrades: ups } : {}),
        ...(gateway ? { gateway } : {}),
      }),
    );
    return;
  }
  say(`report of ${name} over ${since}: ${r.from} -> ${r.to}, ${r.samples} probe(s) of ${r.targets.length} target(s)`);
  say(
    `  uptime       ${r.uptime === undefined ? '- (one probe)' : `${(r.uptime * 100).toFixed(2)} % healthy (time-weighted)`}; verdicts: ${Object.entries(
      r.verdicts,
    )
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  sayIncidents(r);
  say(`  TTFT         ${lat(r.ttft)}`);
  say(`  ITL          ${lat(r.itl)}`);
  const fin = Object.entries(r.finished).filter(([, v]) => v > 0);
  say(
    `  tokens       prompt ${int(r.tokens.prompt)}, generation ${int(r.tokens.generation)}${r.restarts ? ` (${r.restarts} restart(s))` : ''}; requests ${fin.length ? fin.map(([k, v]) => `${k} ${int(v)}`).join(', ') : 'none'}; preemptions ${int(r.preemptions)}${r.prefixHitRate !== undefined ? `; prefix cache hits ${(r.prefixHitRate * 100).toFixed(1)} %` : ''}`,
  );
  if (gateway) say(`  gateway      ${gatewayUsageLine(gateway).replace(/^through the gateway: /, '')}`);
  sayCost(cost, priceHow);
  sayTrends(r);
  for (const l of startLines(r.starts)) say(l);
  if (r.gpu)
    say(
      `  GPUs         ${r.gpu.tempMin}..${r.gpu.tempMax} C; memory up to ${r.gpu.memPctMax.toFixed(0)} %; uncorrected ECC ${r.gpu.ecc}; Xid events ${r.gpu.xid}`,
    );
  for (const l of upgradeLines(ups)) say(l);
}

/**
 * What the window costs, from each target's own samples at the GPU price asked or configured (none without a price,
 * unless one was asked: then its error is thrown).
 */
function costOf(
  name: string,
  opts: ReportCli,
  dir: string,
  samples: Sample[],
): { cost?: CostResult; priceHow?: string } {
  let cost: CostResult | undefined;
  let priceHow: string | undefined;
  const priced = opts.gpuHourPrice || opts.gpuMonthPrice;
  if (samples.length >= 2) {
    try {
      const price = resolvePrice(name, opts, dir);
      priceHow = price.how;
      const byUrl = new Map<string, Sample[]>();
      for (const s of samples) byUrl.set(s.url, [...(byUrl.get(s.url) ?? []), s]);
      const gpus = opts.gpusHeld === undefined ? undefined : Number(opts.gpusHeld);
      const util = opts.utilization === undefined ? undefined : Number(opts.utilization);
      const parts = [...byUrl.values()]
        .filter((ss) => ss.length >= 2)
        .map((ss) => computeCost({ samples: ss, pricePerGpuHour: price.perHour, gpus, utilization: util }));
      if (parts.length) cost = sumCosts(parts, price.perHour);
    } catch (e) {
      if (priced) throw e;
      if (!(e instanceof UsageError)) throw e;
    }
  }
  return { cost, priceHow };
}

/** The incidents: how many, then the last ten one a line (--json lists all). */
function sayIncidents(r: Report): void {
  say(`  incidents    ${r.incidents.length || 'none'}`);
  for (const i of r.incidents.slice(-10))
    say(
      `    ${when(i.at)}${i.until ? ` -> ${when(i.until)}` : ' -> (still)'}  ${i.target} ${i.to}${i.cause ? `: ${i.cause}` : ''}`,
    );
  if (r.incidents.length > 10) say(`    (${r.incidents.length - 10} earlier incident(s): --json lists all)`);
}

/** The cost line: what the GPUs held cost at the price and per 1K tokens, or how to give a price. */
function sayCost(cost: CostResult | undefined, priceHow: string | undefined): void {
  if (cost?.allocation)
    say(
      `  cost         ${priceHow}: $${cost.allocation.dollars.toFixed(2)} held${cost.allocation.per1K !== undefined ? `, $${cost.allocation.per1K.toFixed(4)} per 1K tokens` : ''}${cost.usage?.per1K !== undefined ? `; usage basis $${cost.usage.per1K.toFixed(4)} per 1K` : ''}`,
    );
  else say('  cost         no GPU price: --gpu-hour-price USD (or probe.gpuHourPriceUsd in the profile)');
}

/** The trends over the window: one sparkline a series, each with its lowest and highest value (none: no line). */
function sayTrends(r: Report): void {
  const a = Date.parse(r.from!);
  const b = Date.parse(r.to!);
  const line = (label: string, pts: SeriesPoint[], fmt: (v: number) => string, lo?: number, hi?: number) => {
    if (!pts.length) return;
    const vs = pts.map((p) => p.v);
    say(
      `  ${label.padEnd(12)} ${sparkline(pts, a, b, 48, lo, hi)}  ${fmt(Math.min(...vs))} .. ${fmt(Math.max(...vs))}`,
    );
  };
  line('healthy', r.series.healthy, (v) => (v ? 'up' : 'down'), 0, 1);
  line('tokens/s', r.series.tokensPerSecond, (v) => v.toFixed(1));
  line('TTFT p50', r.series.ttftP50, (v) => sec(v));
  line('KV cache', r.series.kvCache, (v) => `${(v * 100).toFixed(0)} %`, 0, 1);
  line('waiting', r.series.waiting, (v) => String(v));
  line('GPU temp', r.series.gpuTempMax, (v) => `${v} C`);
  line('GPU memory', r.series.gpuMemPct, (v) => `${v.toFixed(0)} %`, 0, 100);
}

/**
 * The starts over time: a sparkline of the seconds to ready, then the last starts one a line, each with its compile
 * verdict.
 */
function startLines(starts: Report['starts']): string[] {
  if (!starts.length) return [];
  const ready = starts.filter((x) => x.ready !== undefined);
  const out = [
    `  starts       ${starts.length}${
      ready.length > 1
        ? `; ready ${sparkline(
            ready.map((x) => ({ t: Date.parse(x.at), v: x.ready! })),
            Date.parse(starts[0]!.at),
            Date.parse(starts[starts.length - 1]!.at) + 1,
            24,
          )} ${sec(Math.min(...ready.map((x) => x.ready!)))} .. ${sec(Math.max(...ready.map((x) => x.ready!)))}`
        : ''
    }`,
  ];
  for (const x of starts.slice(-10)) {
    const parts = [
      x.ready !== undefined ? `ready ${sec(x.ready)}` : '',
      x.first !== undefined ? `first token ${sec(x.first)}` : '',
      x.phases.compile !== undefined || x.compile
        ? `compile ${x.compile ? `cache ${x.compile}` : 'cache unknown'}${x.phases.compile !== undefined ? ` (ended ${sec(x.phases.compile)})` : ''}`
        : '',
    ];
    out.push(`    ${when(x.at)}  ${x.target} ${parts.filter(Boolean).join(', ')}`);
  }
  if (starts.length > 10) out.push(`    (${starts.length - 10} earlier start(s): --json lists all)`);
  return out;
}

/** The profile's upgrades and rollbacks in the window (upgrade/record.ts), oldest first. */
function upgradesOf(dir: string, name: string, from: number | undefined, to: number | undefined): UpgradeRecord[] {
  return readUpgrades(dir).records.filter((u) => {
    const t = Date.parse(u.at);
    return u.profile === name && (from === undefined || t >= from) && (to === undefined || t <= to);
  });
}

function upgradeLines(ups: UpgradeRecord[]): string[] {
  if (!ups.length) return [];
  const side = (s: UpgradeRecord['from']) => s.vllmVersion + (s.image ? ` (${s.image})` : '');
  return [
    `  upgrades     ${ups.length}`,
    ...ups.map(
      (u) =>
        `    ${when(u.at)}  ${u.kind} ${side(u.from)} -> ${side(u.to)}: ${u.status}${u.failed.length ? ` (${u.failed[0]}${u.failed.length > 1 ? `; ${u.failed.length - 1} more` : ''})` : ''}, by ${u.by}`,
    ),
  ];
}

/** No probe history in the window, but upgrades: those, and no made-up numbers. */
function upgradesOnly(name: string, since: string, ups: UpgradeRecord[], json: boolean | undefined) {
  if (json) return say(envelope('report', { target: name, since, samples: 0, upgrades: ups }));
  say(`report of ${name} over ${since}: no probe history (sparkctl probe ${name} writes it)`);
  for (const l of upgradeLines(ups)) say(l);
}

function page(name: string, since: string, r: Report, cost: CostResult | undefined, priceHow: string | undefined) {
  const t0 = Date.parse(r.from!);
  const hours = (pts: SeriesPoint[]) => pts.map((p) => +((p.t - t0) / 3_600_000).toFixed(4));
  const chart = (heading: string, pts: SeriesPoint[], yLabel: string, text?: string): Section | undefined =>
    pts.length
      ? {
          heading,
          text,
          chart: {
            kind: 'line',
            x: hours(pts),
            series: [{ label: yLabel, values: pts.map((p) => p.v) }],
            xLabel: `hours since ${r.from}`,
            yLabel,
          },
        }
      : undefined;
  const sections: Array<Section | undefined> = [
    {
      heading: 'Summary',
      table: {
        header: ['', ''],
        rows: [
          ['uptime (time-weighted)', r.uptime === undefined ? '-' : `${(r.uptime * 100).toFixed(2)} %`],
          [
            'verdicts',
            Object.entries(r.verdicts)
              .map(([k, v]) => `${k} ${v}`)
              .join(', '),
          ],
          ['TTFT', lat(r.ttft)],
          ['ITL', lat(r.itl)],
          ['prompt tokens', int(r.tokens.prompt)],
          ['generation tokens', int(r.tokens.generation)],
          ['restarts', String(r.restarts)],
          ['preemptions', int(r.preemptions)],
          ...(cost?.allocation
            ? [
                ['price', priceHow ?? ''],
                ['$ per 1K tokens (allocation)', cost.allocation.per1K?.toFixed(4) ?? '-'],
                ['$ per 1K tokens (usage)', cost.usage?.per1K?.toFixed(4) ?? '-'],
              ]
            : []),
          ...(r.gpu
            ? [
                ['GPU temperature', `${r.gpu.tempMin}..${r.gpu.tempMax} C`],
                ['uncorrected ECC / Xid', `${r.gpu.ecc} / ${r.gpu.xid}`],
              ]
            : []),
        ],
      },
    },
    {
      heading: 'Incidents',
      text: r.incidents.length ? undefined : 'No state changes in this window.',
      table: r.incidents.length
        ? {
            header: ['from', 'to', 'target', 'state', 'cause'],
            rows: r.incidents.map((i) => [
              when(i.at),
              i.until ? when(i.until) : 'still',
              i.target,
              i.to,
              i.cause ?? '',
            ]),
          }
        : undefined,
    },
    chart('Healthy', r.series.healthy, 'healthy (1) / not (0)'),
    chart(
      'Tokens per second',
      r.series.tokensPerSecond,
      'tokens/s',
      'Prompt + generation tokens between consecutive probes (counter deltas; a restart counts from zero).',
    ),
    chart(
      'Time to first token, median between probes',
      r.series.ttftP50,
      'TTFT p50 (s)',
      "From vLLM's histogram: bucket deltas between consecutive probes, interpolated as Prometheus does.",
    ),
    chart('KV-cache usage', r.series.kvCache, 'KV cache (0..1)'),
    chart('GPU temperature (hottest GPU)', r.series.gpuTempMax, 'C'),
    chart('GPU memory (fullest GPU)', r.series.gpuMemPct, '% used'),
  ];
  return {
    title: `sparkctl report: ${name}`,
    subtitle: `${since}: ${r.from} -> ${r.to}, ${r.samples} probes`,
    sections: sections.filter((s): s is Section => !!s),
  };
}
