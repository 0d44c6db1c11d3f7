// The model copy's rsync target names a cache folder that can hold spaces and shell characters (from
// HF_HOME). Real rsync runs here against a stand-in for ssh that does what ssh does with the command it
// carries: joins it and hands it to the far end's shell (`eval "$*"`), on this machine instead of a node.
// RSYNC_OLD_ARGS=1 gives rsync < 3.2.4's behaviour (it did not escape the remote path itself), which is
// what a node or a host with an older rsync does: there the path reaches the shell unless -s carries it.
import { describe, it, expect, afterAll } from 'vitest';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, existsSync, chmodSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { rsyncArgv } from '../../src/engine/cluster/model-sync.js';
import { NodesFile } from '../../src/profiles/schema.js';

const nf = NodesFile.parse({ head: { name: 'n0', address: '10.0.0.10', interface: 'eth0' } });
const hasRsync = spawnSync('rsync', ['--version']).status === 0;
const root = mkdtempSync(join(tmpdir(), 'sparkctl-rsync-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('rsync argv for the model copy', () => {
  it('keeps a hostile cache path one argument and protects it from the remote shell', () => {
    const dir = '/c/a b\'$(touch x);c"';
    const argv = rsyncArgv(nf, nf.head, dir, 'ssh');
    expect(argv).toContain('--protect-args');
    expect(argv.slice(-3)).toEqual(['--', `${dir}/`, `root@10.0.0.10:${dir}/`]);
  });

  it.skipIf(!hasRsync)('copies into a folder named with spaces, quotes, $() and ; without running any of it (real rsync)', () => {
    const pwned = join(root, 'PWNED');
    const src = join(root, `src dir;touch PWNED;'$(touch PWNED)'`);
    const dst = join(root, `dst dir;touch PWNED;'$(touch PWNED)'`);
    mkdirSync(join(src, 'blobs'), { recursive: true });
    mkdirSync(dst, { recursive: true });
    writeFileSync(join(src, 'blobs', 'abc'), 'weights');
    const fakeSsh = join(root, 'fake-ssh');
    // rsync calls: <shell> [-l user] host rsync --server ...; drop all up to the host, run the rest as sshd would.
    writeFileSync(fakeSsh, '#!/bin/sh\nwhile [ "$#" -gt 0 ] && [ "$1" != rsync ]; do shift; done\neval "$*"\n');
    chmodSync(fakeSsh, 0o755);
    const argv = rsyncArgv(nf, { ...nf.head, address: 'localhost' }, src, fakeSsh);
    argv[argv.length - 1] = `root@localhost:${dst}/`;
    const r = spawnSync('rsync', argv, {
      cwd: root,
      env: { ...process.env, RSYNC_OLD_ARGS: '1' },
      input: 'blobs/abc\0',
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(readFileSync(join(dst, 'blobs', 'abc'), 'utf8')).toBe('weights');
    expect(existsSync(pwned)).toBe(false);
  });
});
