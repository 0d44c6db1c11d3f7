// pollUntil: the one poll-until-deadline loop (readiness of HAProxy, a drain, sleep/wake, a freed
// port, the simulator's drain, the bench's last scrape). Real timers: what it promises is about time.
import { describe, expect, it } from 'vitest';
import { pollUntil } from '../../src/util/poll.js';

const counter = (values: number[]) => {
  let i = 0;
  const at: number[] = [];
  const t0 = performance.now();
  return {
    read: () => {
      at.push(performance.now() - t0);
      return values[Math.min(i++, values.length - 1)]!;
    },
    at,
  };
};

describe('pollUntil', () => {
  it('a reading that is already done: one reading, no pause', async () => {
    const c = counter([5]);
    const r = await pollUntil(c.read, (v) => v === 5, { deadlineMs: 10_000, intervalMs: 5_000 });
    expect(r).toMatchObject({ done: true, value: 5, readings: 1 });
    expect(r.ms).toBeLessThan(1000);
  });

  it('reads until done, every interval, and returns the reading that was', async () => {
    const c = counter([3, 2, 1, 0]);
    const r = await pollUntil(c.read, (v) => v === 0, { deadlineMs: 10_000, intervalMs: 20 });
    expect(r).toMatchObject({ done: true, value: 0, readings: 4 });
    for (let k = 1; k < c.at.length; k++) expect(c.at[k]! - c.at[k - 1]!).toBeGreaterThanOrEqual(15);
  });

  it.each([Number.NaN, undefined as unknown as number, -5])(
    'a deadline of %s is no time to wait: one reading, then deadline (never a wait without end)',
    async (deadlineMs) => {
      const c = counter([1]);
      const r = await pollUntil(c.read, (v) => v === 0, { deadlineMs, intervalMs: 10 });
      expect(r).toMatchObject({ done: false, reason: 'deadline', value: 1, readings: 1 });
    },
  );

  it('an interval that is no number (a back-off function gone wrong) still ends at the deadline', async () => {
    const c = counter([1]);
    const r = await pollUntil(c.read, (v) => v === 0, { deadlineMs: 200, intervalMs: () => Number.NaN });
    expect(r).toMatchObject({ done: false, reason: 'deadline' });
    expect(r.ms).toBeLessThan(2000);
  });

  it('an async reading is awaited', async () => {
    let n = 0;
    const r = await pollUntil(
      async () => ++n,
      (v) => v >= 3,
      { deadlineMs: 10_000, intervalMs: 1 },
    );
    expect(r).toMatchObject({ done: true, value: 3, readings: 3 });
  });

  it('the deadline: the last reading and why, the last one taken at the deadline, not an interval short', async () => {
    const c = counter([7]);
    const r = await pollUntil(c.read, () => false, { deadlineMs: 250, intervalMs: 200 });
    expect(r).toMatchObject({ done: false, reason: 'deadline', value: 7 });
    expect(c.at[1]!).toBeGreaterThanOrEqual(195);
    expect(c.at.at(-1)!).toBeGreaterThanOrEqual(240); // the second pause was cut to the 50 ms left...
    expect(r.ms).toBeGreaterThanOrEqual(245);
    expect(r.ms).toBeLessThan(2000); // ...and never ran a whole interval past it
  });

  it('deadline 0: one reading', async () => {
    const c = counter([1]);
    expect(await pollUntil(c.read, () => false, { deadlineMs: 0, intervalMs: 50 })).toMatchObject({
      done: false,
      reason: 'deadline',
      readings: 1,
    });
  });

  it('an abort ends the pause at once, with the last reading', async () => {
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(), 50);
    const c = counter([4]);
    const r = await pollUntil(c.read, () => false, { deadlineMs: 60_000, intervalMs: 30_000, signal: ctl.signal });
    expect(r).toMatchObject({ done: false, reason: 'aborted', value: 4, readings: 1 });
    expect(r.ms).toBeLessThan(5000);
  });

  it('a signal already aborted: one reading, then aborted (a done reading still counts)', async () => {
    const s = AbortSignal.abort();
    expect(
      await pollUntil(
        () => 1,
        () => false,
        { deadlineMs: 60_000, intervalMs: 10, signal: s },
      ),
    ).toMatchObject({ done: false, reason: 'aborted', readings: 1 });
    expect(
      await pollUntil(
        () => 1,
        () => true,
        { deadlineMs: 60_000, intervalMs: 10, signal: s },
      ),
    ).toMatchObject({ done: true, readings: 1 });
  });

  it('the interval may follow the last reading (back off while refused)', async () => {
    const c = counter([1, 1, 0]);
    const asked: number[] = [];
    await pollUntil(c.read, (v) => v === 0, {
      deadlineMs: 10_000,
      intervalMs: (v) => {
        asked.push(v);
        return 5;
      },
    });
    expect(asked).toEqual([1, 1]);
  });

  it("a reading that throws is the caller's error, not swallowed", async () => {
    await expect(
      pollUntil(
        () => {
          throw new Error('boom');
        },
        () => true,
        { deadlineMs: 100, intervalMs: 10 },
      ),
    ).rejects.toThrow('boom');
  });
});
