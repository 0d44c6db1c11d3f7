// Host inventory (CPU, memory, OS, disks, network interfaces; on Linux, CPU and memory straight from
// /proc, below), read with systeminformation and reduced
// to the fields preflight reads: never a serial number, UUID, machine id or MAC address. The library
// is imported on first use only (it costs ~100 ms to load and spawns shells), so `--help`,
// `--version` and `serve --dry-run` never load it, and a preflight that selects no check reading it
// never pays for it. `collect` records these readings into the bundle; a replay answers from there.
export const SYSINFO_PARTS = ['cpu', 'mem', 'os', 'disks', 'net'] as const;
import { own } from '../util/own.js';
export type SysinfoPart = (typeof SYSINFO_PARTS)[number];

interface SysCpu {
  manufacturer?: string;
  brand?: string;
  speedGHz?: number;
  cores?: number;
  physicalCores?: number;
  sockets?: number;
}
interface SysMem {
  totalBytes?: number;
  availableBytes?: number;
  swapTotalBytes?: number;
}
interface SysOs {
  platform?: string;
  distro?: string;
  release?: string;
  codename?: string;
  kernel?: string;
  arch?: string;
}
interface SysDisk {
  fs: string;
  type?: string;
  mount: string;
  sizeBytes?: number;
  availableBytes?: number;
}
interface SysNet {
  iface: string;
  ip4?: string;
  operstate?: string;
  speedMbps?: number | null;
  mtu?: number | null;
  type?: string;
  virtual?: boolean;
  internal?: boolean;
}
export interface SysinfoReadings {
  cpu: SysCpu;
  mem: SysMem;
  os: SysOs;
  disks: SysDisk[];
  net: SysNet[];
}
/** One part's answer: the reading, or why there is none (the library failed, not in the bundle). */
export type SysinfoResult<P extends SysinfoPart = SysinfoPart> =
  | { ok: true; value: SysinfoReadings[P]; durationMs: number }
  | { ok: false; error: string; durationMs: number };

const str = (v: unknown) => (typeof v === 'string' && v.trim() ? v.trim() : undefined);
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const bool = (v: unknown) => (typeof v === 'boolean' ? v : undefined);
type Kind = typeof str | typeof num | typeof bool;

/** Per part: [our field, the library's field, its type]. Everything else the library returns is dropped. */
const FIELDS: Record<SysinfoPart, Array<[string, string, Kind]>> = {
  cpu: [
    ['manufacturer', 'manufacturer', str],
    ['brand', 'brand', str],
    ['speedGHz', 'speed', num],
    ['cores', 'cores', num],
    ['physicalCores', 'physicalCores', num],
    ['sockets', 'processors', num],
  ],
  mem: [
    ['totalBytes', 'total', num],
    ['availableBytes', 'available', num],
    ['swapTotalBytes', 'swaptotal', num],
  ],
  os: [
    ['platform', 'platform', str],
    ['distro', 'distro', str],
    ['release', 'release', str],
    ['codename', 'codename', str],
    ['kernel', 'kernel', str],
    ['arch', 'arch', str],
  ],
  disks: [
    ['fs', 'fs', str],
    ['type', 'type', str],
    ['mount', 'mount', str],
    ['sizeBytes', 'size', num],
    ['availableBytes', 'available', num],
  ],
  net: [
    ['iface', 'iface', str],
    ['ip4', 'ip4', str],
    ['operstate', 'operstate', str],
    ['speedMbps', 'speed', num],
    ['mtu', 'mtu', num],
    ['type', 'type', str],
    ['virtual', 'virtual', bool],
    ['internal', 'internal', bool],
  ],
};
const LISTS: Partial<Record<SysinfoPart, string>> = { disks: 'mount', net: 'iface' };

/**
 * Keep only the fields above, typed: from the library's answer (`from: 'library'`), or from a bundle's
 * section (`from: 'bundle'`, our own field names), which is outside data like any bundle file.
 * Never a serial number, UUID, machine id, hostname or MAC address.
 */
export function pickSysinfo<P extends SysinfoPart>(
  part: P,
  raw: unknown,
  from: 'library' | 'bundle' = 'library',
): SysinfoReadings[P] {
  const one = (o: Record<string, unknown>) =>
    Object.fromEntries(FIELDS[part].map(([ours, lib, kind]) => [ours, kind(o[from === 'library' ? lib : ours])]));
  const key = LISTS[part];
  if (key) {
    const list = (Array.isArray(raw) ? raw : []) as Array<Record<string, unknown>>;
    return list
      .filter((x) => x && typeof x === 'object')
      .map(one)
      .filter((x) => x[key] !== undefined && (part !== 'disks' || x.fs !== undefined)) as unknown as SysinfoReadings[P];
  }
  return one(raw && typeof raw === 'object' ? (raw as Record<string, unknown>) : {}) as unknown as SysinfoReadings[P];
}

type SiModule = typeof import('systeminformation');
let si: Promise<SiModule> | undefined;
const load = () =>
  (si ??= import('systeminformation').then((m) => ((m as { default?: SiModule }).default ?? m) as SiModule));

// ---- CPU and memory on Linux, from /proc: what systeminformation reads there, without its shells ----
// (its cpu() runs lscpu and dmidecode and a synchronous cat | grep, and loading it is 430 KB of
// bundle: together about 30 ms of the 110 ms a default preflight spent of its own on the H200 host).

const MANUFACTURER: Record<string, string> = { GenuineIntel: 'Intel', AuthenticAMD: 'AMD', HygonGenuine: 'Hygon' };
/** /proc/cpuinfo's "CPU implementer" of ARM cores (the Arm ARM's MIDR codes). */
const ARM_IMPLEMENTER: Record<string, string> = {
  '0x41': 'ARM',
  '0x4e': 'NVIDIA',
  '0x51': 'Qualcomm',
  '0x48': 'HiSilicon',
  '0xc0': 'Ampere',
  '0x61': 'Apple',
};
const ARM_PART: Record<string, string> = {
  '0xd0c': 'Neoverse-N1',
  '0xd40': 'Neoverse-V1',
  '0xd49': 'Neoverse-N2',
  '0xd4f': 'Neoverse-V2',
  '0xd8e': 'Neoverse-N3',
  '0xd84': 'Neoverse-V3',
};

/** The CPU from /proc/cpuinfo (and the max frequency in kHz from cpufreq, when readable). */
export function procCpu(cpuinfo: string, maxKHz?: number): SysCpu {
  const blocks = cpuinfo
    .split(/\n\s*\n/)
    .map((b) => {
      const kv: Record<string, string> = {};
      for (const l of b.split('\n')) {
        const m = /^([^:]+?)\s*:\s*(.*)$/.exec(l);
        if (m) kv[m[1]!.trim()] = m[2]!.trim();
      }
      return kv;
    })
    .filter((b) => b.processor !== undefined);
  const first = blocks[0] ?? {};
  const sockets = new Set(blocks.map((b) => b['physical id']).filter((x) => x !== undefined));
  const cores = new Set(
    blocks.filter((b) => b['core id'] !== undefined).map((b) => `${b['physical id'] ?? 0}:${b['core id']}`),
  );
  const vendor = first.vendor_id;
  const manufacturer = vendor
    ? (own(MANUFACTURER, vendor) ?? vendor)
    : first['CPU implementer']
      ? own(ARM_IMPLEMENTER, first['CPU implementer'].toLowerCase())
      : undefined;
  const model = first['model name'] ?? (first['CPU part'] ? own(ARM_PART, first['CPU part'].toLowerCase()) : undefined);
  const ghz = model ? /@\s*([\d.]+)\s*GHz/i.exec(model)?.[1] : undefined;
  // as systeminformation names it: "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz" -> "Xeon® Platinum 8480+"
  let brand = model
    ?.replace(/\(R\)/gi, '®')
    .replace(/\(TM\)/gi, '™')
    .replace(/\s*@\s*[\d.]+\s*GHz.*$/i, '')
    .replace(/\bCPU\b/g, '')
    .replace(/\s+/g, ' ')
    .trim();
  if (brand && manufacturer && brand.toLowerCase().startsWith(manufacturer.toLowerCase()))
    brand = brand.slice(manufacturer.length).replace(/^®?\s*/, '');
  return {
    manufacturer,
    brand: brand || undefined,
    speedGHz: ghz ? Number(ghz) : maxKHz ? Math.round(maxKHz / 10_000) / 100 : undefined,
    cores: blocks.length || undefined,
    physicalCores: cores.size || blocks.length || undefined,
    sockets: sockets.size || (blocks.length ? 1 : undefined),
  };
}

/** Memory from /proc/meminfo (kB lines): total, available (MemAvailable, else free + buffers + cache), swap. */
export function procMem(meminfo: string): SysMem {
  const kb = (k: string) => {
    const m = new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(meminfo);
    return m ? Number(m[1]) * 1024 : undefined;
  };
  const free = kb('MemFree');
  const available =
    kb('MemAvailable') ?? (free !== undefined ? free + (kb('Buffers') ?? 0) + (kb('Cached') ?? 0) : undefined);
  return { totalBytes: kb('MemTotal'), availableBytes: available, swapTotalBytes: kb('SwapTotal') };
}

async function readProc<P extends 'cpu' | 'mem'>(part: P): Promise<SysinfoReadings[P]> {
  const { readText, READ_LIMITS } = await import('../util/read.js');
  const readFile = (f: string) => readText(f, { maxBytes: READ_LIMITS.proc });
  if (part === 'mem') return procMem(await readFile('/proc/meminfo')) as SysinfoReadings[P];
  const maxKHz =
    Number(await readFile('/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq').catch(() => '')) || undefined;
  return procCpu(await readFile('/proc/cpuinfo'), maxKHz) as SysinfoReadings[P];
}

/** Read one part on this machine, within a deadline (the library has none of its own). */
export async function readSysinfo<P extends SysinfoPart>(part: P, timeoutMs: number): Promise<SysinfoResult<P>> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  let timer: NodeJS.Timeout | undefined;
  if (process.platform === 'linux' && (part === 'cpu' || part === 'mem')) {
    try {
      return { ok: true, value: (await readProc(part as 'cpu' | 'mem')) as SysinfoReadings[P], durationMs: ms() };
    } catch {
      /* /proc unreadable (a sandbox): the library's way */
    }
  }
  try {
    const lib = await load();
    const call: Record<SysinfoPart, () => Promise<unknown>> = {
      cpu: () => lib.cpu(),
      mem: () => lib.mem(),
      os: () => lib.osInfo(),
      disks: () => lib.fsSize(),
      net: () => lib.networkInterfaces(),
    };
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
      timer.unref();
    });
    const raw = await Promise.race([call[part](), deadline]);
    return { ok: true, value: pickSysinfo(part, raw), durationMs: ms() };
  } catch (e) {
    return {
      ok: false,
      error: (e as Error).message === 'timeout' ? 'timeout' : `systeminformation failed: ${(e as Error).message}`,
      durationMs: ms(),
    };
  } finally {
    clearTimeout(timer);
  }
}
