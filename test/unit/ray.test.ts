// Ray planning is pure: what Ray's own output says, and how it compares with the nodes file.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import {
  parseRayStatus,
  parseRayNodes,
  compareCluster,
  describeShortfall,
  planNodes,
  type RayNode,
} from '../../src/engine/cluster/ray-plan.js';
import { withRemoteDeadline } from '../../src/engine/cluster/ssh.js';
import { NodesFile } from '../../src/profiles/schema.js';
import { FIXTURES } from '../helpers.js';

const cap = (f: string) => readFileSync(join(FIXTURES, 'captures', 'ray', f), 'utf8');
const nf = NodesFile.parse({
  head: { name: 'n0', address: '10.0.0.10', interface: 'eth0', gpus: 8 },
  workers: [1, 2, 3].map((i) => ({ name: `n${i}`, address: `10.0.0.1${i}`, interface: 'eth0', gpus: 8 })),
});
const node = (i: number, gpus = 8): RayNode => ({ id: `id${i}`, ip: `10.0.0.1${i}`, state: 'IDLE', gpus });

describe('ray status text (captured from Ray 2.58)', () => {
  it.each([
    ['v1 layout: Active lists the node', cap('status-2.58-v1-head.txt'), { nodes: 1, gpus: 8, gpusUsed: 0 }],
    [
      'autoscaler v2: Active (no active nodes), the node under Idle',
      cap('status-2.58-v2-head.txt'),
      { nodes: 1, gpus: 8, gpusUsed: 0 },
    ],
    [
      'v2 with nodes in both sections, pending and failures not counted',
      'Node status\nActive:\n 1 node_a\nIdle:\n 1 node_b\n 1 node_c\nPending:\n 1 node_d\nRecent failures:\n 1 node_e\nResources\nTotal Usage:\n 8.0/24.0 GPU\n',
      { nodes: 3, gpus: 24, gpusUsed: 8 },
    ],
    ['no Ray', 'ConnectionError: Could not find any running Ray instance.', undefined],
  ])('%s', (_n, text, want) => {
    expect(parseRayStatus(text)).toEqual(want);
  });
});

describe('Ray node list (JSON, hostile until validated)', () => {
  it.each([
    [
      'good',
      '{"nodes": [{"id": "a", "ip": "10.0.0.10", "state": "IDLE", "gpus": 8}]}',
      [{ id: 'a', ip: '10.0.0.10', state: 'IDLE', gpus: 8 }],
    ],
    ['a warning line before the JSON', 'WARNING something\n{"nodes": []}', []],
    ['gpus not a number', '{"nodes": [{"id": "a", "ip": "x", "gpus": "8"}]}', undefined],
    ['not JSON', 'Traceback (most recent call last):', undefined],
    ['wrong shape', '{"nodes": 3}', undefined],
  ])('%s', (_n, text, want) => {
    expect(parseRayNodes(text)).toEqual(want);
  });
});

describe('the cluster against the nodes file: exact, never >=', () => {
  it.each<
    [string, RayNode[] | undefined, { nodes: number; gpus: number } | undefined, { complete: boolean; line: string }]
  >([
    [
      'all four, 32 GPUs',
      [node(0), node(1), node(2), node(3)],
      undefined,
      { complete: true, line: 'the Ray cluster has 4 node(s) with 32 GPUs; the nodes file declares 4 with 32' },
    ],
    [
      'a worker missing is named',
      [node(0), node(1), node(3)],
      undefined,
      {
        complete: false,
        line: 'the Ray cluster has 3 node(s) with 24 GPUs; the nodes file declares 4 with 32; missing: n2 (10.0.0.12)',
      },
    ],
    [
      'a stray fifth node (a late join) is not accepted',
      [node(0), node(1), node(2), node(3), { id: 'x', ip: '10.0.0.99', state: 'IDLE', gpus: 8 }],
      undefined,
      {
        complete: false,
        line: 'the Ray cluster has 5 node(s) with 40 GPUs; the nodes file declares 4 with 32; not in the nodes file: 10.0.0.99 (8 GPUs)',
      },
    ],
    [
      'a node with fewer GPUs',
      [node(0), node(1), node(2), node(3, 4)],
      undefined,
      {
        complete: false,
        line: 'the Ray cluster has 4 node(s) with 28 GPUs; the nodes file declares 4 with 32; n3 has 4 GPUs in Ray, 8 in the nodes file',
      },
    ],
    [
      'counts only (no node list): 40 GPUs is not 32',
      undefined,
      { nodes: 5, gpus: 40 },
      { complete: false, line: 'the Ray cluster has 5 node(s) with 40 GPUs; the nodes file declares 4 with 32' },
    ],
    [
      'counts only, short',
      undefined,
      { nodes: 3, gpus: 24 },
      {
        complete: false,
        line: 'the Ray cluster has 3 node(s) with 24 GPUs; the nodes file declares 4 with 32; which node is missing is unknown (ray status lists node ids only)',
      },
    ],
  ])('%s', (_n, nodes, counts, want) => {
    const v = compareCluster(nf, counts ? { ...counts, gpusUsed: 0 } : undefined, nodes);
    expect(v.complete).toBe(want.complete);
    expect(describeShortfall(nf, v)).toBe(want.line);
  });
});

describe('plan and transport', () => {
  it('head first with --head, workers join the head, vLLM last on the head', () => {
    const steps = planNodes({ ...nf, rayPort: 6379 }, ['vllm', 'serve', 'm']);
    expect(steps.map((s) => s.argv[0]!.slice(0, 3).join(' '))).toEqual([
      'ray start --head',
      'ray start --address',
      'ray start --address',
      'ray start --address',
    ]);
    expect(steps[1]!.argv[0]).toContain('10.0.0.10:6379');
    expect(steps[0]!.argv[1]).toEqual(['vllm', 'serve', 'm']);
  });
  it('a remote deadline ends the whole process group on the node, a backgrounded child included (exit 124)', async () => {
    const mark = `${(Math.random() * 1000).toFixed(3)}7`;
    const r = spawnSync('sh', ['-c', withRemoteDeadline(`sleep 3${mark} & sleep 4${mark}`, 1)], { timeout: 20_000 });
    expect(r.status).toBe(124);
    await new Promise((res) => setTimeout(res, 300));
    const left = spawnSync('pgrep', ['-f', `sleep [34]${mark}`], { encoding: 'utf8' }).stdout.trim();
    expect(left).toBe('');
  });
});
