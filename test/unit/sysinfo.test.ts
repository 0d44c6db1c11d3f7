import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { ReplayHost } from '../../src/host/replay.js';
import { RecordingHost, type Host } from '../../src/host/host.js';
import { writeBundle } from '../../src/host/bundle.js';
import { pickSysinfo, type SysinfoPart, type SysinfoResult } from '../../src/host/sysinfo.js';
import { runPreflight, selectChecks } from '../../src/preflight/run.js';
import { loadProfile } from '../../src/profiles/load.js';
import { GIB } from '../../src/nvidia/units.js';
import { FIXTURES, tempDir, rmrf } from '../helpers.js';

const X2 = join(FIXTURES, 'bundles', 'h200x2-device-collect');

/** What systeminformation returns, with the identifying fields it also returns (which must never travel). */
const RAW: Record<SysinfoPart, unknown> = {
  cpu: {
    manufacturer: 'Intel',
    brand: 'Xeon Platinum 8480+',
    speed: 2,
    cores: 3,
    physicalCores: 3,
    processors: 1,
    serial: 'CPU-SERIAL-1',
  },
  mem: { total: 64 * GIB, available: 10 * GIB, swaptotal: 0, used: 1 },
  os: {
    platform: 'linux',
    distro: 'Ubuntu',
    release: '24.04.1 LTS',
    codename: 'noble',
    kernel: '6.8.0-45-generic',
    arch: 'x64',
    serial: 'machine-id-abc',
    hostname: 'gpu-7',
  },
  disks: [{ fs: '/dev/nvme0n1p2', type: 'ext4', mount: '/', size: 1e12, available: 6e11, use: 40 }],
  net: [
    {
      iface: 'lo',
      ip4: '127.0.0.1',
      operstate: 'unknown',
      speed: null,
      mtu: 65536,
      internal: true,
      virtual: false,
      mac: '00:00:00:00:00:00',
    },
    {
      iface: 'ens1',
      ip4: '10.0.0.7',
      operstate: 'up',
      speed: 10000,
      mtu: 9000,
      internal: false,
      virtual: false,
      mac: 'aa:bb:cc:dd:ee:ff',
      type: 'wired',
    },
  ],
};

/** The real 2 x H200 bundle, answering systeminformation as a live host would. */
class WithSysinfo implements Host {
  readonly kind = 'replay' as const;
  readonly name = 'with-sysinfo';
  inner = new ReplayHost(X2);
  constructor(private raw = RAW) {}
  run(argv: string[]) {
    return this.inner.run(argv);
  }
  readFile(p: string) {
    return this.inner.readFile(p);
  }
  hasFile(p: string) {
    return this.inner.hasFile(p);
  }
  env() {
    return this.inner.env();
  }
  async sysinfo<P extends SysinfoPart>(part: P): Promise<SysinfoResult<P>> {
    return { ok: true, value: pickSysinfo(part, this.raw[part]), durationMs: 7 };
  }
}

describe('systeminformation readings', () => {
  it('keep only the typed fields: no serial, machine id, hostname or MAC', () => {
    const all = JSON.stringify((['cpu', 'mem', 'os', 'disks', 'net'] as const).map((p) => pickSysinfo(p, RAW[p])));
    for (const leak of ['CPU-SERIAL-1', 'machine-id-abc', 'gpu-7', 'aa:bb:cc:dd:ee:ff'])
      expect(all).not.toContain(leak);
    expect(pickSysinfo('cpu', RAW.cpu)).toEqual({
      manufacturer: 'Intel',
      brand: 'Xeon Platinum 8480+',
      speedGHz: 2,
      cores: 3,
      physicalCores: 3,
      sockets: 1,
    });
    expect(pickSysinfo('net', 'not a list')).toEqual([]);
    expect(pickSysinfo('mem', null)).toEqual({
      totalBytes: undefined,
      availableBytes: undefined,
      swapTotalBytes: undefined,
    });
  });

  it('drive host.cpu and host.memory: 3 cores for 2 GPU workers warns, 10 GiB free for ~17 GiB of weights warns', async () => {
    const rep = await runPreflight(new WithSysinfo(), {
      profile: loadProfile('qwen3.5-9b').profile,
      only: 'host.cpu,host.memory',
    });
    const by = Object.fromEntries(rep.checks.map((c) => [c.id, c]));
    expect(by['host.cpu']).toMatchObject({
      status: 'warn',
      observed: '3 logical (3 physical) cores, Intel Xeon Platinum 8480+',
      expected: '>= 4 cores (one per GPU worker, the API server, the engine core)',
    });
    expect(by['host.memory']!.status).toBe('warn');
    expect(by['host.memory']!.observed).toBe('64.0 GiB total, 10.0 GiB available');
    expect(rep.system.cpu?.cores).toBe(3);
  });

  it('host.os and host.network run only on request; a multi-node profile wants a fast link', async () => {
    expect(selectChecks().map((c) => c.id)).not.toContain('host.os');
    expect(selectChecks().map((c) => c.id)).not.toContain('host.network');
    expect(selectChecks('host').map((c) => c.id)).toEqual(expect.arrayContaining(['host.os', 'host.network']));
    const single = await runPreflight(new WithSysinfo(), {
      profile: loadProfile('qwen3.5-9b').profile,
      only: 'host.os,host.network',
    });
    expect(single.checks.map((c) => [c.id, c.status, c.observed])).toEqual([
      ['host.os', 'pass', 'Ubuntu 24.04.1 LTS (noble), kernel 6.8.0-45-generic, x64'],
      ['host.network', 'pass', 'ens1 10 Gb/s MTU 9000'],
    ]);
    const multi = await runPreflight(new WithSysinfo(), {
      profile: loadProfile('qwen3.5-9b', { sets: ['parallel.nodes=2'] }).profile,
      only: 'host.network',
    });
    expect(multi.checks[0]).toMatchObject({ status: 'warn', expected: expect.stringContaining('>= 25 Gb/s') });
  });

  it('a default preflight never asks for the slow parts (os, net)', async () => {
    const asked: string[] = [];
    const h = new WithSysinfo();
    const orig = h.sysinfo.bind(h);
    h.sysinfo = (async (part: SysinfoPart) => (asked.push(part), orig(part))) as typeof h.sysinfo;
    await runPreflight(h, {});
    expect(asked.sort()).toEqual(['cpu', 'mem']);
  });

  it('collect writes them into the bundle; preflight --from replays the same verdicts and values', async () => {
    const dir = tempDir();
    try {
      const rec = new RecordingHost(new WithSysinfo());
      const { gatherFacts } = await import('../../src/preflight/facts.js');
      await gatherFacts(rec);
      await writeBundle(dir, rec);
      const m = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
      expect(m.systeminformation).toBe('systeminformation.json');
      const sec = readFileSync(join(dir, 'systeminformation.json'), 'utf8');
      expect(sec).not.toContain('aa:bb:cc:dd:ee:ff');
      const opts = { profile: loadProfile('qwen3.5-9b').profile, only: 'host.' };
      const live = await runPreflight(new WithSysinfo(), opts);
      const replay = await runPreflight(new ReplayHost(dir), opts);
      expect(replay.checks.map((c) => [c.id, c.status, c.observed])).toEqual(
        live.checks.map((c) => [c.id, c.status, c.observed]),
      );
      expect(replay.system).toEqual(live.system);
    } finally {
      rmrf(dir);
    }
  });

  it('an old bundle (before systeminformation) replays: those checks skip and say why', async () => {
    const rep = await runPreflight(new ReplayHost(X2), { only: 'host.cpu,host.memory,host.os' });
    for (const c of rep.checks) {
      expect(c.status, c.id).toBe('skip');
      expect(c.observed, c.id).toMatch(/not in the bundle/);
    }
  });

  it('a damaged systeminformation section is bad input naming the file, not a crash', async () => {
    const dir = tempDir();
    try {
      const rec = new RecordingHost(new WithSysinfo());
      const { gatherFacts } = await import('../../src/preflight/facts.js');
      await gatherFacts(rec, { probes: new Set(['si.cpu']) });
      await writeBundle(dir, rec);
      writeFileSync(join(dir, 'systeminformation.json'), '{"library":"x","readings":{"cpu":{"ok":"yes"}}}');
      expect(() => new ReplayHost(dir)).toThrow(/systeminformation\.json is not a systeminformation section/);
      writeFileSync(join(dir, 'systeminformation.json'), '{');
      expect(() => new ReplayHost(dir)).toThrow(/systeminformation\.json is not JSON/);
    } finally {
      rmrf(dir);
    }
  });
});

describe('the bundle collected on a real 2 x H200 with systeminformation (device machine)', () => {
  const B = join(FIXTURES, 'bundles', 'h200x2-device-si-20261130');
  it('replays the verdicts seen live there, with the host facts and the typed GPU memory', async () => {
    const rep = await runPreflight(new ReplayHost(B), {
      profile: loadProfile('qwen3.5-9b').profile,
      only: 'driver.,gpu.,host.,torch.,vllm.',
    });
    const by = Object.fromEntries(rep.checks.map((c) => [c.id, c]));
    expect(rep.checks.filter((c) => c.status === 'fail').map((c) => c.id)).toEqual(['vllm.installed']);
    expect(rep.checks.filter((c) => c.status === 'warn').map((c) => c.id)).toEqual(['host.nofile']);
    expect(by['host.cpu']!.observed).toBe('32 logical (32 physical) cores, Intel Xeon® Processor');
    expect(by['host.memory']!.observed).toMatch(/^251\.8 GiB total, 251\.\d GiB available$/);
    expect(by['host.os']).toMatchObject({
      status: 'pass',
      observed: 'Ubuntu 24.04.3 LTS (noble), kernel 6.18.44-fc-v657-gpu, x64',
    });
    expect(by['host.network']!.observed).toBe('eth0 speed unknown MTU 1400');
    expect(by['gpu.memory']!.observed).toBe('GPU0 139.8 GiB free, GPU1 139.8 GiB free');
    expect(rep.gpus.map((g) => [g.index, g.memoryTotalMiB, g.memoryFreeMiB, g.computeCapability])).toEqual([
      [0, 143771, 143156, '9.0'],
      [1, 143771, 143156, '9.0'],
    ]);
    const { gatherFacts } = await import('../../src/preflight/facts.js');
    expect((await gatherFacts(new ReplayHost(B))).system.disks).toEqual([
      { fs: '/dev/vda', type: 'ext4', mount: '/', sizeBytes: 270553174016, availableBytes: 137262161920 },
    ]);
  });
});

describe('CPU and memory from /proc (Linux, without the library)', () => {
  const block = (kv: Record<string, string>) =>
    Object.entries(kv)
      .map(([k, v]) => `${k}\t: ${v}`)
      .join('\n');
  const xeon = (cpu: number, socket: number, core: number) =>
    block({
      processor: String(cpu),
      vendor_id: 'GenuineIntel',
      'model name': 'Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz',
      'physical id': String(socket),
      'core id': String(core),
    });
  const grace = (cpu: number) =>
    block({ processor: String(cpu), BogoMIPS: '2000.00', 'CPU implementer': '0x41', 'CPU part': '0xd4f' });
  it.each([
    // 2 sockets x 2 cores x 2 threads
    [
      'two-socket Xeon with hyper-threads',
      [
        xeon(0, 0, 0),
        xeon(1, 0, 1),
        xeon(2, 1, 0),
        xeon(3, 1, 1),
        xeon(4, 0, 0),
        xeon(5, 0, 1),
        xeon(6, 1, 0),
        xeon(7, 1, 1),
      ].join('\n\n'),
      undefined,
      { manufacturer: 'Intel', brand: 'Xeon® Platinum 8480+', speedGHz: 2, cores: 8, physicalCores: 4, sockets: 2 },
    ],
    [
      'Grace (ARM: no model name, no core ids)',
      [0, 1, 2, 3].map(grace).join('\n\n'),
      3_456_000,
      { manufacturer: 'ARM', brand: 'Neoverse-V2', speedGHz: 3.46, cores: 4, physicalCores: 4, sockets: 1 },
    ],
    [
      'a VM naming only its family',
      block({
        processor: '0',
        vendor_id: 'AuthenticAMD',
        'model name': 'AMD EPYC',
        'physical id': '0',
        'core id': '0',
      }),
      undefined,
      { manufacturer: 'AMD', brand: 'EPYC', speedGHz: undefined, cores: 1, physicalCores: 1, sockets: 1 },
    ],
    [
      'nothing readable',
      'garbage',
      undefined,
      {
        manufacturer: undefined,
        brand: undefined,
        speedGHz: undefined,
        cores: undefined,
        physicalCores: undefined,
        sockets: undefined,
      },
    ],
  ])('%s', async (_n, text, maxKHz, want) => {
    const { procCpu } = await import('../../src/host/sysinfo.js');
    expect(procCpu(text, maxKHz)).toEqual(want);
  });

  it.each([
    [
      'MemAvailable',
      'MemTotal:       24683584 kB\nMemFree:  100 kB\nMemAvailable:   22042468 kB\nSwapTotal:             0 kB\n',
      { totalBytes: 24683584 * 1024, availableBytes: 22042468 * 1024, swapTotalBytes: 0 },
    ],
    [
      'an old kernel without MemAvailable',
      'MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 20 kB\nCached: 300 kB\n',
      { totalBytes: 1024000, availableBytes: 420 * 1024, swapTotalBytes: undefined },
    ],
  ])('memory, %s', async (_n, text, want) => {
    const { procMem } = await import('../../src/host/sysinfo.js');
    expect(procMem(text)).toEqual(want);
  });

  it.skipIf(process.platform !== 'linux')(
    'agree with systeminformation on this host (cores, sockets, memory)',
    async () => {
      const { readSysinfo } = await import('../../src/host/sysinfo.js');
      const si = (await import('systeminformation')).default;
      const [cpu, mem, lib, libMem] = await Promise.all([
        readSysinfo('cpu', 10_000),
        readSysinfo('mem', 10_000),
        si.cpu(),
        si.mem(),
      ]);
      expect(cpu.ok && mem.ok).toBe(true);
      if (!cpu.ok || !mem.ok) return;
      expect(cpu.value).toMatchObject({
        manufacturer: lib.manufacturer,
        brand: lib.brand,
        cores: lib.cores,
        physicalCores: lib.physicalCores,
        sockets: lib.processors,
      });
      expect(mem.value.totalBytes).toBe(libMem.total);
      expect(mem.value.swapTotalBytes).toBe(libMem.swaptotal);
    },
  );
});
