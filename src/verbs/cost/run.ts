// sparkctl cost NAME: what the service cost per token over a window, from the cron probe's history.
import { costFor, gatewayUsageFor, gatewayUsageLine, type CostCli } from '../history.js';
import { envelope, table } from '../../output/format.js';
import { say, note } from '../../output/log.js';

const money = (v: number | undefined, digits = 4) =>
  v === undefined
    ? '-'
    : `$${v < 1 ? v.toFixed(digits) : v.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
/** Below this many tokens a window's price per token is an extrapolation, and is said to be one. */
const FEW_TOKENS = 10_000;
const int = (n: number) => Math.round(n).toLocaleString('en-US');

export async function run(name: string, opts: CostCli) {
  const { result: r, price, compare, skipped, since, from, to } = costFor(name, opts);
  if (skipped) note(`history: ${skipped} unreadable line(s) skipped (torn or edited)`);
  const gateway = gatewayUsageFor(name, from, to);
  if (opts.json) {
    say(
      envelope('cost', {
        target: name,
        since,
        price: { perGpuHour: price.perHour, source: price.how },
        comparePer1K: compare,
        ...r,
        ...(gateway ? { gateway } : {}),
      }),
    );
    return;
  }
  say(
    `cost of ${name} over ${since}: ${r.from} -> ${r.to} (${r.samples} samples${r.restarts ? `, ${r.restarts} restart(s): counters taken from zero after each` : ''})`,
  );
  say(`  price        ${price.how}`);
  say(
    `  GPU-hours    ${r.gpus} GPU(s) x ${r.hours.toFixed(2)} h = ${r.allocation!.gpuHours.toFixed(2)} held${r.utilization ? `; utilisation ${(r.utilization.value * 100).toFixed(1)} % (${r.utilization.source}) -> ${r.usage!.gpuHours.toFixed(2)} used` : '; utilisation not measured (no GPU readings: pass --utilization 0..1 for the usage basis)'}`,
  );
  say(
    `  tokens       ${int(r.tokens.total)} (prompt ${int(r.tokens.prompt)}, generation ${int(r.tokens.generation)}), as the server counted them`,
  );
  if (gateway) say(`               ${gatewayUsageLine(gateway)}`);
  if (r.tokens.total > 0 && r.tokens.total < FEW_TOKENS)
    note(
      `warning: only ${int(r.tokens.total)} token(s) in this window: the price per 1M tokens multiplies their cost by ${int(1_000_000 / r.tokens.total)}, so it says little about real traffic (widen --since, or price a window with real load)`,
    );
  const a = r.allocation!;
  const u = r.usage;
  const rows = [
    ['$ total', money(a.dollars, 2), money(u?.dollars, 2)],
    ['$ per 1K tokens', money(a.per1K), money(u?.per1K)],
    ['$ per 1M tokens', money(a.per1M, 2), money(u?.per1M, 2)],
    ['prompt, $ per 1K', money(a.promptPer1K), money(u?.promptPer1K)],
    ['generation, $ per 1K', money(a.generationPer1K), money(u?.generationPer1K)],
  ];
  say(table(rows, ['', 'allocation (GPUs held)', 'usage (x utilisation)']).replace(/^/gm, '  '));
  say(
    r.split.by === 'prefill-decode-time'
      ? `  prompt/generation split by vLLM's prefill vs decode time (prompt share ${((r.split.promptShare ?? 0) * 100).toFixed(1)} %)`
      : `  prompt/generation split by an assumed ratio: a generated token costs ${r.split.genWeight ?? 4} prompt tokens (vLLM exposed no prefill/decode time sums; --gen-weight N)`,
  );
  if (a.per1K !== undefined) {
    const cmp = (b: typeof a | undefined, label: string) =>
      b?.per1K !== undefined ? `${label} ${(b.per1K / compare).toFixed(2)}x` : undefined;
    say(
      `  vs ${money(compare)} per 1K (${opts.comparePrice ? '--compare-price' : 'a reference API price; --compare-price sets another'}): ${[cmp(a, 'allocation'), cmp(u, 'usage')].filter(Boolean).join(', ')}`,
    );
  } else say('  no tokens in this window: no price per token');
  if (opts.gpuMonthPrice)
    say(
      `  note: a monthly price times GPU-hours mixes units; sparkctl converts the monthly price to an hourly one first (/ 730 h)`,
    );
}
