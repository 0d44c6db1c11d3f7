// Co-location on one GPU as table tests over real memory facts: the 2 x H200 device host's capture
// (test/fixtures/bundles/h200x2-device-collect, nvidia-smi --query-gpu: 143,771 MiB total, 143,156 MiB
// free with nothing running) and the DGX Spark's unified memory (FACTS: 128 GB LPDDR5x shared with the
// CPU; 121 GiB of it is MemTotal on a Spark, as operators' reports show), with the planner's figures
// for the shipped profiles.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { judgeColocation, serverNeed, needBytes, usableBytes, largestShare, SPARK_MAX_SHARE, type GpuMemory, type ServerNeed } from '../../src/profiles/colocate.js';
import { parseQueryGpu } from '../../src/nvidia/smi.js';
import { loadProfile } from '../../src/profiles/load.js';
import { FIXTURES } from '../helpers.js';

const MIB = 2 ** 20;
const GIB = 2 ** 30;
const BUNDLE = join(FIXTURES, 'bundles', 'h200x2-device-collect');
const query = (JSON.parse(readFileSync(join(BUNDLE, 'manifest.json'), 'utf8')).commands as Array<{ argv: string[]; stdout: string }>).find((c) => c.argv[1]?.startsWith('--query-gpu='))!;
const FIELDS = query.argv[1]!.slice('--query-gpu='.length).split(',');
const row = parseQueryGpu(readFileSync(join(BUNDLE, query.stdout), 'utf8'), FIELDS)[0]!;
const H200: GpuMemory = { totalBytes: Number(row['memory.total']) * MIB, driverBytes: (Number(row['memory.total']) - Number(row['memory.free'])) * MIB };
const SPARK: GpuMemory = { totalBytes: 121 * GIB, unified: true };

const need = (name: string, share: number, weightsGiB = 9, kvCacheMemoryBytes?: number): ServerNeed => ({ name, share, weightsBytes: weightsGiB * GIB, reserveBytes: 2 * GIB, kvCacheMemoryBytes });

describe('co-location: every server on one GPU added up against what it has', () => {
  it('reads the H200 capture: 143,771 MiB, of which the driver keeps 615 MiB', () => {
    expect(row['name']).toBe('NVIDIA H200');
    expect(H200.totalBytes / MIB).toBe(143771);
    expect(H200.driverBytes! / MIB).toBe(615);
    expect(usableBytes(H200) / MIB).toBe(143156);
    expect(usableBytes(SPARK)).toBeCloseTo(SPARK_MAX_SHARE * 121 * GIB);
  });

  // [gpu, running, newcomer, fits, what the verdict names]
  const TABLE: Array<[string, GpuMemory, ServerNeed[], ServerNeed, boolean, RegExp]> = [
    ['H200: 0.45 + 0.45 fit (126.4 of 139.8 GiB)', H200, [need('a', 0.45)], need('b', 0.45), true, /a 63\.2 GiB \+ b 63\.2 GiB = 126\.4 GiB of 139\.8 GiB/],
    [
      'H200: 0.5 + 0.5 is more than the driver leaves',
      H200,
      [need('a', 0.5)],
      need('b', 0.5),
      false,
      /= 140\.4 GiB, more than the 139\.8 GiB this GPU has for them \(140\.4 GiB less the driver's 0\.6 GiB\)/,
    ],
    ['H200: 0.92 (the shipped share) leaves no room for a second server', H200, [need('qwen-prod', 0.92)], need('qwen-dev', 0.1), false, /more than the 139\.8 GiB/],
    ['H200: three at 0.3', H200, [need('a', 0.3), need('b', 0.3)], need('c', 0.3), true, /= 126\.4 GiB of 139\.8 GiB/],
    ['H200: a share smaller than its weights is refused whatever the sum', H200, [], need('tiny', 0.05, 9), false, /leaves no KV cache after 9\.0 GiB of weights/],
    ['H200: kvCacheMemoryBytes counts weights + KV + reserve, not the share', H200, [need('a', 0.8)], need('b', 0.9, 9, 10 * GIB), true, /a 112\.3 GiB \+ b 21\.0 GiB = 133\.3 GiB of 139\.8 GiB/],
    ['Spark: 0.4 + 0.4 is the most NVIDIA gives (0.8 of unified memory)', SPARK, [need('chat', 0.4)], need('code', 0.4), true, /= 96\.8 GiB of 96\.8 GiB/],
    [
      'Spark: 0.5 + 0.4 leaves the OS and page cache too little',
      SPARK,
      [need('chat', 0.5)],
      need('code', 0.4),
      false,
      /more than the 96\.8 GiB the servers may take of this Spark's 121\.0 GiB unified memory \(0\.8 of it/,
    ],
    ['Spark: one server at 0.6 (the shipped Spark profile)', SPARK, [], need('qwen3.5-9b-spark', 0.6, 18), true, /72\.6 GiB of 96\.8 GiB/],
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
    expect(v.problems.join('\n')).toMatch(/b needs 63\.2 GiB at its start and the GPU has 60\.0 GiB free now/);
    expect(largestShare(busy, [need('a', 0.5)])).toBe(0.42);
  });

  it("uses the planner's figures for the shipped profiles: qwen-dev and qwen-prod at 0.45 each fit one H200", () => {
    const dev = loadProfile('qwen-dev', { sets: ['engine.gpuMemoryUtilization=0.45', 'parallel.tensor=1'] }).profile;
    const prod = loadProfile('qwen-prod', { sets: ['engine.gpuMemoryUtilization=0.45', 'parallel.tensor=1'] }).profile;
    const a = serverNeed('qwen-prod', prod, H200.totalBytes);
    const b = serverNeed('qwen-dev', dev, H200.totalBytes);
    expect(a.weightsBytes).toBe(18e9);
    expect(needBytes(a, H200)).toBeCloseTo(0.45 * 143771 * MIB);
    const v = judgeColocation(H200, [a], b);
    expect(v.fits, v.problems.join('\n')).toBe(true);
    expect(judgeColocation(H200, [serverNeed('qwen-prod', { ...prod, engine: { ...prod.engine, gpuMemoryUtilization: 0.92 } }, H200.totalBytes)], b).fits).toBe(false);
  });
});
