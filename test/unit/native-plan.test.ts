// vLLM's native multi-node launch, planned: every node's argv with its rank, the head's address, the
// rendezvous port, --headless on the workers; the executor a profile gets per target vLLM version.
import { describe, it, expect } from 'vitest';
import { planNative, nativeProblem, withoutPerNode } from '../../src/engine/cluster/native-plan.js';
import { planNodes } from '../../src/engine/cluster/ray-plan.js';
import { NodesFile, Profile } from '../../src/profiles/schema.js';
import { clusterExecutor, parallelArgs } from '../../src/profiles/render.js';

const nodes = (n: number, extra: (i: number) => object = () => ({})) =>
  NodesFile.parse({
    head: { name: 'n0', address: '10.0.0.10', interface: 'eth0', gpus: 8, ...extra(0) },
    workers: Array.from({ length: n - 1 }, (_, k) => ({
      name: `n${k + 1}`,
      address: `10.0.0.1${k + 1}`,
      interface: 'eth0',
      gpus: 8,
      ...extra(k + 1),
    })),
  });
const argv = [
  'vllm',
  'serve',
  '/m',
  '--tensor-parallel-size',
  '8',
  '--pipeline-parallel-size',
  '4',
  '--distributed-executor-backend',
  'mp',
  '--port',
  '8000',
];

describe('planNative', () => {
  it('one vllm serve per node: rank, nnodes, the head as master, --headless on the workers only', () => {
    const steps = planNative(nodes(4), argv);
    expect(steps.map((s) => `${s.node}/${s.role}`)).toEqual(['n0/head', 'n1/worker', 'n2/worker', 'n3/worker']);
    for (const [i, s] of steps.entries()) {
      const a = s.argv[0]!;
      expect(s.argv).toHaveLength(1);
      expect(a.slice(0, 3)).toEqual(['vllm', 'serve', '/m']);
      // rendered once, here: the profile's own backend flag is replaced, never doubled
      expect(a.filter((x) => x === '--distributed-executor-backend')).toHaveLength(1);
      expect(a.slice(a.indexOf('--distributed-executor-backend'))).toEqual([
        '--distributed-executor-backend',
        'mp',
        '--nnodes',
        '4',
        '--node-rank',
        String(i),
        '--master-addr',
        '10.0.0.10',
        '--master-port',
        '29501',
        ...(i ? ['--headless'] : []),
      ]);
      expect(s.env).toEqual({ VLLM_HOST_IP: `10.0.0.1${i}`, NCCL_SOCKET_IFNAME: 'eth0', GLOO_SOCKET_IFNAME: 'eth0' });
    }
  });

  it('the fabric address and netdev, when named, carry the rendezvous and NCCL; ssh stays on address', () => {
    const nf = nodes(2, (i) => ({ fabric: { address: `192.168.100.1${i}`, interface: 'enp1s0f1np1' } }));
    const steps = planNative({ ...nf, masterPort: 29600 }, argv, {
      n1: { NCCL_IB_HCA: 'rocep1s0f1', NCCL_IB_GID_INDEX: '3' },
    });
    expect(steps[1]!.address).toBe('10.0.0.11');
    expect(steps[1]!.argv[0]).toEqual(
      expect.arrayContaining(['--master-addr', '192.168.100.10', '--master-port', '29600']),
    );
    expect(steps[1]!.env).toEqual({
      VLLM_HOST_IP: '192.168.100.11',
      NCCL_SOCKET_IFNAME: 'enp1s0f1np1',
      GLOO_SOCKET_IFNAME: 'enp1s0f1np1',
      NCCL_IB_HCA: 'rocep1s0f1',
      NCCL_IB_GID_INDEX: '3',
    });
    // Ray over the same fabric: the head's GCS and every node's Ray address are the fabric's
    const ray = planNodes(nf, argv);
    expect(ray[1]!.argv[0]).toEqual([
      'ray',
      'start',
      '--address',
      '192.168.100.10:6379',
      '--node-ip-address',
      '192.168.100.11',
      '--num-gpus',
      '8',
    ]);
  });

  it.each([
    [
      ['--nnodes', '2', '--node-rank=1', '--headless', '--port', '1'],
      ['--port', '1'],
    ],
    [
      ['--master-addr=x', '--master-port', '9', '-tp', '2'],
      ['-tp', '2'],
    ],
  ])('withoutPerNode(%j)', (a, want) => {
    expect(withoutPerNode(a)).toEqual(want);
  });

  it.each([
    [4, 8, 8, 4, undefined],
    [2, 8, 1, 2, undefined],
    [3, 8, 8, 4, 'do not divide evenly over 3 nodes'],
    [4, 4, 8, 4, 'each node runs 8 of the 32 ranks; n0 has 4 GPUs, n1 has 4 GPUs'],
  ])('%i nodes of %i GPUs, TP %i x PP %i: %s', (n, gpus, tp, pp, want) => {
    const why = nativeProblem(
      nodes(n, () => ({ gpus })),
      tp,
      pp,
    );
    if (want === undefined) expect(why).toBeUndefined();
    else expect(why).toContain(want);
  });

  it('a nodes file without fabric or masterPort still parses (written before them): vLLM default port 29501', () => {
    const nf = nodes(2);
    expect(nf.masterPort).toBe(29501);
    expect(nf.head.fabric).toBeUndefined();
    expect(() =>
      NodesFile.parse({ head: { name: 'a', address: 'x', interface: 'e', fabric: { address: '1.2.3.4' } } }),
    ).toThrow(/interface/);
  });
});

describe('which executor a multi-node profile gets', () => {
  const prof = (parallel: object, vllmVersion = 'auto') =>
    Profile.parse({
      name: 'p',
      model: { path: '/m' },
      engine: { vllmVersion },
      parallel: { tensor: 8, pipeline: 4, ...parallel },
    });
  it.each([
    [{ executor: 'ray', nodes: 4 }, 'auto', 'ray', 'ray'],
    [{ nodes: 4 }, 'auto', 'native', 'mp'],
    [{ nodes: 4 }, '0.16.0', 'native', 'mp'],
    // --nnodes came with 0.12 (arg_utils.py ParallelConfig.nnodes); before it, Ray
    [{ nodes: 4 }, '0.11.0', 'ray', 'ray'],
    [{ nodes: 1 }, 'auto', undefined, undefined],
  ])('%j on vLLM %s -> %s', (parallel, v, want, backend) => {
    const p = prof(parallel, v);
    expect(clusterExecutor(p)).toBe(want);
    const a = parallelArgs(p);
    expect(
      a.includes('--distributed-executor-backend') ? a[a.indexOf('--distributed-executor-backend') + 1] : undefined,
    ).toBe(backend);
  });
});
