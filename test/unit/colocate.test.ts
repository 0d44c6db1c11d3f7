// Co-location on one GPU as table tests over real memory facts: the 2 x H200 device host's capture
// (test/fixtures/bundles/h200x2-device-collect, nvidia-smi --query-gpu: 143,771 MiB total, 143,156 MiB
// free with nothing running) and the DGX Spark's unified memory (FACTS: 128 GB LPDDR5x shared with the
// CPU; 121 GiB of it is MemTotal on a Spark, as operators' reports show), with the planner's figures
// for the shipped profiles.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  judgeColocation,
  serverNeed,
  needBytes,
  usableBytes,
  largestShare,
  SPARK_MAX_SHARE,
  type GpuMemory,
  type ServerNeed,
} from '../../src/profiles/colocate.js';
import { parseQueryGpu } from '../../src/nvidia/smi.js';
import { loadProfile } from '../../src/profiles/load.js';
import { FIXTURES } from '../helpers.js';

const MIB = 2 ** 20;
const GIB = 2 ** 30;
const BUNDLE = join(FIXTURES, 'bundles', 'h200x2-device-collect');
const query = (
  JSON.parse(readFileSync(join(BUNDLE, 'manifest.json'), 'utf8')).commands as Array<{ argv: string[]; stdout: string }>
).find((c) => c.argv[1]?.startsWith('--query-gpu='))!;
const FIELDS = query.argv[1]!.slice('--query-gpu='.length).split(',');
const row = parseQueryGpu(readFileSync(join(BUNDLE, query.stdout), 'utf8'), FIELDS)[0]!;
const H200: GpuMemory = {
  totalBytes: Number(row['memory.total']) * MIB,
  driverBytes: (Number(row['memory.total']) - Number(row['memory.free'])) * MIB,
};
const SPARK: GpuMemory = { totalBytes: 121 * GIB, unified: true };

const need = (name: string, share: number, weightsGiB = 9, kvCacheMemoryBytes?: number): ServerNeed => ({
  name,
  share,
  weightsBytes: weightsGiB * GIB,
  reserveBytes: 2 * GIB,
  kvCacheMemoryBytes,
});

describe('co-location: every server on one GPU added up against what it has', () => {
  it('reads the H200 capture: 143,771 MiB, of which the driver keeps 615 MiB', () => {
    expect(row.name).toBe('NVIDIA H200');
    expect(H200.totalBytes / MIB).toBe(143771);
    expect(H200.driverBytes! / MIB).toBe(615);
    expect(usableBytes(H200) / MIB).toBe(143156);
    expect(usableBytes(SPARK)).toBeCloseTo(SPARK_MAX_SHARE * 121 * GIB);
  });

  // [gpu, running, newcomer, fits, what the verdict names]
  const TABLE: Array<[string, GpuMemory, ServerNeed[], ServerNeed, boolean, RegExp]> = [
    [
      'H200: 0.45 + 0.45 fit (126.8 of 139.8 GiB, the contexts included)',
      H200,
      [need('a', 0.45)],
      need('b', 0.45),
      true,
      /a 63\.4 GiB \+ b 63\.4 GiB = 126\.8 GiB of 139\.8 GiB/,
    ],
    [
      'H200: 0.5 + 0.5 is more than the driver leaves',
      H200,
      [need('a', 0.5)],
      need('b', 0.5),
      false,
      /a 70\.4 GiB \(0\.5 x 139\.8 GiB \+ context 0\.5 GiB\) \+ b 70\.4 GiB .* = 140\.8 GiB, more than the 139\.8 GiB this GPU has for them \(140\.4 GiB less the driver's 0\.6 GiB\)/,
    ],
    [
      'H200: 0.92 (the shipped share) leaves no room for a second server',
      H200,
      [need('qwen-prod', 0.92)],
      need('qwen-dev', 0.1),
      false,
      /more than the 139\.8 GiB/,
    ],
    ['H200: three at 0.3', H200, [need('a', 0.3), need('b', 0.3)], need('c', 0.3), true, /= 127\.3 GiB of 139\.8 GiB/],
    [
      'H200: a share smaller than its weights is refused whatever the sum',
      H200,
      [],
      need('tiny', 0.05, 9),
      false,
      /leaves no KV cache after 9\.0 GiB of weights/,
    ],
    [
      'H200: kvCacheMemoryBytes counts weights + KV + reserve, not the share',
      H200,
      [need('a', 0.8)],
      need('b', 0.9, 9, 10 * GIB),
      true,
      /a 112\.3 GiB \+ b 21\.5 GiB = 133\.9 GiB of 139\.8 GiB/,
    ],
    [
      'Spark: 0.4 + 0.35 fit within the 0.8 NVIDIA gives at most',
      SPARK,
      [need('chat', 0.4)],
      need('code', 0.35),
      true,
      /= 91\.8 GiB of 96\.8 GiB/,
    ],
    [
      'Spark: 0.4 + 0.4 and their contexts are past it',
      SPARK,
      [need('chat', 0.4)],
      need('code', 0.4),
      false,
      /= 97\.8 GiB, more than the 96\.8 GiB/,
    ],
    [
      'Spark: 0.5 + 0.4 leaves the OS and page cache too little',
      SPARK,
      [need('chat', 0.5)],
      need('code', 0.4),
      false,
      /more than the 96\.8 GiB the servers may take of this Spark's 121\.0 GiB unified memory \(0\.8 of it/,
    ],
    [
      'Spark: one server at 0.6 (the shipped Spark profile)',
      SPARK,
      [],
      need('qwen3.5-9b-spark', 0.6, 18),
      true,
      /73\.1 GiB of 96\.8 GiB/,
    ],
  ];
  for (const [what, gpu, running, newcomer, fits, says] of TABLE)
    it(what, () => {
      const v = judgeColocation(gpu, running, newcomer);
      expect(v.fits, v.problems.join('\n')).toBe(fits);
      expect(fits ? v.summary : v.problems.join('\n')).toMatch(says);
    });

  it('what is free now is checked too: vLLM refuses a share larger than the free memory at its start', () => {
    const busy: GpuMemory = { ...H200, freeBytes: 60 * GIB };
    const v = judgeColocation(busy, [need('a', 0.5)], need('b', 0.45));
    expect(v.fits).toBe(false);
    expect(v.problems.join('\n')).toMatch(/b needs 62\.9 GiB at its start and the GPU has 60\.0 GiB free now/);
    expect(largestShare(busy, [need('a', 0.5)])).toBe(0.42);
    expect(largestShare(H200, [need('a', 0.5)])).toBe(0.49);
  });

  it("uses the planner's figures for the shipped profiles: qwen-dev and qwen-prod at 0.45 each fit one H200", () => {
    const dev = loadProfile('qwen-dev', { sets: ['engine.gpuMemoryUtilization=0.45', 'parallel.tensor=1'] }).profile;
    const prod = loadProfile('qwen-prod', { sets: ['engine.gpuMemoryUtilization=0.45', 'parallel.tensor=1'] }).profile;
    const a = serverNeed('qwen-prod', prod, H200.totalBytes);
    const b = serverNeed('qwen-dev', dev, H200.totalBytes);
    expect(a.weightsBytes).toBe(18e9);
    expect(needBytes(a, H200)).toBeCloseTo(0.45 * 143156 * MIB + 520 * MIB);
    const v = judgeColocation(H200, [a], b);
    expect(v.fits, v.problems.join('\n')).toBe(true);
    expect(
      judgeColocation(
        H200,
        [serverNeed('qwen-prod', { ...prod, engine: { ...prod.engine, gpuMemoryUtilization: 0.92 } }, H200.totalBytes)],
        b,
      ).fits,
    ).toBe(false);
  });
});

// The real H200 (scripts/device-colocate.py, test/fixtures/device/colocate-h200): two stand-ins at
// 0.45 held real memory on one GPU, a third at 0.2 was refused by vLLM's own start-up check. The rule,
// given nvidia-smi's free memory before each, says the same.
describe('co-location on the real H200: the rule against nvidia-smi after each stand-in', () => {
  const run = JSON.parse(readFileSync(join(FIXTURES, 'device', 'colocate-h200', 'colocate-h200.json'), 'utf8')) as {
    steps: Array<{
      step: string;
      share?: number;
      said?: string;
      smi: { totalMiB: number; usedMiB: number; freeMiB: number };
      exit?: number;
    }>;
  };
  const [empty, a, b, c] = run.steps;
  const gpu = (freeMiB: number): GpuMemory => ({
    totalBytes: empty!.smi.totalMiB * MIB,
    driverBytes: (empty!.smi.totalMiB - empty!.smi.freeMiB) * MIB,
    freeBytes: freeMiB * MIB,
  });
  const stand = (name: string, share: number) => need(name, share, 0.1);

  it('what the stand-ins did on the GPU', () => {
    expect(a!.said).toMatch(/^HOLDING/);
    expect(b!.said).toMatch(/^HOLDING/);
    expect(c!.said).toMatch(/^REFUSED/);
    expect(c!.exit).toBe(3);
    // torch's total (what a share multiplies) is nvidia-smi's free memory with nothing running
    expect(Number(/total (\d+)/.exec(a!.said!)![1]) / MIB).toBeCloseTo(empty!.smi.freeMiB, -1);
    // each process holds its share and about CONTEXT beyond it
    expect((a!.smi.usedMiB - empty!.smi.usedMiB) * MIB).toBeGreaterThan(0.45 * empty!.smi.freeMiB * MIB);
    expect(Math.abs((b!.smi.usedMiB - a!.smi.usedMiB) * MIB - needBytes(stand('b', 0.45), gpu(0)))).toBeLessThan(
      64 * MIB,
    );
  });

  it('the rule allows the second stand-in and refuses the third, with the numbers', () => {
    const second = judgeColocation(gpu(a!.smi.freeMiB), [stand('a', 0.45)], stand('b', 0.45));
    expect(second.fits, second.problems.join('\n')).toBe(true);
    const third = judgeColocation(gpu(b!.smi.freeMiB), [stand('a', 0.45), stand('b', 0.45)], stand('c', 0.2));
    expect(third.fits).toBe(false);
    expect(third.problems.join('\n')).toMatch(/c needs 28\.0 GiB at its start and the GPU has 13\.0 GiB free now/);
    expect(third.problems.join('\n')).toMatch(/= 155\.3 GiB, more than the 139\.8 GiB/);
    expect(largestShare(gpu(b!.smi.freeMiB), [stand('a', 0.45), stand('b', 0.45)])).toBe(0.08);
  });
});
