// preflight --nodes: a cross-node check whose evidence is missing (a node not reached, an ssh step
// that failed) says "could not check" with the reason, never "on every node" (issue 42, item 7). Pure.
import { describe, it, expect } from 'vitest';
import { runNodesChecks, type NodeReport } from '../../src/preflight/nodes.js';
import { NodesFile } from '../../src/profiles/schema.js';

const nf = NodesFile.parse({
  head: { name: 'n0', address: '10.0.0.10', interface: 'eth0', gpus: 8 },
  workers: [{ name: 'n1', address: '10.0.0.11', interface: 'eth0', gpus: 8 }],
});
const ok = (node: string, over: Partial<NodeReport> = {}): NodeReport => ({
  node,
  address: '10.0.0.1',
  reached: true,
  ifaceName: 'eth0',
  iface: 'up',
  model: 'present',
  versions: { driver: '580.159.04', cuda: '13.0', nccl: '2.27', torch: '2.9', vllm: '0.28.0', gpus: 8 },
  summary: { pass: 1, warn: 0, fail: 0, skip: 0 },
  checks: [],
  ...over,
});
const run = (reports: NodeReport[]) =>
  Object.fromEntries(runNodesChecks({ nf, reports, modelPath: '/models/m', gpusNeeded: 8 }).map((c) => [c.id, c]));

describe('a check that did not run does not pass', () => {
  it('every node read: the checks pass', () => {
    const c = run([ok('n0'), ok('n1')]);
    for (const id of ['nodes.same-driver', 'nodes.interface', 'nodes.model-path'])
      expect(c[id].status, id).toBe('pass');
  });
  it.each<[string, NodeReport[], string, RegExp]>([
    [
      'a node not reached: one driver "on every node" is not claimed',
      [ok('n0'), { ...ok('n1'), reached: false, error: 'ssh root@10.0.0.11: timed out' }],
      'nodes.same-driver',
      /could not check: .*n1 not reached \(ssh root@10.0.0.11: timed out\)/,
    ],
    [
      'no node reached',
      [
        { ...ok('n0'), reached: false, error: 'x' },
        { ...ok('n1'), reached: false, error: 'y' },
      ],
      'nodes.same-vllm',
      /could not check: n0 not reached/,
    ],
    [
      'the NIC read over ssh failed: not "does not exist"',
      [
        ok('n0'),
        { ...ok('n1'), iface: undefined, ifaceWhy: 'reading /sys/class/net/eth0/operstate over ssh failed: timed out' },
      ],
      'nodes.interface',
      /could not check: n1: reading \/sys\/class\/net\/eth0\/operstate over ssh failed: timed out/,
    ],
    [
      'the model folder looked for over ssh failed: not "missing"',
      [
        ok('n0'),
        { ...ok('n1'), model: undefined, modelWhy: 'looking for /models/m/config.json over ssh failed: exit 255' },
      ],
      'nodes.model-path',
      /could not check: n1: looking for \/models\/m\/config.json over ssh failed/,
    ],
  ])('%s', (_what, reports, id, why) => {
    const c = run(reports)[id]!;
    expect(c.status).toBe('fail');
    expect(c.observed).toMatch(why);
    expect(c.observed).not.toMatch(/on every node|does not exist|missing on/);
  });
});
