import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { ReplayHost } from '../../src/host/replay.js';
import { RecordingHost, type Host, type CmdResult } from '../../src/host/host.js';
import { runPreflight, selectChecks, probesFor } from '../../src/preflight/run.js';
import { detectPlatform } from '../../src/preflight/verdict.js';
import { CHECKS } from '../../src/preflight/checks.js';
import { gatherFacts } from '../../src/preflight/facts.js';
import { loadProfile } from '../../src/profiles/load.js';
import { GPU_FIELDS, SMI_FABRIC } from '../../src/nvidia/smi.js';
import { FIXTURES } from '../helpers.js';

const H200 = join(FIXTURES, 'bundles', 'h200x2-driver580-cuda13');

/** The real capture with some answers edited: the way a broken host differs from a good one. */
class EditedHost implements Host {
  readonly kind = 'replay' as const;
  readonly name = 'edited';
  constructor(
    private inner: ReplayHost,
    private edits: {
      run?: (argv: string[], r: CmdResult) => CmdResult | undefined;
      files?: Record<string, string | null>;
      env?: Record<string, string | undefined>;
    } = {},
  ) {}
  async run(argv: string[]) {
    const r = await this.inner.run(argv);
    return this.edits.run?.(argv, r) ?? r;
  }
  hasFile(p: string) {
    return (this.edits.files && p in this.edits.files) || this.inner.hasFile(p);
  }
  async readFile(p: string) {
    if (this.edits.files && p in this.edits.files) return this.edits.files[p]!;
    return this.inner.readFile(p);
  }
  env() {
    return { ...this.inner.env(), ...this.edits.env };
  }
}

const edited = (edits: ConstructorParameters<typeof EditedHost>[1]) => new EditedHost(new ReplayHost(H200), edits);
/** the GPU query (not smi.q's narrow fabric query, which is its own probe) */
const isQuery = (argv: string[]) =>
  argv[0] === 'nvidia-smi' && argv[1]!.startsWith('--query-gpu=') && argv[1] !== SMI_FABRIC[1];
/** Edit one column of every query-gpu row. */
const setColumn = (field: string, value: string) => (argv: string[], r: CmdResult) => {
  if (!isQuery(argv)) return undefined;
  const i = GPU_FIELDS.indexOf(field as never);
  return {
    ...r,
    stdout: r.stdout
      .split('\n')
      .map((l) =>
        l
          ? l
              .split(', ')
              .map((v, j) => (j === i ? value : v))
              .join(', ')
          : l,
      )
      .join('\n'),
  };
};
const status = async (host: Host, id: string, profile = 'qwen3.5-9b') => {
  const rep = await runPreflight(host, {
    profile: loadProfile(profile, { sets: ['parallel.replicas=1'] }).profile,
    only: id,
  });
  return rep.checks[0]!;
};

describe('preflight on the real 2 x H200 capture', () => {
  it('picks hopper-cuda13 and says why; the only failure is vLLM missing', async () => {
    const rep = await runPreflight(new ReplayHost(H200), { profile: loadProfile('qwen3.5-9b').profile });
    expect(rep.platform).toBe('hopper-cuda13');
    expect(rep.platformReason).toMatch(/2 x NVIDIA H200 on x86_64, driver 580\.159\.04 matches hopper-cuda13/);
    expect(rep.checks.filter((c) => c.status === 'fail').map((c) => c.id)).toEqual(['vllm.installed']);
    const byId = Object.fromEntries(rep.checks.map((c) => [c.id, c]));
    expect(byId['driver.version']!.observed).toBe('580.159.04 (open kernel module)');
    expect(byId['nccl.version']!.observed).toContain("vLLM loads 2.28.9 (PyTorch's bundled NCCL");
    expect(byId['gpu.topology']!.observed).toBe('GPU0-GPU1 NV18');
    expect(byId['driver.version']!.durationMs).toBe(60);
  });

  it('the documents baseline forced on it fails driver, CUDA and PyTorch with fixes', async () => {
    const rep = await runPreflight(new ReplayHost(H200), { platform: 'dgx-a100-os6' });
    const f = Object.fromEntries(rep.checks.map((c) => [c.id, c]));
    expect(f['driver.version']).toMatchObject({
      status: 'fail',
      expected: 'exactly 535.129.03 (platform dgx-a100-os6)',
    });
    expect(f['cuda.toolkit']).toMatchObject({ status: 'fail', expected: 'one of 12.1, 12.3' });
    expect(f['torch.build']!.status).toBe('fail');
    expect(f['gpu.model']!.status).toBe('fail');
    for (const c of rep.checks.filter((c) => c.status === 'fail')) expect(c.fix, c.id).toBeTruthy();
  });
});

describe('checks over edited copies of the real capture', () => {
  it('a stale CUDA 11.8 on PATH ahead of CUDA_HOME', async () => {
    const h = edited({ env: { PATH: '/usr/local/cuda-11.8/bin:/usr/local/cuda/bin:/usr/bin' } });
    const c = await status(h, 'cuda.path-hygiene');
    expect(c.status).toBe('fail');
    expect(c.observed).toContain('PATH has /usr/local/cuda-11.8/bin ahead of CUDA 13.0');
  });

  it('a leftover ld.so.conf.d entry', async () => {
    const h = edited({
      run: (argv, r) =>
        argv[2]?.includes('ld.so.conf.d')
          ? {
              ...r,
              exitCode: 0,
              stdout: '/etc/ld.so.conf.d/cuda-12-1.conf:/usr/local/cuda-12.1/targets/x86_64-linux/lib\n',
            }
          : undefined,
    });
    expect((await status(h, 'cuda.path-hygiene')).observed).toContain('cuda-12-1.conf still adds /usr/local/cuda-12.1');
  });

  it('a busy GPU: a leftover vLLM holds memory', async () => {
    const h = edited({
      run: (argv, r) => {
        if (argv[1]?.startsWith('--query-compute-apps'))
          return {
            ...r,
            stdout: '4242, /opt/venv/bin/python3 -m vllm.entrypoints.openai.api_server, 120000, 00000000:00:06.0\n',
          };
        return setColumn('memory.free', '23000')(argv, r);
      },
    });
    const p = await status(h, 'gpu.processes');
    expect(p.status).toBe('fail');
    expect(p.observed).toContain('PID 4242');
    expect(p.observed).toContain('on GPU0');
    expect(p.fix).toContain('kill 4242');
    const m = await status(h, 'gpu.memory');
    expect(m.status).toBe('fail');
    expect(m.observed).toMatch(
      /GPU0 has 22\.5 GiB free of 140\.4 GiB, vLLM wants 129\.2 GiB \(0\.92 of it\); held by PID 4242 \/opt\/venv\/bin\/python3 -m vllm\.entrypoints\.openai\.api_server \(117\.2 GiB\)/,
    );
  });

  it.each([
    ['0x0000000000000040', 'fail', 'HW thermal slowdown'],
    ['0x0000000000000080', 'fail', 'HW power brake slowdown'],
    ['0x0000000000000008', 'fail', 'HW slowdown'],
  ])('throttle %s -> %s', async (hex, want, reason) => {
    const c = await status(edited({ run: setColumn('clocks_event_reasons.active', hex) }), 'gpu.throttle');
    expect(c.status).toBe(want);
    expect(c.observed).toContain(reason);
  });

  it('SW power cap warns only under load', async () => {
    const idle = await status(
      edited({ run: setColumn('clocks_event_reasons.active', '0x0000000000000004') }),
      'gpu.throttle',
    );
    expect(idle.status).toBe('pass');
    const busy = await status(
      edited({
        run: (a, r) =>
          setColumn('utilization.gpu', '97')(
            a,
            setColumn('clocks_event_reasons.active', '0x0000000000000004')(a, r) ?? r,
          ),
      }),
      'gpu.throttle',
    );
    expect(busy.status).toBe('warn');
  });

  it('kernel module and user space of different releases: the real cause', async () => {
    const h = edited({
      run: (argv, r) =>
        isQuery(argv)
          ? {
              ...r,
              exitCode: 18,
              stdout: 'Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n',
            }
          : undefined,
    });
    const c = await status(h, 'driver.version');
    expect(c.status).toBe('fail');
    expect(c.observed).toContain('kernel module 580.159.04 but user-space libraries differ');
    expect(c.fix).toMatch(/reboot/);
  });

  it('driver 610: driver_version deprecated, the module version still answers', async () => {
    const c = await status(
      edited({ run: setColumn('driver_version', '[Requested functionality has been deprecated]') }),
      'driver.version',
    );
    expect(c).toMatchObject({ status: 'pass', observed: '580.159.04 (open kernel module)' });
  });

  it('power limit below the documents 300 W', async () => {
    const c = (
      await runPreflight(edited({ run: setColumn('enforced.power.limit', '200.00') }), {
        platform: 'dgx-a100-os6',
        only: 'gpu.power-limit',
      })
    ).checks[0]!;
    expect(c).toMatchObject({ status: 'fail', expected: '>= 300 W (dgx-a100-os6)' });
    expect(c.fix).toContain('nvidia-smi -pl 300');
  });

  it('uncorrected ECC and a failed remap fail; a pending remap warns', async () => {
    expect(
      (await status(edited({ run: setColumn('ecc.errors.uncorrected.volatile.total', '3') }), 'gpu.ecc')).status,
    ).toBe('fail');
    expect((await status(edited({ run: setColumn('remapped_rows.failure', 'Yes') }), 'gpu.ecc')).status).toBe('fail');
    expect((await status(edited({ run: setColumn('remapped_rows.pending', 'Yes') }), 'gpu.ecc')).status).toBe('warn');
  });

  it('MIG on with TP 2 fails', async () => {
    expect((await status(edited({ run: setColumn('mig.mode.current', 'Enabled') }), 'gpu.mig')).status).toBe('fail');
  });

  it('Xid 79 in the kernel log fails', async () => {
    const c = await status(
      edited({
        run: (argv, r) =>
          argv[0] === 'dmesg'
            ? { ...r, stdout: '[ 9.1] NVRM: Xid (PCI:0000:00:06): 79, pid=0, GPU has fallen off the bus.\n' }
            : undefined,
      }),
      'gpu.xid',
    );
    expect(c.status).toBe('fail');
    expect(c.observed).toContain('Xid 79 (GPU has fallen off the bus) x1');
  });

  it('a full conntrack table warns with the real fix, not "unload the module"', async () => {
    const c = await status(
      edited({ files: { '/proc/sys/net/netfilter/nf_conntrack_count': '250000\n' } }),
      'host.conntrack',
    );
    expect(c.status).toBe('warn');
    expect(c.fix).toContain('nf_conntrack_max=1048576');
  });

  it('a port that is listening fails host.port', async () => {
    const c = await status(
      edited({
        files: { '/proc/net/tcp': '  sl  local_address rem_address   st\n   0: 00000000:1F40 00000000:0000 0A\n' },
      }),
      'host.port',
    );
    // whose port it is and the --set that moves it (no holder: a bundle knows nothing of sparkctl's registry)
    expect(c).toMatchObject({
      status: 'fail',
      observed: expect.stringMatching(/^port\(s\) 8000 already listening: 8000 is \S+-0's \(server\.port\)$/),
    });
    expect(c.fix).toMatch(
      /^--set server\.port=N; or sparkctl status \(a server of ours\?\) or ss -ltnp 'sport = :8000'$/,
    );
  });

  it('small /dev/shm (a container without --ipc=host) fails', async () => {
    const c = await status(
      edited({
        run: (argv, r) =>
          argv[0] === 'df'
            ? {
                ...r,
                stdout: 'Filesystem 1024-blocks Used Available Capacity Mounted on\nshm 65536 0 65536 0% /dev/shm\n',
              }
            : undefined,
      }),
      'host.shm',
    );
    expect(c.status).toBe('fail');
    expect(c.fix).toContain('--ipc=host');
  });

  it('NCCL_DEBUG=INFO in production warns', async () => {
    expect((await status(edited({ env: { NCCL_DEBUG: 'INFO' } }), 'nccl.version')).status).toBe('warn');
  });

  it('a torch that vLLM was not built against fails (the cu121 vs cu124 trap)', async () => {
    const h = edited({
      run: (argv, r) =>
        argv[0] === 'python3' ? { ...r, stdout: r.stdout + 'dist vllm-0.17.0.dist-info\n' } : undefined,
      files: {
        '/opt/torch/.venv/lib/python3.12/site-packages/vllm-0.17.0.dist-info/METADATA':
          'Name: vllm\nVersion: 0.17.0\nRequires-Dist: torch==2.10.0\n',
      },
    });
    const c = await status(h, 'torch.build');
    expect(c.status).toBe('fail');
    expect(c.observed).toContain('built against torch 2.10.0');
  });

  it('GB10: memory "Not Supported" is read from /proc/meminfo', async () => {
    const h = edited({
      run: (a, r) => {
        let x = setColumn('memory.total', '[Not Supported]')(a, r);
        if (x) x = setColumn('memory.free', '[Not Supported]')(a, x);
        if (x) x = setColumn('name', 'NVIDIA GB10')(a, x);
        return x;
      },
      files: { '/proc/meminfo': 'MemTotal:       124572388 kB\n' },
    });
    const rep = await runPreflight(h, { profile: loadProfile('qwen3.5-9b-spark').profile, only: 'gpu.memory' });
    expect(rep.checks[0]!.observed).toMatch(/GPU0 118\.8 GiB free/);
  });
  // vLLM on an integrated GPU takes psutil's MemAvailable as free memory (utils/mem_utils.py MemorySnapshot.measure)
  const gb10 = (meminfo: string) =>
    edited({
      run: (a, r) => {
        let x = setColumn('memory.total', '[Not Supported]')(a, r);
        if (x) x = setColumn('memory.free', '[Not Supported]')(a, x);
        if (x) x = setColumn('name', 'NVIDIA GB10')(a, x);
        return x;
      },
      files: { '/proc/meminfo': meminfo },
    });
  it('GB10: free is MemAvailable, as vLLM reads it; short of the share, the fix names the page cache', async () => {
    // 121.7 GiB total, 60 GiB available: the profile's 0.6 x 121.7 = 73.0 GiB is more than that
    const h = gb10('MemTotal:       127611904 kB\nMemAvailable:    62914560 kB\nCached:          31457280 kB\n');
    const rep = await runPreflight(h, { profile: loadProfile('qwen3.5-9b-spark').profile, only: 'gpu.memory' });
    const c = rep.checks[0]!;
    expect(c.status).toBe('fail');
    expect(c.observed).toMatch(/60\.0 GiB free of 121\.7 GiB/);
    expect(c.fix).toMatch(/drop_caches/);
  });
  it("GB10: enough available but a large page cache: a warning that vLLM's profiling can starve the KV cache, fixed by a KV size in bytes", async () => {
    const h = gb10('MemTotal:       127611904 kB\nMemAvailable:   115343360 kB\nCached:          31457280 kB\n');
    const rep = await runPreflight(h, { profile: loadProfile('qwen3.5-9b-spark').profile, only: 'gpu.memory' });
    const c = rep.checks[0]!;
    expect(c.status).toBe('warn');
    expect(c.observed).toMatch(/page cache 30\.0 GiB/);
    expect(c.fix).toMatch(/PR #286.*engine\.kvCacheMemoryBytes/);
    const fixed = await runPreflight(h, {
      profile: {
        ...loadProfile('qwen3.5-9b-spark').profile,
        engine: { ...loadProfile('qwen3.5-9b-spark').profile.engine, kvCacheMemoryBytes: 20 * 2 ** 30 },
      },
      only: 'gpu.memory',
    });
    expect(fixed.checks[0]!.status).toBe('pass');
  });
});

describe('facts', () => {
  it('an unknown query field fails the whole query: the retry asks the driver which fields it knows', async () => {
    const calls: string[][] = [];
    const host: Host = {
      kind: 'real',
      name: 'fake',
      async run(argv) {
        calls.push(argv);
        if (isQuery(argv) && argv[1]!.includes('gsp.mode.current'))
          return {
            argv,
            stdout: 'Field "gsp.mode.current" is not a valid field to query.\n\n',
            stderr: '',
            exitCode: 2,
            durationMs: 1,
          };
        if (argv[1] === '--help-query-gpu')
          return {
            argv,
            stdout: GPU_FIELDS.filter((f) => f !== 'gsp.mode.current')
              .map((f) => `"${f}"\nhelp\n`)
              .join('\n'),
            stderr: '',
            exitCode: 0,
            durationMs: 1,
          };
        if (isQuery(argv))
          return {
            argv,
            stdout: '0, NVIDIA A100-SXM4-80GB' + ', 1'.repeat(GPU_FIELDS.length - 3) + '\n',
            stderr: '',
            exitCode: 0,
            durationMs: 1,
          };
        return { argv, stdout: '', stderr: '', exitCode: null, durationMs: 0, error: 'not-found' };
      },
      async readFile() {
        return null;
      },
      env: () => ({}),
    };
    const f = await gatherFacts(host);
    expect(f.gpuFields).not.toContain('gsp.mode.current');
    expect(f.gpus[0]!.name).toBe('NVIDIA A100-SXM4-80GB');
    expect(calls.filter(isQuery)).toHaveLength(2);
  });

  it('a hung probe cannot hang preflight: each has its deadline', async () => {
    const { RealHost } = await import('../../src/host/real.js');
    const h = new RealHost(300);
    const s = performance.now();
    const r = await h.run(['sleep', '5']);
    expect(r.error).toBe('timeout');
    expect(performance.now() - s).toBeLessThan(2000);
  });
});

describe('gpu.count says the fix that helps', () => {
  it.each([
    ['h200x1-device-collect', [], '--set parallel.tensor=1'],
    ['h200x2-driver580-cuda13', ['parallel.tensor=1', 'parallel.replicas=4'], '--set parallel.replicas=2'],
  ] as const)('%s %j', async (bundle, sets, fix) => {
    const rep = await runPreflight(new ReplayHost(join(FIXTURES, 'bundles', bundle)), {
      profile: loadProfile('qwen3.5-9b', { sets: [...sets] }).profile,
      only: 'gpu.count',
    });
    expect(rep.checks[0]).toMatchObject({ status: 'fail' });
    expect(rep.checks[0]!.fix).toContain(fix);
  });
});

describe("typed per-GPU facts (what serve plans with, not the checks' text)", () => {
  it('the real 2 x H200 collect: memory in MiB, compute capability, no holders', async () => {
    const rep = await runPreflight(new ReplayHost(join(FIXTURES, 'bundles', 'h200x2-device-collect')), {
      profile: loadProfile('qwen3.5-9b').profile,
    });
    expect(rep.checks.find((c) => c.id === 'gpu.memory')!.observed).toBe('GPU0 139.8 GiB free, GPU1 139.8 GiB free');
    expect(rep.gpus).toEqual([
      {
        index: 0,
        name: 'NVIDIA H200',
        uuid: 'GPU-4da135ec-e162-3301-4da3-80e71f51c473',
        busId: '00000000:00:06.0',
        memoryTotalMiB: 143771,
        memoryFreeMiB: 143156,
        computeCapability: '9.0',
        processes: [],
      },
      {
        index: 1,
        name: 'NVIDIA H200',
        uuid: 'GPU-db35c851-6f80-aa18-f9f4-4b80b2f6895e',
        busId: '00000000:00:07.0',
        memoryTotalMiB: 143771,
        memoryFreeMiB: 143156,
        computeCapability: '9.0',
        processes: [],
      },
    ]);
  });

  it('a process is placed on the GPU of its bus id (any case, 8- or 4-digit domain); the others stay empty', async () => {
    const h = edited({
      run: (argv, r) => {
        if (argv[1]?.startsWith('--query-compute-apps'))
          return {
            ...r,
            exitCode: 0,
            stdout: '4242, /opt/venv/bin/python3, 120000, 0000:00:06.0\n77, ray::RayWorker, 512, 00000000:00:07.0\n',
          };
        return setColumn('memory.free', '23000')(argv, r);
      },
    });
    const rep = await runPreflight(h, { profile: loadProfile('qwen3.5-9b').profile, only: 'gpu.memory' });
    expect(rep.gpus.map((g) => [g.index, g.memoryFreeMiB, g.processes])).toEqual([
      [0, 23000, [{ pid: 4242, name: '/opt/venv/bin/python3', usedMiB: 120000 }]],
      [1, 23000, [{ pid: 77, name: 'ray::RayWorker', usedMiB: 512 }]],
    ]);
  });

  it('GB10: memory "Not Supported" stays unknown in the typed facts (no figure is invented)', async () => {
    const h = edited({
      run: (a, r) =>
        setColumn('memory.total', '[Not Supported]')(a, setColumn('memory.free', '[Not Supported]')(a, r) ?? r),
    });
    const rep = await runPreflight(h, { only: 'gpu.count' });
    expect(rep.gpus.map((g) => [g.memoryTotalMiB, g.memoryFreeMiB])).toEqual([
      [undefined, undefined],
      [undefined, undefined],
    ]);
  });
});

describe('only the probes the selected checks need are run', () => {
  const X2 = join(FIXTURES, 'bundles', 'h200x2-device-collect');
  const profile = () => loadProfile('qwen3.5-9b').profile;
  const seen = async (opts: Parameters<typeof runPreflight>[1]) => {
    const rec = new RecordingHost(new ReplayHost(X2));
    const rep = await runPreflight(rec, opts);
    // what the bundle answered: a call it never recorded (smi.q's narrow pair, in a bundle from before it) is not a
    // probe it holds
    const answered = rec.commands.filter((c) => c.error !== 'not-collected');
    return {
      rep,
      argv: answered.map((c) => c.argv.slice(0, 2).join(' ')),
      whole: answered.map((c) => c.argv.join(' ')),
      files: [...rec.files.keys()],
    };
  };

  it('--only gpu.memory: the nvidia-smi queries (and uname -m for platform detection), nothing else', async () => {
    const { rep, argv, files } = await seen({ profile: profile(), only: 'gpu.memory' });
    expect(rep.checks.map((c) => [c.id, c.status])).toEqual([['gpu.memory', 'pass']]);
    expect(argv.map((a) => a.replace(/=.*/, '=')).sort()).toEqual([
      'nvidia-smi --query-compute-apps=',
      'nvidia-smi --query-gpu=',
      'uname -m',
    ]);
    expect(files.sort()).toEqual(['/proc/driver/nvidia/version', '/proc/meminfo']);
    expect(rep.gpus.map((g) => g.memoryFreeMiB)).toEqual([143156, 143156]);
  });

  it('with the platform named, --only gpu.memory runs nvidia-smi alone', async () => {
    const { argv } = await seen({ profile: profile(), platform: 'hopper-cuda13', only: 'gpu.memory' });
    expect(argv).toHaveLength(2);
    expect(argv.every((a) => a.startsWith('nvidia-smi --query-'))).toBe(true);
  });

  it('the whole set runs every probe the bundle holds; a full report is unchanged by the selection', async () => {
    const all = await seen({ profile: profile() });
    // all but cuda.dirs, which collect keeps for the bundle's reader and no check reads
    const held = new ReplayHost(X2).manifest.commands
      .map((c) => c.argv.join(' '))
      .filter((a) => a !== 'sh -c ls -d /usr/local/cuda*');
    expect(all.whole.sort()).toEqual(held.sort());
    const one = await seen({ profile: profile(), only: 'gpu.topology' });
    expect(one.argv.length).toBeLessThan(all.argv.length);
    const f = (r: typeof all.rep, id: string) => r.checks.find((c) => c.id === id)!;
    expect(f(one.rep, 'gpu.topology')).toMatchObject({
      status: f(all.rep, 'gpu.topology').status,
      observed: f(all.rep, 'gpu.topology').observed,
    });
  });

  it("serve's set is the checks' own metadata (blocking, and gpu.topology read for its plan's P2P skip), and runs nvidia-smi/uname commands plus file reads", async () => {
    // changed on purpose (issue 44): gpu.topology runs for serve too, as evidence (never a refusal:
    // verbs/serve/preflight.ts takes it out of the gate)
    expect(selectChecks(undefined, undefined, { blocking: true }).map((c) => c.id)).toEqual(
      CHECKS.filter((c) => c.blocking || c.forServe).map((c) => c.id),
    );
    expect(
      selectChecks(undefined, undefined, { blocking: true })
        .map((c) => c.id)
        .sort(),
    ).toEqual(['driver.version', 'gpu.count', 'gpu.memory', 'gpu.topology', 'host.port', 'router.haproxy']);
    expect(CHECKS.filter((c) => c.forServe && c.blocking)).toEqual([]);
    const { rep, argv } = await seen({ profile: profile(), blocking: true });
    // router.haproxy skips a profile without a router, without looking for HAProxy; the TP group is on NVLink
    expect(rep.checks.map((c) => [c.id, c.status])).toEqual([
      ['driver.version', 'pass'],
      ['gpu.count', 'pass'],
      ['gpu.memory', 'pass'],
      ['gpu.topology', 'pass'],
      ['host.port', 'pass'],
      ['router.haproxy', 'skip'],
    ]);
    expect(argv.every((a) => /^(nvidia-smi --query-|nvidia-smi topo$|uname)/.test(a))).toBe(true);
  });

  it('every check names probes gatherFacts knows; GPU checks bring the driver probes', () => {
    const set = probesFor(
      CHECKS.filter((c) => c.id === 'gpu.ecc'),
      { platform: 'hopper-cuda13' },
    );
    expect([...set].sort()).toEqual(['proc.driver', 'smi.query']);
    expect([
      ...probesFor(
        CHECKS.filter((c) => c.id === 'host.memlock'),
        { platform: 'hopper-cuda13' },
      ),
    ]).toEqual(['limits']);
  });
});

describe('selecting checks', () => {
  it('--only and --skip take ids and prefixes; unknown ids are bad input', () => {
    expect(selectChecks('gpu.').every((c) => c.id.startsWith('gpu.'))).toBe(true);
    expect(selectChecks('driver.version,host').map((c) => c.id)).toContain('host.shm');
    expect(selectChecks(undefined, 'gpu').some((c) => c.id.startsWith('gpu.'))).toBe(false);
    expect(() => selectChecks('gpu.nope')).toThrow(/unknown check id/);
  });
});

describe('platform detection', () => {
  it('every corpus GPU gets a platform and a reason', async () => {
    for (const [b, want] of [
      ['nvidia-h100-80gb-hbm3__590.48.01', 'hopper-cuda13'],
      ['nvidia-l40s__595.80', 'hopper-cuda13'],
    ] as const) {
      const f = await gatherFacts(new ReplayHost(join(FIXTURES, 'bundles', b)));
      const d = detectPlatform(f, 'auto');
      expect(d.platform.name).toBe(want);
      expect(d.reason.length).toBeGreaterThan(10);
    }
  });
});

describe('the bundle sparkctl collected on a real H200 (device machine)', () => {
  it('replays to the verdicts seen there: only vLLM missing fails', async () => {
    const rep = await runPreflight(new ReplayHost(join(FIXTURES, 'bundles', 'h200x1-device-collect')), {
      profile: loadProfile('qwen3.5-9b', { sets: ['parallel.tensor=1'] }).profile,
    });
    expect(rep.platform).toBe('hopper-cuda13');
    const by = Object.fromEntries(rep.checks.map((c) => [c.id, c]));
    expect(rep.checks.filter((c) => c.status === 'fail').map((c) => c.id)).toEqual(['vllm.installed']);
    expect(by['host.nofile']!.status).toBe('warn');
    expect(by['gpu.memory']!.observed).toBe('GPU0 139.8 GiB free');
    expect(by['cudnn.version']!.observed).toBe('system 9, pip 9.19.0.56');
    expect(by['gpu.query' as never]).toBeUndefined();
    expect(by['driver.version']!.durationMs).toBeGreaterThan(0);
  });
});

describe('the bundle sparkctl collected on a real 2 x H200 (device machine)', () => {
  it('replays the TP 2 verdicts seen there: NVLink between the pair, only vLLM missing fails', async () => {
    const rep = await runPreflight(new ReplayHost(join(FIXTURES, 'bundles', 'h200x2-device-collect')), {
      profile: loadProfile('qwen3.5-9b').profile,
    });
    const by = Object.fromEntries(rep.checks.map((c) => [c.id, c]));
    expect(rep.checks.filter((c) => c.status === 'fail').map((c) => c.id)).toEqual(['vllm.installed']);
    expect(by['gpu.topology']).toMatchObject({ status: 'pass', observed: 'GPU0-GPU1 NV18' });
    expect(by['gpu.fabric']!.observed).toMatch(/^fabric Completed\/Success/);
    expect(rep.versions).toMatchObject({
      driver: '580.159.04',
      cuda: '13.0.88',
      nccl: '2.28.9',
      torch: '2.11.0+cu130',
      gpus: 2,
    });
  });
});

// issue 48 item 10: a Spark's unified memory under pressure. The GB10 is made from the H200 capture
// (name GB10, memory "Not Supported" as nvidia-smi prints it on a Spark); /proc/meminfo and
// `systemctl is-active systemd-oomd earlyoom` are set per case.
describe('host.memory-pressure (DGX Spark)', () => {
  const spark = (meminfo: string, oomd: string | null) =>
    edited({
      run: (a, r) => {
        if (a[0] === 'systemctl' && a[2] === 'systemd-oomd')
          return oomd === null
            ? { ...r, exitCode: 127, stdout: '', stderr: 'systemctl: not found' }
            : { ...r, exitCode: oomd.includes('inactive') ? 3 : 0, stdout: oomd, stderr: '' };
        let x = setColumn('memory.total', '[Not Supported]')(a, r);
        if (x) x = setColumn('memory.free', '[Not Supported]')(a, x);
        if (x) x = setColumn('name', 'NVIDIA GB10')(a, x);
        return x;
      },
      files: { '/proc/meminfo': meminfo },
    });
  const mem = (swapKb: number, cachedKb: number) =>
    `MemTotal:       127611904 kB\nMemAvailable:   115343360 kB\nCached:          ${cachedKb} kB\nSwapTotal:       ${swapKb} kB\nSwapFree:        ${swapKb} kB\n`;
  const check = async (h: Host) =>
    (await runPreflight(h, { profile: loadProfile('qwen3.5-9b-spark').profile, only: 'host.memory-pressure' }))
      .checks[0]!;

  it('swap, systemd-oomd active, a small page cache: pass, each said', async () => {
    const c = await check(spark(mem(16 * 1024 * 1024, 1024 * 1024), 'active\ninactive\n'));
    expect(c.status).toBe('pass');
    expect(c.observed).toBe('swap 16.0 GiB (0.0 GiB used); OOM daemon systemd-oomd; page cache 1.0 GiB of 121.7 GiB');
  });

  it('no swap, no OOM daemon, a 30 GiB page cache: a warning with the fix for each', async () => {
    const c = await check(spark(mem(0, 30 * 1024 * 1024), 'inactive\ninactive\n'));
    expect(c.status).toBe('warn');
    expect(c.observed).toBe(
      'no swap; no OOM daemon (systemd-oomd, earlyoom inactive); page cache 30.0 GiB of 121.7 GiB',
    );
    expect(c.fix).toMatch(/no swap: .*sudo mkswap \/swapfile && sudo swapon \/swapfile/);
    expect(c.fix).toMatch(/no OOM daemon: .*sudo systemctl enable --now systemd-oomd, or sudo apt install earlyoom/);
    expect(c.fix).toMatch(/page cache .*competes with vLLM's KV cache: .*drop_caches/);
  });

  it('earlyoom counts as the OOM daemon; no systemctl answer is said, not judged', async () => {
    expect((await check(spark(mem(8 * 1024 * 1024, 0), 'inactive\nactive\n'))).observed).toContain(
      'OOM daemon earlyoom',
    );
    const c = await check(spark(mem(8 * 1024 * 1024, 0), null));
    expect(c.status).toBe('pass');
    expect(c.observed).toContain('OOM daemon not read (no systemctl answer)');
  });

  it('a data-centre GPU (its own memory): skipped, saying why', async () => {
    const rep = await runPreflight(edited({}), {
      profile: loadProfile('qwen3.5-9b').profile,
      only: 'host.memory-pressure',
    });
    expect(rep.checks[0]!.status).toBe('skip');
    expect(rep.checks[0]!.observed).toMatch(/memory is their own/);
  });
});
