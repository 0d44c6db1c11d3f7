// What the watcher does about a verdict: only dead and wedged servers are acted on, per the profile's
// action; exponential back-off between restarts of one server; the circuit opens after N restarts in
// the window and stays open. And the watcher's own textfile, which an alert reads when it stops.
import { describe, expect, it } from 'vitest';
import { backoffMs, decide } from '../../src/watch/policy.js';
import { WatchBlock } from '../../src/profiles/watch-block.js';
import { renderTextfile } from '../../src/watch/textfile.js';
import { policyWith } from '../../src/verbs/watch/run.js';
import { VERDICTS } from '../../src/watch/verdict.js';

const P = WatchBlock.parse({});
const NOW = Date.parse('2026-12-04T03:00:00Z');

describe('decide', () => {
  it('acts only on dead and wedged servers', () => {
    for (const v of VERDICTS)
      expect(decide(v, { restarts: [] }, P, NOW).do).toBe(v === 'dead' || v === 'wedged' ? 'restart' : 'nothing');
  });
  it('watch.action alert or none: never a restart', () => {
    expect(decide('wedged', { restarts: [] }, { ...P, action: 'alert' }, NOW).do).toBe('alert');
    expect(decide('dead', { restarts: [] }, { ...P, action: 'none' }, NOW).do).toBe('nothing');
  });
  it('backs off exponentially between restarts of one server, capped', () => {
    expect([1, 2, 3, 4, 5, 12].map((n) => backoffMs(n, P))).toEqual([0, 10_000, 20_000, 40_000, 80_000, 600_000]);
    const once = { restarts: [NOW - 5_000] };
    const d = decide('dead', once, P, NOW);
    expect(d).toMatchObject({ do: 'wait', untilMs: NOW + 5_000 });
    expect(decide('dead', once, P, NOW + 5_000)).toMatchObject({ do: 'restart', attempt: 2 });
  });
  it('opens the circuit after circuitRestarts restarts in the window, and keeps it open', () => {
    const mem = { restarts: [NOW - 20 * 60_000, NOW - 10 * 60_000, NOW - 2 * 60_000] };
    const d = decide('wedged', mem, P, NOW);
    expect(d.do).toBe('open-circuit');
    expect(d.why).toContain('3 restarts in the last 30 min');
    expect(decide('wedged', { ...mem, circuitOpenSince: NOW }, P, NOW + 3_600_000).do).toBe('nothing');
    // restarts older than the window do not count
    expect(decide('wedged', { restarts: [NOW - 40 * 60_000, NOW - 35 * 60_000, NOW - 31 * 60_000] }, P, NOW).do).toBe(
      'restart',
    );
  });
});

describe('flags over the watch: block', () => {
  it('override, and a bad value names the flag', () => {
    expect(policyWith({ windowSeconds: 60, action: 'alert' }, { interval: 5000, window: 30 })).toMatchObject({
      windowSeconds: 30,
      action: 'alert',
    });
    expect(policyWith({}, { interval: 5000, restartWindow: 600 }).circuitWindowMinutes).toBe(10);
    expect(() => policyWith({}, { interval: 5000, window: 1 })).toThrow(/--window: .*5/);
    expect(() => policyWith({}, { interval: 5000, maxRestarts: 0 })).toThrow(/--max-restarts/);
  });
});

describe("the watcher's textfile", () => {
  it('has its last tick, servers, one verdict per server, restarts and circuit; label values escaped', () => {
    const text = renderTextfile(
      {
        lastTick: NOW,
        state: () => [
          { target: 'a-0', verdict: 'wedged', restarts: 2, circuitOpen: true, incident: true },
          { target: 'b"\\-0', verdict: 'healthy', restarts: 0, circuitOpen: false, incident: false },
        ],
      },
      5000,
    );
    expect(text).toContain(`sparkctl_watch_last_tick_timestamp_seconds ${NOW / 1000}.000`);
    expect(text).toContain('sparkctl_watch_servers 2');
    expect(text).toContain('sparkctl_watch_verdict{target="a-0",verdict="wedged"} 1');
    expect(text).toContain('sparkctl_watch_verdict{target="a-0",verdict="healthy"} 0');
    expect(text).toContain('sparkctl_watch_circuit_open{target="a-0"} 1');
    expect(text).toContain('sparkctl_watch_restarts_total{target="a-0"} 2');
    expect(text).toContain('target="b\\"\\\\-0"');
    expect(text.match(/^sparkctl_watch_verdict\{target="a-0"/gm)).toHaveLength(VERDICTS.length);
  });
});
