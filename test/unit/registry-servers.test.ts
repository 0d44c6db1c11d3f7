// The registry's one listing (engine/registry.ts servers(), engine/servers.ts): every registered
// server, on this host and over nodes, read once, each behind its placement's discriminant, and what
// could not be read said by placement (an entry on this host is kept aside as *.corrupt; a record over
// nodes is left where it is). status, stop, watch, probe and the gateway read this one listing, so a
// reader that drops, mixes or misplaces a record shows here. The launch records of both placements
// share one definition of their common fields (LaunchBase) and one reader (readLaunch): a record reads
// back key for key. One writer and one remover: the placement decides the file, the bytes as ever.
import { describe, it, expect, afterAll } from 'vitest';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  Registry,
  readLaunch,
  type ClusterRecord,
  type Instance,
  type Placement,
  type ServerEntry,
} from '../../src/engine/registry.js';
import { named, onHost, overNodes } from '../../src/engine/servers.js';
import { tempDir, rmrf } from '../helpers.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmrf(d);
});
const fresh = () => {
  const d = tempDir('sparkctl-servers-');
  dirs.push(d);
  return new Registry(d);
};

// a replica whose process is long gone (a pid above any pid_max): listed, proven gone, never signalled
const host: Instance = {
  version: 1,
  name: 'small-0',
  profile: 'small',
  replica: 0,
  pid: 2 ** 23 + 17,
  pgid: 2 ** 23 + 17,
  startTime: 42,
  marker: '5f0c1d2e-0000-4000-8000-000000000001',
  host: '127.0.0.1',
  port: 8001,
  url: 'http://127.0.0.1:8001',
  servedName: 'small',
  gpus: [0],
  logFile: '/tmp/small-0.log',
  engine: 'sim',
  argv: ['sparkctl-sim'],
  startedAt: '2026-12-05T00:00:00.000Z',
  readyTimeoutSeconds: 60,
  launch: {
    sets: ['server.port=8001'],
    profilesDir: '/etc/sparkctl/profiles',
    gpus: 1,
    platform: 'dgx-spark',
    vllm: { asked: 'auto', resolved: '0.11.0', how: 'installed' },
  },
};
const cluster: ClusterRecord = {
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
  ],
  launch: {
    asked: 'big',
    sets: ['engine.runtime=container'],
    profilesDir: '/etc/sparkctl/profiles',
    platform: 'dgx-spark',
    engine: 'vllm',
    prewarm: true,
  },
};

const hostFile = (reg: Registry, name: string) => join(reg.dir, `${name}.json`);
const clusterFile = (reg: Registry, name: string) => join(reg.stateDir, 'clusters', `${name}.json`);
const writeRaw = (file: string, text: string) => {
  mkdirSync(join(file, '..'), { recursive: true });
  writeFileSync(file, text);
};

interface Case {
  /** what the state folder holds */
  put: (reg: Registry) => void;
  /** the listing's kinds and names, in order */
  listed: string[];
  /** what could not be read, by placement: the file's name and the reason's pattern */
  corruptHost?: [string, RegExp];
  corruptNodes?: [string, RegExp];
}

describe('Registry.servers: one listing of both placements', () => {
  it.each<[string, Case]>([
    ['a server on this host', { put: (r) => r.write('host', host), listed: ['host small-0'] }],
    ['a server over nodes', { put: (r) => r.write('nodes', cluster), listed: ['nodes big'] }],
    [
      'one of each: this host first, then the nodes',
      {
        put: (r) => {
          r.write('nodes', cluster);
          r.write('host', host);
        },
        listed: ['host small-0', 'nodes big'],
      },
    ],
    [
      'an entry on this host that is not JSON, beside a good record over nodes',
      {
        put: (r) => (r.write('nodes', cluster), writeRaw(hostFile(r, 'broken-0'), '{"version": 1,')),
        listed: ['nodes big'],
        corruptHost: ['broken-0.json', /JSON/],
      },
    ],
    [
      'an entry on this host of another shape (a pid that is a shell line)',
      {
        put: (r) => writeRaw(hostFile(r, 'small-0'), JSON.stringify({ ...host, pid: '1; reboot' })),
        listed: [],
        corruptHost: ['small-0.json', /^pid: /],
      },
    ],
    [
      'an entry on this host under another name than its file',
      {
        put: (r) => writeRaw(hostFile(r, 'other-0'), JSON.stringify(host)),
        listed: [],
        corruptHost: ['other-0.json', /names "small-0", not other-0/],
      },
    ],
    [
      'a record over nodes with a rank log that runs a command, beside a good entry on this host',
      {
        put: (r) => (
          r.write('host', host),
          writeRaw(
            clusterFile(r, 'bad'),
            JSON.stringify({
              ...cluster,
              profile: 'bad',
              ranks: [{ ...cluster.ranks![0], logFile: '/x"; reboot; echo "' }],
            }),
          )
        ),
        listed: ['host small-0'],
        corruptNodes: ['bad.json', /^ranks\.0\.logFile: /],
      },
    ],
    [
      'a record over nodes that is not JSON',
      { put: (r) => writeRaw(clusterFile(r, 'bad'), '[1, 2'), listed: [], corruptNodes: ['bad.json', /JSON/] },
    ],
    [
      'a record over nodes that names another profile than its file',
      {
        put: (r) => writeRaw(clusterFile(r, 'bad'), JSON.stringify(cluster)),
        listed: [],
        corruptNodes: ['bad.json', /names "big", not bad/],
      },
    ],
  ])('%s', (_, c) => {
    const reg = fresh();
    c.put(reg);
    const hostText = c.corruptHost ? readFileSync(join(reg.dir, c.corruptHost[0]), 'utf8') : '';
    const nodesText = c.corruptNodes ? readFileSync(join(reg.stateDir, 'clusters', c.corruptNodes[0]), 'utf8') : '';
    const servers = reg.servers();
    expect(servers.map((s) => (s.kind === 'host' ? `host ${s.inst.name}` : `nodes ${s.record.profile}`))).toEqual(
      c.listed,
    );
    // each record as it was written, behind its placement; the host's with the proof of its process
    for (const s of servers) {
      if (s.kind === 'host') {
        expect(s.inst).toEqual(host);
        expect(s.proof.state).toBe('gone');
        expect(s.alive).toBe(false);
      } else expect(s.record).toEqual(cluster);
    }
    // what could not be read: by placement, the entry on this host kept aside, the record over nodes left in place as
    // it was
    expect(reg.corrupt).toHaveLength(Number(Boolean(c.corruptHost)) + Number(Boolean(c.corruptNodes)));
    const [h] = reg.corruptOf('host');
    const [n] = reg.corruptOf('nodes');
    if (c.corruptHost) {
      const file = join(reg.dir, c.corruptHost[0]);
      expect(reg.corruptOf('host')).toHaveLength(1);
      expect(h).toMatchObject({ file, keptAs: `${file}.corrupt` });
      expect(h!.reason).toMatch(c.corruptHost[1]);
      expect(existsSync(file)).toBe(false);
      expect(readFileSync(`${file}.corrupt`, 'utf8')).toBe(hostText);
    } else expect(h).toBeUndefined();
    if (c.corruptNodes) {
      const file = join(reg.stateDir, 'clusters', c.corruptNodes[0]);
      expect(reg.corruptOf('nodes')).toHaveLength(1);
      expect(n).toEqual({ file, keptAs: file, reason: expect.stringMatching(c.corruptNodes[1]) });
      expect(readFileSync(file, 'utf8')).toBe(nodesText);
    } else expect(n).toBeUndefined();
    // the same as the two readers it replaces, read by a second sparkctl
    const again = new Registry(reg.stateDir);
    expect(onHost(servers)).toEqual(again.list());
    expect(overNodes(servers)).toEqual(again.clusters());
  });

  it('read again in one process: each unreadable record said once', () => {
    const reg = fresh();
    writeRaw(clusterFile(reg, 'bad'), '[1, 2');
    reg.servers();
    reg.servers();
    expect(reg.corruptOf('nodes')).toHaveLength(1);
  });

  it('one placement only: the other is not read (nothing of it kept aside or said)', () => {
    const reg = fresh();
    writeRaw(hostFile(reg, 'broken-0'), '{');
    writeRaw(clusterFile(reg, 'bad'), '{');
    reg.write('host', host);
    reg.write('nodes', cluster);
    expect(reg.servers('nodes').map((s) => s.kind)).toEqual(['nodes']);
    expect(reg.corruptOf('host')).toEqual([]);
    expect(existsSync(hostFile(reg, 'broken-0'))).toBe(true);
    const only = new Registry(reg.stateDir);
    expect(only.servers('host').map((s) => s.kind)).toEqual(['host']);
    expect(only.corruptOf('nodes')).toEqual([]);
    expect(only.corruptOf('host').map((c) => c.file)).toEqual([hostFile(reg, 'broken-0')]);
  });

  it('named: an instance or profile on this host, a profile over nodes; onHost hands back plain entries', () => {
    const reg = fresh();
    reg.write('host', host);
    reg.write('host', { ...host, name: 'small-1', replica: 1, port: 8002 });
    reg.write('nodes', cluster);
    const servers = reg.servers();
    const names = (s: ServerEntry[]) => s.map((x) => (x.kind === 'host' ? x.inst.name : `nodes:${x.record.profile}`));
    expect(names(named(servers, 'small'))).toEqual(['small-0', 'small-1']);
    expect(names(named(servers, 'small-1'))).toEqual(['small-1']);
    expect(names(named(servers, 'big'))).toEqual(['nodes:big']);
    expect(named(servers, 'big-0')).toEqual([]);
    expect(onHost(servers).every((e) => !('kind' in e))).toBe(true);
  });
});

describe('the launch records: one definition of their shared fields, one reader', () => {
  it('each reads back key for key as written (a parsed record is written back as parsed)', () => {
    expect(JSON.stringify(readLaunch('host', host).launch)).toBe(JSON.stringify(host.launch));
    expect(JSON.stringify(readLaunch('nodes', JSON.parse(JSON.stringify(cluster))).launch)).toBe(
      JSON.stringify(cluster.launch),
    );
  });

  it('each placement reads with its own shape: a launch of the other placement is refused, said by field', () => {
    expect(readLaunch('host', { launch: cluster.launch })).toMatchObject({ problem: expect.stringMatching(/^vllm: /) });
    expect(readLaunch('nodes', { launch: host.launch })).toMatchObject({
      problem: expect.stringMatching(/^asked: .*; engine: .*; prewarm: /),
    });
  });

  it('none kept (a record written before): no launch and no problem', () => {
    expect(readLaunch('host', {})).toEqual({});
    expect(readLaunch('nodes', {})).toEqual({});
    expect(readLaunch('nodes', { launch: null })).toMatchObject({ problem: expect.any(String) });
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['sets that are no list of strings', { sets: [1] }, /^sets\.0: /],
    ['a --set longer than 4096', { sets: ['x'.repeat(4097)] }, /^sets\.0: /],
    ['more than 256 --set', { sets: Array.from({ length: 257 }, (_, i) => `a.b=${i}`) }, /^sets: /],
    ['a profiles folder that is no string', { profilesDir: 7 }, /^profilesDir: /],
    ['a platform longer than 200', { platform: 'p'.repeat(201) }, /^platform: /],
  ])('%s: refused by both, the field named', (_, over, field) => {
    for (const [at, rec] of [
      ['host', host],
      ['nodes', cluster],
    ] as const) {
      const r = readLaunch(at, { launch: { ...rec.launch!, ...over } });
      expect(r.launch, at).toBeUndefined();
      expect('problem' in r && r.problem, at).toMatch(field);
    }
  });
});

describe('one writer and one remover: the placement decides the file', () => {
  // the same name in both placements: an instance named "big" on this host and profile "big" over nodes
  const onHere: Instance = { ...host, name: 'big', profile: 'big' };
  const files = (reg: Registry) =>
    ['instances', 'clusters'].flatMap((d) =>
      existsSync(join(reg.stateDir, d)) ? readdirSync(join(reg.stateDir, d)).map((f) => `${d}/${f}`) : [],
    );
  const bytes = (rec: object) => JSON.stringify(rec, null, 2) + '\n';

  it.each<[Placement, Placement, Instance | ClusterRecord, string, Instance | ClusterRecord, string]>([
    ['host', 'nodes', onHere, 'instances/big.json', cluster, 'clusters/big.json'],
    ['nodes', 'host', cluster, 'clusters/big.json', onHere, 'instances/big.json'],
  ])(
    'a %s record: its own file, the bytes as ever; its remove leaves the %s record of the same name',
    (at, other, rec, file, otherRec, otherFile) => {
      const reg = fresh();
      reg.write(at, rec as never);
      // the very file and bytes every sparkctl before wrote
      expect(files(reg)).toEqual([file]);
      expect(readFileSync(join(reg.stateDir, file), 'utf8')).toBe(bytes(rec));
      reg.write(other, otherRec as never);
      expect(files(reg).sort()).toEqual([file, otherFile].sort());
      // read back by its own placement's reader
      const listed = reg.servers(at);
      expect(listed.map((s) => (s.kind === 'host' ? `host ${s.inst.name}` : `nodes ${s.record.profile}`))).toEqual([
        `${at} big`,
      ]);
      // a remove of one never touches the other's file of the same name
      reg.remove(at, 'big');
      expect(files(reg)).toEqual([otherFile]);
      expect(readFileSync(join(reg.stateDir, otherFile), 'utf8')).toBe(bytes(otherRec));
      reg.remove(at, 'big'); // gone already: nothing to do, nothing else touched
      expect(files(reg)).toEqual([otherFile]);
      reg.remove(other, 'big');
      expect(files(reg)).toEqual([]);
    },
  );

  it("a container's launch-ledger record goes with its entry on this host, never with a record over nodes", () => {
    const reg = fresh();
    const marker = host.marker!;
    const ledger = join(reg.stateDir, 'containers', `${marker}.json`);
    const cid = join(reg.stateDir, 'containers', `${marker}.cid`);
    const container = {
      cli: 'podman',
      cliArgs: [],
      name: 'sparkctl-big',
      image: 'x',
      id: 'a'.repeat(64),
      cidFile: cid,
    } as Instance['container'];
    const putLedger = () => (writeRaw(ledger, '{}'), writeRaw(cid, 'a'.repeat(64)));
    putLedger();
    // a record over nodes that names the same marker and a container (hostile or not): its remove leaves this host's
    // ledger alone
    writeRaw(join(reg.stateDir, 'clusters', 'big.json'), JSON.stringify({ ...cluster, marker, container }));
    reg.remove('nodes', 'big');
    expect(existsSync(join(reg.stateDir, 'clusters', 'big.json'))).toBe(false);
    expect([existsSync(ledger), existsSync(cid)]).toEqual([true, true]);
    // the container's entry on this host: its ledger record is released with it
    reg.write('host', { ...onHere, marker, container });
    reg.remove('host', 'big');
    expect(files(reg)).toEqual([]);
    expect([existsSync(ledger), existsSync(cid)]).toEqual([false, false]);
  });

  it('a state folder whose records cannot be written: bad input naming the file, for either placement', () => {
    for (const [at, rec, dir] of [
      ['host', onHere, 'instances'],
      ['nodes', cluster, 'clusters'],
    ] as const) {
      const reg = fresh();
      // the placement's folder is a file: neither written nor a crash
      if (dir === 'clusters') writeRaw(join(reg.stateDir, 'clusters'), 'not a folder');
      else {
        rmrf(join(reg.stateDir, 'instances'));
        writeRaw(join(reg.stateDir, 'instances'), 'not a folder');
      }
      expect(() => reg.write(at, rec as never), at).toThrow(
        new RegExp(`registry entry ${join(reg.stateDir, dir, 'big.json').replace(/[.]/g, '\\.')}`),
      );
    }
  });
});
