// The fix a colocation refusal prints changes something when pasted: a share only when that share
// still holds the newcomer's weights and reserve (issue 48 item 7: "engine.gpuMemoryUtilization=0"
// and a share below the model's own weights were printed as fixes).
import { describe, it, expect } from 'vitest';
import { colocationFix } from '../../src/engine/serve.js';
import { judgeColocation, type ServerNeed } from '../../src/profiles/colocate.js';

const GiB = 2 ** 30;
const gpu = { totalBytes: 80 * GiB, driverBytes: 0.6 * GiB };
const held = (share: number, name = 'a'): ServerNeed => ({ name, share, weightsBytes: 5 * GiB, reserveBytes: 1 * GiB });
const mine = (weights: number): ServerNeed => ({
  name: 'new-0',
  share: 0.45,
  weightsBytes: weights * GiB,
  reserveBytes: 1 * GiB,
});

describe('colocationFix', () => {
  it.each([
    // running shares, newcomer weights GiB, expected fix
    [[0.45], 4, /^fix: --set engine\.gpuMemoryUtilization=0\.\d+ \(the largest share that fits beside them\)$/],
    [
      [0.45, 0.45],
      6,
      /no share of this GPU holds new-0's weights beside them; fix: sparkctl stop p0, then sparkctl stop p1/,
    ],
    [[0.9], 7, /fix: sparkctl stop p0/],
    [[0.7], 30, /no share of this GPU holds new-0's weights/],
  ])('beside %j a newcomer of %d GiB: %s', (shares, weights, fix) => {
    const running = shares.map((s, i) => held(s, `p${i}-0`));
    const text = colocationFix(
      gpu,
      running,
      mine(weights),
      shares.map((_, i) => `p${i}`),
    );
    expect(text).toMatch(fix);
    const m = /gpuMemoryUtilization=([\d.]+)/.exec(text);
    if (m) {
      // the printed share, pasted, passes the same rule that refused the serve
      const v = judgeColocation(gpu, running, { ...mine(weights), share: Number(m[1]) });
      expect(v.problems, v.summary).toEqual([]);
      expect(Number(m[1])).toBeGreaterThan(0);
    }
  });
});
