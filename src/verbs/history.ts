// The probe history as the cost and report verbs read it: the window (--since, --until), the GPU
// price (flags or the profile), the cost over the window, and what a missing history tells the operator.
import { readUsage, usageByProfile, type UsageCounts } from '../gateway/usage.js';
import { stateDir } from './common.js';
import { Registry } from '../engine/registry.js';
import { historyDir } from '../history/store.js';
import { readHistory } from '../history/read.js';
import type { Sample } from '../history/sample.js';
import {
  computeCost,
  sumCosts,
  monthlyToHourly,
  parseSince,
  HOURS_PER_MONTH,
  REFERENCE_PER_1K,
  type CostResult,
} from '../history/cost.js';
import { loadProfile } from '../profiles/load.js';
import { UsageError, ProblemsFound } from '../errors.js';

export interface CostCli {
  since?: string;
  until?: string;
  gpuHourPrice?: string;
  gpuMonthPrice?: string;
  comparePrice?: string;
  gpusHeld?: string;
  utilization?: string;
  genWeight?: string;
  json?: boolean;
  profiles?: string;
}

const CRON_LINE =
  '*/5 * * * * sparkctl probe --all --quiet --deadline 4m --prometheus /var/lib/node_exporter/textfile_collector/sparkctl.prom';

const positive = (flag: string, v: string | undefined, max = Infinity): number | undefined => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!(n > 0 && n <= max))
    throw new UsageError(`${flag}: "${v}" is not a number in (0, ${max === Infinity ? '...' : max}]`, [
      `e.g. ${flag} ${max === 1 ? '0.78' : '2.5'}`,
    ]);
  return n;
};

interface Price {
  perHour: number;
  how: string;
}

/** --gpu-hour-price, --gpu-month-price (converted), or the profile's probe.gpuHourPriceUsd. */
export function resolvePrice(name: string, opts: CostCli, dir: string): Price {
  const hour = positive('--gpu-hour-price', opts.gpuHourPrice);
  const month = positive('--gpu-month-price', opts.gpuMonthPrice);
  if (hour !== undefined && month !== undefined)
    throw new UsageError('--gpu-hour-price and --gpu-month-price: give one price');
  if (hour !== undefined) return { perHour: hour, how: `$${hour} per GPU-hour (--gpu-hour-price)` };
  if (month !== undefined)
    return {
      perHour: monthlyToHourly(month),
      how: `$${month} per GPU-month / ${HOURS_PER_MONTH} h = $${monthlyToHourly(month).toFixed(4)} per GPU-hour (converted from --gpu-month-price)`,
    };
  const inst = new Registry(dir).find(name)[0]?.inst;
  const fromInst = (inst?.probe as { gpuHourPriceUsd?: number } | undefined)?.gpuHourPriceUsd;
  if (fromInst)
    return { perHour: fromInst, how: `$${fromInst} per GPU-hour (profile ${inst!.profile}, probe.gpuHourPriceUsd)` };
  try {
    const p = loadProfile(inst?.profile ?? name, { profilesDir: opts.profiles }).profile;
    if (p.probe.gpuHourPriceUsd)
      return {
        perHour: p.probe.gpuHourPriceUsd,
        how: `$${p.probe.gpuHourPriceUsd} per GPU-hour (profile ${p.name}, probe.gpuHourPriceUsd)`,
      };
  } catch {
    /* not a profile name: the flags are the only source */
  }
  throw new UsageError(`no GPU price for ${name}`, [
    'pass --gpu-hour-price USD (or --gpu-month-price USD, converted at 730 h per month), or set probe.gpuHourPriceUsd in the profile',
  ]);
}

export const matches = (name: string) => {
  const u = name.replace(/\/+$/, '');
  return (s: Sample) => s.target === name || s.profile === name || s.url === u;
};

export function window(opts: { since?: string; until?: string }, dflt: string, now = Date.now()) {
  const since = opts.since ?? dflt;
  const from = parseSince(since, now);
  if (from === undefined)
    throw new UsageError(`--since: "${since}" is not a window`, [
      'e.g. --since 24h, 7d, 90m, or an ISO time 2026-11-30T00:00:00Z',
    ]);
  const to = opts.until === undefined ? now : parseSince(opts.until, now);
  if (to === undefined)
    throw new UsageError(`--until: "${opts.until}" is not a time`, [
      'e.g. --until 2026-11-30T12:00:00Z or 1h (an hour ago)',
    ]);
  if (to <= from) throw new UsageError(`--since ${since} starts after --until ${opts.until}`);
  return { from, to, since };
}

export function noHistory(name: string, dir: string, any: boolean): never {
  throw new ProblemsFound(
    `${any ? `fewer than two probes of ${name} in this window` : `no probe history for ${name}`} (${historyDir(dir)})`,
    [
      ...(any ? ['widen --since, or check the name (sparkctl status)'] : []),
      'the cron probe writes the history; start it with:',
      `  ${CRON_LINE}`,
      'or run `sparkctl probe NAME` by hand a few times',
    ],
  );
}

/**
 * The profile's answers through the gateway in the window (<state>/gateway/usage.jsonl: tokens as the
 * answers said them, streams without usage apart), or undefined when the gateway counted none.
 */
export function gatewayUsageFor(name: string, from: number, to: number): UsageCounts | undefined {
  const { records } = readUsage(stateDir(), { from, to });
  return usageByProfile(records).get(name);
}

/** The gateway's part in words (cost and report print it the same way). */
export function gatewayUsageLine(u: UsageCounts): string {
  const n = (v: number) => Math.round(v).toLocaleString('en-US');
  return `through the gateway: ${n(u.requests)} request(s), prompt ${n(u.prompt)}, completion ${n(u.completion)} token(s) (as ${n(u.withUsage)} answer(s) said them)${u.streamsWithoutUsage ? `; ${n(u.streamsWithoutUsage)} stream(s) without usage (the client did not ask for it), ~${n(u.chunksWithoutUsage)} chunk(s), not counted as tokens` : ''}`;
}

export function costFor(
  name: string,
  opts: CostCli,
  now = Date.now(),
): { result: CostResult; price: Price; compare: number; skipped: number; since: string; from: number; to: number } {
  const dir = stateDir();
  const { from, to, since } = window(opts, '24h', now);
  const compare = positive('--compare-price', opts.comparePrice) ?? REFERENCE_PER_1K;
  const gpus = positive('--gpus-held', opts.gpusHeld);
  if (gpus !== undefined && !Number.isInteger(gpus))
    throw new UsageError(`--gpus-held: "${opts.gpusHeld}" is not a whole number`);
  const utilization = positive('--utilization', opts.utilization, 1);
  const genWeight = positive('--gen-weight', opts.genWeight);
  const all = readHistory(dir, matches(name), { from, to });
  const inWindow = all.samples; // readHistory keeps only the window
  if (inWindow.length < 2) noHistory(name, dir, all.files.length > 0);
  const price = resolvePrice(name, opts, dir);
  const byTarget = new Map<string, Sample[]>();
  for (const s of inWindow) byTarget.set(s.url, [...(byTarget.get(s.url) ?? []), s]);
  const parts = [...byTarget.values()].map((samples) =>
    computeCost({ samples, pricePerGpuHour: price.perHour, gpus, utilization, genWeight }),
  );
  if (parts.some((p) => p.gpus === undefined))
    throw new UsageError(`how many GPUs does ${name} hold? The history does not say (a --url target)`, [
      'pass --gpus-held N',
    ]);
  return { result: sumCosts(parts, price.perHour), price, compare, skipped: all.skipped.length, since, from, to };
}
