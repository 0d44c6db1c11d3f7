// Which cluster records a verb acts on (engine/cluster/index.ts recordsFor, nodesMissing; common.ts
// runsOn): the --nodes form and the one-host form read the registry through this one rule.
import { describe, it, expect } from 'vitest';
import { recordsFor, nodesMissing, runsOn } from '../../src/engine/cluster/index.js';
import type { ClusterRecord } from '../../src/engine/registry.js';
import type { NodesFile } from '../../src/profiles/schema.js';

const node = (name: string, address: string) => ({ name, address, sshUser: 'root', sshPort: 22, gpus: 8 });
const nf = (head: string, ...workers: string[]) =>
  ({
    head: node(head, '10.0.0.1'),
    workers: workers.map((w, i) => node(w, `10.0.0.${i + 2}`)),
  }) as unknown as NodesFile;
const rec = (profile: string, nodesFile: string, head: string, ranks: string[] = []): ClusterRecord => ({
  version: 1,
  profile,
  nodesFile,
  head,
  pid: 10,
  port: 8000,
  url: 'http://10.0.0.1:8000',
  servedName: profile,
  logFile: '/x.log',
  startedAt: '2026-12-04T00:00:00Z',
  ranks: ranks.map((n, rank) => ({ node: n, rank, pid: 10 + rank, logFile: `/r${rank}.log` })),
});

describe('recordsFor: what a stop names, from the registry', () => {
  const a = rec('big', '/etc/nodes-a.yaml', 'n0', ['n0', 'n1']);
  const b = rec('other', '/etc/nodes-b.yaml', 'm0');
  const all = [a, b];
  it.each<[string, Parameters<typeof recordsFor>[1], string[]]>([
    ['a name: its profile only', { name: 'big' }, ['big']],
    ['a name that is no record', { name: 'nope' }, []],
    [
      'a name wins over the nodes file',
      { name: 'other', nodes: { file: '/etc/nodes-a.yaml', nf: nf('n0', 'n1') } },
      ['other'],
    ],
    [
      'no name, the same file: the record on it (the defect: stop --nodes FILE found none)',
      { nodes: { file: '/etc/nodes-a.yaml', nf: nf('n0', 'n1') } },
      ['big'],
    ],
    [
      'no name, another path to the same head: the record on that head',
      { nodes: { file: '/home/op/nodes.yaml', nf: nf('n0', 'n1') } },
      ['big'],
    ],
    ['no name, other nodes: none', { nodes: { file: '/etc/nodes-c.yaml', nf: nf('x0', 'x1') } }, []],
    ['no name and no nodes (stop --all): every record', {}, ['big', 'other']],
  ])('%s', (_, sel, want) => {
    expect(recordsFor(all, sel).map((r) => r.profile)).toEqual(want);
  });

  it('runsOn is the rule serve refuses a second cluster by', () => {
    expect(runsOn(a, '/etc/nodes-a.yaml', nf('z0'))).toBe(true);
    expect(runsOn(a, '/elsewhere.yaml', nf('n0'))).toBe(true);
    expect(runsOn(a, '/elsewhere.yaml', nf('z0'))).toBe(false);
  });
});

describe('nodesMissing: a record is stopped only over nodes the file names', () => {
  it.each<[string, ClusterRecord, NodesFile, string[]]>([
    ['every rank named', rec('big', 'f', 'n0', ['n0', 'n1']), nf('n0', 'n1'), []],
    ['a rank on a node the file lacks', rec('big', 'f', 'n0', ['n0', 'n1', 'n2']), nf('n0', 'n1'), ['n2']],
    ['another head', rec('big', 'f', 'm0'), nf('n0', 'n1'), ['m0']],
  ])('%s', (_, r, file, want) => {
    expect(nodesMissing(r, file)).toEqual(want);
  });
});
