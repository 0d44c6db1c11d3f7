// A field read back from a record becomes a program to run or its arguments: the container CLI and
// its global options (a host entry's container, the launch ledger, a cluster record's ranks[].cli)
// and a node's log path in a shell line. A record is a file (corrupted or planted): each is checked
// against what sparkctl itself writes (runtime/cli-words.ts) or quoted, and a record that fails is
// listed as corrupt, never acted on. Each case is shown not to run anything: the program named
// writes a marker file when run, and the marker must not appear.
import { hostEntryJson } from '../host-entry.js';
import { describe, it, expect, afterAll } from 'vitest';
import { chmodSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Registry, type ClusterRecord } from '../../src/engine/registry.js';
import { cliArgsProblem, cliLineProblem, cliWordProblem } from '../../src/engine/runtime/cli-words.js';
import { aliveLine, logsLine, stopLine, type NodeContainerRef } from '../../src/engine/cluster/node-container.js';
import { headLog } from '../../src/engine/cluster/logs.js';
import { nodePathWord } from '../../src/engine/cluster/node-proc.js';
import type { NodesFile } from '../../src/profiles/schema.js';
import { tempDir, rmrf } from '../helpers.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmrf(d);
});
const fresh = () => {
  const d = tempDir('sparkctl-cliword-');
  dirs.push(d);
  return d;
};

const ID = 'a'.repeat(64);
const PODMAN = ['--runtime', 'runc', '--cgroup-manager=cgroupfs'];

/** A folder with a program `name` that, run, writes the marker file; and that marker. */
const bin = fresh();
const mark = join(bin, 'RAN');
for (const name of ['evil', 'podman', 'docker']) {
  writeFileSync(join(bin, name), `#!/bin/sh\necho "$0 $*" >> '${mark}'\nexit 1\n`);
  chmodSync(join(bin, name), 0o755);
}
const ran = () => existsSync(mark);
const clean = () => rmSync(mark, { force: true });

describe('the CLI word and its options: only what sparkctl writes', () => {
  it.each<[string, unknown]>([
    ['docker', 'docker'],
    ['podman', 'podman'],
  ])('%s is run', (_, cli) => expect(cliWordProblem(cli)).toBeUndefined());

  it.each<[string, unknown]>([
    ['a shell', 'sh'],
    ['a path that ends in podman', '/tmp/x/podman'],
    ['podman with a trailing space', 'podman '],
    ['a word with a newline', 'podman\nrm'],
    ['no string', 7],
  ])('%s is refused, named and shown escaped', (_, cli) => {
    const p = cliWordProblem(cli);
    expect(p).toMatch(/is not a container CLI sparkctl runs \(docker or podman/);
    expect(p).toMatch(/check the file/);
    expect(p).not.toMatch(/\n/);
  });

  it.each<[string, string[]]>([
    ['none', []],
    ['podman with runc and cgroupfs (the CI profile)', PODMAN],
    ['a separate storage', ['--root', '/tmp/a b', '--runroot=/run/x', '--storage-driver', 'vfs']],
    ["an OCI runtime in the system's folders", ['--runtime', '/usr/bin/crun']],
    ["docker's local socket", ['--host=unix:///var/run/docker.sock']],
  ])('options sparkctl writes are run: %s', (_, args) => expect(cliArgsProblem(args)).toBeUndefined());

  it.each<[string, string[], RegExp]>([
    ['another daemon (podman --url)', ['--url', 'ssh://x/run/podman.sock'], /"--url" is not a global option/],
    ['podman --remote', ['--remote'], /"--remote" is not a global option/],
    ['docker -H tcp', ['-H', 'tcp://10.0.0.9:2375'], /"-H" is not a global option/],
    ['docker --host tcp', ['--host=tcp://10.0.0.9:2375'], /--host "tcp:.*" is not a value/],
    ['a config folder (plugins, credential helpers)', ['--config', '/tmp/evil'], /"--config" is not a global option/],
    ['an OCI runtime anyone can write', ['--runtime', '/tmp/x/runc'], /--runtime "\/tmp\/x\/runc" is not a value/],
    ['an OCI runtime by ..', ['--runtime', '/usr/bin/../../tmp/runc'], /is not a value/],
    ['a storage root by ..', ['--root', '/var/../tmp'], /--root "\/var\/..\/tmp" is not a value/],
    [
      'a storage option (mount_program)',
      ['--storage-opt', 'mount_program=/tmp/x'],
      /"--storage-opt" is not a global option/,
    ],
    ['an option without its value', ['--root'], /--root "\(nothing\)"/],
    ['a control character, shown escaped', ['--root', '/x\u001b[2J'], /\\\\x1b/],
  ])('options sparkctl never writes are refused: %s', (_, args, why) => {
    const p = cliArgsProblem(args);
    expect(p).toMatch(why);
    expect(p).toMatch(/the options a record may carry: --runtime/);
    expect(p).not.toMatch(/\u001b/);
  });

  it('[cli, ...options] as a cluster record keeps it', () => {
    expect(cliLineProblem(['podman', ...PODMAN])).toBeUndefined();
    expect(cliLineProblem(['sh', '-c', 'reboot'])).toMatch(/"sh" is not a container CLI/);
    expect(cliLineProblem([])).toMatch(/is not \[cli/);
  });
});

describe('a host entry whose container CLI is not one sparkctl writes: corrupt, never run', () => {
  const entry = (container: Record<string, unknown>) =>
    hostEntryJson({ container: { name: 'sparkctl-x-0', image: 'x', id: ID, ...container } });
  it.each<[string, () => Record<string, unknown>, RegExp]>([
    [
      'a program by path',
      () => ({ cli: join(bin, 'evil'), cliArgs: [] }),
      /^container\.cli: ".*\/evil" is not a container CLI sparkctl runs/,
    ],
    ['a shell', () => ({ cli: 'sh', cliArgs: [] }), /^container\.cli: "sh" is not a container CLI/],
    [
      'a path that ends in podman',
      () => ({ cli: join(bin, 'podman'), cliArgs: [] }),
      /^container\.cli: ".*\/podman" is not a container CLI/,
    ],
    [
      'podman with an unknown flag',
      () => ({ cli: 'podman', cliArgs: ['--url', 'tcp://10.0.0.9:1'] }),
      /^container\.cliArgs: "--url" is not a global option/,
    ],
    [
      'podman with a config elsewhere',
      () => ({ cli: 'podman', cliArgs: ['--config', '/tmp/evil'] }),
      /^container\.cliArgs: "--config"/,
    ],
  ])('%s', (_, container, why) => {
    const reg = new Registry(fresh());
    writeFileSync(join(reg.dir, 'x-0.json'), JSON.stringify(entry(container())));
    clean();
    const PATH = process.env.PATH;
    process.env.PATH = `${bin}:${PATH}`;
    try {
      expect(reg.list().filter((e) => e.inst.name === 'x-0')).toEqual([]);
    } finally {
      process.env.PATH = PATH;
    }
    expect(reg.corrupt).toHaveLength(1);
    expect(reg.corrupt[0]!.reason).toMatch(why);
    expect(ran()).toBe(false);
  });
});

describe('a launch-ledger record whose options sparkctl never writes: passed over, never run', () => {
  it.each<[string, unknown, unknown]>([
    ['podman --url', 'podman', ['--url', 'tcp://10.0.0.9:1']],
    ['podman --config', 'podman', ['--config', '/tmp/evil']],
    ['a program by path', '/tmp/x/podman', []],
  ])('%s', (_, cli, cliArgs) => {
    const reg = new Registry(fresh());
    const marker = randomUUID();
    mkdirSync(join(reg.stateDir, 'containers'), { recursive: true });
    writeFileSync(
      join(reg.stateDir, 'containers', `${marker}.json`),
      JSON.stringify({
        marker,
        cli,
        cliArgs,
        name: 'sparkctl-x-0',
        instance: 'x-0',
        profile: 'x',
        launchedAt: '2026-12-04T00:00:00.000Z',
        logFile: '/tmp/x.log',
      }),
    );
    clean();
    const PATH = process.env.PATH;
    process.env.PATH = `${bin}:${PATH}`;
    try {
      expect(reg.list().filter((e) => e.inst.marker === marker)).toEqual([]);
    } finally {
      process.env.PATH = PATH;
    }
    expect(ran()).toBe(false);
  });
});

const rank1 = {
  node: 'n1',
  rank: 1,
  pid: 0,
  marker: 'm',
  logFile: `podman logs ${ID.slice(0, 12)}`,
  containerId: ID,
  cli: ['podman', ...PODMAN],
};
const cluster: ClusterRecord = {
  version: 1,
  executor: 'native',
  profile: 'big',
  nodesFile: '/etc/sparkctl/nodes.yaml',
  head: 'n0',
  pid: 0,
  marker: 'm',
  port: 8000,
  url: 'http://10.0.0.1:8000',
  servedName: 'big',
  logFile: `podman logs ${ID.slice(0, 12)}`,
  startedAt: '2026-12-04T00:00:00.000Z',
  ranks: [{ ...rank1, node: 'n0', rank: 0 }, rank1],
};

describe('a cluster record: its CLI words and log paths only as sparkctl writes them', () => {
  it.each<[string, Record<string, unknown>, RegExp]>([
    [
      "a rank's CLI that is a shell",
      { ranks: [{ ...rank1, cli: ['sh', '-c', 'reboot'] }] },
      /^ranks\.0\.cli: "sh" is not a container CLI/,
    ],
    [
      "a rank's CLI by path",
      { ranks: [{ ...rank1, cli: ['/tmp/x/podman'] }] },
      /^ranks\.0\.cli: "\/tmp\/x\/podman" is not a container CLI/,
    ],
    [
      "a rank's CLI with an unknown flag",
      { ranks: [{ ...rank1, cli: ['podman', '--url', 'ssh://x'] }] },
      /^ranks\.0\.cli: "--url" is not a global option/,
    ],
    [
      "a rank's CLI with docker -H",
      { ranks: [{ ...rank1, cli: ['docker', '-H', 'tcp://x:2375'] }] },
      /^ranks\.0\.cli: "-H"/,
    ],
    ["a rank's log with $(...)", { ranks: [{ ...rank1, logFile: '/x/$(reboot)' }] }, /^ranks\.0\.logFile: /],
    ["a rank's log with backticks", { ranks: [{ ...rank1, logFile: '/x/`reboot`' }] }, /^ranks\.0\.logFile: /],
    ["a rank's log with a quote", { ranks: [{ ...rank1, logFile: `/x/'"; reboot` }] }, /^ranks\.0\.logFile: /],
    ["a rank's log with a newline", { ranks: [{ ...rank1, logFile: '/x/a\nreboot' }] }, /^ranks\.0\.logFile: /],
    ["a rank's log with another variable", { ranks: [{ ...rank1, logFile: '$PATH/x.log' }] }, /^ranks\.0\.logFile: /],
    ['a relative log', { logFile: 'x.log' }, /^logFile: /],
  ])('%s: corrupt, never read', (_, over, why) => {
    const reg = new Registry(fresh());
    mkdirSync(join(reg.stateDir, 'clusters'), { recursive: true });
    writeFileSync(join(reg.stateDir, 'clusters', 'big.json'), JSON.stringify({ ...cluster, ...over }));
    expect(reg.clusters()).toEqual([]);
    expect(reg.corrupt).toHaveLength(1);
    expect(reg.corrupt[0]!.reason).toMatch(why);
  });

  it('the record sparkctl writes reads back', () => {
    const reg = new Registry(fresh());
    reg.write('nodes', cluster);
    expect(reg.clusters()).toEqual([cluster]);
    expect(reg.corrupt).toEqual([]);
  });
});

/** Run a produced shell line with the marker programs on PATH; whether any of them ran. */
const runs = (line: string): boolean => {
  clean();
  spawnSync('sh', ['-c', line], {
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, HOME: bin },
    timeout: 10_000,
  });
  return ran();
};

describe("a record's words handed to a node's shell some other way: nothing runs", () => {
  it.each<[string, string[]]>([
    ['a program by path', [join(bin, 'evil')]],
    ['a shell', ['sh', '-c', `touch '${join(bin, 'RAN')}'`]],
    ['podman with an unknown flag', ['podman', '--url', 'ssh://x']],
  ])('%s: every line starts with the refusal (exit 4)', (_, cli) => {
    const ref: NodeContainerRef = { node: 'n0', containerId: ID, cli };
    for (const l of [stopLine(ref, 1), aliveLine(ref), logsLine(ref)]) {
      expect(l).toMatch(/^echo 'unproven: the record names a container CLI sparkctl does not run' >&2; exit 4/);
      expect(runs(l)).toBe(false);
    }
  });

  it('podman as sparkctl writes it is run (the guard passes it)', () => {
    expect(runs(stopLine({ node: 'n0', containerId: ID, cli: ['podman', ...PODMAN] }, 1))).toBe(true);
  });
});

describe("a node's log path in a shell line: one word, nothing in it runs", () => {
  const node = (name: string) => ({ name, address: '10.0.0.1', sshUser: 'root', sshPort: 22, gpus: 8 });
  const nf = { head: node('n0'), workers: [] } as unknown as NodesFile;
  it.each<[string, string]>([
    ['$(...)', `/x/$(touch '${'RAN'}')`],
    ['$(...) after $HOME', `$HOME/$(touch RAN)`],
    ['backticks', '/x/`touch RAN`'],
    ['a single quote', `/x/'; touch RAN; '`],
    ['a double quote', '/x/"; touch RAN; "'],
    ['a newline', '/x/a\ntouch RAN'],
  ])('%s', (_, logFile) => {
    const rec = { ...cluster, ranks: [{ node: 'n0', rank: 0, pid: 1, marker: 'm', logFile }] } as ClusterRecord;
    const line = headLog(rec, nf)!.tail(5);
    clean();
    spawnSync('sh', ['-c', line], { cwd: bin, timeout: 10_000 });
    expect(ran()).toBe(false);
    expect(existsSync(join(bin, 'RAN'))).toBe(false);
  });

  it('$HOME still expands on the node; the rest is data', () => {
    expect(nodePathWord('$HOME/.local/state/sparkctl/logs/a.log')).toBe('"$HOME"/.local/state/sparkctl/logs/a.log');
    const dir = fresh();
    writeFileSync(join(dir, 'a b.log'), 'one\ntwo\n');
    const r = spawnSync('sh', ['-c', `tail -n 1 ${nodePathWord('$HOME/a b.log')}`], {
      env: { ...process.env, HOME: dir },
      encoding: 'utf8',
    });
    expect(r.stdout).toBe('two\n');
  });
});
