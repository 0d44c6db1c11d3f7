// GPU readings for probe, prewarm and stop, where GPUs are visible (a real nvidia-smi on this
// host, or a support bundle replayed), and the serving probe's GPU verdict: preflight's own ECC,
// remap, throttle and Xid rules (src/preflight/checks.ts) plus temperature and memory thresholds.
import type { Host } from '../host/host.js';
import { RealHost } from '../host/real.js';
import { parseQueryGpu, decodeThrottle } from '../nvidia/smi.js';
import { queryGpus } from '../host/gpu-query.js';
import { parseXid } from '../nvidia/xid.js';
import { gpuNum, type Gpu } from '../nvidia/smi.js';
import { gpuEccFindings, gpuThrottleFindings, describeXid } from '../nvidia/gpu-rules.js';
import type { GpuSample } from '../history/sample.js';

interface GpuReading {
  index: number;
  usedMiB: number;
  totalMiB: number;
  throttle: Array<{ reason: string; severity: 'ok' | 'warn' | 'fail' }>;
  /** every field nvidia-smi answered, as preflight reads them */
  raw: Gpu;
}

/** nvidia-smi --query-gpu with preflight's fields (the same query and retry as preflight's). */
export async function readGpuRows(host: Host, timeoutMs = 3000): Promise<Gpu[] | undefined> {
  const { r, fields } = await queryGpus(host, timeoutMs);
  if (r.exitCode !== 0) return undefined;
  return parseQueryGpu(r.stdout, fields);
}

export async function readGpus(
  timeoutMs = 3000,
  host: Host = new RealHost(timeoutMs),
): Promise<GpuReading[] | undefined> {
  const rows = await readGpuRows(host, timeoutMs);
  return rows?.map(toReading);
}

function toReading(g: Gpu): GpuReading {
  return {
    index: Number(g.index),
    usedMiB: gpuNum(g, 'memory.used') ?? NaN,
    totalMiB: gpuNum(g, 'memory.total') ?? NaN,
    throttle: decodeThrottle(g['clocks_event_reasons.active']),
    raw: g,
  };
}

export interface XidEvent {
  pci: string;
  code: number;
  line: string;
  /** seconds since boot, from the kernel log's [   123.456] prefix */
  ts?: number;
}

/** Xid lines of the kernel log with their times; unreadable (not root, no dmesg) says why. */
export async function readXid(
  host: Host,
  timeoutMs = 3000,
): Promise<{ readable: true; events: XidEvent[] } | { readable: false; why: string }> {
  const r = await host.run(['dmesg'], { timeoutMs });
  if (r.exitCode !== 0)
    return {
      readable: false,
      why:
        r.error === 'not-found'
          ? 'dmesg is not installed'
          : r.error === 'not-collected'
            ? 'the kernel log is not in the bundle'
            : 'the kernel log is not readable (run the probe as root or in group adm)',
    };
  return { readable: true, events: xidWithTimes(r.stdout) };
}

export function xidWithTimes(text: string): XidEvent[] {
  const out: XidEvent[] = [];
  for (const line of text.split('\n')) {
    const [e] = parseXid(line);
    if (!e) continue;
    const ts = /^\s*\[\s*(\d+\.\d+)\]/.exec(line)?.[1];
    out.push({ ...e, ts: ts ? Number(ts) : undefined });
  }
  return out;
}

/** Bus ids as nvidia-smi writes them (00000000:1A:00.0) and the kernel log (0000:1a:00) differ. */
const busKey = (s: string | undefined) => {
  const m = /([0-9a-f]{2}):([0-9a-f]{2})(?:\.\d)?$/i.exec((s ?? '').trim());
  return m ? `${m[1]!.toLowerCase()}:${m[2]!.toLowerCase()}` : undefined;
};

interface GpuThresholds {
  tempWarnC: number;
  tempUnhealthyC: number;
  tempCriticalC: number;
}
interface GpuFinding {
  /** the GPU index, or undefined for a Xid the kernel log did not tie to a known GPU */
  gpu?: number;
  level: 'warn' | 'unhealthy' | 'critical';
  text: string;
}
export interface GpuVerdict {
  status: 'pass' | 'warn' | 'fail';
  detail: string;
  findings: GpuFinding[];
  samples: GpuSample[];
}

type AddFinding = (gpu: number | undefined, level: GpuFinding['level'], text: string) => void;

/** One GPU's own findings: temperature against the thresholds, ECC and throttle (preflight's rules), memory used. */
function judgeGpu(g: Gpu, o: { thresholds: GpuThresholds; memLimit: number; reserved: number }, add: AddFinding): void {
  const t = o.thresholds;
  const i = Number(g.index);
  const temp = gpuNum(g, 'temperature.gpu');
  if (temp !== undefined) {
    if (temp >= t.tempCriticalC)
      add(i, 'critical', `GPU${i}: ${temp} C >= ${t.tempCriticalC} C (critical: throttling or shutdown next)`);
    else if (temp >= t.tempUnhealthyC) add(i, 'unhealthy', `GPU${i}: ${temp} C >= ${t.tempUnhealthyC} C`);
    else if (temp >= t.tempWarnC) add(i, 'warn', `GPU${i}: ${temp} C >= ${t.tempWarnC} C`);
  }
  const ecc = gpuEccFindings(g);
  const thr = gpuThrottleFindings(g);
  for (const f of [...ecc.fails, ...thr.fails]) add(i, 'unhealthy', f);
  for (const f of [...ecc.warns, ...thr.warns]) add(i, 'warn', f);
  const used = gpuNum(g, 'memory.used');
  const total = gpuNum(g, 'memory.total');
  if (used !== undefined && total && used / total > o.memLimit)
    add(
      i,
      'warn',
      `GPU${i}: ${((used / total) * 100).toFixed(0)} % memory used, above the reserved ${(o.reserved * 100).toFixed(0)} % + headroom (another process on the GPU?)`,
    );
}

/**
 * Judge the GPUs a server holds. `mine` limits the judgement to those indices (all when absent);
 * `xidNew` are the Xid events since the last probe.
 */
export function judgeGpus(
  rows: Gpu[],
  o: {
    mine?: number[];
    thresholds: GpuThresholds;
    memLimit: number;
    reserved: number;
    xidNew?: XidEvent[];
    xidUnreadable?: string;
  },
): GpuVerdict {
  const mine = o.mine?.length ? rows.filter((g) => o.mine!.includes(Number(g.index))) : rows;
  const findings: GpuFinding[] = [];
  const add = (gpu: number | undefined, level: GpuFinding['level'], text: string) =>
    findings.push({ gpu, level, text });
  for (const g of mine) judgeGpu(g, o, add);
  // Xid since the last probe, tied to a GPU by bus id
  const byBus = new Map(rows.map((g) => [busKey(g['pci.bus_id']), Number(g.index)]));
  const xidNew = (o.xidNew ?? []).filter((e) => {
    const i = byBus.get(busKey(e.pci));
    return i === undefined || !o.mine?.length || o.mine.includes(i);
  });
  const perGpu = new Map<number | undefined, XidEvent[]>();
  for (const e of xidNew) {
    const i = byBus.get(busKey(e.pci));
    perGpu.set(i, [...(perGpu.get(i) ?? []), e]);
  }
  for (const [i, evs] of perGpu) {
    const { desc, fatal } = describeXid(evs);
    add(
      i,
      fatal ? 'unhealthy' : 'warn',
      `${i === undefined ? `PCI ${evs[0]!.pci}` : `GPU${i}`}: ${desc} since the last probe`,
    );
  }
  const samples: GpuSample[] = mine.map((g) => {
    const i = Number(g.index);
    const bus = busKey(g['pci.bus_id']);
    return {
      i,
      util: gpuNum(g, 'utilization.gpu'),
      mem: gpuNum(g, 'memory.used'),
      memTotal: gpuNum(g, 'memory.total'),
      temp: gpuNum(g, 'temperature.gpu'),
      power: gpuNum(g, 'power.draw'),
      ecc: gpuNum(g, 'ecc.errors.uncorrected.volatile.total'),
      xid: o.xidNew ? xidNew.filter((e) => busKey(e.pci) === bus).length : undefined,
    };
  });
  const desc = mine
    .map(
      (g) =>
        `GPU${g.index} ${g['temperature.gpu'] ?? '?'} C ${gpuNum(g, 'memory.total') ? `${(((gpuNum(g, 'memory.used') ?? 0) / gpuNum(g, 'memory.total')!) * 100).toFixed(0)} %` : '? %'}`,
    )
    .join(', ');
  const bad = findings.filter((f) => f.level !== 'warn');
  const status = bad.length ? 'fail' : findings.length ? 'warn' : 'pass';
  const order = { critical: 0, unhealthy: 1, warn: 2 } as const;
  const sorted = [...findings].sort((a, b) => order[a.level] - order[b.level]);
  const text = sorted.map((f) => (f.level === 'critical' ? `CRITICAL ${f.text}` : f.text)).join('; ');
  const tail = o.xidUnreadable ? ` (Xid not checked: ${o.xidUnreadable})` : '';
  return {
    status,
    detail: (findings.length ? `${desc}: ${text}` : `${desc} (reserved ${(o.reserved * 100).toFixed(0)} %)`) + tail,
    findings: sorted,
    samples,
  };
}
