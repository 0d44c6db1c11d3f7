// The simulated host of `serve --engine sim`: the GPUs, driver and libraries of the profile's
// platform, answered as nvidia-smi and friends would. Ports, limits and disks are this machine's own,
// because the simulator really listens here.
import type { Host, CmdResult } from '../host/host.js';
import type { Platform } from '../profiles/schema.js';
import { GPU_FIELDS, SMI_FABRIC, SMI_Q_GSP } from '../nvidia/smi.js';
import { GIB, MIB } from '../nvidia/units.js';
import { RealHost } from '../host/real.js';

function versionOf(rule: Platform['driver']): string {
  if ('exact' in rule) return rule.exact;
  if ('oneOf' in rule) return rule.oneOf[0]!;
  if ('sameMajor' in rule) return rule.sameMajor;
  return rule.min;
}

/** One GPU's nvidia-smi --query-gpu row: an idle, healthy card of the platform, its fields in GPU_FIELDS order. */
function gpuRow(p: Platform, i: number, busId: string, drv: string, memMiB: number): string {
  const v: Record<string, string> = {
    index: String(i),
    name: p.gpu.displayName,
    uuid: `GPU-sim-${i}`,
    'pci.bus_id': busId,
    driver_version: drv,
    vbios_version: '96.00.00.00.01',
    'inforom.img': 'G520.0200.00.01',
    compute_cap: p.gpu.computeCapability,
    'memory.total': p.gpu.unifiedMemory ? '[N/A]' : String(memMiB),
    'memory.used': p.gpu.unifiedMemory ? '[N/A]' : '0',
    'memory.free': p.gpu.unifiedMemory ? '[N/A]' : String(memMiB),
    'temperature.gpu': '31',
    'power.draw': '70.00',
    'power.limit': String(p.gpu.minPowerLimitW ?? 400),
    'enforced.power.limit': String(p.gpu.minPowerLimitW ?? 400),
    persistence_mode: 'Enabled',
    'ecc.mode.current': 'Enabled',
    'ecc.errors.uncorrected.volatile.total': '0',
    'retired_pages.pending': '[N/A]',
    'remapped_rows.pending': 'No',
    'remapped_rows.failure': 'No',
    'clocks_event_reasons.active': '0x0000000000000001',
    'mig.mode.current': 'Disabled',
    'pcie.link.gen.current': '4',
    'pcie.link.gen.max': '4',
    'pcie.link.width.current': '16',
    'pcie.link.width.max': '16',
    'utilization.gpu': '0',
    'gsp.mode.current': 'Enabled',
  };
  return GPU_FIELDS.map((f) => v[f] ?? '[N/A]').join(', ');
}

/** nvidia-smi topo -m: every pair of GPUs on NVLink, the first half of them on NUMA node 0 and the rest on 1. */
function topoMatrix(n: number): string {
  const header =
    '\t' + Array.from({ length: n }, (_, i) => `GPU${i}`).join('\t') + '\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID';
  return [
    header,
    ...Array.from(
      { length: n },
      (_, i) =>
        `GPU${i}\t` +
        Array.from({ length: n }, (_, j) => (i === j ? ' X ' : 'NV12')).join('\t') +
        `\t0-63\t${i < n / 2 ? 0 : 1}\t\tN/A`,
    ),
  ].join('\n');
}

/**
 * nvidia-smi -q's lines: the driver and CUDA versions, then each GPU's product name and GSP firmware (and its fabric
 * state, with NVSwitch).
 */
function smiQuery(p: Platform, busIds: string[], drv: string, cuda: string): string[] {
  const smiq = [
    `Driver Version                            : ${drv}`,
    `CUDA Version                              : ${cuda}`,
    '',
  ];
  for (let i = 0; i < p.gpu.count; i++) {
    smiq.push(
      `GPU ${busIds[i]}`,
      `    Product Name                          : ${p.gpu.displayName}`,
      `    GSP Firmware Version                  : ${drv}`,
    );
    if (p.gpu.nvswitch)
      smiq.push(
        '    Fabric',
        '        State                             : Completed',
        '        Status                            : Success',
      );
  }
  return smiq;
}

export class SimHost implements Host {
  readonly kind = 'sim' as const;
  readonly name: string;
  private real = new RealHost();
  constructor(readonly platform: Platform) {
    this.name = `simulated ${platform.gpu.count} x ${platform.gpu.displayName} (${platform.name})`;
  }

  private cache?: Map<string, string>;
  private answers(): Map<string, string> {
    return (this.cache ??= this.build());
  }

  private build(): Map<string, string> {
    const p = this.platform;
    const drv = versionOf(p.driver);
    const cuda = versionOf(p.cuda);
    const memMiB = Math.round((p.gpu.memoryGiB * GIB) / MIB);
    const busIds = Array.from(
      { length: p.gpu.count },
      (_, i) => `00000000:${(0x10 + i).toString(16).padStart(2, '0')}:00.0`,
    );
    const rows = busIds.map((busId, i) => gpuRow(p, i, busId, drv, memMiB));
    const topo = topoMatrix(p.gpu.count);
    const smiq = smiQuery(p, busIds, drv, cuda);
    const torchVer = p.torch ? versionOf(p.torch) : '2.9.0';
    const torchCuda =
      'exact' in (p.torch ?? {}) && /\+cu(\d+)(\d)$/.test(torchVer)
        ? torchVer.replace(/.*\+cu(\d+)(\d)$/, '$1.$2')
        : cuda.split('.').slice(0, 2).join('.');
    const m = new Map<string, string>();
    // the narrow smi.q pair first: the prefixes below would answer them too
    m.set(
      SMI_FABRIC.join(' '),
      busIds.map((b) => (p.gpu.nvswitch ? `${b}, Completed, Success` : `${b}, [N/A], [N/A]`)).join('\n') + '\n',
    );
    m.set(
      SMI_Q_GSP.join(' '),
      [
        ...smiq.slice(0, 3),
        ...busIds.flatMap((b) => [`GPU ${b}`, `    GSP Firmware Version                  : ${drv}`]),
      ].join('\n') + '\n',
    );
    m.set('nvidia-smi --query-gpu', rows.join('\n') + '\n');
    m.set('nvidia-smi -q', smiq.join('\n') + '\n');
    m.set('nvidia-smi topo', topo + '\n');
    m.set('nvidia-smi --query-compute-apps', '');
    m.set(
      'nvcc',
      `Cuda compilation tools, release ${cuda.split('.').slice(0, 2).join('.')}, V${cuda.split('.').slice(0, 2).join('.')}.0\n`,
    );
    m.set('which -a nvcc', '/usr/local/cuda/bin/nvcc\n');
    m.set('readlink', `/usr/local/cuda-${cuda.split('.').slice(0, 2).join('.')}\n`);
    m.set(
      'python3',
      `python 3.12.3\npurelib /opt/sim/site-packages\ndist torch-${torchVer}.dist-info\ndist vllm-0.17.0.dist-info\ndist nvidia_nccl_cu${cuda.split('.')[0]}-${p.nccl ? versionOf(p.nccl) : '2.27.3'}.dist-info\n`,
    );
    m.set('which -a vllm', '/opt/sim/bin/vllm\n');
    m.set('uname', `${p.arch}\n`);
    m.set(
      '/proc/driver/nvidia/version',
      `NVRM version: NVIDIA UNIX Open Kernel Module for ${p.arch}  ${drv}  Release Build  (sim)\n`,
    );
    m.set(
      '/opt/sim/site-packages/torch/version.py',
      `__version__ = '${torchVer}'\ncuda: Optional[str] = '${torchCuda}'\n`,
    );
    m.set(
      '/usr/include/cudnn_version.h',
      p.cudnn
        ? `#define CUDNN_MAJOR ${versionOf(p.cudnn).split('.')[0]}\n#define CUDNN_MINOR ${versionOf(p.cudnn).split('.')[1] ?? 0}\n#define CUDNN_PATCHLEVEL 0\n`
        : '',
    );
    return m;
  }

  async run(argv: string[], opts?: { timeoutMs?: number }): Promise<CmdResult> {
    const joined = argv.join(' ');
    const a = this.answers();
    for (const [prefix, out] of a) {
      if (prefix.startsWith('/')) continue;
      if (
        joined === prefix ||
        joined.startsWith(prefix + ' ') ||
        joined.startsWith(prefix + '=') ||
        (prefix === 'nvidia-smi --query-gpu' && joined.startsWith(prefix)) ||
        (prefix === 'nvidia-smi --query-compute-apps' && joined.startsWith(prefix))
      ) {
        return { argv, stdout: out, stderr: '', exitCode: 0, durationMs: 0 };
      }
    }
    // Ports, limits and disks are real; GPU tooling that the simulation does not model is absent.
    if (['df', 'sh', 'ldconfig', 'find'].includes(argv[0]!) && !(argv[0] === 'sh' && /cuda/.test(joined)))
      return this.real.run(argv, opts);
    if (argv[0] === 'sh') return { argv, stdout: '/usr/local/cuda\n', stderr: '', exitCode: 0, durationMs: 0 };
    return { argv, stdout: '', stderr: '', exitCode: null, durationMs: 0, error: 'not-found' };
  }

  async readFile(path: string, maxBytes?: number): Promise<string | null> {
    const a = this.answers();
    if (a.has(path)) return a.get(path) || null;
    if (
      path.startsWith('/proc/net/') ||
      path === '/proc/self/limits' ||
      path === '/proc/meminfo' ||
      path.startsWith('/proc/sys/net/')
    )
      return this.real.readFile(path, maxBytes);
    return null;
  }

  /** CPU, memory and disks are this machine's own, like its ports */
  sysinfo: RealHost['sysinfo'] = (part, opts) => this.real.sysinfo(part, opts);

  env() {
    const e = { ...process.env };
    e.CUDA_HOME = '/usr/local/cuda';
    e.PATH = `/usr/local/cuda/bin:${(e.PATH ?? '')
      .split(':')
      .filter((p) => !/cuda/.test(p))
      .join(':')}`;
    delete e.LD_LIBRARY_PATH;
    return e;
  }
}
