// The model copy's rsync target names a cache folder that can hold spaces and shell characters (from
// HF_HOME). Real rsync runs here against a stand-in for ssh that does what ssh does with the command it
// carries: joins it and hands it to the far end's shell (`eval "$*"`), on this machine instead of a node.
// RSYNC_OLD_ARGS=1 gives rsync < 3.2.4's behaviour (it did not escape the remote path itself), which is
// what a node or a host with an older rsync does: there the path reaches the shell unless -s carries it.
import { describe, it, expect, afterAll } from 'vitest';
import { mkdirSync, writeFileSync, readFileSync, existsSync, chmodSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { rsyncArgv, rsyncShell, rsyncWord } from '../../src/engine/cluster/model-sync.js';
import { NodesFile } from '../../src/profiles/schema.js';
import { tempDir } from '../temp-dirs.js';

const nf = NodesFile.parse({ head: { name: 'n0', address: '10.0.0.10', interface: 'eth0' } });
const hasRsync = spawnSync('rsync', ['--version']).status === 0;
const root = tempDir('sparkctl-rsync-');
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('rsync argv for the model copy', () => {
  it('keeps a hostile cache path one argument and protects it from the remote shell', () => {
    const dir = '/c/a b\'$(touch x);c"';
    const argv = rsyncArgv(nf, nf.head, dir, 'ssh');
    expect(argv).toContain('--protect-args');
    expect(argv.slice(-3)).toEqual(['--', `${dir}/`, `root@10.0.0.10:${dir}/`]);
  });

  it.skipIf(!hasRsync)(
    'copies into a folder named with spaces, quotes, $() and ; without running any of it (real rsync)',
    () => {
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
    },
  );
});

describe("rsync's -e: each ssh word stays one argument, as rsync splits it (issue 42, item 9)", () => {
  it.each([
    ['plain', '/root/.ssh/id'],
    ['a space', '/root/my keys/id'],
    ['a single quote', "/root/it's/id"],
    ['a double quote', '/root/"q"/id'],
    ['a backslash and a dollar', '/root/a\\b$HOME/id'],
  ])('an identity file with %s', (_what, key) => {
    expect(rsyncWord(key)).toBe(/^[\w@%+=:,./-]+$/.test(key) ? key : `'${key.replace(/'/g, "''")}'`);
  });

  it.skipIf(!hasRsync)(
    'real rsync hands the stand-in ssh the key path and an option with spaces and quotes as one argument each',
    () => {
      const dir = join(root, "ssh dir 'x'");
      mkdirSync(dir, { recursive: true });
      const log = join(root, 'argv.log');
      const fake = join(dir, 'fake ssh');
      // records each argument on its own line, then fails (no rsync server needed to read the argv)
      writeFileSync(fake, `#!/bin/sh\nfor a in "$@"; do printf '%s\\n' "$a"; done > '${log}'\nexit 255\n`);
      chmodSync(fake, 0o755);
      const key = join(root, `my key's "id"`);
      const nf2 = NodesFile.parse({
        head: { name: 'n0', address: '10.0.0.10', interface: 'eth0' },
        ssh: { identityFile: key, options: ['SetEnv=A="b c"'] },
      });
      const before = process.env.SPARKCTL_SSH;
      process.env.SPARKCTL_SSH = fake;
      let shell: string;
      try {
        shell = rsyncShell(nf2, nf2.head);
      } finally {
        if (before === undefined) delete process.env.SPARKCTL_SSH;
        else process.env.SPARKCTL_SSH = before;
      }
      const src = join(root, 'src2');
      mkdirSync(src, { recursive: true });
      spawnSync('rsync', rsyncArgv(nf2, nf2.head, src, shell), { input: '', encoding: 'utf8', timeout: 30_000 });
      const argv = readFileSync(log, 'utf8').split('\n');
      expect(argv[argv.indexOf('-i') + 1]).toBe(key);
      expect(argv).toContain('SetEnv=A="b c"');
      expect(argv).toContain('10.0.0.10');
    },
  );
});
