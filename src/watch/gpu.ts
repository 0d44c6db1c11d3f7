// What the GPUs say about a watched server, read cheaply once for the host (one nvidia-smi
// --query-gpu, one --query-compute-apps, the kernel log's Xid lines since the watcher began, and on a
// DGX Spark /proc/meminfo) and judged per server over the GPUs it holds. Pure.
//
// The rule: GPU signals inform, they never decide a restart on their own. They are evidence on the
// server's verdict and an alert when they appear (an Xid, uncorrected ECC, a failed row remap,
// hardware throttling, memory held by a process that is not the server, a Spark's unified memory
// running out for the OS). A server is restarted only for its own verdict (dead, or wedged with a
// second signal). And a dead or wedged server whose GPU shows a fault that only a GPU reset or a
// reboot clears (Xid 48, 74, 79, 92, 95, 119, 120: the fatal set preflight uses; a failed row remap)
// is NOT restarted: a restart there fails or wedges again, so the watcher alerts with why instead.
import { decodeThrottle, gpuNum, type Gpu } from '../nvidia/smi.js';
import { XID_FATAL, XID_MEANING } from '../nvidia/xid.js';
import { asciiLine } from '../util/control.js';

interface XidLine {
  pci: string;
  code: number;
  line: string;
}

export interface GpuFacts {
  /** nvidia-smi --query-gpu rows (preflight's fields) */
  rows: Gpu[];
  /** nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_bus_id (undefined: not read) */
  apps?: Array<{ pid: number; name: string; usedMiB: number; bus: string }>;
  /** Xid lines new since the watcher began */
  xid?: XidLine[];
  /** /proc/meminfo MemAvailable and MemTotal, bytes (a unified-memory host: what the OS has left) */
  memAvailable?: number;
  memTotal?: number;
}

export interface GpuFinding {
  signal: 'xid' | 'ecc' | 'row-remap' | 'throttle' | 'foreign-memory' | 'unified-memory';
  gpu?: number;
  value: string | number;
  note: string;
  /** only a GPU reset or a reboot clears it: a restart of the server would not help */
  resetNeeded?: boolean;
}

/**
 * A Spark keeps at least this much of its unified memory for the OS, or this share of it, the larger (below: a
 * finding).
 */
const SPARK_OS_MIN_BYTES = 4 * 1024 ** 3;
const SPARK_OS_MIN_SHARE = 0.05;

const busKey = (b: string | undefined) =>
  (b ?? '')
    .toLowerCase()
    .replace(/^0000/, '')
    .replace(/^0+/, '')
    .replace(/\.\d+$/, '');
const unified = (rows: Gpu[]) => rows.some((g) => /\bGB10\b/.test(g.name ?? ''));

/**
 * `--query-compute-apps=pid,process_name,used_memory,gpu_bus_id --format=csv,noheader,nounits` rows; a line that is not
 * one is passed over.
 */
export function parseComputeApps(text: string): NonNullable<GpuFacts['apps']> {
  const out: NonNullable<GpuFacts['apps']> = [];
  for (const line of text.split('\n')) {
    const f = line.split(',').map((x) => x.trim());
    if (f.length < 4) continue;
    const pid = Number(f[0]);
    const used = Number(f[f.length - 2]);
    if (!Number.isInteger(pid) || pid <= 0 || !Number.isFinite(used)) continue;
    out.push({ pid, name: f.slice(1, -2).join(',').slice(0, 80), usedMiB: used, bus: f[f.length - 1]! });
  }
  return out;
}

/** MemAvailable and MemTotal of a /proc/meminfo text, bytes. */
export function parseMeminfo(text: string): { memAvailable?: number; memTotal?: number } {
  const kb = (k: string) => {
    const m = new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(text);
    return m ? Number(m[1]) * 1024 : undefined;
  };
  return { memAvailable: kb('MemAvailable'), memTotal: kb('MemTotal') };
}

/**
 * The findings for one server: its GPUs (indices; all of the host's when it names none) and the pids
 * that are its own (its process group: any other pid holding memory on its GPUs is foreign).
 */
export function gpuFindings(
  f: GpuFacts,
  server: { gpus: readonly number[]; ownPids: ReadonlySet<number> },
): GpuFinding[] {
  const mine = server.gpus.length ? f.rows.filter((g) => server.gpus.includes(Number(g.index))) : f.rows;
  const byBus = new Map(f.rows.map((g) => [busKey(g['pci.bus_id']), Number(g.index)]));
  const held = new Set(mine.map((g) => Number(g.index)));
  const out: GpuFinding[] = [];
  for (const g of mine) {
    const i = Number(g.index);
    const unc = gpuNum(g, 'ecc.errors.uncorrected.volatile.total') ?? 0;
    if (unc > 0)
      out.push({ signal: 'ecc', gpu: i, value: unc, note: `GPU${i}: ${unc} uncorrected volatile ECC error(s)` });
    if (g['remapped_rows.failure'] === 'Yes')
      out.push({
        signal: 'row-remap',
        gpu: i,
        value: 'failed',
        note: `GPU${i}: row remapping failed: the GPU needs service`,
        resetNeeded: true,
      });
    else if (g['remapped_rows.pending'] === 'Yes')
      out.push({
        signal: 'row-remap',
        gpu: i,
        value: 'pending',
        note: `GPU${i}: a row remap is pending until a GPU reset`,
      });
    for (const t of decodeThrottle(g['clocks_event_reasons.active']))
      if (t.severity === 'fail')
        out.push({
          signal: 'throttle',
          gpu: i,
          value: t.reason,
          note: `GPU${i}: ${t.reason} (a slow server, not a wedged one)`,
        });
  }
  for (const x of f.xid ?? []) {
    const i = byBus.get(busKey(x.pci));
    if (i !== undefined && !held.has(i)) continue;
    const fatal = XID_FATAL.has(x.code);
    out.push({
      signal: 'xid',
      gpu: i,
      value: x.code,
      note: `${i === undefined ? `PCI ${x.pci}` : `GPU${i}`}: Xid ${x.code} (${XID_MEANING[x.code] ?? 'see NVIDIA Xid catalog'})${fatal ? ': needs a GPU reset or a reboot' : ''}`,
      ...(fatal ? { resetNeeded: true } : {}),
    });
  }
  for (const a of f.apps ?? []) {
    const i = byBus.get(busKey(a.bus));
    if (i === undefined || !held.has(i) || server.ownPids.has(a.pid)) continue;
    out.push({
      signal: 'foreign-memory',
      gpu: i,
      value: a.usedMiB,
      note: `GPU${i}: pid ${a.pid} (${asciiLine(a.name, 200)}), not this server's, holds ${a.usedMiB} MiB`,
    });
  }
  if (unified(f.rows) && f.memAvailable !== undefined && f.memTotal) {
    const floor = Math.max(SPARK_OS_MIN_BYTES, SPARK_OS_MIN_SHARE * f.memTotal);
    if (f.memAvailable < floor)
      out.push({
        signal: 'unified-memory',
        value: f.memAvailable,
        note: `unified memory: ${(f.memAvailable / 1024 ** 3).toFixed(1)} GiB of ${(f.memTotal / 1024 ** 3).toFixed(0)} GiB left to the OS (below ${(floor / 1024 ** 3).toFixed(1)} GiB): the host swaps or the OOM killer picks a process`,
      });
  }
  return out;
}

/** Whether a restart could help: not while a finding says only a GPU reset or a reboot clears it. */
export const restartHelps = (fs: readonly GpuFinding[]): { ok: boolean; why?: string } => {
  const r = fs.find((x) => x.resetNeeded);
  return r ? { ok: false, why: r.note } : { ok: true };
};
