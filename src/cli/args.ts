// Parsers commander runs on a flag's value before any verb starts: a bad value is exit 2 with the
// flag named, never a launch.
import { SparkError, ExitCode } from '../errors.js';
import { parseDuration } from '../util/duration.js';
import type { OptionTuple } from './define.js';

export const collect = (v: string, prev: string[] = []) => [...prev, v];

export const intArg = (name: string) => (v: string) => {
  // Decimal digits only: Number() would also take 0x10, 1e3, ' 8 ' and 0b1.
  const n = /^\d{1,9}$/.test(v) ? Number(v) : NaN;
  if (!Number.isInteger(n) || n < 0) throw new SparkError(`${name}: "${v}" is not a whole number`, ExitCode.badInput);
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

/** --set, --profiles and --gpus: every verb that reads a profile takes them. */
export const PROFILE_OPTIONS: OptionTuple[] = [
  ['--set <field=value>', 'override a profile field, e.g. engine.maxModelLen=8192 (repeatable)', collect, []],
  ['--profiles <dir>', 'also read profiles from DIR (or SPARKCTL_PROFILES)'],
  ['--gpus <n>', "the host's GPU count (when it cannot be read)", intArg('--gpus')],
];
