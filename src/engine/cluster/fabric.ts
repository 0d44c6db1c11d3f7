// The fabric between the nodes, read from each node and checked; never written. What a DGX Spark
// owner who followed NVIDIA's playbook has: a ConnectX-7 netdev (enp1s0f1np1) with an address, its
// RoCE device (rocep1s0f1) and the twin of the same port (roceP2p1s0f1), RoCE v2, jumbo frames.
// Read with sysfs only (no rdma-core needed): /sys/class/net/IF/{operstate,mtu,speed}, and under
// /sys/class/infiniband/DEV/ports/P/: state, phys_state, link_layer, rate, gids/I,
// gid_attrs/types/I ("RoCE v2"), gid_attrs/ndevs/I (the netdev of that GID); plus `ip -o -4 addr`,
// and `show_gids` where the node has it (MLNX_OFED / DOCA): its rows fill in a GID whose sysfs type
// or netdev could not be read (a kernel without gid_attrs, a GID entry sysfs refuses to show).
// From that: NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME (the fabric netdev), NCCL_IB_HCA (the active
// RoCE devices, the fabric netdev's first), NCCL_IB_GID_INDEX (the RoCE v2 GID of the fabric
// address: it moves after a reboot or a recable, so it is read each time), UCX_NET_DEVICES (the
// netdev, as the Spark community's launch scripts set it). A wrong or missing value makes NCCL fall
// back to TCP over whatever it finds, without an error: hence the checks (src/preflight/fabric.ts,
// with the pings between the nodes).
import type { NodeEntry, NodesFile } from '../../profiles/schema.js';
import { shellQuote } from '../../output/format.js';
import { allNodes, fabricAddress, fabricInterface } from './ray-plan.js';
import { parseShowGids } from '../../nvidia/rdma.js';

interface RdmaPort {
  dev: string;
  port: number;
  /** "ACTIVE", "DOWN", ... (the word of sysfs `state`, "4: ACTIVE") */
  state: string;
  physState: string;
  linkLayer: string;
  rate: string;
  /** the netdev behind it (gid_attrs/ndevs/0), when known */
  netdev?: string;
  gids: Array<{ index: number; gid: string; type: string; ndev?: string }>;
}

export interface FabricReading {
  iface: string;
  operstate?: string;
  mtu?: number;
  /** Mb/s, from /sys/class/net/IF/speed (-1 or absent on a virtual link) */
  speedMbps?: number;
  /** IPv4 addresses on the fabric interface (ip -o -4 addr) */
  addresses: string[];
  rdma: RdmaPort[];
}

/**
 * POSIX sh run on the node: prints one record a line, every read bounded (head -c), nothing
 * written. SPARKCTL_SYSFS_ROOT (on the node) prefixes /sys for replaying a recorded tree.
 */
export function fabricScript(iface: string): string {
  const I = shellQuote(iface);
  return [
    'R="${SPARKCTL_SYSFS_ROOT:-}"',
    'rd() { [ -f "$1" ] && head -c 256 "$1" 2>/dev/null | head -n 1; }',
    `n="$R/sys/class/net/"${I}`,
    `if [ -d "$n" ]; then echo "net $(rd "$n/operstate") $(rd "$n/mtu") $(rd "$n/speed" || echo -)"; else echo "net missing"; fi`,
    // a replayed tree carries what `ip -o -4 addr show` printed beside it
    `if [ -n "$R" ]; then A=$(grep " "${I}" " "$R/ip-o-4-addr" 2>/dev/null | head -c 4096); else A=$(ip -o -4 addr show dev ${I} 2>/dev/null | head -c 4096); fi`,
    `printf '%s\\n' "$A" | awk '{ for (i = 1; i < NF; i++) if ($i == "inet") print "addr " $(i + 1) }' | head -n 16`,
    'for p in "$R"/sys/class/infiniband/*/ports/*; do',
    '  [ -d "$p" ] || continue',
    '  d=$(basename "$(dirname "$(dirname "$p")")"); pn=$(basename "$p")',
    '  nd=$(rd "$p/gid_attrs/ndevs/0")',
    `  echo "ib $d $pn $(rd "$p/state" | tr ' ' '_') $(rd "$p/phys_state" | tr ' ' '_') $(rd "$p/link_layer") $(rd "$p/rate" | tr ' ' '_') \${nd:--}"`,
    '  for g in "$p"/gids/*; do i=$(basename "$g"); v=$(rd "$g"); case "$v" in ""|0000:0000:0000:0000:0000:0000:0000:0000) continue;; esac',
    `    echo "gid $d $pn $i $v $(rd "$p/gid_attrs/types/$i" | tr ' ' '_') $(rd "$p/gid_attrs/ndevs/$i")"; done | head -n 64`,
    'done | head -n 512',
    // show_gids, where installed (a replayed tree carries what it printed beside it)
    `if [ -n "$R" ]; then if [ -f "$R/show_gids" ]; then head -c 32768 "$R/show_gids" | sed 's/^/sg /'; fi; elif command -v show_gids >/dev/null 2>&1; then show_gids 2>/dev/null | head -c 32768 | sed 's/^/sg /'; fi; true`,
  ].join('\n');
}

const word = (s: string | undefined) =>
  (s ?? '')
    .replace(/^\d+:_?/, '')
    .replace(/_/g, ' ')
    .trim();

/** Every byte from a node is hostile: only lines of the expected shape are kept. */
export function parseFabric(iface: string, text: string): FabricReading {
  const r: FabricReading = { iface, addresses: [], rdma: [] };
  for (const line of text.split('\n').slice(0, 600)) {
    const f = line.trim().split(/\s+/);
    if (f[0] === 'net' && f[1] !== 'missing' && f.length >= 3) {
      // one line per interface: the last one read stands, whole
      const mtu = Number(f[2]);
      const sp = Number(f[3]);
      r.operstate = /^[a-z]+$/.test(f[1]!) ? f[1] : undefined;
      r.mtu = Number.isInteger(mtu) && mtu > 0 ? mtu : undefined;
      r.speedMbps = Number.isFinite(sp) && sp > 0 ? sp : undefined;
      if (r.mtu === undefined) delete r.mtu;
      if (r.speedMbps === undefined) delete r.speedMbps;
    } else if (f[0] === 'addr' && /^\d+\.\d+\.\d+\.\d+\/\d+$/.test(f[1] ?? '')) r.addresses.push(f[1]!.split('/')[0]!);
    else if (f[0] === 'ib' && f.length >= 8 && /^[\w.-]+$/.test(f[1]!) && /^\d+$/.test(f[2]!)) {
      r.rdma.push({
        dev: f[1]!,
        port: Number(f[2]),
        state: word(f[3]),
        physState: word(f[4]),
        linkLayer: f[5]!,
        rate: word(f[6]),
        netdev: f[7] === '-' ? undefined : f[7],
        gids: [],
      });
    } else if (f[0] === 'gid' && f.length >= 6) {
      const p = r.rdma.find((x) => x.dev === f[1] && x.port === Number(f[2]));
      const index = Number(f[3]);
      if (p && Number.isInteger(index) && /^[0-9a-f:]+$/i.test(f[4]!))
        p.gids.push({ index, gid: f[4]!.toLowerCase(), type: word(f[5]), ndev: f[6] });
    }
  }
  // show_gids' rows: a GID sysfs gave without its type or netdev (or not at all) takes them from there
  const sg = parseShowGids(
    text
      .split('\n')
      .filter((l) => l.startsWith('sg '))
      .map((l) => l.slice(3))
      .join('\n'),
  );
  for (const row of sg) {
    const p = r.rdma.find((x) => x.dev === row.dev && x.port === row.port);
    if (!p) continue;
    const type = row.ver === 'v2' ? 'RoCE v2' : 'IB/RoCE v1';
    const g = p.gids.find((x) => x.index === row.index);
    if (!g) p.gids.push({ index: row.index, gid: row.gid, type, ndev: row.ndev });
    else if (g.gid === row.gid) {
      if (!g.type) g.type = type;
      if (!g.ndev) g.ndev = row.ndev;
    }
  }
  return r;
}

/** The RoCE GID of an IPv4 address: the address IPv4-mapped (::ffff:a.b.c.d), as the kernel writes it in gids/I. */
export function ipv4Gid(addr: string): string {
  const o = addr.split('.').map(Number);
  const h = (a: number, b: number) => ((a << 8) | b).toString(16).padStart(4, '0');
  return `0000:0000:0000:0000:0000:ffff:${h(o[0]!, o[1]!)}:${h(o[2]!, o[3]!)}`;
}

/** The RDMA port whose netdev is the fabric interface. */
export const fabricPort = (r: FabricReading) =>
  r.rdma.find((p) => p.netdev === r.iface || p.gids.some((g) => g.ndev === r.iface));

/** The GID of `address` on the fabric port: its index and type (undefined: the address has no GID there). */
export function gidOf(r: FabricReading, address: string): { index: number; type: string } | undefined {
  const p = fabricPort(r);
  const want = ipv4Gid(address);
  const all = p?.gids.filter((g) => g.gid === want) ?? [];
  const v2 = all.find((g) => g.type === 'RoCE v2');
  return v2 ?? all[0];
}

/** The NCCL/Gloo/UCX variables for a node, from what was read on it (only what could be read). */
export function fabricEnv(node: NodeEntry, r: FabricReading): Record<string, string> {
  const env: Record<string, string> = { UCX_NET_DEVICES: fabricInterface(node) };
  const own = fabricPort(r);
  const active = r.rdma.filter((p) => p.state === 'ACTIVE' && p.linkLayer === 'Ethernet');
  if (own && own.state === 'ACTIVE') {
    const hcas = [own.dev, ...active.filter((p) => p.dev !== own.dev).map((p) => p.dev)];
    env.NCCL_IB_HCA = [...new Set(hcas)].join(',');
    const g = gidOf(r, fabricAddress(node));
    if (g && g.type === 'RoCE v2') env.NCCL_IB_GID_INDEX = String(g.index);
  }
  return env;
}

/** Every node's fabric, read over ssh concurrently (undefined: that node did not answer). */
export async function readFabric(
  nf: NodesFile,
  signal?: AbortSignal,
  why?: Map<string, string>,
): Promise<Map<string, FabricReading | undefined>> {
  const { ssh, remoteWhy } = await import('./ssh.js');
  const read = await Promise.all(
    allNodes(nf).map(async (n) => {
      const r = await ssh(nf, n, fabricScript(fabricInterface(n)), {
        timeoutMs: 30_000,
        signal,
        maxBytes: 1024 * 1024,
      });
      if (r.exitCode !== 0) why?.set(n.name, `reading its fabric over ssh failed: ${remoteWhy(r, 1)}`);
      return [n.name, r.exitCode === 0 ? parseFabric(fabricInterface(n), r.stdout) : undefined] as const;
    }),
  );
  return new Map(read);
}

/** The NCCL/UCX variables of every node whose fabric was read, for the launch plan. */
export function fabricEnvs(
  nf: NodesFile,
  readings: Map<string, FabricReading | undefined>,
): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const n of allNodes(nf)) {
    const r = readings.get(n.name);
    if (r?.operstate) out[n.name] = fabricEnv(n, r);
  }
  return out;
}

/** The nodes whose fabric shows an RDMA device (their containers get /dev/infiniband). */
export const rdmaNodes = (readings: Map<string, FabricReading | undefined>) =>
  new Set([...readings].filter(([, r]) => (r?.rdma.length ?? 0) > 0).map(([n]) => n));
