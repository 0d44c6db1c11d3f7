// preflight's facts as a table: every probe has exactly one source, and the derivers read only what
// the sources read. The nvidia-smi query that preflight, probe and prewarm share falls back to the
// fields the driver knows (driver_version is kmd_version on newer drivers).
import { describe, it, expect } from 'vitest';
import { FACT_SOURCES, FACT_DERIVERS, PROBES, Readings, gatherFacts } from '../../src/preflight/facts.js';
import { GPU_FIELDS } from '../../src/nvidia/smi.js';
import { queryGpus } from '../../src/host/gpu-query.js';
import { readGpuRows } from '../../src/health/gpu.js';
import type { CmdResult, Host } from '../../src/host/host.js';

const ok = (argv: string[], stdout: string, exitCode = 0): CmdResult => ({
  argv,
  stdout,
  stderr: '',
  exitCode,
  durationMs: 1,
});

/** nvidia-smi of a driver that knows kmd_version, not driver_version; every other command is not installed. */
function kmdHost(): Host & { calls: string[][] } {
  const calls: string[][] = [];
  const known = GPU_FIELDS.filter((f) => f !== 'driver_version');
  return {
    kind: 'sim',
    name: 'kmd',
    calls,
    env: () => ({}),
    readFile: async () => null,
    async run(argv) {
      calls.push(argv);
      if (argv[0] !== 'nvidia-smi')
        return { argv, stdout: '', stderr: '', exitCode: null, durationMs: 0, error: 'not-found' };
      if (argv[1] === '--help-query-gpu')
        return ok(argv, [...known, 'kmd_version'].map((f) => `"${f}"\nsome help`).join('\n'));
      const q = argv[1]!.replace('--query-gpu=', '').split(',');
      if (q.includes('driver_version'))
        return { ...ok(argv, '', 2), stdout: 'Field "driver_version" is not a valid field to query.' };
      return ok(
        argv,
        q
          .map((f) => (f === 'index' ? '0' : f === 'kmd_version' ? '595.71.05' : f === 'name' ? 'NVIDIA H200' : '1'))
          .join(', '),
      );
    },
  };
}

describe('fact sources', () => {
  it('every probe name has one source, and every source is a known probe', () => {
    const names = FACT_SOURCES.map((s) => s.probe);
    expect(new Set(names).size).toBe(names.length);
    // 'container' is the one probe with no source in the table: the image it asks about depends on
    // the platform, so run.ts gathers it (gatherContainerFacts) after the platform is detected.
    expect(names).not.toContain('container');
    expect([...names, 'container'].sort()).toEqual([...PROBES].sort());
  });

  it("systeminformation's shell-running parts read last, after every other probe settled", () => {
    expect(FACT_SOURCES.filter((s) => s.late).map((s) => s.probe)).toEqual(['si.os', 'si.disks', 'si.net']);
  });

  it('derivers are pure over the readings: nothing read is nothing claimed', () => {
    const facts = Object.assign({}, ...FACT_DERIVERS.map((d) => d(new Readings(new Map()), { env: {} })));
    expect(facts.gpus).toEqual([]);
    expect(facts.driver.smi).toBe('failed');
    expect(facts.xid.readable).toBe(false);
    expect(facts.model).toBeUndefined();
    expect(facts.listening.size).toBe(0);
  });

  it('a deriver reads a recorded output: dmesg Xid lines become events', () => {
    const dmesg = ok(['dmesg'], '[  12.5] NVRM: Xid (PCI:0000:17:00): 79, pid=1, GPU has fallen off the bus.\n');
    const facts = Object.assign(
      {},
      ...FACT_DERIVERS.map((d) => d(new Readings(new Map([['dmesg', dmesg]])), { env: {} })),
    );
    expect(facts.xid.readable).toBe(true);
    expect(facts.xid.events.map((e: { code: number }) => e.code)).toEqual([79]);
  });
});

describe('each part of the facts is derived once what it reads has answered', () => {
  const FILES = new Set([
    'proc.driver',
    'cuda.json',
    'nccl.h',
    'cudnn.h',
    'limits',
    'conntrack.max',
    'conntrack.count',
    'tcp',
    'tcp6',
    'os-release',
    'dgx-release',
    'meminfo',
  ]);
  /** Readings that record every probe read (a value of each shape for every probe, so no branch stops early). */
  const everything = (seen: Set<string>) => {
    const value = (p: string) =>
      p === 'smi.query'
        ? { r: ok(['nvidia-smi'], '0, NVIDIA H200'), fields: ['index', 'name'] }
        : p === 'smi.q'
          ? {
              r: ok(
                ['nvidia-smi', '-q', '-d', 'GSP_FIRMWARE_VERSION'],
                'CUDA Version : 13.0\nGPU 00000000:00:06.0\n    GSP Firmware Version : 580.159.04\n',
              ),
              fabric: ok(['nvidia-smi'], '00000000:00:06.0, N/A, N/A\n'),
            }
          : p === 'python'
            ? {
                version: '3.12',
                purelib: '/p',
                dists: { torch: '2.9.0', vllm: '0.17.0' },
                torchPy: null,
                vllmMeta: 'Requires-Dist: torch==2.9.0',
              }
            : FILES.has(p)
              ? '1\n'
              : ok([p], '1\n');
    const m = new Map(PROBES.map((p) => [p, value(p)]));
    return new Readings({ get: (k: string) => (seen.add(k), m.get(k as never)) } as unknown as ReadonlyMap<
      string,
      unknown
    >);
  };

  it.each(FACT_DERIVERS.map((d, i) => [i, d] as const))(
    'deriver %i reads only the probes it names, all of them first-wave sources',
    (_i, d) => {
      const seen = new Set<string>();
      d(everything(seen), {
        env: { VLLM_NCCL_SO_PATH: '/x/libnccl.so.2.27.3' },
        loc: { where: '/models/m', kind: 'path' },
      });
      expect([...seen].filter((p) => !d.reads.includes(p as never))).toEqual([]);
      const early = FACT_SOURCES.filter((s) => !s.late).map((s) => s.probe);
      expect(d.reads.filter((p) => !early.includes(p))).toEqual([]);
    },
  );

  it('a deriver that reads a probe it does not name throws, instead of reading a probe that may not have answered', () => {
    const r = new Readings(new Map([['dmesg', ok(['dmesg'], '')]]), ['uname']);
    expect(() => r.cmd('dmesg')).toThrow(/probe dmesg/);
    expect(r.cmd('uname').error).toBe('not-run');
  });
});

describe('one nvidia-smi query for preflight and the serving probe', () => {
  it('an unknown driver_version field: ask the driver, query kmd_version instead', async () => {
    const host = kmdHost();
    const q = await queryGpus(host, 1000);
    expect(q.r.exitCode).toBe(0);
    expect(q.fields).toContain('kmd_version');
    expect(q.fields).not.toContain('driver_version');
    expect(host.calls.map((c) => c[1]?.slice(0, 12))).toEqual(['--query-gpu=', '--help-query', '--query-gpu=']);
  });

  it('probe/prewarm GPU rows and preflight facts both get the driver version through the fallback', async () => {
    const rows = await readGpuRows(kmdHost(), 1000);
    expect(rows?.[0]?.kmd_version).toBe('595.71.05');
    const facts = await gatherFacts(kmdHost(), { probes: new Set(['smi.query']) });
    expect(facts.driver.smi).toBe('ok');
    expect(facts.gpus[0]?.kmd_version).toBe('595.71.05');
  });
});
