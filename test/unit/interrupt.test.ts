// src/util/interrupt.ts: the one Ctrl-C / SIGTERM wiring every verb uses. The handlers are driven
// with process.emit (the listeners Node would call), so the test process itself is never signalled.
import { afterEach, describe, expect, it } from 'vitest';
import { interrupts, withInterrupts } from '../../src/util/interrupt.js';

const count = () => ({ int: process.listenerCount('SIGINT'), term: process.listenerCount('SIGTERM') });
let base = count();
afterEach(() => expect(count()).toEqual(base));

describe('interrupts', () => {
  it.each([
    ['SIGINT', 'exit'],
    ['SIGTERM', 'exit'],
    ['SIGINT', 'force'],
    ['SIGTERM', 'force'],
  ] as const)('%s, second: %s: the first aborts signal only', (sig, second) => {
    base = count();
    const i = interrupts({ second });
    expect(count()).toEqual({ int: base.int + 1, term: base.term + 1 });
    process.emit(sig);
    expect(i.signal.aborted).toBe(true);
    expect(i.force.aborted).toBe(false);
    if (second === 'exit') {
      // the handlers are gone: a second signal meets Node's default (the process ends)
      expect(count()).toEqual(base);
    } else {
      process.emit(sig === 'SIGINT' ? 'SIGTERM' : 'SIGINT');
      expect(i.force.aborted).toBe(true);
      i.off();
    }
    i.off(); // idempotent
  });

  it('listens only to the signals named (bench: SIGINT), gives the reason, says onFirst once', () => {
    base = count();
    const said: string[] = [];
    const i = interrupts({ second: 'force', signals: ['SIGINT'], reason: () => new Error('interrupted'), onFirst: () => said.push('first') });
    expect(count()).toEqual({ int: base.int + 1, term: base.term });
    process.emit('SIGTERM' as never); // not ours: nothing happens here (a real SIGTERM would end the process)
    expect(i.signal.aborted).toBe(false);
    process.emit('SIGINT');
    process.emit('SIGINT');
    expect(i.signal.reason).toEqual(new Error('interrupted'));
    expect(i.force.aborted).toBe(true);
    expect(said).toEqual(['first']);
    i.off();
  });

  it('withInterrupts hands the signal to the work and removes its handlers when the work settles, ok or failed', async () => {
    base = count();
    const seen = await withInterrupts(async (signal) => {
      expect(count().int).toBe(base.int + 1);
      process.emit('SIGINT');
      return signal.aborted;
    });
    expect(seen).toBe(true);
    await expect(withInterrupts(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  });
});
