import { describe, it, expect } from 'vitest';
import { parseDuration, MAX_DURATION_MS } from '../../src/util/duration.js';
import { UsageError, ExitCode } from '../../src/errors.js';

describe('parseDuration: one syntax for every timeout flag', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['15m', 900_000],
    ['1h', 3_600_000],
    ['1.5h', 5_400_000],
    ['600', 600_000], // a bare number is seconds
    ['0.25', 250],
    [' 90s ', 90_000],
  ])('%s -> %d ms', (text, ms) => {
    expect(parseDuration(text, '--timeout')).toBe(ms);
  });

  it.each(['bogus', '-5', '', '1e3', '10 minutes', '5d', '0x10', 'NaN', 'Infinity', '1h30m', '.5s'])(
    '%j is bad input (exit 2) naming flag, value and fix',
    (text) => {
      let err: unknown;
      try {
        parseDuration(text, '--ready-timeout');
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(UsageError);
      const u = err as UsageError;
      expect(u.exitCode).toBe(ExitCode.badInput);
      expect(u.message).toContain('--ready-timeout');
      expect(u.message).toContain(`"${text}"`);
      expect(u.details.join(' ')).toMatch(/500ms, 30s, 15m or 1h/);
    },
  );

  it('zero is refused unless the flag allows it; past what setTimeout can wait is refused', () => {
    expect(() => parseDuration('0', '--timeout')).toThrow(/is zero/);
    expect(() => parseDuration('0ms', '--timeout')).toThrow(UsageError);
    expect(parseDuration('0', '--timeout', { allowZero: true })).toBe(0);
    expect(() => parseDuration('25d'.replace('d', '') + '000000', '--timeout')).toThrow(/too long/);
    expect(parseDuration(`${MAX_DURATION_MS}ms`, '--timeout')).toBe(MAX_DURATION_MS);
    expect(() => parseDuration(`${MAX_DURATION_MS + 1}ms`, '--timeout')).toThrow(/too long/);
  });
});
