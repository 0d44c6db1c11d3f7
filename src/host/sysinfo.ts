// Host inventory read with systeminformation (CPU, memory, OS, disks, network interfaces), reduced
// to the fields preflight reads: never a serial number, UUID, machine id or MAC address. The library
// is imported on first use only (it costs ~100 ms to load and spawns shells), so `--help`,
// `--version` and `serve --dry-run` never load it, and a preflight that selects no check reading it
// never pays for it. `collect` records these readings into the bundle; a replay answers from there.
export const SYSINFO_PARTS = ['cpu', 'mem', 'os', 'disks', 'net'] as const;
export type SysinfoPart = (typeof SYSINFO_PARTS)[number];

export interface SysCpu {
  manufacturer?: string;
  brand?: string;
  speedGHz?: number;
  cores?: number;
  physicalCores?: number;
  sockets?: number;
}
export interface SysMem {
  totalBytes?: number;
  availableBytes?: number;
  swapTotalBytes?: number;
}
export interface SysOs {
  platform?: string;
  distro?: string;
  release?: string;
  codename?: string;
  kernel?: string;
  arch?: string;
}
export interface SysDisk {
  fs: string;
  type?: string;
  mount: string;
  sizeBytes?: number;
  availableBytes?: number;
}
export interface SysNet {
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
export type SysinfoResult<P extends SysinfoPart = SysinfoPart> = { ok: true; value: SysinfoReadings[P]; durationMs: number } | { ok: false; error: string; durationMs: number };

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
export function pickSysinfo<P extends SysinfoPart>(part: P, raw: unknown, from: 'library' | 'bundle' = 'library'): SysinfoReadings[P] {
  const one = (o: Record<string, unknown>) => Object.fromEntries(FIELDS[part].map(([ours, lib, kind]) => [ours, kind(o[from === 'library' ? lib : ours])]));
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
const load = () => (si ??= import('systeminformation').then((m) => ((m as { default?: SiModule }).default ?? m) as SiModule));

/** Read one part on this machine, within a deadline (the library has none of its own). */
export async function readSysinfo<P extends SysinfoPart>(part: P, timeoutMs: number): Promise<SysinfoResult<P>> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  let timer: NodeJS.Timeout | undefined;
  try {
    const lib = await load();
    const call: Record<SysinfoPart, () => Promise<unknown>> = { cpu: () => lib.cpu(), mem: () => lib.mem(), os: () => lib.osInfo(), disks: () => lib.fsSize(), net: () => lib.networkInterfaces() };
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
      timer.unref();
    });
    const raw = await Promise.race([call[part](), deadline]);
    return { ok: true, value: pickSysinfo(part, raw), durationMs: ms() };
  } catch (e) {
    return { ok: false, error: (e as Error).message === 'timeout' ? 'timeout' : `systeminformation failed: ${(e as Error).message}`, durationMs: ms() };
  } finally {
    clearTimeout(timer);
  }
}
