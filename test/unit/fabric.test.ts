// The fabric, read from a DGX Spark pair's recorded sysfs (test/fixtures/fabric: every value from a
// public reading of a real Spark/GB10, see its README) by sparkctl's own script under a real shell,
// then rendered into NCCL's variables and checked. The failing trees are edits of the recorded one,
// each named in its case.
import { describe, it, expect, afterAll } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { FIXTURES, tempDir } from '../helpers.js';
import { NodesFile } from '../../src/profiles/schema.js';
import { parseShowGids, parseIbdev2netdev, v2IndexOf } from '../../src/nvidia/rdma.js';
import { fabricScript, parseFabric, fabricEnv, ipv4Gid, type FabricReading } from '../../src/engine/cluster/fabric.js';
import { runFabricChecks, pingScript, parsePings, type PingResult } from '../../src/preflight/fabric.js';

const TREE = readFileSync(join(FIXTURES, 'fabric', 'spark-pair.tree'), 'utf8')
  .split('\n')
  .filter((l) => l && !l.startsWith('#'))
  .map((l) => l.split('\t') as [string, string]);
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * The recorded tree of one node, edited, written out, and read by the real script (bash). An unedited tree is read by
 * the script once per node and interface (each read forks the script's tools: seconds on a loaded CI host); each call
 * gets its own copy.
 */
const unedited = new Map<string, FabricReading>();
function read(node: 'spark' | 'spark2', iface: string, edit?: (files: Map<string, string>) => void): FabricReading {
  if (edit) return readTree(node, iface, edit);
  const key = `${node} ${iface}`;
  if (!unedited.has(key))
    unedited.set(
      key,
      readTree(node, iface, () => {}),
    );
  return structuredClone(unedited.get(key)!);
}
function readTree(node: 'spark' | 'spark2', iface: string, edit: (files: Map<string, string>) => void): FabricReading {
  const files = new Map(TREE.filter(([p]) => p.startsWith(`${node}/`)).map(([p, c]) => [p.slice(node.length + 1), c]));
  edit(files);
  const root = tempDir('sparkctl-fabric-');
  dirs.push(root);
  for (const [p, c] of files) {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    writeFileSync(join(root, p), c.replace(/\\ {7}/g, '\\       ') + '\n');
  }
  const out = execFileSync('sh', ['-c', fabricScript(iface)], {
    env: { ...process.env, SPARKCTL_SYSFS_ROOT: root },
    encoding: 'utf8',
  });
  return parseFabric(iface, out);
}

const nf = NodesFile.parse({
  head: {
    name: 'spark',
    address: '10.0.0.11',
    interface: 'enP7s7',
    gpus: 1,
    fabric: { address: '192.168.177.11', interface: 'enp1s0f1np1' },
  },
  workers: [
    {
      name: 'spark2',
      address: '10.0.0.12',
      interface: 'enP7s7',
      gpus: 1,
      fabric: { address: '192.168.177.12', interface: 'enp1s0f1np1' },
    },
  ],
});
const allOk = (): Map<string, Map<string, PingResult>> =>
  new Map([
    ['spark', new Map([['192.168.177.12', { reach: true, mtu: true }]])],
    ['spark2', new Map([['192.168.177.11', { reach: true, mtu: true }]])],
  ]);
const checks = (a: FabricReading | undefined, b: FabricReading | undefined, pings = allOk()) =>
  Object.fromEntries(
    runFabricChecks({
      nf,
      readings: new Map([
        ['spark', a],
        ['spark2', b],
      ]),
      pings,
      pingSize: 8972,
    }).map((c) => [c.id, c]),
  );

// each reading writes the recorded tree out and runs the real script (bash): seconds under a loaded CI
describe('reading a Spark fabric (recorded sysfs of a GB10 ConnectX-7, replayed)', { timeout: 60_000 }, () => {
  it('the fabric netdev, its RoCE device, the twin, the GID of the fabric address', () => {
    const r = read('spark', 'enp1s0f1np1');
    expect(r).toMatchObject({
      iface: 'enp1s0f1np1',
      operstate: 'up',
      mtu: 9000,
      speedMbps: 200000,
      addresses: ['192.168.177.11'],
    });
    expect(r.rdma.map((p) => `${p.dev}:${p.port} ${p.state} ${p.physState} ${p.linkLayer} ${p.netdev}`).sort()).toEqual(
      [
        'roceP2p1s0f0:1 DOWN Disabled Ethernet enP2p1s0f0np0',
        'roceP2p1s0f1:1 ACTIVE LinkUp Ethernet enP2p1s0f1np1',
        'rocep1s0f0:1 DOWN Disabled Ethernet enp1s0f0np0',
        'rocep1s0f1:1 ACTIVE LinkUp Ethernet enp1s0f1np1',
      ],
    );
    expect(ipv4Gid('192.168.177.11')).toBe('0000:0000:0000:0000:0000:ffff:c0a8:b10b');
    // NCCL: both twins of the cabled port (the fabric netdev's first), the RoCE v2 GID of the address
    expect(fabricEnv(nf.head, r)).toEqual({
      NCCL_IB_HCA: 'rocep1s0f1,roceP2p1s0f1',
      NCCL_IB_GID_INDEX: '3',
      UCX_NET_DEVICES: 'enp1s0f1np1',
    });
    const c = checks(r, read('spark2', 'enp1s0f1np1'));
    for (const id of ['fabric.link', 'fabric.address', 'fabric.mtu', 'fabric.reachable', 'fabric.rdma', 'fabric.gid'])
      expect(c[id].status, `${id}: ${c[id].observed}`).toBe('pass');
    expect(c['fabric.gid'].observed).toBe('spark index 3, spark2 index 3');
    expect(c['fabric.mtu'].observed).toBe('MTU 9000 on 2 nodes; ping -M do -s 8972 passes between every pair');
  });

  it('a fabric interface whose link is down (the recorded port without a cable named as the fabric)', () => {
    const c = checks(read('spark', 'enp1s0f1np1'), read('spark2', 'enp1s0f0np0'));
    expect(c['fabric.link']).toMatchObject({ status: 'fail', observed: 'spark2: enp1s0f0np0 down' });
    expect(c['fabric.rdma'].observed).toBe('spark2: rocep1s0f0 port 1 is DOWN (Disabled)');
  });

  it('an MTU that differs (spark2 at 1500) and the non-fragmenting ping that fails', () => {
    const pings = allOk();
    pings.get('spark')!.set('192.168.177.12', { reach: true, mtu: false });
    pings.get('spark2')!.set('192.168.177.11', { reach: true, mtu: false });
    const c = checks(
      read('spark', 'enp1s0f1np1'),
      read('spark2', 'enp1s0f1np1', (f) => f.set('sys/class/net/enp1s0f1np1/mtu', '1500')),
      pings,
    );
    expect(c['fabric.mtu'].status).toBe('fail');
    // a tie of two nodes: the larger MTU is the one meant
    expect(c['fabric.mtu'].observed).toBe(
      'spark2 has MTU 1500 (others: 9000); ping -M do -s 8972 (MTU 9000) does not pass: spark -> spark2, spark2 -> spark',
    );
  });

  it('an RDMA device missing on one node (spark2 without /sys/class/infiniband: mlx5_ib not loaded)', () => {
    const c = checks(
      read('spark', 'enp1s0f1np1'),
      read('spark2', 'enp1s0f1np1', (f) => {
        for (const k of [...f.keys()]) if (k.startsWith('sys/class/infiniband/')) f.delete(k);
      }),
    );
    expect(c['fabric.rdma']).toMatchObject({
      status: 'fail',
      observed: 'no RDMA device behind the fabric interface on spark2 (the others have spark rocep1s0f1)',
    });
    expect(
      fabricEnv(
        nf.workers[0]!,
        read('spark2', 'enp1s0f1np1', (f) => f.delete('sys/class/infiniband/rocep1s0f1/ports/1/state')),
      ),
    ).not.toHaveProperty('NCCL_IB_GID_INDEX');
  });

  it('the GID of the fabric address only as RoCE v1 (the v2 entry gone: rdma_cm in v1 mode)', () => {
    const v1 = read('spark2', 'enp1s0f1np1', (f) => {
      f.set('sys/class/infiniband/rocep1s0f1/ports/1/gids/3', '0000:0000:0000:0000:0000:0000:0000:0000');
    });
    const c = checks(read('spark', 'enp1s0f1np1'), v1);
    expect(c['fabric.gid']).toMatchObject({
      status: 'fail',
      observed: 'spark2: the GID of 192.168.177.12 on rocep1s0f1 (index 2) is IB/RoCE v1',
    });
    expect(fabricEnv(nf.workers[0]!, v1)).toEqual({
      NCCL_IB_HCA: 'rocep1s0f1,roceP2p1s0f1',
      UCX_NET_DEVICES: 'enp1s0f1np1',
    });
  });

  it('an address that is not on the fabric netdev, a node that cannot be reached', () => {
    const pings = allOk();
    pings.get('spark')!.set('192.168.177.12', { reach: false });
    const c = checks(
      read('spark', 'enp1s0f1np1'),
      read('spark2', 'enp1s0f1np1', (f) => f.set('ip-o-4-addr', '')),
      pings,
    );
    expect(c['fabric.address'].observed).toBe('spark2: 192.168.177.12 is not on enp1s0f1np1 (it has no IPv4 address)');
    expect(c['fabric.reachable'].observed).toBe("not reachable: spark2's fabric address 192.168.177.12 from spark");
  });

  it('hostile node output: only well-formed lines count', () => {
    const r = parseFabric(
      'x',
      'net up nine 1\naddr 1.2.3.4/24; rm -rf /\nib ../x 1 4:_ACTIVE a b c d\ngid nope 1 1 zz\nnet up 9000 -1\n',
    );
    expect(r).toEqual({ iface: 'x', operstate: 'up', mtu: 9000, addresses: [], rdma: [] });
    expect(parsePings('ping 1.2.3.4 reach ok\nping 1.2.3.4 mtu fail\nping $(x) reach ok junk\n')).toEqual(
      new Map([['1.2.3.4', { reach: true, mtu: false }]]),
    );
    // every address goes to ping quoted
    expect(pingScript(["1.2.3.4'; reboot"], 1472)).toContain("'1.2.3.4'\\''; reboot'");
  });
});

// Real outputs recorded from public sources (test/fixtures/fabric/README.md): the parsers of the tools'
// own output, and the recorded Spark tree checked against what real Sparks printed.
const fixture = (f: string) => readFileSync(join(FIXTURES, 'fabric', f), 'utf8');

describe('show_gids and ibdev2netdev, as real hosts printed them', () => {
  it('show_gids of a two-port ConnectX host (NVIDIA/nccl-tests#192): every row, the RoCE v2 index of each IPv4 address', () => {
    const rows = parseShowGids(fixture('show_gids.nccl-tests-192.txt'));
    expect(rows).toHaveLength(8);
    expect(rows[3]).toEqual({
      dev: 'mlx5_0',
      port: 1,
      index: 3,
      gid: '0000:0000:0000:0000:0000:ffff:0b00:0048',
      ipv4: '11.0.0.72',
      ver: 'v2',
      ndev: 'ens3np0',
    });
    expect(rows[0]).not.toHaveProperty('ipv4');
    expect(v2IndexOf(rows, '11.0.0.72')).toEqual({ dev: 'mlx5_0', index: 3 });
    expect(v2IndexOf(rows, '11.0.0.73', 'ens2np0')).toEqual({ dev: 'mlx5_1', index: 3 });
    expect(v2IndexOf(rows, '11.0.0.73', 'ens3np0')).toBeUndefined();
    // the IPv4-mapped GID is the one sparkctl computes from the address
    expect(rows[3]!.gid).toBe(ipv4Gid('11.0.0.72'));
  });

  it('show_gids with a RoCE v1-only ConnectX-3 and a VLAN netdev (tensorflow#22077): no v2 index where there is none', () => {
    const rows = parseShowGids(fixture('show_gids.tensorflow-22077.txt'));
    expect(rows).toHaveLength(9);
    expect(rows.filter((r) => r.dev === 'mlx4_0').every((r) => r.ver === 'v1')).toBe(true);
    expect(rows.find((r) => r.ipv4 === '10.10.10.2')?.ndev).toBe('eth2.10');
    expect(v2IndexOf(rows, '12.12.12.12')).toBeUndefined();
    expect(v2IndexOf(rows, '12.12.11.12')).toEqual({ dev: 'mlx5_0', index: 3 });
  });

  it('hostile show_gids text: only rows of the exact shape', () => {
    expect(
      parseShowGids(
        'mlx5_0 1 3 ::ffff:1.2.3.4 1.2.3.4 v2 eth0\nmlx5_0 x 3 0000:0000:0000:0000:0000:ffff:0102:0304 v2 eth0\nmlx5_0 1 3 0000:0000:0000:0000:0000:ffff:0102:0304 999.1 v2 eth0\n$(rm) 1 3 0000:0000:0000:0000:0000:ffff:0102:0304 v2 eth0',
      ),
    ).toEqual([]);
  });

  it("the fabric read takes a GID's type and netdev from show_gids where sysfs has none (the nccl-tests#192 rows)", () => {
    // the `ib` line is this test's (a port up on ens3np0); the GIDs are show_gids' rows, recorded
    const sg = fixture('show_gids.nccl-tests-192.txt')
      .split('\n')
      .map((l) => `sg ${l}`)
      .join('\n');
    const r = parseFabric(
      'ens3np0',
      [
        'net up 9000 200000',
        'addr 11.0.0.72/24',
        'ib mlx5_0 1 4:_ACTIVE 5:_LinkUp Ethernet 200_Gb/sec ens3np0',
        sg,
      ].join('\n'),
    );
    expect(r.rdma[0]!.gids.find((g) => g.index === 3)).toEqual({
      index: 3,
      gid: ipv4Gid('11.0.0.72'),
      type: 'RoCE v2',
      ndev: 'ens3np0',
    });
    const node = NodesFile.parse({
      head: {
        name: 'h',
        address: '10.1.1.1',
        interface: 'eno1',
        gpus: 8,
        fabric: { address: '11.0.0.72', interface: 'ens3np0' },
      },
      workers: [],
    }).head;
    expect(fabricEnv(node, r)).toMatchObject({ NCCL_IB_HCA: 'mlx5_0', NCCL_IB_GID_INDEX: '3' });
    // a sysfs GID that show_gids contradicts keeps what sysfs said
    const x = parseFabric(
      'ens3np0',
      [
        'ib mlx5_0 1 4:_ACTIVE 5:_LinkUp Ethernet 200_Gb/sec ens3np0',
        'gid mlx5_0 1 3 0000:0000:0000:0000:0000:ffff:0b00:0099 RoCE_v2 ens3np0',
        sg,
      ].join('\n'),
    );
    expect(x.rdma[0]!.gids.find((g) => g.index === 3)?.gid).toBe('0000:0000:0000:0000:0000:ffff:0b00:0099');
  });

  it("the recorded Spark tree is what a real Spark's ibdev2netdev printed: the same devices, netdevs and link states", () => {
    const real = parseIbdev2netdev(fixture('spark.ibdev2netdev.txt'));
    expect(real).toHaveLength(4);
    const r = read('spark', 'enp1s0f1np1');
    expect(
      r.rdma
        .map((p) => ({ dev: p.dev, port: p.port, netdev: p.netdev, up: p.state === 'ACTIVE' }))
        .sort((a, b) => a.dev.localeCompare(b.dev)),
    ).toEqual(real.sort((a, b) => a.dev.localeCompare(b.dev)));
  });

  it("sparkctl's NCCL variables for the tree are what NCCL on a real Spark pair used (MiaAI-Lab PR #95)", () => {
    const log = fixture('spark-pair.nccl-info.txt');
    const used = /NET\/IB : Using \[0\](\S+):1\/RoCE \[1\](\S+):1\/RoCE \[RO\]; OOB (\S+):/.exec(log)!;
    const env = fabricEnv(nf.head, read('spark', 'enp1s0f1np1'));
    expect(env.NCCL_IB_HCA).toBe(`${used[1]},${used[2]}`);
    expect(nf.head.fabric?.interface).toBe(used[3]);
    expect(env.NCCL_IB_GID_INDEX).toBe(/NCCL_IB_GID_INDEX set by environment to (\d+)/.exec(log)![1]);
  });
});

// each case reads the same two trees: read once (a reading is the real script's run, seconds under a loaded CI)
describe('a check that did not run does not pass (issue 42, item 7)', { timeout: 60_000 }, () => {
  let readA: FabricReading | undefined;
  let readB: FabricReading | undefined;
  const a = () => (readA ??= read('spark', 'enp1s0f1np1'));
  const b = () =>
    (readB ??= read('spark2', 'enp1s0f1np1', (f) =>
      f.set('ip-o-4-addr', (f.get('ip-o-4-addr') ?? '').replaceAll('192.168.177.11', '192.168.177.12')),
    ));
  const run = (
    ra: FabricReading | undefined,
    rb: FabricReading | undefined,
    pings: Map<string, Map<string, PingResult>>,
    why: Map<string, string>,
  ) =>
    Object.fromEntries(
      runFabricChecks({
        nf,
        readings: new Map([
          ['spark', ra],
          ['spark2', rb],
        ]),
        pings,
        pingSize: 8972,
        why,
      }).map((c) => [c.id, c]),
    );
  it.each<[string, () => Parameters<typeof run>, string[], RegExp]>([
    [
      'the ping step over ssh failed on both nodes (no verdicts): MTU and reachability are not passed',
      () => [
        a(),
        b(),
        new Map(),
        new Map([
          ['spark', 'the ping step over ssh failed: timed out'],
          ['spark2', 'the ping step over ssh failed: timed out'],
        ]),
      ],
      ['fabric.mtu', 'fabric.reachable'],
      /could not check: .*no ping verdict spark -> spark2 \(the ping step over ssh failed: timed out\)/,
    ],
    [
      'one node answered its pings, the other did not',
      () => [
        a(),
        b(),
        new Map([['spark', new Map([['192.168.177.12', { reach: true, mtu: true }]])]]),
        new Map([['spark2', 'the ping step over ssh failed: exit 255']]),
      ],
      ['fabric.mtu', 'fabric.reachable'],
      /could not check: no ping verdict spark2 -> spark/,
    ],
    [
      "one node's fabric was not read at all",
      () => [a(), undefined, allOk(), new Map([['spark2', 'reading its fabric over ssh failed: Connection refused']])],
      ['fabric.link', 'fabric.address', 'fabric.mtu', 'fabric.reachable', 'fabric.rdma', 'fabric.gid'],
      /could not check: spark2: reading its fabric over ssh failed: Connection refused/,
    ],
  ])('%s', (_what, args, ids, why) => {
    const c = run(...args());
    for (const id of ids) {
      expect(c[id].status, `${id}: ${c[id].observed}`).toBe('fail');
      expect(c[id].observed, id).toMatch(why);
    }
  });
  it('with every verdict in, the same readings pass (the could-not-check is about the evidence only)', () => {
    const c = run(a(), b(), allOk(), new Map());
    for (const id of ['fabric.mtu', 'fabric.reachable']) expect(c[id].status, `${id}: ${c[id].observed}`).toBe('pass');
  });
});
