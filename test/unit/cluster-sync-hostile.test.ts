// Values that reach ssh, rsync and the nodes' shells, and the bytes the nodes send back, are hostile:
// a nodes file's user, address and interface are checked names (a leading '-' would make ssh read
// -oProxyCommand=... as an option and run it here); every value in the probe's remote command is one
// quoted word, run here by a real sh; and what a node prints reaches the terminal without its control
// characters.
import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { NodesFile } from '../../src/profiles/schema.js';
import { parseHolding, probeCommand } from '../../src/engine/cluster/model-sync.js';
import { parseImageProbe } from '../../src/engine/cluster/image-sync.js';
import { printable, remoteWhy } from '../../src/engine/cluster/ssh.js';
import { tempDirs } from '../helpers.js';

const fresh = tempDirs('sparkctl-synchostile-');
const node = (over: Record<string, unknown>) => ({
  head: { name: 'n0', address: '10.0.0.10', sshUser: 'ubuntu', interface: 'ens1f0', ...over },
});

describe('a nodes file: what reaches ssh is a checked name', () => {
  it.each([
    ['address', '10.0.0.10'],
    ['address', 'node-1.example.com'],
    ['sshUser', 'ubuntu'],
    ['sshUser', 'svc_llm'],
    ['interface', 'enp1s0f1np1'],
    ['interface', 'lo'],
  ])('%s %j is accepted', (field, value) => {
    expect(NodesFile.safeParse(node({ [field]: value })).success).toBe(true);
  });
  it.each([
    ['address', '-oProxyCommand=touch /tmp/x'],
    ['address', 'host;id'],
    ['address', 'a b'],
    ['address', 'host:/path'],
    ['address', 'user@host'],
    ['address', '$(id)'],
    // IPv6 literals: refused with the fix (issue 42, item 9), not half-carried into rsync's host:path
    ['address', 'fe80::1'],
    ['address', '[2001:db8::2]'],
    ['address', '2001:db8::2'],
    ['sshUser', '-oProxyCommand=touch /tmp/x'],
    ['sshUser', 'a b'],
    ['sshUser', 'root@evil'],
    ['sshUser', 'u$(id)'],
    ['interface', '-x'],
    ['interface', 'eth0;id'],
    ['interface', 'a'.repeat(16)],
  ])('%s %j is refused', (field, value) => {
    expect(NodesFile.safeParse(node({ [field]: value })).success).toBe(false);
  });
  it('an IPv6 literal is refused naming the fix (a host name that resolves to it)', () => {
    const r = NodesFile.safeParse(node({ address: '2001:db8::2' }));
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toContain('give an IPv4 address, or a host name that resolves to it');
    expect(NodesFile.safeParse(node({ fabric: { address: 'fe80::2', interface: 'enp1s0f1np1' } })).success).toBe(false);
  });
  it('a fabric address and interface are checked the same', () => {
    expect(
      NodesFile.safeParse(node({ fabric: { address: '-oProxyCommand=x', interface: 'enp1s0f1np1' } })).success,
    ).toBe(false);
    expect(NodesFile.safeParse(node({ fabric: { address: '192.168.100.10', interface: 'x;id' } })).success).toBe(false);
    expect(NodesFile.safeParse(node({ fabric: { address: '192.168.100.10', interface: 'enp1s0f1np1' } })).success).toBe(
      true,
    );
  });
});

describe("model-sync's probe command: every value one word of a real sh", () => {
  it('a hostile cache path, revision, commit, blob and file name run nothing', () => {
    const d = fresh();
    const mark = (n: string) => join(d, n);
    const repoDir = join(d, `repo $(touch ${mark('a')}) \`touch ${mark('b')}\` ;touch ${mark('c')}`);
    mkdirSync(join(repoDir, 'refs'), { recursive: true });
    const cmd = probeCommand({
      repoDir,
      revision: `main$(touch ${mark('d')})`,
      commit: `x";touch ${mark('e')};"`,
      files: [{ path: `p'$(touch ${mark('f')})'`, blob: `b$(touch ${mark('g')})`, size: 1 }],
    });
    const out = execFileSync('sh', ['-c', cmd], { encoding: 'utf8' });
    expect(readdirSync(d).filter((f) => !f.startsWith('repo '))).toEqual([]);
    expect(out).toMatch(/^ref \n/);
    expect(out).toMatch(/^free \d+ /m);
  });
});

describe('a repository folder that is a link on the node is found, never copied through', () => {
  it('the probe, run by a real sh, reports blobs/ as a link; a real folder is not reported', () => {
    const d = fresh();
    const repoDir = join(d, 'models--o--m');
    mkdirSync(join(repoDir, 'snapshots'), { recursive: true });
    mkdirSync(join(d, 'elsewhere'));
    symlinkSync(join(d, 'elsewhere'), join(repoDir, 'blobs'));
    const out = execFileSync(
      'sh',
      ['-c', probeCommand({ repoDir, revision: 'main', commit: 'a'.repeat(40), files: [] })],
      { encoding: 'utf8' },
    );
    expect(parseHolding(out).linked).toEqual(['blobs']);
  });
  it('only the repository folders are taken from a linked line', () => {
    expect(parseHolding('linked blobs\nlinked etc\nlinked ../x\n').linked).toEqual(['blobs']);
  });
});

describe("a node's answer is hostile", () => {
  const ESC = '\u001b]0;owned\u0007\u001b[2J';
  it('a free-space folder with control characters is not taken (it would be printed)', () => {
    expect(parseHolding(`free 100 /data${ESC}\n`).freeAt).toBeUndefined();
    expect(parseImageProbe(`free 100 /var/lib/containers${ESC}\n`).freeAt).toBeUndefined();
    expect(parseHolding('free 100 /data/hf\n')).toMatchObject({ freeAt: '/data/hf', freeBytes: 102400 });
  });
  it("the node's error text is shown with its control characters escaped, never raw (util/control.ts: the one rule)", () => {
    expect(printable(`no${ESC}pe`)).toBe('no\\x1b]0;owned\\x07\\x1b[2Jpe');
    const why = remoteWhy({ exitCode: 1, stdout: '', stderr: `rsync: error${ESC}\n` });
    expect(why).not.toMatch(/[\u0000-\u001f]/);
    expect(why).toContain('rsync: error');
  });
});
