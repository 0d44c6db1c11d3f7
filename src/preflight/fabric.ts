// Preflight of the fabric between the nodes: pings from every node to every other node's fabric
// address (plain, then non-fragmenting at the common MTU), and the checks over what
// engine/cluster/fabric.ts read from each node (link, MTU, RDMA, GID). Read-only, over ssh.
import type { NodeEntry, NodesFile } from '../profiles/schema.js';
import type { CheckResult } from '../output/check.js';
import { shellQuote } from '../output/format.js';
import { allNodes, fabricAddress } from '../engine/cluster/ray-plan.js';
import { readFabric, fabricPort, gidOf, type FabricReading } from '../engine/cluster/fabric.js';

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

interface FabricCtx {
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

interface FabricCheck {
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
    const lacking = allNodes(ctx.nf).filter(
      (o) => o !== n && ctx.pings.get(n.name)?.get(fabricAddress(o))?.reach === undefined,
    );
    if (lacking.length)
      out.push(
        `${n.name} -> ${lacking.map((o) => o.name).join(', ')}${ctx.why?.get(n.name) ? ` (${ctx.why.get(n.name)})` : ''}`,
      );
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

const seen = (ctx: FabricCtx) =>
  allNodes(ctx.nf).flatMap((n) => (ctx.readings.get(n.name) ? [{ n, r: ctx.readings.get(n.name)! }] : []));
const names = (xs: Array<{ n: NodeEntry }>) => xs.map((x) => x.n.name).join(', ');

/** The MTU most nodes have (ties: the larger), the one the fabric is meant to run. */
function commonMtu(ctx: FabricCtx): number | undefined {
  const counts = new Map<number, number>();
  for (const { r } of seen(ctx)) if (r.mtu) counts.set(r.mtu, (counts.get(r.mtu) ?? 0) + 1);
  return [...counts.entries()].sort((a, b) => b[1] - a[1] || b[0] - a[0])[0]?.[0];
}

const FABRIC_CHECKS: FabricCheck[] = [
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
        observed:
          s.map(({ n, r }) => `${n.name} ${r.iface} up${r.speedMbps ? ` ${r.speedMbps / 1000} Gb/s` : ''}`).join(', ') +
          (slow.length ? ` (under 100 Gb/s: ${names(slow)})` : ''),
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
            observed: bad
              .map(
                ({ n, r }) =>
                  `${n.name}: ${fabricAddress(n)} is not on ${r.iface} (it has ${r.addresses.join(', ') || 'no IPv4 address'})`,
              )
              .join('; '),
            expected: 'the address of the nodes file on that interface',
            fix: 'fix fabric.address / fabric.interface in the nodes file (ip -br addr); sparkctl never changes the network configuration',
          }
        : unread(ctx).length
          ? couldNotCheck(true, unread(ctx), 'the address of the nodes file on that interface')
          : {
              status: 'pass',
              observed: s.map(({ n, r }) => `${n.name} ${fabricAddress(n)} on ${r.iface}`).join(', '),
              expected: '',
            };
    },
  },
  {
    id: 'fabric.mtu',
    title: 'one MTU on every node, and a non-fragmenting ping of that size passes between every pair',
    blocking: true,
    run(ctx) {
      const s = seen(ctx).filter(({ r }) => r.mtu);
      if (!s.length)
        return couldNotCheck(true, unread(ctx).length ? unread(ctx) : ['no node showed an MTU'], 'one MTU end to end');
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
      if (allNodes(ctx.nf).length < 2)
        return { status: 'skip', observed: 'one node: no fabric between nodes', expected: '' };
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
            missing.length
              ? `no RDMA device behind the fabric interface on ${names(missing)} (the others have ${withDev.map(({ n, r }) => `${n.name} ${fabricPort(r)!.dev}`).join(', ')})`
              : '',
            inactive.length
              ? inactive
                  .map(
                    ({ n, r }) =>
                      `${n.name}: ${fabricPort(r)!.dev} port ${fabricPort(r)!.port} is ${fabricPort(r)!.state} (${fabricPort(r)!.physState})`,
                  )
                  .join('; ')
              : '',
          ]
            .filter(Boolean)
            .join('; '),
          expected: 'ACTIVE on every node',
          fix: 'NCCL would mix RDMA and sockets, or fall back to TCP silently: check the cable and ibdev2netdev on those nodes (the mlx5_ib module, the port up)',
        };
      if (unread(ctx).length) return couldNotCheck(true, unread(ctx), 'ACTIVE on every node');
      return {
        status: 'pass',
        observed: withDev.map(({ n, r }) => `${n.name} ${fabricPort(r)!.dev} ACTIVE`).join(', '),
        expected: 'ACTIVE on every node',
      };
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
              g
                ? `${n.name}: the GID of ${fabricAddress(n)} on ${fabricPort(r)!.dev} (index ${g.index}) is ${g.type}`
                : `${n.name}: no GID of ${fabricAddress(n)} on ${fabricPort(r)!.dev}`,
            )
            .join('; '),
          expected: 'RoCE v2',
          fix: 'the address must be on the RoCE netdev itself (not a bridge or VLAN above it); show_gids lists the table; RoCE v2 needs the rdma_cm default (cma_roce_mode)',
        };
      if (unread(ctx).length) return couldNotCheck(true, unread(ctx), 'RoCE v2');
      const idx = new Set(rows.map((x) => x.g!.index));
      return {
        status: 'pass',
        observed:
          rows.map(({ n, g }) => `${n.name} index ${g!.index}`).join(', ') +
          (idx.size > 1 ? ' (it differs between nodes: set per node)' : ''),
        expected: 'RoCE v2',
      };
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
  const { ssh, remoteWhy } = await import('../engine/cluster/ssh.js');
  const nodes = allNodes(nf);
  const why = new Map<string, string>();
  const ctx: FabricCtx = { nf, readings: await readFabric(nf, signal, why), pings: new Map(), why };
  const mtu = commonMtu(ctx);
  ctx.pingSize = mtu ? mtu - 28 : 1472;
  await Promise.all(
    nodes.map(async (n) => {
      if (!ctx.readings.get(n.name)) return;
      const targets = nodes.filter((o) => o !== n).map(fabricAddress);
      const r = await ssh(nf, n, pingScript(targets, ctx.pingSize!), {
        timeoutMs: 15_000 + targets.length * 9_000,
        signal,
        maxBytes: 256 * 1024,
      });
      ctx.pings.set(n.name, parsePings(r.stdout));
      // the verdicts printed before a failure stand; the ones missing are "could not check", with this reason
      if (r.exitCode !== 0) why.set(n.name, `the ping step over ssh failed: ${remoteWhy(r, 1)}`);
    }),
  );
  return ctx;
}
