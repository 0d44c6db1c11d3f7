// Issue 48 item 7 (fixes that fix): when the weights leave no room for a KV cache, the fix offers only
// what can make room. "Raise the share" to a share that cannot hold the weights (a Spark's servers get
// at most 0.8 of its unified memory) fixed nothing; "largest max model len that fits is 0", "0.00x"
// and a generated max model len of 1 were numbers no one can serve.
import { describe, it, expect } from 'vitest';
import { Profile } from '../../src/profiles/schema.js';
import { noRoomFixes, type HostShape } from '../../src/profiles/validate.js';

const GIB = 1024 ** 3;
const prof = (share: number, tensor = 1) =>
  Profile.parse({ name: 'x', model: { id: 'org/x' }, engine: { gpuMemoryUtilization: share }, parallel: { tensor } });
const spark: HostShape = { gpus: 1, gpusSource: 'platform', gpuMemoryBytes: 119 * GIB, gpuName: 'NVIDIA GB10' };
const h100x8: HostShape = {
  gpus: 8,
  gpusSource: 'detected',
  gpuMemoryBytes: 80 * GIB,
  gpuName: 'NVIDIA H100 80GB HBM3',
};
const h100x1: HostShape = { ...h100x8, gpus: 1 };
const twoSparks: HostShape = { ...spark, gpus: 1, multiNode: true, nodes: 2, gpusPerNode: 1 };

describe('noRoomFixes: only fixes that can make room', () => {
  const cases: Array<[string, Profile, HostShape, number, RegExp[], RegExp[]]> = [
    [
      'Spark, weights over 0.8 of it: no share fix, over nodes, quantize',
      prof(0.8),
      spark,
      150 * GIB,
      [
        /a higher share cannot help: .*150\.0 GiB .* more than 0\.8 x 119 GiB/,
        /serve over nodes/,
        /quantized checkpoint/,
      ],
      [/gpuMemoryUtilization=/],
    ],
    [
      'Spark at 0.5, weights that fit under 0.8: the share that holds them, never above 0.8',
      prof(0.5),
      spark,
      80 * GIB,
      [/--set engine\.gpuMemoryUtilization=0\.7\d?\b/],
      [/cannot help/, /=0\.(8[1-9]|9)/],
    ],
    [
      'Spark at 0.5, weights that need 0.79 of it: 0.8 at most',
      prof(0.5),
      spark,
      93 * GIB,
      [/--set engine\.gpuMemoryUtilization=0\.8\b/],
      [/cannot help/],
    ],
    [
      'H100 at 0.8, 70 GiB of weights: a share up to 0.95 helps; 8 GPUs: more per replica',
      prof(0.8),
      h100x8,
      70 * GIB,
      [/gpuMemoryUtilization=0\.9\d?\b/, /more GPUs per replica: .*now 1; this host has 8/],
      [/serve over nodes/],
    ],
    [
      'H100 x1, 90 GiB: no share can hold it; one GPU: over nodes',
      prof(0.9),
      h100x1,
      90 * GIB,
      [/cannot help/, /serve over nodes/],
      [/more GPUs per replica/],
    ],
    [
      'at 0.95 with weights over 0.95 of the GPU: no share fix offered as if it helped',
      prof(0.95),
      h100x1,
      77 * GIB,
      [/cannot help/],
      [/gpuMemoryUtilization=/],
    ],
    [
      'two Sparks at TP 2: more GPUs than these nodes have',
      prof(0.8, 2),
      twoSparks,
      100 * GIB,
      [/more GPUs than these nodes have/, /cannot help/],
      [/more GPUs per replica/],
    ],
  ];
  for (const [name, p, host, need, want, never] of cases) {
    it(name, () => {
      const text = noRoomFixes(p, host, need);
      for (const w of want) expect(text).toMatch(w);
      for (const n of never) expect(text).not.toMatch(n);
      expect(text).not.toMatch(/undefined|NaN/);
    });
  }
});
