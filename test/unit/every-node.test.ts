// The per-node loop the cluster copies share (pull --nodes: the model snapshot and the container
// image): every node at once, each reached at its fabric address where the nodes file names one,
// each result heard as it comes and returned in the file's order, head first.
import { describe, it, expect } from 'vitest';
import { NodesFile } from '../../src/profiles/schema.js';
import { onEveryNode } from '../../src/engine/cluster/ssh.js';

const nf = NodesFile.parse({
  head: {
    name: 'n0',
    address: '10.0.0.10',
    interface: 'eth0',
    fabric: { address: '192.168.100.10', interface: 'enp1s0f1np1' },
  },
  workers: [
    { name: 'n1', address: '10.0.0.11', interface: 'eth0' },
    {
      name: 'n2',
      address: '10.0.0.12',
      interface: 'eth0',
      fabric: { address: '192.168.100.12', interface: 'enp1s0f1np1' },
    },
  ],
});

describe('onEveryNode', () => {
  it('reaches each node at its fabric address where named; results in file order whatever order they end in', async () => {
    const heard: string[] = [];
    const delay = { n0: 30, n1: 0, n2: 15 } as Record<string, number>;
    const out = await onEveryNode(
      nf,
      async (via) => {
        await new Promise((r) => setTimeout(r, delay[via.name]));
        return { node: via.name, address: via.address, port: via.sshPort };
      },
      (r) => heard.push(r.node),
    );
    expect(out).toEqual([
      { node: 'n0', address: '192.168.100.10', port: 22 },
      { node: 'n1', address: '10.0.0.11', port: 22 },
      { node: 'n2', address: '192.168.100.12', port: 22 },
    ]);
    expect(heard).toEqual(['n1', 'n2', 'n0']);
  });

  it('runs the nodes at once, not one after another', async () => {
    let running = 0;
    let most = 0;
    await onEveryNode(nf, async () => {
      most = Math.max(most, ++running);
      await new Promise((r) => setTimeout(r, 10));
      running--;
    });
    expect(most).toBe(3);
  });
});
