// What rdma-core's and MLNX_OFED's own tools print about a node's RDMA devices, parsed: `show_gids`
// (the GID table with its RoCE version and netdev, the table NCCL_IB_GID_INDEX indexes) and
// `ibdev2netdev` (which RoCE device is behind which netdev, and whether its link is up). Pure; every
// line is hostile text: only rows of the exact shape count.

interface ShowGidsRow {
  dev: string;
  port: number;
  index: number;
  /** as printed: eight groups of four hex digits */
  gid: string;
  /** the IPv4 address of an IPv4-mapped GID, when printed */
  ipv4?: string;
  /** "v1" or "v2" (RoCE version) */
  ver: 'v1' | 'v2';
  ndev: string;
}

const GID = /^[0-9a-f]{4}(:[0-9a-f]{4}){7}$/i;

/** `show_gids`: DEV PORT INDEX GID [IPv4] VER DEV, after its two header lines. */
export function parseShowGids(text: string): ShowGidsRow[] {
  const out: ShowGidsRow[] = [];
  for (const line of text.split('\n').slice(0, 1024)) {
    const f = line.trim().split(/\s+/);
    if (f.length !== 6 && f.length !== 7) continue;
    const [dev, port, index, gid] = f as [string, string, string, string];
    const ipv4 = f.length === 7 ? f[4] : undefined;
    const ver = f[f.length - 2];
    const ndev = f[f.length - 1]!;
    if (
      !/^[\w.-]+$/.test(dev) ||
      !/^\d+$/.test(port) ||
      !/^\d+$/.test(index) ||
      !GID.test(gid) ||
      (ver !== 'v1' && ver !== 'v2') ||
      !/^[\w.@-]+$/.test(ndev)
    )
      continue;
    if (ipv4 !== undefined && !/^\d{1,3}(\.\d{1,3}){3}$/.test(ipv4)) continue;
    out.push({
      dev,
      port: Number(port),
      index: Number(index),
      gid: gid.toLowerCase(),
      ...(ipv4 ? { ipv4 } : {}),
      ver,
      ndev,
    });
  }
  return out;
}

/** The RoCE v2 GID index of an IPv4 address on a netdev, by show_gids (what NCCL_IB_GID_INDEX must be). */
export function v2IndexOf(
  rows: ShowGidsRow[],
  ipv4: string,
  ndev?: string,
): { dev: string; index: number } | undefined {
  const r = rows.find((x) => x.ipv4 === ipv4 && x.ver === 'v2' && (!ndev || x.ndev === ndev));
  return r ? { dev: r.dev, index: r.index } : undefined;
}

interface Ibdev2netdevRow {
  dev: string;
  port: number;
  netdev: string;
  up: boolean;
}

/** `ibdev2netdev`: "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)". */
export function parseIbdev2netdev(text: string): Ibdev2netdevRow[] {
  const out: Ibdev2netdevRow[] = [];
  for (const line of text.split('\n').slice(0, 256)) {
    const m = /^([\w.-]+) port (\d+) ==> ([\w.@-]+) \((Up|Down)\)$/.exec(line.trim());
    if (m) out.push({ dev: m[1]!, port: Number(m[2]), netdev: m[3]!, up: m[4] === 'Up' });
  }
  return out;
}
