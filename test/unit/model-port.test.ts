// serve MODEL's port rule (issue 48 item 4): the first model keeps 8000; a later one takes the first
// run of free ports from 8000 up instead of colliding; the chosen line names what holds each port
// passed over.
import { describe, it, expect } from 'vitest';
import { pickModelPort, MODEL_FIRST_PORT } from '../../src/profiles/from-model.js';

const held = (...ports: number[]) => new Map(ports.map((p) => [p, `held by x-${p}`] as [number, string]));

describe('pickModelPort', () => {
  it.each([
    ['nothing taken: 8000', 1, held(), 8000],
    ['8000 taken by a first model: 8001', 1, held(8000), 8001],
    ['a gap is used: 8000, 8002 taken -> 8001', 1, held(8000, 8002), 8001],
    ['four replicas need a run of four free ports: 8000 and 8003 taken -> 8004', 4, held(8000, 8003), 8004],
    ['four replicas, 8000-8003 taken by the first model -> 8004', 4, held(8000, 8001, 8002, 8003), 8004],
    ['ports below 8000 do not matter', 1, held(22, 7999), 8000],
  ])('%s', (_what, count, taken, want) => {
    expect(pickModelPort(count, taken)!.port).toBe(want);
  });

  it('says why: free at 8000, or which ports were passed over and by whom', () => {
    expect(pickModelPort(1, held())!.why).toMatch(/^port 8000: free/);
    const w = pickModelPort(2, held(8000, 8001))!.why;
    expect(w).toMatch(
      /^port 8002-8003: the first free from 8000 up; passed over: 8000 held by x-8000; 8001 held by x-8001;/,
    );
    expect(w).toContain('--set server.port=N');
  });

  it('names at most three holders, then a count', () => {
    expect(pickModelPort(1, held(8000, 8001, 8002, 8003, 8004))!.why).toContain('8002 held by x-8002; 2 more');
  });

  it('no run of free ports up to 65535: undefined (the profile keeps its port, and preflight says it is taken)', () => {
    const all = new Map<number, string>();
    for (let p = MODEL_FIRST_PORT; p <= 65535; p++) all.set(p, 'x');
    expect(pickModelPort(1, all)).toBeUndefined();
  });
});
