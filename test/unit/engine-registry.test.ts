// The registry's records of servers over nodes (engine/registry.ts clusters()): a state file is
// untrusted input. Records sparkctl writes, and the older records an earlier sparkctl wrote (no
// executor, no ranks, no start, no launch), read back as they are; a record of another shape is
// listed as unreadable and left where it is (it may be a running cluster's: nothing is rewritten
// behind the operator's back), never handed to status, stop, watch or upgrade, whose node shells
// would run what it holds (a pid, a log path, a container's ID).
import { describe, it, expect, afterAll } from 'vitest';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Registry, type ClusterRecord } from '../../src/engine/registry.js';
import { tempDir, rmrf } from '../helpers.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmrf(d);
});
const fresh = () => {
  const d = tempDir('sparkctl-registry-');
  dirs.push(d);
  return d;
};

const ID = 'a'.repeat(64);
const native: ClusterRecord = {
  version: 1,
  executor: 'native',
  profile: 'big',
  nodesFile: '/etc/sparkctl/nodes.yaml',
  head: 'n0',
  pid: 4242,
  startTime: 123456,
  marker: '0b7c4c1e-6a7b-4e0e-9d5e-3f1a2b3c4d5e',
  port: 8000,
  url: 'http://10.0.0.1:8000',
  servedName: 'big',
  logFile: '$HOME/.local/state/sparkctl/logs/big-0-rank0.log',
  startedAt: '2026-12-04T00:00:00.000Z',
  ranks: [
    {
      node: 'n0',
      rank: 0,
      pid: 4242,
      startTime: 123456,
      marker: 'm',
      logFile: '$HOME/.local/state/sparkctl/logs/big-0-rank0.log',
    },
    {
      node: 'n1',
      rank: 1,
      pid: 77,
      startTime: 99,
      marker: 'm',
      logFile: '$HOME/.local/state/sparkctl/logs/big-0-rank1.log',
    },
  ],
  start: { totalMs: 1000 } as unknown as ClusterRecord['start'],
  launch: { asked: 'big', sets: [], engine: 'vllm', prewarm: true },
};
// Ray in containers: every rank's container by ID, vLLM's process in the head's container proven at launch
const inContainers: ClusterRecord = {
  ...native,
  profile: 'boxed',
  executor: 'ray',
  pid: 0,
  logFile: `podman logs ${ID.slice(0, 12)}`,
  ranks: [0, 1].map((rank) => ({
    node: `n${rank}`,
    rank,
    pid: 0,
    marker: 'm',
    logFile: `podman logs ${ID.slice(0, 12)}`,
    containerId: ID,
    cli: ['podman', '--runtime', 'runc'],
  })),
  inHead: { pid: 321, startTime: 654 },
};
// as the first multi-node sparkctl wrote it: Ray, no executor, no ranks, no marker, no start, no launch
const older = {
  version: 1,
  profile: 'old',
  nodesFile: '/etc/sparkctl/nodes.yaml',
  head: 'n0',
  pid: 4242,
  port: 8000,
  url: 'http://10.0.0.1:8000',
  servedName: 'old',
  logFile: '$HOME/.local/state/sparkctl/logs/old-0.log',
  startedAt: '2025-01-01T00:00:00.000Z',
};

describe('Registry.clusters: what it reads', () => {
  it('the records sparkctl writes, and an older record without the newer fields, read back as they are', () => {
    const reg = new Registry(fresh());
    reg.write('nodes', native);
    reg.write('nodes', inContainers);
    writeFileSync(join(reg.stateDir, 'clusters', 'old.json'), JSON.stringify(older, null, 2));
    expect(reg.clusters()).toEqual([native, inContainers, older]);
    expect(reg.corrupt).toEqual([]);
  });

  const bad = (over: Record<string, unknown>) => JSON.stringify({ ...native, profile: 'bad', ...over });
  const rank1 = native.ranks![1]!;
  it.each<[string, string, RegExp]>([
    ['not JSON', '{"version": 1, ', /JSON/],
    ['another version', bad({ version: 2 }), /^version: /],
    ['a url that is no string', bad({ url: 8000 }), /^url: /],
    ['a pid that is a shell line', bad({ pid: '4242; rm -rf /' }), /^pid: /],
    ['ranks that are no list', bad({ ranks: 'n0,n1' }), /^ranks: /],
    ["a rank's pid that is no number", bad({ ranks: [{ ...rank1, pid: '77 || reboot' }] }), /^ranks\.0\.pid: /],
    [
      "a rank's log that runs a command in the node's shell",
      bad({ ranks: [{ ...rank1, logFile: '/tmp/x"; reboot; echo "' }] }),
      /^ranks\.0\.logFile: /,
    ],
    ["the head's log with a command substitution", bad({ logFile: '$(reboot).log' }), /^logFile: /],
    [
      "a rank's container that is no ID",
      bad({ ranks: [{ ...rank1, containerId: 'abc; podman rm -af' }] }),
      /^ranks\.0\.containerId: /,
    ],
    [
      "vLLM's proof in the head's container that is no number",
      bad({ inHead: { pid: 'x', startTime: 1 } }),
      /^inHead\.pid: /,
    ],
    ['a port out of range', bad({ port: 70000 }), /^port: /],
    ['another profile than its file', JSON.stringify({ ...native, profile: 'other' }), /names "other", not bad/],
  ])('%s: listed as unreadable, left where it is; the good record beside it still read', (_, text, reason) => {
    const reg = new Registry(fresh());
    reg.write('nodes', native);
    const file = join(reg.stateDir, 'clusters', 'bad.json');
    writeFileSync(file, text);
    expect(reg.clusters()).toEqual([native]);
    expect(reg.corrupt).toHaveLength(1);
    expect(reg.corrupt[0]).toMatchObject({ file, keptAs: file });
    expect(reg.corrupt[0]!.reason).toMatch(reason);
    // nothing rewritten: the file is as it was
    expect(readFileSync(file, 'utf8')).toBe(text);
    // read again (status after stop in one process): said once
    reg.clusters();
    expect(reg.corrupt).toHaveLength(1);
  });

  it('a record that is a link is not followed', () => {
    const reg = new Registry(fresh());
    const elsewhere = join(reg.stateDir, 'elsewhere.json');
    writeFileSync(elsewhere, JSON.stringify({ ...native, profile: 'linked' }));
    mkdirSync(join(reg.stateDir, 'clusters'), { recursive: true });
    symlinkSync(elsewhere, join(reg.stateDir, 'clusters', 'linked.json'));
    expect(reg.clusters()).toEqual([]);
    expect(reg.corrupt.map((c) => c.file)).toEqual([join(reg.stateDir, 'clusters', 'linked.json')]);
  });
});

describe('status and stop with a record they cannot read', () => {
  it('status says so once, escaped, leaves it in place, and lists it in --json; stop says it did not stop it; exit 0', async () => {
    const { cli } = await import('../helpers.js');
    const dir = fresh();
    const reg = new Registry(dir);
    const file = join(reg.stateDir, 'clusters', 'bad.json');
    mkdirSync(join(reg.stateDir, 'clusters'), { recursive: true });
    const text = JSON.stringify({
      ...native,
      profile: 'bad',
      ranks: [{ ...native.ranks![1], logFile: '/x"; reboot; echo "\u001b[2J' }],
    });
    writeFileSync(file, text);
    const r = await cli(['status'], { stateDir: dir });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toContain(
      `unreadable cluster record ${file} (ranks.0.logFile: a log path ($HOME/... or /...) of letters, digits and . / _ - only, or "podman logs ID"; a record sparkctl wrote never names another: check the file): left in place`,
    );
    expect(r.stderr).not.toContain('\u001b');
    const j = await cli(['status', '--json'], { stateDir: dir });
    expect(JSON.parse(j.stdout)).toMatchObject({ clusters: [], corrupt: [{ file, keptAs: file }] });
    expect(readFileSync(file, 'utf8')).toBe(text);
    // stop acts on nothing it cannot read, and says so
    const s = await cli(['stop', 'bad'], { stateDir: dir });
    expect(s.exitCode, s.stderr).toBe(0);
    expect(s.stderr).toContain(`unreadable cluster record ${file} (ranks.0.logFile: `);
    expect(s.stderr).toContain('left in place, not stopped');
    expect(readFileSync(file, 'utf8')).toBe(text);
  });
});
