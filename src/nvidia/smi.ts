// Parsers for what nvidia-smi and the NVIDIA driver and libraries really print (tested on the real
// captures under test/fixtures). Neutral: preflight, health and the simulated host all read them.

// eslint-disable-next-line no-control-regex
const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '');

/** /proc/driver/nvidia/version: "...Kernel Module for x86_64  580.159.04  Release Build..." */
export function parseProcDriverVersion(text: string | null): { version: string; open: boolean } | undefined {
  if (!text) return undefined;
  const first = text.split('\n')[0] ?? '';
  const m = /Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)/.exec(first);
  if (!m) return undefined;
  return { version: m[1]!, open: /Open Kernel Module/.test(first) };
}

const PLACEHOLDER =
  /^\[?(N\/A|Not Supported|Requested functionality has been deprecated|Unknown Error|Insufficient Permissions|GPU requires reset)\]?$/i;
const isPlaceholder = (v: string | undefined) => v === undefined || v === '' || PLACEHOLDER.test(v.trim());

/** The fields preflight asks for, in order (the same list as the real 2 x H200 capture). */
export const GPU_FIELDS = [
  'index',
  'name',
  'uuid',
  'pci.bus_id',
  'driver_version',
  'vbios_version',
  'inforom.img',
  'compute_cap',
  'memory.total',
  'memory.used',
  'memory.free',
  'temperature.gpu',
  'power.draw',
  'power.limit',
  'enforced.power.limit',
  'persistence_mode',
  'ecc.mode.current',
  'ecc.errors.uncorrected.volatile.total',
  'retired_pages.pending',
  'remapped_rows.pending',
  'remapped_rows.failure',
  'clocks_event_reasons.active',
  'mig.mode.current',
  'pcie.link.gen.current',
  'pcie.link.gen.max',
  'pcie.link.width.current',
  'pcie.link.width.max',
  'utilization.gpu',
  'gsp.mode.current',
] as const;

/**
 * `--format=csv,noheader,nounits` rows. Values are separated by ", "; a GPU name may itself contain
 * commas, so surplus pieces are glued back into the name column.
 */
export function parseQueryGpu(text: string, fields: readonly string[]): Array<Record<string, string | undefined>> {
  const rows: Array<Record<string, string | undefined>> = [];
  const nameIdx = fields.indexOf('name');
  for (const line of text.split('\n')) {
    if (!line.trim() || line.startsWith('__rc=')) continue;
    let parts = line.split(', ');
    if (parts.length > fields.length && nameIdx >= 0) {
      const extra = parts.length - fields.length;
      parts = [
        ...parts.slice(0, nameIdx),
        parts.slice(nameIdx, nameIdx + extra + 1).join(', '),
        ...parts.slice(nameIdx + extra + 1),
      ];
    }
    if (parts.length !== fields.length) continue;
    const row: Record<string, string | undefined> = {};
    fields.forEach((f, i) => {
      const v = parts[i]!.trim();
      row[f] = isPlaceholder(v) ? undefined : v;
    });
    rows.push(row);
  }
  return rows;
}

/** The header-bearing `--format=csv` of the corpus captures: a map of field -> values, units stripped. */
export function parseQueryGpuWithHeader(text: string): Array<Record<string, string | undefined>> {
  const lines = text.split('\n').filter((l) => l.trim() && !l.startsWith('__rc='));
  if (!lines.length) return [];
  const header = lines[0]!.split(', ').map((h) => h.replace(/\s*\[.*\]$/, '').trim());
  return parseQueryGpu(lines.slice(1).join('\n'), header).map((row) => {
    for (const k of Object.keys(row)) {
      const v = row[k];
      if (v !== undefined) row[k] = v.replace(/\s+(MiB|W|%|MHz|C)$/, '');
    }
    return row;
  });
}

/** `Field "x" is not a valid field to query.` -> "x" */
export function invalidField(stderrOrStdout: string): string | undefined {
  return /Field "([^"]+)" is not a valid field to query/.exec(stderrOrStdout)?.[1];
}

/** `nvidia-smi --help-query-gpu`: the field names this driver knows (quoted names at line starts). */
export function parseHelpQueryGpu(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(/^"([^"]+)"(?:\s+or\s+"([^"]+)")*/gm)) {
    out.add(m[1]!);
    for (const alt of m[0].matchAll(/"([^"]+)"/g)) out.add(alt[1]!);
  }
  return out;
}

/**
 * What preflight reads of `nvidia-smi -q` (the driver's CUDA version, each GPU's GSP firmware and
 * fabric state), asked narrowly: the GSP section of -q (its header carries the driver and CUDA
 * versions) and the fabric fields of --query-gpu. The whole -q is the fallback for a driver that
 * refuses either (and for a bundle recorded before).
 */
export const SMI_Q_GSP = ['nvidia-smi', '-q', '-d', 'GSP_FIRMWARE_VERSION'] as const;
export const SMI_FABRIC = [
  'nvidia-smi',
  '--query-gpu=pci.bus_id,fabric.state,fabric.status',
  '--format=csv,noheader,nounits',
] as const;
export const SMI_Q_FULL = ['nvidia-smi', '-q'] as const;

/** The SMI_FABRIC rows: bus id -> fabric state and status ("N/A" where the GPU has no fabric). */
export function parseFabricQuery(text: string): Map<string, { state?: string; status?: string }> {
  const out = new Map<string, { state?: string; status?: string }>();
  for (const row of parseQueryGpu(text, ['pci.bus_id', 'fabric.state', 'fabric.status'])) {
    const bus = row['pci.bus_id'];
    if (!bus || !/^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$/.test(bus)) continue;
    out.set(bus.toUpperCase(), { state: row['fabric.state'] ?? 'N/A', status: row['fabric.status'] ?? 'N/A' });
  }
  return out;
}

/** The narrow reading put together: the GSP section's header and firmware, each GPU's fabric from the query. */
export function withFabric(q: SmiQ, fabric: ReadonlyMap<string, { state?: string; status?: string }>): SmiQ {
  return {
    ...q,
    gpus: q.gpus.map((g) => {
      const f = fabric.get(g.busId.toUpperCase());
      return f ? { ...g, fabricState: f.state, fabricStatus: f.status } : g;
    }),
  };
}

export interface SmiQ {
  cudaVersion?: string;
  driverVersion?: string;
  gpus: Array<{
    busId: string;
    gspFirmware?: string;
    inforomImage?: string;
    fabricState?: string;
    fabricStatus?: string;
    productName?: string;
  }>;
}

/** `nvidia-smi -q`: the header's CUDA Version and, per GPU, GSP firmware, InfoROM image, fabric state. */
export function parseSmiQ(text: string): SmiQ {
  const out: SmiQ = { gpus: [] };
  let cur: SmiQ['gpus'][number] | undefined;
  let section: string[] = [];
  for (const raw of text.split('\n')) {
    if (!raw.trim()) continue;
    const indent = raw.length - raw.trimStart().length;
    const line = raw.trim();
    const gpu = /^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$/.exec(line);
    if (gpu && indent === 0) {
      cur = { busId: gpu[1]! };
      out.gpus.push(cur);
      section = [];
      continue;
    }
    const kv = /^([^:]+?)\s*:\s*(.*)$/.exec(line);
    const level = Math.max(0, Math.floor(indent / 4) - 1);
    if (!kv || kv[2] === '') {
      section = [...section.slice(0, level), line.replace(/\s*:$/, '')];
      continue;
    }
    const [k, v] = [kv[1]!, kv[2]!.trim()];
    section = section.slice(0, level);
    if (!cur) {
      if (k === 'CUDA Version') out.cudaVersion = v;
      if (k === 'Driver Version') out.driverVersion = v;
      continue;
    }
    const path = [...section, k].join('/');
    if (k === 'GSP Firmware Version') cur.gspFirmware = isPlaceholder(v) ? undefined : v;
    else if (path === 'Inforom Version/Image Version') cur.inforomImage = v;
    else if (path === 'Fabric/State') cur.fabricState = v;
    else if (path === 'Fabric/Status') cur.fabricStatus = v;
    else if (k === 'Product Name') cur.productName = v;
  }
  return out;
}

export interface Topology {
  gpus: string[];
  link: (a: number, b: number) => string | undefined;
  numa: Array<string | undefined>;
}

/** `nvidia-smi topo -m`: tab-separated, with ANSI underline codes around the header even in a pipe. */
export function parseTopo(text: string): Topology | undefined {
  const lines = stripAnsi(text).split('\n');
  const headerIdx = lines.findIndex((l) => /\tGPU0\b/.test(l) || /^\s*GPU0\s/.test(l));
  if (headerIdx < 0) return undefined;
  const header = lines[headerIdx]!.split('\t').map((s) => s.trim());
  const numaCol = header.indexOf('NUMA Affinity');
  const rows = new Map<string, string[]>();
  for (const l of lines.slice(headerIdx + 1)) {
    if (!l.trim() || l.startsWith('Legend')) break;
    const cells = l.split('\t').map((s) => s.trim());
    rows.set(cells[0]!, cells);
  }
  const gpus = [...rows.keys()].filter((k) => /^GPU\d+$/.test(k));
  return {
    gpus,
    link: (a, b) => {
      const row = rows.get(`GPU${a}`);
      const col = header.indexOf(`GPU${b}`);
      return row && col >= 0 ? row[col] : undefined;
    },
    numa: gpus.map((g) => (numaCol >= 0 ? rows.get(g)?.[numaCol] : undefined)),
  };
}

const THROTTLE_BITS: Array<[number, string, 'ok' | 'warn' | 'fail']> = [
  [0x1, 'GPU idle', 'ok'],
  [0x2, 'application clocks setting', 'ok'],
  [0x4, 'SW power cap', 'warn'],
  [0x8, 'HW slowdown', 'fail'],
  [0x10, 'sync boost', 'ok'],
  [0x20, 'SW thermal slowdown', 'fail'],
  [0x40, 'HW thermal slowdown', 'fail'],
  [0x80, 'HW power brake slowdown', 'fail'],
  [0x100, 'display clock setting', 'ok'],
];

export function decodeThrottle(hex: string | undefined): Array<{ reason: string; severity: 'ok' | 'warn' | 'fail' }> {
  if (!hex) return [];
  const v = Number(BigInt(hex.startsWith('0x') ? hex : `0x${hex}`) & 0xffffn);
  return THROTTLE_BITS.filter(([bit]) => (v & bit) !== 0).map(([, reason, severity]) => ({ reason, severity }));
}

/** nvcc --version: "Cuda compilation tools, release 13.0, V13.0.88" -> 13.0.88 */
export function parseNvcc(text: string): string | undefined {
  const m = /release (\d+\.\d+), V(\d+\.\d+\.\d+)/.exec(text);
  return m ? m[2] : /release (\d+\.\d+)/.exec(text)?.[1];
}

/** #define NCCL_MAJOR 2 ... -> "2.28.3" (first complete set in the text) */
export function parseHeaderVersion(text: string | null, prefix: 'NCCL' | 'CUDNN'): string | undefined {
  if (!text) return undefined;
  const get = (k: string) => new RegExp(`#define ${prefix}_${k}\\s+(\\d+)`).exec(text)?.[1];
  const [a, b, c] = [get('MAJOR'), get('MINOR'), get('PATCH') ?? get('PATCHLEVEL')];
  return a && b ? `${a}.${b}${c ? `.${c}` : ''}` : undefined;
}

/** ldconfig -p lines: "libnccl.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnccl.so.2" */
export function parseLdconfig(text: string): Array<{ lib: string; path: string }> {
  const out: Array<{ lib: string; path: string }> = [];
  for (const m of text.matchAll(/^\s*(\S+)\s+\([^)]*\)\s+=>\s+(\S+)/gm)) out.push({ lib: m[1]!, path: m[2]! });
  return out;
}

/** torch/version.py: __version__ = '2.11.0+cu130'; cuda: Optional[str] = '13.0' */
export function parseTorchVersionPy(text: string | null): { version?: string; cuda?: string } {
  if (!text) return {};
  return {
    version: /__version__\s*=\s*['"]([^'"]+)['"]/.exec(text)?.[1],
    cuda: /^cuda(?::[^=]+)?\s*=\s*['"]([^'"]+)['"]/m.exec(text)?.[1],
  };
}

/** One GPU's row of `nvidia-smi --query-gpu`: field name -> the text nvidia-smi printed. */
export type Gpu = Record<string, string | undefined>;

/** A field of a GPU row as a number (units and other text stripped); undefined where absent or not a number. */
export function gpuNum(g: Gpu, field: string): number | undefined {
  const v = g[field];
  if (v === undefined) return undefined;
  const n = Number(v.replace(/[^\d.-]/g, ''));
  return Number.isFinite(n) ? n : undefined;
}
