// `sparkctl logs NAME` of a server over nodes reads the head's log where the record says it is
// (engine/cluster/logs.ts): rank 0's node and file, a container's logs by its recorded ID, and no
// node at all when the nodes file does not name the head (said, never a crash).
import { describe, it, expect } from 'vitest';
import { headLog } from '../../src/engine/cluster/logs.js';
import type { ClusterRecord } from '../../src/engine/registry.js';
import type { NodesFile } from '../../src/profiles/schema.js';

const node = (name: string, address: string) => ({ name, address, sshUser: 'root', sshPort: 22, gpus: 8 });
const nf = { head: node('n0', '10.0.0.1'), workers: [node('n1', '10.0.0.2')] } as unknown as NodesFile;
const base: ClusterRecord = {
  version: 1,
  executor: 'native',
  profile: 'big',
  nodesFile: '/abs/nodes.yaml',
  head: 'n0',
  pid: 100,
  port: 8000,
  url: 'http://10.0.0.1:8000',
  servedName: 'big',
  logFile: '$HOME/.local/state/sparkctl/logs/big-0-rank0.log',
  startedAt: '2026-12-04T00:00:00.000Z',
  marker: 'mmmmmmmm',
};

describe("a multi-node server's log: where the record says", () => {
  it.each<[string, ClusterRecord, string | undefined, RegExp | undefined]>([
    [
      'Ray on the host: the head and its log file',
      { ...base, executor: 'ray' },
      'n0',
      /^tail -n 7 "\$HOME"\/\.local\/state\/sparkctl\/logs\/big-0-rank0\.log$/,
    ],
    [
      'native: rank 0, wherever the ranks list puts it',
      {
        ...base,
        ranks: [
          { node: 'n1', rank: 1, pid: 2, marker: 'm', logFile: '/r1.log' },
          { node: 'n0', rank: 0, pid: 1, marker: 'm', logFile: '/r0.log' },
        ],
      },
      'n0',
      /^tail -n 7 \/r0\.log$/,
    ],
    [
      "in a container: the container's logs by its recorded ID, proven first",
      {
        ...base,
        ranks: [
          {
            node: 'n0',
            rank: 0,
            pid: 0,
            marker: 'm',
            logFile: 'podman logs abc',
            containerId: 'a'.repeat(64),
            cli: ['podman'],
          },
        ],
      },
      'n0',
      new RegExp(`logs --tail 7 ${'a'.repeat(64)}`),
    ],
    ['a head the nodes file does not name: none', { ...base, head: 'n9' }, undefined, undefined],
  ])('%s', (_, rec, want, line) => {
    const h = headLog(rec, nf);
    expect(h?.node.name).toBe(want);
    if (line) expect(h!.tail(7)).toMatch(line);
  });
});
