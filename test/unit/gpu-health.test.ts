// The serving probe's GPU verdict on real captures (the 2 x H200 bundle, and an edited copy of it).
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseQueryGpu, GPU_FIELDS } from '../../src/nvidia/smi.js';
import { judgeGpus, xidWithTimes } from '../../src/health/gpu.js';
import { FIXTURES } from '../helpers.js';

const rows = (bundle: string) =>
  parseQueryGpu(readFileSync(join(FIXTURES, 'bundles', bundle, 'out', 'cmd-012.stdout'), 'utf8'), GPU_FIELDS);
const T = { tempWarnC: 75, tempUnhealthyC: 82, tempCriticalC: 88 };
const base = { thresholds: T, memLimit: 0.97, reserved: 0.92 };
const withTemp = (t: string[]) => rows('h200x2-device-collect').map((g, k) => ({ ...g, 'temperature.gpu': t[k] }));

describe('judgeGpus', () => {
  it('the real idle capture passes and reports each GPU', () => {
    const v = judgeGpus(rows('h200x2-device-collect'), base);
    expect(v.status).toBe('pass');
    expect(v.detail).toMatch(/^GPU0 34 C 0 %, GPU1 34 C 0 %/);
    expect(v.samples).toEqual([
      { i: 0, util: 0, mem: 0, memTotal: 143771, temp: 34, power: 79.99, ecc: 0, xid: undefined },
      { i: 1, util: 0, mem: 0, memTotal: 143771, temp: 34, power: 77.76, ecc: 0, xid: undefined },
    ]);
  });

  it.each([
    ['74 C: below every threshold', ['74', '34'], 'pass', []],
    ["75 C warns (the documents' first line)", ['75', '34'], 'warn', [[0, 'warn']]],
    ['82 C is unhealthy', ['34', '82'], 'fail', [[1, 'unhealthy']]],
    [
      '88 C is critical',
      ['88', '80'],
      'fail',
      [
        [0, 'critical'],
        [1, 'warn'],
      ],
    ],
  ])('temperature %s', (_n, temps, status, levels) => {
    const v = judgeGpus(withTemp(temps as string[]), base);
    expect(v.status).toBe(status);
    expect(v.findings.map((f) => [f.gpu, f.level])).toEqual(levels);
  });

  it('custom thresholds from the profile', () => {
    const v = judgeGpus(withTemp(['70', '34']), {
      ...base,
      thresholds: { tempWarnC: 60, tempUnhealthyC: 65, tempCriticalC: 90 },
    });
    expect(v.findings).toEqual([{ gpu: 0, level: 'unhealthy', text: 'GPU0: 70 C >= 65 C' }]);
  });

  it('the edited hot capture: temperature, ECC, remap and Xid, each naming its GPU', () => {
    const xid = xidWithTimes(
      readFileSync(join(FIXTURES, 'bundles', 'h200x2-serving-hot', 'out', 'cmd-009.stdout'), 'utf8'),
    );
    expect(xid.map((e) => [e.code, e.ts])).toEqual([
      [48, 8812.402113],
      [63, 8812.40299],
    ]);
    const v = judgeGpus(rows('h200x2-serving-hot'), { ...base, xidNew: xid });
    expect(v.status).toBe('fail');
    expect(v.findings).toEqual([
      { gpu: 1, level: 'critical', text: 'GPU1: 90 C >= 88 C (critical: throttling or shutdown next)' },
      { gpu: 0, level: 'unhealthy', text: 'GPU0: 84 C >= 82 C' },
      { gpu: 1, level: 'unhealthy', text: 'GPU1: 2 uncorrected volatile ECC error(s)' },
      {
        gpu: 1,
        level: 'unhealthy',
        text: 'GPU1: Xid 48 (double-bit ECC error) x1, Xid 63 (ECC page retirement or row remap recorded) x1 since the last probe',
      },
      { gpu: 1, level: 'warn', text: 'GPU1: row remap pending (needs a GPU reset)' },
    ]);
    expect(v.detail).toMatch(/^GPU0 84 C 92 %, GPU1 90 C 92 %: CRITICAL GPU1: 90 C/);
    expect(v.samples.map((s) => [s.i, s.util, s.temp, s.ecc, s.xid])).toEqual([
      [0, 81, 84, 0, 0],
      [1, 75, 90, 2, 2],
    ]);
  });

  it('only the GPUs the server holds are judged', () => {
    const v = judgeGpus(rows('h200x2-serving-hot'), { ...base, mine: [0] });
    expect(v.findings.map((f) => f.gpu)).toEqual([0]);
    expect(v.samples.map((s) => s.i)).toEqual([0]);
  });

  it('memory above the reserved share + headroom warns (another process on the GPU?)', () => {
    const v = judgeGpus(rows('h200x2-serving-hot'), {
      ...base,
      thresholds: { tempWarnC: 100, tempUnhealthyC: 100, tempCriticalC: 100 },
      memLimit: 0.5,
      reserved: 0.45,
      mine: [0],
    });
    expect(v.findings).toEqual([
      {
        gpu: 0,
        level: 'warn',
        text: 'GPU0: 92 % memory used, above the reserved 45 % + headroom (another process on the GPU?)',
      },
    ]);
  });
});
