import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as S from '../../src/nvidia/smi.js';
import * as X from '../../src/nvidia/xid.js';
import * as R from '../../src/nvidia/ray.js';
import * as H from '../../src/host/parse.js';

import * as U from '../../src/nvidia/units.js';

const P = { ...S, ...X, ...R, ...H };

describe('units: the one definition', () => {
  it.each([
    [U.mibToBytes(143156), '139.8 GiB'],
    [U.mibToBytes(143771), '140.4 GiB'],
    [0.92 * U.mibToBytes(143771), '129.2 GiB'],
    [U.GIB / 2, '0.5 GiB'],
  ])('formatGiB(%d) = %s', (bytes, want) => expect(U.formatGiB(bytes)).toBe(want));
  it('MiB and GiB are binary; conversions round-trip', () => {
    expect([U.KIB, U.MIB, U.GIB]).toEqual([1024, 1048576, 1073741824]);
    expect(U.mibToBytes(143156) / U.MIB).toBe(143156);
  });
});
import { FIXTURES } from '../helpers.js';

const cap = (f: string) => readFileSync(join(FIXTURES, 'captures', f), 'utf8');
const bundleOut = (bundle: string, argv0: string[]) => {
  const dir = join(FIXTURES, 'bundles', bundle);
  const m = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
  const c = m.commands.find(
    (x: { argv: string[] }) => JSON.stringify(x.argv.slice(0, argv0.length)) === JSON.stringify(argv0),
  );
  return readFileSync(join(dir, c.stdout), 'utf8');
};

describe('driver version from /proc', () => {
  it.each([
    [cap('proc-driver-version.txt'), '580.159.04', true],
    ['NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\n', '535.129.03', false],
    ['NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build\n', '580.95.05', true],
    ['NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.26  Release\n', '570.26', false],
    ['garbage', undefined, undefined],
  ])('%#', (text, version, open) => {
    const r = P.parseProcDriverVersion(text);
    expect(r?.version).toBe(version);
    if (version) expect(r?.open).toBe(open);
  });
});

describe('query-gpu CSV', () => {
  it('parses the real noheader,nounits rows of the 2 x H200', () => {
    const rows = P.parseQueryGpu(bundleOut('h200x2-driver580-cuda13', ['nvidia-smi']), P.GPU_FIELDS);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({
      index: '0',
      name: 'NVIDIA H200',
      driver_version: '580.159.04',
      compute_cap: '9.0',
      'memory.total': '143771',
      persistence_mode: 'Enabled',
      'clocks_event_reasons.active': '0x0000000000000001',
    });
    expect(rows[0]!['retired_pages.pending']).toBeUndefined(); // [N/A]
  });

  it('the header-bearing capture with units gives the same values', () => {
    const rows = P.parseQueryGpuWithHeader(cap('query-gpu-csv.txt'));
    expect(rows[1]).toMatchObject({
      index: '1',
      'memory.total': '143771',
      'power.limit': '700.00',
      'utilization.gpu': '0',
    });
  });

  it('glues names that contain commas back together', () => {
    const fields = ['index', 'name', 'memory.total'];
    expect(P.parseQueryGpu('0, NVIDIA A100-SXM4-80GB, rev, 2, 81920\n', fields)[0]).toEqual({
      index: '0',
      name: 'NVIDIA A100-SXM4-80GB, rev, 2',
      'memory.total': '81920',
    });
  });

  it.each(['[N/A]', '[Not Supported]', '[Requested functionality has been deprecated]', 'N/A'])(
    'placeholder %s reads as absent',
    (ph) => {
      expect(P.parseQueryGpu(`0, ${ph}`, ['index', 'memory.total'])[0]!['memory.total']).toBeUndefined();
    },
  );

  it('names the invalid field of a failed query', () => {
    expect(P.invalidField(cap('query-gpu-bad-field.txt'))).toBe('not.a.field');
  });

  it('reads the valid fields from --help-query-gpu, aliases included', () => {
    const known = P.parseHelpQueryGpu(cap('nvidia-smi-help-query-gpu.txt'));
    for (const f of P.GPU_FIELDS) expect(known.has(f), f).toBe(true);
    expect(known.has('clocks_throttle_reasons.active')).toBe(true);
    expect(known.has('not.a.field')).toBe(false);
  });

  it.each([
    'nvidia-h100-80gb-hbm3__590.48.01',
    'nvidia-h100-mig__590.48.01',
    'nvidia-h200__590.48.01',
    'nvidia-h200-mig__590.48.01',
    'nvidia-l40s__595.80',
    'nvidia-geforce-rtx-4080-super__595.71.05',
    'nvidia-geforce-rtx-2080-super__595.71.05',
  ])('corpus %s: one row with a name and a compute capability', (b) => {
    const rows = P.parseQueryGpu(bundleOut(b, ['nvidia-smi']), P.GPU_FIELDS);
    expect(rows.length).toBeGreaterThanOrEqual(1);
    expect(rows[0]!.name).toMatch(/NVIDIA/);
    expect(rows[0]!.compute_cap).toMatch(/^\d+\.\d$/);
  });
});

describe('nvidia-smi -q', () => {
  it('header CUDA version, GSP firmware, InfoROM and fabric per GPU', () => {
    const q = P.parseSmiQ(cap('nvidia-smi-q.txt'));
    expect(q.cudaVersion).toBe('13.0');
    expect(q.gpus).toHaveLength(2);
    expect(q.gpus[0]).toMatchObject({
      gspFirmware: '580.159.04',
      inforomImage: 'G520.0282.02.02',
      fabricState: 'Completed',
      fabricStatus: 'Success',
    });
  });
});

describe('topo -m', () => {
  it('strips the ANSI codes and reads NV18 between the two H200s', () => {
    const t = P.parseTopo(cap('topo-m.txt'))!;
    expect(t.gpus).toEqual(['GPU0', 'GPU1']);
    expect(t.link(0, 1)).toBe('NV18');
    expect(t.numa).toEqual(['0', '0']);
  });
  it('reads SYS and PIX', () => {
    const t = P.parseTopo(
      '\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPIX\tSYS\t0-15\t0\nGPU1\tPIX\t X \tSYS\t0-15\t0\nGPU2\tSYS\tSYS\t X \t16-31\t1\n',
    )!;
    expect(t.link(0, 2)).toBe('SYS');
    expect(t.link(0, 1)).toBe('PIX');
  });
});

describe('throttle reasons', () => {
  it.each([
    ['0x0000000000000001', ['GPU idle']],
    ['0x0000000000000004', ['SW power cap']],
    ['0x0000000000000048', ['HW slowdown', 'HW thermal slowdown']],
    ['0x0000000000000080', ['HW power brake slowdown']],
    ['0x0000000000000000', []],
  ])('%s', (hex, want) => expect(P.decodeThrottle(hex).map((r) => r.reason)).toEqual(want));
});

describe('other host outputs', () => {
  it('nvcc', () => expect(P.parseNvcc('Cuda compilation tools, release 13.0, V13.0.88')).toBe('13.0.88'));
  it('nccl.h', () =>
    expect(P.parseHeaderVersion('#define NCCL_MAJOR 2\n#define NCCL_MINOR 18\n#define NCCL_PATCH 1\n', 'NCCL')).toBe(
      '2.18.1',
    ));
  it('torch/version.py', () =>
    expect(P.parseTorchVersionPy("__version__ = '2.1.2+cu121'\ncuda: Optional[str] = '12.1'\n")).toEqual({
      version: '2.1.2+cu121',
      cuda: '12.1',
    }));
  it('limits', () => {
    const t =
      'Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 1048576              files\nMax locked memory         unlimited            unlimited            bytes\n';
    expect(P.parseLimit(t, 'Max open files')).toBe(1024);
    expect(P.parseLimit(t, 'Max locked memory')).toBe(Infinity);
  });
  it('listening ports from /proc/net/tcp', () => {
    const t =
      '  sl  local_address rem_address   st\n   0: 0100007F:1F40 00000000:0000 0A\n   1: 0100007F:1F41 0100007F:9C40 01\n';
    expect([...P.parseListeningPorts(t)]).toEqual([8000]);
  });
  it('Xid lines', () => {
    const x = P.parseXid(
      '[  5.1] NVRM: Xid (PCI:0000:b1:00): 79, pid=1234, GPU has fallen off the bus.\n[ 6.0] NVRM: Xid (PCI:0000:b2:00): 13, Graphics Exception',
    );
    expect(x.map((e) => e.code)).toEqual([79, 13]);
  });
  it('ray status', () => {
    const t =
      '======== Autoscaler status ========\nNode status\n---------------------------------------------------------------\nActive:\n 1 node_aaa\n 1 node_bbb\nPending:\n (no pending nodes)\nResources\n---------------------------------------------------------------\nUsage:\n 0.0/64.0 CPU\n 0.0/16.0 GPU\n';
    expect(P.parseRayStatus(t)).toEqual({ nodes: 2, gpus: 16, gpusUsed: 0 });
  });
});
