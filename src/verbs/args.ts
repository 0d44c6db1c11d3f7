// Parsers commander runs on a flag's value before any verb starts: a bad value is exit 2 with the
// flag named, never a launch.
import { SparkError, ExitCode, UsageError } from '../errors.js';
import { parseServerUrl } from '../util/url.js';
import { parseDuration } from '../util/duration.js';
import { deprecatedAlias, type OptionTuple } from './define.js';

/**
 * --force: one meaning in every verb that writes a file a user names: replace an existing regular file there (never a
 * link, a folder or a device).
 */
export const FORCE_OPTION: OptionTuple = [
  '--force',
  'replace an existing file at the output path (never a link, a folder or a device)',
];

export const collect = (v: string, prev: string[] = []) => [...prev, v];

export const intArg = (name: string) => (v: string) => {
  // Decimal digits only: Number() would also take 0x10, 1e3, ' 8 ' and 0b1.
  const n = /^\d{1,9}$/.test(v) ? Number(v) : NaN;
  if (!Number.isInteger(n) || n < 0)
    throw new SparkError(`${name}: "${v}" is not a whole number`, ExitCode.badInput, [`digits only, e.g. ${name} 8`]);
  return n;
};

/**
 * Every timeout flag takes the one duration syntax (500ms, 30s, 15m, 1h; a bare number is
 * seconds) and is parsed here, before any verb runs: a bad value never gets as far as a launch.
 * The verb receives the unit its module works in.
 */
export const durationArg =
  (flag: string, unit: 'ms' | 's', allowZero = false) =>
  (v: string) => {
    const ms = parseDuration(v, flag, { allowZero });
    return unit === 'ms' ? ms : ms / 1000;
  };

// One rule per kind of number, used by every verb that takes such a flag: a flag name means the
// same thing, with the same rules, wherever it appears (cost, report and probe take the same
// --gpu-hour-price). Plain decimal only: Number() would take 1e3, 0x10, Infinity and " 2 ", and a
// decimal comma (2,5) is refused with the dot spelled out rather than read as NaN after the work.
const DECIMAL = /^\d{1,12}(\.\d{1,12})?$/;

const decimal = (flag: string, v: string, fix: string): number => {
  if (/^\d+,\d+$/.test(v))
    throw new UsageError(`${flag}: "${v}" has a decimal comma`, [
      `write it with a dot: ${flag} ${v.replace(',', '.')}`,
    ]);
  if (!DECIMAL.test(v)) throw new UsageError(`${flag}: "${v}" is not a plain decimal number`, [fix]);
  return Number(v);
};

/** A price in USD above 0 (--gpu-hour-price, --gpu-month-price, --compare-price). */
export const usdArg =
  (flag: string, example = '2.50') =>
  (v: string) => {
    const n = decimal(flag, v, `a price in USD, e.g. ${flag} ${example}`);
    if (!(n > 0)) throw new UsageError(`${flag}: "${v}" is not a price above 0`, [`e.g. ${flag} ${example}`]);
    return n;
  };

/** A share in (0, max] (--utilization). */
const shareArg =
  (flag: string, max = 1, example = '0.78') =>
  (v: string) => {
    const n = decimal(flag, v, `a share such as ${flag} ${example}`);
    if (!(n > 0 && n <= max))
      throw new UsageError(`${flag}: "${v}" is not a share in (0, ${max}]`, [`e.g. ${flag} ${example}`]);
    return n;
  };

/** A positive decimal (--gen-weight). */
export const positiveArg = (flag: string, example: string) => (v: string) => {
  const n = decimal(flag, v, `e.g. ${flag} ${example}`);
  if (!(n > 0)) throw new UsageError(`${flag}: "${v}" is not above 0`, [`e.g. ${flag} ${example}`]);
  return n;
};

/** A whole number of at least 1 (--gpus, --nodes N, --rounds): 0 of them means nothing. */
export const countArg = (flag: string) => (v: string) => {
  const n = intArg(flag)(v);
  if (n < 1) throw new UsageError(`${flag}: "${v}" must be at least 1`, [`e.g. ${flag} 2`]);
  return n;
};

/** A server URL (--url, --alert-webhook): http(s), a host, no spaces; checked before anything runs. */
export const urlArg = (flag: string) => (v: string) => parseServerUrl(v, flag);
export const urlsArg =
  (flag: string) =>
  (v: string, prev: string[] = []) => [...prev, parseServerUrl(v, flag)];

/** HOST:PORT (--node-exporter, --router-stats), port 1..65535. */
const HOST_PORT = /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$/;
export function hostPort(flag: string, v: string): string {
  const m = HOST_PORT.exec(v);
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535)
    throw new UsageError(`${flag}: "${v}" is not HOST:PORT`, [
      `write it like ${flag === '--router' || flag === '--router-stats' ? 'localhost:8404' : 'localhost:9100'}`,
    ]);
  return v;
}

export const hostPortArg = (flag: string) => (v: string) => hostPort(flag, v);

/** The flags of one meaning shared by several verbs (only the help text may differ). */
export const GPU_HOUR_PRICE = (help: string): OptionTuple => [
  '--gpu-hour-price <usd>',
  help,
  usdArg('--gpu-hour-price'),
];
export const GPU_MONTH_PRICE: OptionTuple = [
  '--gpu-month-price <usd>',
  'a monthly price per GPU, converted at 730 h per month',
  usdArg('--gpu-month-price', '1200'),
];
/** GPUs the server holds (cost, report); --gpus everywhere else is the host's GPU count. */
export const GPUS_HELD = (help: string): OptionTuple => ['--gpus-held <n>', help, countArg('--gpus-held')];
export const GPUS_HELD_OLD = () => deprecatedAlias('--gpus <n>', '--gpus-held', countArg('--gpus'));
export const UTILIZATION = (help: string): OptionTuple => ['--utilization <share>', help, shareArg('--utilization')];

/** --set, --profiles and --gpus: every verb that reads a profile takes them. */
export const PROFILE_OPTIONS: OptionTuple[] = [
  ['--set <field=value>', 'override a profile field, e.g. engine.maxModelLen=8192 (repeatable)', collect, []],
  ['--profiles <dir>', 'also read profiles from DIR (or SPARKCTL_PROFILES)'],
  ['--gpus <n>', "the host's GPU count (when it cannot be read)", countArg('--gpus')],
];
