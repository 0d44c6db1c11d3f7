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
// back to TCP over whatever it finds, without an error: hence the checks.
import type { NodeEntry, NodesFile } from '../../profiles/schema.js';
import type { CheckResult } from '../../output/check.js';
import { shellQuote } from '../../output/format.js';
import { allNodes, fabricAddress, fabricInterface } from './ray-plan.js';
import { parseShowGids } from '../../nvidia/rdma.js';

export interface RdmaPort {
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
      r.rdma.push({ dev: f[1]!, port: Number(f[2]), state: word(f[3]), physState: word(f[4]), linkLayer: f[5]!, rate: word(f[6]), netdev: f[7] === '-' ? undefined : f[7], gids: [] });
    } else if (f[0] === 'gid' && f.length >= 6) {
      const p = r.rdma.find((x) => x.dev === f[1] && x.port === Number(f[2]));
      const index = Number(f[3]);
      if (p && Number.isInteger(index) && /^[0-9a-f:]+$/i.test(f[4]!)) p.gids.push({ index, gid: f[4]!.toLowerCase(), type: word(f[5]), ndev: f[6] });
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
export const fabricPort = (r: FabricReading) => r.rdma.find((p) => p.netdev === r.iface || p.gids.some((g) => g.ndev === r.iface));

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

/**
 * Shell for one node: to every other node's fabric address a plain ping (reachable at all) and a
 * non-fragmenting one of `size` payload bytes (-M do: the MTU holds end to end). Reads nothing back
 * but the verdicts; changes nothing.
 */
export function pingScript(targets: string[], size: number): string {
  // -W 1: a fabric peer answers in microseconds; the second ping only where the first passed
  const one = (t: string) => {
    const q = shellQuote(t);
    return `if ping -s 56 -c 1 -W 1 ${q} >/dev/null 2>&1; then echo "ping ${t} reach ok"; if ping -M do -s ${Math.max(0, size)} -c 1 -W 1 ${q} >/dev/null 2>&1; then echo "ping ${t} mtu ok"; else echo "ping ${t} mtu fail"; fi; else echo "ping ${t} reach fail"; fi`;
  };
  // every target at once: a node's pings run concurrently, the verdicts printed as they come
  return targets.length ? `${targets.map((t) => `( ${one(t)} ) &`).join(' ')} wait` : ':';
}

export interface PingResult {
  reach?: boolean;
  mtu?: boolean;
}

export function parsePings(text: string): Map<string, PingResult> {
  const m = new Map<string, PingResult>();
  for (const l of text.split('\n').slice(0, 256)) {
    const x = /^ping (\S+) (reach|mtu) (ok|fail)$/.exec(l.trim());
    if (!x) continue;
    const r = m.get(x[1]!) ?? {};
    r[x[2] as 'reach' | 'mtu'] = x[3] === 'ok';
    m.set(x[1]!, r);
  }
  return m;
}

export interface FabricCtx {
  nf: NodesFile;
  /** per node name: what was read (undefined: not reached) */
  readings: Map<string, FabricReading | undefined>;
  /** per node name: fabric address of another node -> did the pings pass */
  pings: Map<string, Map<string, PingResult>>;
  /** the payload size pinged (the common MTU minus 28) */
  pingSize?: number;
  /** per node name: why its fabric or its pings could not be read (the ssh step's own words) */
  why?: Map<string, string>;
}

export interface FabricCheck {
  id: string;
  title: string;
  blocking: boolean;
  run(ctx: FabricCtx): CheckResult;
}

/**
 * Evidence a check needs and does not have: nodes whose fabric was not read, and (for the ping
 * checks) pairs with no ping verdict. A check that lacks it never passes: it says it could not check.
 */
function unread(ctx: FabricCtx): string[] {
  return allNodes(ctx.nf)
    .filter((n) => !ctx.readings.get(n.name))
    .map((n) => `${n.name}: ${ctx.why?.get(n.name) ?? 'its fabric was not read'}`);
}

function unpinged(ctx: FabricCtx): string[] {
  const out: string[] = [];
  const s = seen(ctx);
  for (const { n } of s) {
    const lacking = allNodes(ctx.nf).filter((o) => o !== n && ctx.pings.get(n.name)?.get(fabricAddress(o))?.reach === undefined);
    if (lacking.length) out.push(`${n.name} -> ${lacking.map((o) => o.name).join(', ')}${ctx.why?.get(n.name) ? ` (${ctx.why.get(n.name)})` : ''}`);
  }
  return out;
}

/** "could not check", with the reason: a blocking check's gate stays closed (fail), another's warns. */
export function couldNotCheck(blocking: boolean, missing: string[], expected: string): CheckResult {
  return {
    status: blocking ? 'fail' : 'warn',
    observed: `could not check: ${missing.join('; ')}`,
    expected,
    fix: 'the evidence is missing, not known to be good: make the ssh step work on those nodes (ssh NODE true; the nodes file ssh: block), then run preflight --nodes again',
  };
}

const seen = (ctx: FabricCtx) => allNodes(ctx.nf).flatMap((n) => (ctx.readings.get(n.name) ? [{ n, r: ctx.readings.get(n.name)! }] : []));
const names = (xs: Array<{ n: NodeEntry }>) => xs.map((x) => x.n.name).join(', ');

/** The MTU most nodes have (ties: the larger), the one the fabric is meant to run. */
export function commonMtu(ctx: FabricCtx): number | undefined {
  const counts = new Map<number, number>();
  for (const { r } of seen(ctx)) if (r.mtu) counts.set(r.mtu, (counts.get(r.mtu) ?? 0) + 1);
  return [...counts.entries()].sort((a, b) => b[1] - a[1] || b[0] - a[0])[0]?.[0];
}

export const FABRIC_CHECKS: FabricCheck[] = [
  {
    id: 'fabric.link',
    title: 'the fabric interface exists and is up on every node',
    blocking: true,
    run(ctx) {
      const s = seen(ctx);
      if (!s.length) return couldNotCheck(true, unread(ctx), 'up');
      const bad = s.filter(({ r }) => r.operstate !== 'up');
      const slow = s.filter(({ r }) => r.speedMbps !== undefined && r.speedMbps < 100_000);
      if (bad.length)
        return {
          status: 'fail',
          observed: bad.map(({ n, r }) => `${n.name}: ${r.iface} ${r.operstate ?? 'does not exist'}`).join('; '),
          expected: 'up',
          fix: 'check the cable and the port (ip -br link; on a Spark: ibdev2netdev); fabric.interface in the nodes file must be the netdev that carries the fabric',
        };
      if (unread(ctx).length) return couldNotCheck(true, unread(ctx), 'up');
      return {
        status: 'pass',
        observed: s.map(({ n, r }) => `${n.name} ${r.iface} up${r.speedMbps ? ` ${r.speedMbps / 1000} Gb/s` : ''}`).join(', ') + (slow.length ? ` (under 100 Gb/s: ${names(slow)})` : ''),
        expected: 'up',
      };
    },
  },
  {
    id: 'fabric.address',
    title: "each node's fabric address is on its fabric interface",
    blocking: true,
    run(ctx) {
      const s = seen(ctx).filter(({ r }) => r.operstate !== undefined);
      if (!s.length) return { status: 'skip', observed: 'no fabric interface read', expected: '' };
      const bad = s.filter(({ n, r }) => !r.addresses.includes(fabricAddress(n)));
      return bad.length
        ? {
            status: 'fail',
            observed: bad.map(({ n, r }) => `${n.name}: ${fabricAddress(n)} is not on ${r.iface} (it has ${r.addresses.join(', ') || 'no IPv4 address'})`).join('; '),
            expected: 'the address of the nodes file on that interface',
            fix: 'fix fabric.address / fabric.interface in the nodes file (ip -br addr); sparkctl never changes the network configuration',
          }
        : unread(ctx).length
          ? couldNotCheck(true, unread(ctx), 'the address of the nodes file on that interface')
          : { status: 'pass', observed: s.map(({ n, r }) => `${n.name} ${fabricAddress(n)} on ${r.iface}`).join(', '), expected: '' };
    },
  },
  {
    id: 'fabric.mtu',
    title: 'one MTU on every node, and a non-fragmenting ping of that size passes between every pair',
    blocking: true,
    run(ctx) {
      const s = seen(ctx).filter(({ r }) => r.mtu);
      if (!s.length) return couldNotCheck(true, unread(ctx).length ? unread(ctx) : ['no node showed an MTU'], 'one MTU end to end');
      const m = commonMtu(ctx)!;
      const odd = s.filter(({ r }) => r.mtu !== m);
      const failed: string[] = [];
      for (const { n } of s)
        for (const o of s) {
          if (o.n === n) continue;
          const p = ctx.pings.get(n.name)?.get(fabricAddress(o.n));
          // an address that does not answer at all is fabric.reachable's finding
          if (p?.reach && p.mtu === false) failed.push(`${n.name} -> ${o.n.name}`);
        }
      if (odd.length || failed.length)
        return {
          status: 'fail',
          observed: [
            odd.length ? `${odd.map(({ n, r }) => `${n.name} has MTU ${r.mtu}`).join(', ')} (others: ${m})` : '',
            failed.length ? `ping -M do -s ${ctx.pingSize} (MTU ${m}) does not pass: ${failed.join(', ')}` : '',
          ]
            .filter(Boolean)
            .join('; '),
          expected: `MTU ${m} end to end`,
          fix: `set the same MTU on every node's fabric interface and on the switch ports between them (a Spark fabric runs 9000; e.g. nmcli connection modify ... mtu ${m}); check with ping -M do -s ${m - 28} PEER`,
        };
      const lacking = [
        ...unread(ctx),
        ...seen(ctx)
          .filter(({ r }) => !r.mtu)
          .map(({ n }) => `${n.name}: no MTU shown`),
        ...unpinged(ctx).map((x) => `no ping verdict ${x}`),
      ];
      if (lacking.length) return couldNotCheck(true, lacking, `MTU ${m} end to end`);
      return {
        status: 'pass',
        observed: `MTU ${m} on ${s.length} nodes${ctx.pingSize !== undefined ? `; ping -M do -s ${ctx.pingSize} passes between every pair` : ''}`,
        expected: `MTU ${m} end to end`,
      };
    },
  },
  {
    id: 'fabric.reachable',
    title: "every node reaches every other node's fabric address",
    blocking: true,
    run(ctx) {
      const s = seen(ctx);
      if (allNodes(ctx.nf).length < 2) return { status: 'skip', observed: 'one node: no fabric between nodes', expected: '' };
      if (s.length < 2) return couldNotCheck(true, unread(ctx), 'every pair');
      const unreached = allNodes(ctx.nf).flatMap((o) => {
        const from = s.filter(({ n }) => n !== o && ctx.pings.get(n.name)?.get(fabricAddress(o))?.reach === false);
        return from.length ? [`${o.name}'s fabric address ${fabricAddress(o)} from ${names(from)}`] : [];
      });
      const small = new Set(unreached);
      return small.size
        ? {
            status: 'fail',
            observed: `not reachable: ${[...small].join('; ')}`,
            expected: 'every pair',
            fix: 'check the cable, the addresses (one subnet on the fabric) and the routes: ip route get ADDR on the node that cannot reach it; firewalls between the nodes',
          }
        : unread(ctx).length || unpinged(ctx).length
          ? couldNotCheck(true, [...unread(ctx), ...unpinged(ctx).map((x) => `no ping verdict ${x}`)], 'every pair')
          : { status: 'pass', observed: `${s.length} nodes reach each other over the fabric`, expected: 'every pair' };
    },
  },
  {
    id: 'fabric.rdma',
    title: 'an active RoCE device behind the fabric interface on every node (or on none)',
    blocking: true,
    run(ctx) {
      const s = seen(ctx).filter(({ r }) => r.operstate !== undefined);
      if (!s.length) return { status: 'skip', observed: 'no fabric interface read', expected: '' };
      const withDev = s.filter(({ r }) => fabricPort(r));
      if (!withDev.length)
        return {
          status: 'warn',
          observed: `no RDMA device behind the fabric interface on any node (${names(s)})`,
          expected: 'RoCE on a ConnectX fabric',
          fix: 'NCCL will use TCP sockets: expected on a plain Ethernet test bed, slow on a Spark fabric (check ibdev2netdev and the mlx5 driver)',
        };
      const missing = s.filter(({ r }) => !fabricPort(r));
      const inactive = withDev.filter(({ r }) => fabricPort(r)!.state !== 'ACTIVE');
      if (missing.length || inactive.length)
        return {
          status: 'fail',
          observed: [
            missing.length ? `no RDMA device behind the fabric interface on ${names(missing)} (the others have ${withDev.map(({ n, r }) => `${n.name} ${fabricPort(r)!.dev}`).join(', ')})` : '',
            inactive.length ? inactive.map(({ n, r }) => `${n.name}: ${fabricPort(r)!.dev} port ${fabricPort(r)!.port} is ${fabricPort(r)!.state} (${fabricPort(r)!.physState})`).join('; ') : '',
          ]
            .filter(Boolean)
            .join('; '),
          expected: 'ACTIVE on every node',
          fix: 'NCCL would mix RDMA and sockets, or fall back to TCP silently: check the cable and ibdev2netdev on those nodes (the mlx5_ib module, the port up)',
        };
      if (unread(ctx).length) return couldNotCheck(true, unread(ctx), 'ACTIVE on every node');
      return { status: 'pass', observed: withDev.map(({ n, r }) => `${n.name} ${fabricPort(r)!.dev} ACTIVE`).join(', '), expected: 'ACTIVE on every node' };
    },
  },
  {
    id: 'fabric.gid',
    title: 'the GID of each fabric address is RoCE v2 (the NCCL_IB_GID_INDEX rendered)',
    blocking: true,
    run(ctx) {
      const s = seen(ctx).filter(({ r }) => fabricPort(r));
      if (!s.length) return { status: 'skip', observed: 'no RDMA device behind the fabric interface', expected: '' };
      const rows = s.map(({ n, r }) => ({ n, r, g: gidOf(r, fabricAddress(n)) }));
      const bad = rows.filter((x) => !x.g || x.g.type !== 'RoCE v2');
      if (bad.length)
        return {
          status: 'fail',
          observed: bad
            .map(({ n, r, g }) =>
              g ? `${n.name}: the GID of ${fabricAddress(n)} on ${fabricPort(r)!.dev} (index ${g.index}) is ${g.type}` : `${n.name}: no GID of ${fabricAddress(n)} on ${fabricPort(r)!.dev}`,
            )
            .join('; '),
          expected: 'RoCE v2',
          fix: 'the address must be on the RoCE netdev itself (not a bridge or VLAN above it); show_gids lists the table; RoCE v2 needs the rdma_cm default (cma_roce_mode)',
        };
      if (unread(ctx).length) return couldNotCheck(true, unread(ctx), 'RoCE v2');
      const idx = new Set(rows.map((x) => x.g!.index));
      return { status: 'pass', observed: rows.map(({ n, g }) => `${n.name} index ${g!.index}`).join(', ') + (idx.size > 1 ? ' (it differs between nodes: set per node)' : ''), expected: 'RoCE v2' };
    },
  },
];

export function runFabricChecks(ctx: FabricCtx) {
  return FABRIC_CHECKS.map((c) => ({ id: c.id, title: c.title, blocking: c.blocking, ...c.run(ctx) }));
}

/**
 * Reads every node's fabric (concurrently), then pings from every node to every other node's fabric
 * address: plainly, and non-fragmenting at the common MTU. Over ssh, read-only.
 */
export async function gatherFabric(nf: NodesFile, signal?: AbortSignal): Promise<FabricCtx> {
  const { ssh, remoteWhy } = await import('./ssh.js');
  const nodes = allNodes(nf);
  const why = new Map<string, string>();
  const ctx: FabricCtx = { nf, readings: await readFabric(nf, signal, why), pings: new Map(), why };
  const mtu = commonMtu(ctx);
  ctx.pingSize = mtu ? mtu - 28 : 1472;
  await Promise.all(
    nodes.map(async (n) => {
      if (!ctx.readings.get(n.name)) return;
      const targets = nodes.filter((o) => o !== n).map(fabricAddress);
      const r = await ssh(nf, n, pingScript(targets, ctx.pingSize!), { timeoutMs: 15_000 + targets.length * 9_000, signal });
      ctx.pings.set(n.name, parsePings(r.stdout));
      // the verdicts printed before a failure stand; the ones missing are "could not check", with this reason
      if (r.exitCode !== 0) why.set(n.name, `the ping step over ssh failed: ${remoteWhy(r, 1)}`);
    }),
  );
  return ctx;
}

/** Every node's fabric, read over ssh concurrently (undefined: that node did not answer). */
export async function readFabric(nf: NodesFile, signal?: AbortSignal, why?: Map<string, string>): Promise<Map<string, FabricReading | undefined>> {
  const { ssh, remoteWhy } = await import('./ssh.js');
  const read = await Promise.all(
    allNodes(nf).map(async (n) => {
      const r = await ssh(nf, n, fabricScript(fabricInterface(n)), { timeoutMs: 30_000, signal });
      if (r.exitCode !== 0) why?.set(n.name, `reading its fabric over ssh failed: ${remoteWhy(r, 1)}`);
      return [n.name, r.exitCode === 0 ? parseFabric(fabricInterface(n), r.stdout) : undefined] as const;
    }),
  );
  return new Map(read);
}

/** The NCCL/UCX variables of every node whose fabric was read, for the launch plan. */
export function fabricEnvs(nf: NodesFile, readings: Map<string, FabricReading | undefined>): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const n of allNodes(nf)) {
    const r = readings.get(n.name);
    if (r?.operstate) out[n.name] = fabricEnv(n, r);
  }
  return out;
}

/** The nodes whose fabric shows an RDMA device (their containers get /dev/infiniband). */
export const rdmaNodes = (readings: Map<string, FabricReading | undefined>) => new Set([...readings].filter(([, r]) => (r?.rdma.length ?? 0) > 0).map(([n]) => n));
