// A DGX Spark's memory share (issue 48 item 4): the schema's default 0.9 is a data-centre GPU's, and on a Spark's
// unified memory sparkctl lets its servers take at most 0.8 (SPARK_MAX_SHARE; the OS, the page cache and every
// other process share the rest). A profile that names a unified-memory platform and no share gets 0.8; a share
// above 0.8 there (written, --set, or a --gpu-memory-utilization in extraArgs), or the 0.9 default of a profile
// that names no platform meeting a GB10, is refused with the field, the value and the fix (exit 2 at the CLI).
import { describe, it, expect } from 'vitest';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { parseProfile } from '../../src/profiles/load.js';
import { validateProfile, type HostShape } from '../../src/profiles/validate.js';
import { GIB } from '../../src/profiles/planner.js';
import { ROOT, tempDir, rmrf } from '../helpers.js';

const spark: HostShape = {
  gpus: 1,
  gpusSource: 'detected',
  read: true,
  gpuMemoryBytes: 119 * GIB,
  gpuName: 'NVIDIA GB10',
};
const h100: HostShape = {
  gpus: 8,
  gpusSource: 'detected',
  read: true,
  gpuMemoryBytes: 80 * GIB,
  gpuName: 'NVIDIA H100 80GB HBM3',
};
const base = (platform: string | undefined, engine: Record<string, unknown> = {}) => ({
  name: 'mine',
  model: { id: 'Qwen/Qwen3.5-9B' },
  ...(platform ? { platform } : {}),
  engine: { maxModelLen: 8192, ...engine },
  parallel: { tensor: 1 },
});
const shareErrors = (raw: object, host?: HostShape, sets: string[] = []) =>
  validateProfile(parseProfile(raw, 'mine.yaml', sets), host).filter(
    (p) => p.severity === 'error' && /gpuMemoryUtilization|--gpu-memory-utilization/.test(p.path),
  );

describe('the memory share of a profile on unified memory', () => {
  it.each([
    ['a Spark platform, no share: 0.8', base('dgx-spark-gb10'), [], 0.8],
    ['a Spark platform, a share written: kept', base('dgx-spark-gb10', { gpuMemoryUtilization: 0.6 }), [], 0.6],
    ['a Spark platform, --set: kept', base('dgx-spark-gb10'), ['engine.gpuMemoryUtilization=0.7'], 0.7],
    [
      'a Spark platform, the share in extraArgs: the field left to the flag',
      base('dgx-spark-gb10', { extraArgs: ['--gpu-memory-utilization', '0.5'] }),
      [],
      0.9,
    ],
    ['a data-centre platform, no share: the schema default', base('hopper-cuda13'), [], 0.9],
    ['no platform, no share: the schema default (judged against the host)', base(undefined), [], 0.9],
  ])('%s', (_, raw, sets, want) => {
    expect(parseProfile(raw, 'mine.yaml', sets as string[]).engine.gpuMemoryUtilization).toBe(want);
  });

  it.each([
    ['a Spark platform at its default', base('dgx-spark-gb10'), undefined, []],
    ['a Spark platform at 0.8 on a GB10', base('dgx-spark-gb10', { gpuMemoryUtilization: 0.8 }), spark, []],
    [
      'a Spark platform, --gpu-memory-utilization 0.5 in extraArgs',
      base('dgx-spark-gb10', { extraArgs: ['--gpu-memory-utilization', '0.5'] }),
      spark,
      [],
    ],
    ['no platform on an H100 at 0.9', base(undefined), h100, []],
    [
      'a data-centre platform at 0.95 with no host',
      base('hopper-cuda13', { gpuMemoryUtilization: 0.95 }),
      undefined,
      [],
    ],
  ])('no error: %s', (_, raw, host, want) => {
    expect(shareErrors(raw, host)).toEqual(want);
  });

  it('a Spark platform with a share above 0.8 is an error naming the field, the value and the fix, host or not', () => {
    for (const host of [undefined, spark]) {
      const [e, ...rest] = shareErrors(base('dgx-spark-gb10', { gpuMemoryUtilization: 0.9 }), host);
      expect(rest).toEqual([]);
      expect(e).toMatchObject({ path: 'engine.gpuMemoryUtilization', severity: 'error' });
      expect(e!.message).toContain('0.9 is more than the 0.8 of unified memory (platform dgx-spark-gb10)');
      expect(e!.fix).toContain('--set engine.gpuMemoryUtilization=0.8');
    }
  });

  it('a share above 0.8 given in extraArgs is named by the flag that gave it', () => {
    const [e] = shareErrors(base('dgx-spark-gb10', { extraArgs: ['--gpu-memory-utilization=0.85'] }));
    expect(e).toMatchObject({ path: 'engine.extraArgs[0] (--gpu-memory-utilization)' });
    expect(e!.message).toContain('0.85 is more than the 0.8');
  });

  it("a profile with no platform keeps the schema's 0.9, and on a GB10 it is refused naming the default and the platform that fixes it", () => {
    const [e] = shareErrors(base(undefined), spark);
    expect(e!.message).toContain("0.9 is more than the 0.8 of unified memory (this host's NVIDIA GB10)");
    expect(e!.message).toContain("the schema's default 0.9 is a data-centre GPU's");
    expect(e!.fix).toContain('platform: dgx-spark-gb10 there makes 0.8 its default');
    const planned = shareErrors(base(undefined), { ...spark, read: false, gpusSource: 'platform' });
    expect(planned[0]!.message).toContain('(the NVIDIA GB10 planned for)');
  });

  it('at the CLI: serve --dry-run of such a profile exits 2 with the fix, and without the share it renders 0.8', () => {
    const dir = tempDir('spark-share-');
    try {
      const file = join(dir, 'mine.yaml');
      // the shipped Spark profile as an owner would copy it, without its share
      const shipped = readFileSync(join(ROOT, 'profiles', 'qwen3.5-9b-spark.yaml'), 'utf8');
      expect(shipped).toMatch(/^ {2}gpuMemoryUtilization: /m);
      writeFileSync(file, shipped.replace(/^ {2}gpuMemoryUtilization: .*\n/m, ''));
      const bin = join(ROOT, 'bin', 'sparkctl.js');
      const env = { ...process.env, SPARKCTL_STATE_DIR: join(dir, 'state'), HOME: dir };
      const bad = spawnSync(
        process.execPath,
        [bin, 'serve', file, '--engine', 'sim', '--dry-run', '--set', 'engine.gpuMemoryUtilization=0.9'],
        { encoding: 'utf8', env },
      );
      expect(bad.status).toBe(2);
      expect(bad.stderr).toContain('engine.gpuMemoryUtilization: 0.9 is more than the 0.8 of unified memory');
      expect(bad.stderr).toContain('fix: --set engine.gpuMemoryUtilization=0.8');
      const ok = spawnSync(process.execPath, [bin, 'serve', file, '--engine', 'sim', '--dry-run'], {
        encoding: 'utf8',
        env,
      });
      expect(ok.status, ok.stderr).toBe(0);
      expect(ok.stdout).toContain('--gpu-memory-utilization 0.8');
    } finally {
      rmrf(dir);
    }
  });
});
