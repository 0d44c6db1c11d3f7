// Every file sparkctl reads is a regular file read up to a bound: a FIFO, a device or a huge file
// where a file is expected is refused at once (never a hang, never memory filled); a file that
// says size 0 (/proc) is still read, and still bounded. Every file sparkctl creates for a user is
// never written over an existing one without force, and never through a link another user made.
import { describe, it, expect, afterAll } from 'vitest';
import { execFileSync } from 'node:child_process';
import {
  writeFileSync,
  readFileSync,
  symlinkSync,
  mkdirSync,
  lchownSync,
  existsSync,
  readdirSync,
  appendFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { readTextSync, readText, readTail, checkRegularFile, FileRefused } from '../../src/util/read.js';
import { writeNewFile, checkNewFile, checkOutputFile, ensureNewDir } from '../../src/util/new-file.js';
import { UsageError } from '../../src/errors.js';
import { tempDir, rmrf } from '../helpers.js';

const d = tempDir('sparkctl-read-');
afterAll(() => rmrf(d));
const fifo = join(d, 'fifo');
execFileSync('mkfifo', [fifo]);
const file = join(d, 'file');
writeFileSync(file, 'hello\n');
const big = join(d, 'big');
writeFileSync(big, Buffer.alloc(4096, 'a'));
symlinkSync(file, join(d, 'link'));

describe('reading a file: only a regular file, only up to a bound', () => {
  const refused: Array<[string, string, RegExp]> = [
    ['a FIFO (would block the open forever)', fifo, /named pipe \(FIFO\), not a regular file/],
    ['/dev/zero (would never end)', '/dev/zero', /character device, not a regular file/],
    ['a folder', d, /is a folder, not a regular file/],
    ['a file past the bound', big, /larger than 1024 bytes \(4096\)/],
  ];
  for (const [label, path, why] of refused) {
    it(`refuses ${label}, sync and async, naming the path`, async () => {
      const sync = (() => {
        try {
          readTextSync(path, { maxBytes: 1024, what: '--dataset' });
        } catch (e) {
          return e;
        }
      })();
      expect(sync).toBeInstanceOf(FileRefused);
      expect(sync).toBeInstanceOf(UsageError); // exit 2 where nobody catches it
      expect((sync as Error).message).toMatch(why);
      expect((sync as Error).message).toContain(`--dataset ${path}`);
      await expect(readText(path, { maxBytes: 1024 })).rejects.toThrow(why);
      expect(() => checkRegularFile(path, { maxBytes: 1024 })).toThrow(why);
    });
  }

  it('reads a regular file, and follows a link unless told not to', async () => {
    expect(readTextSync(file, { maxBytes: 1024 })).toBe('hello\n');
    expect(await readText(join(d, 'link'), { maxBytes: 1024 })).toBe('hello\n');
    expect(() => readTextSync(join(d, 'link'), { maxBytes: 1024, noFollow: true })).toThrow(/symbolic link/);
  });

  it('a /proc file that says size 0 is read whole, and is still bounded', async () => {
    expect(readTextSync('/proc/self/status', { maxBytes: 1 << 20 })).toMatch(/^Name:/);
    expect(() => readTextSync('/proc/self/status', { maxBytes: 16 })).toThrow(/larger than 16 bytes/);
  });

  it('a missing file is the fs error (ENOENT), not a refusal', () => {
    expect(() => readTextSync(join(d, 'nope'), { maxBytes: 1 })).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  });

  it('a tail read takes at most the last maxBytes since `from`, and re-reads a truncated file from its start', () => {
    const log = join(d, 'log');
    writeFileSync(log, '0123456789');
    expect(readTail(log, 2, 100).buf.toString()).toBe('23456789');
    const t = readTail(log, 0, 4);
    expect([t.buf.toString(), t.size, t.skipped]).toEqual(['6789', 10, 6]);
    expect(readTail(log, 50, 100).buf.toString()).toBe('0123456789');
    appendFileSync(log, 'ab');
    expect(readTail(log, 10, 100).buf.toString()).toBe('ab');
    expect(() => readTail(fifo, 0, 100)).toThrow(FileRefused);
  });
});

describe('creating a file for a user: never over one without force, never through a link', () => {
  it('refuses an existing file without force (checked first, and at the write); force replaces it', () => {
    const p = join(d, 'profile.yaml');
    writeFileSync(p, 'hand-edited\n');
    expect(() => checkNewFile(p, '--out')).toThrow(/--out .*profile\.yaml: the file exists/);
    expect(() => writeNewFile(p, 'new\n', '--out')).toThrow(UsageError);
    expect(readFileSync(p, 'utf8')).toBe('hand-edited\n');
    checkNewFile(p, '--out', { force: true });
    writeNewFile(p, 'new\n', '--out', { force: true });
    expect(readFileSync(p, 'utf8')).toBe('new\n');
    writeNewFile(join(d, 'fresh.yaml'), 'x\n', '--out');
    expect(readFileSync(join(d, 'fresh.yaml'), 'utf8')).toBe('x\n');
    expect(readdirSync(d).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('a link at the name is refused with force too, and its target is untouched; so is a dangling one', () => {
    for (const force of [false, true]) {
      expect(() => writeNewFile(join(d, 'link'), 'evil\n', '--out', { force }), `force ${force}`).toThrow(
        /symbolic link/,
      );
      symlinkSync(join(d, 'nowhere'), join(d, `dangling-${force}`));
      expect(() => writeNewFile(join(d, `dangling-${force}`), 'evil\n', '--out', { force })).toThrow(UsageError);
    }
    expect(readFileSync(file, 'utf8')).toBe('hello\n');
    expect(existsSync(join(d, 'nowhere'))).toBe(false);
  });

  it("a folder on the way that is another user's link is refused; one's own link is followed", () => {
    const real = join(d, 'real');
    mkdirSync(real);
    const planted = join(d, 'planted');
    symlinkSync(real, planted);
    lchownSync(planted, 65534, 65534); // as if "nobody" had put it there
    for (const check of [
      () => checkOutputFile(join(planted, 'x.prom'), '--prometheus'),
      () => writeNewFile(join(planted, 'x.yaml'), 'x', '--out'),
      () => ensureNewDir(join(planted, 'bundle'), '--out', 'fix'),
    ]) {
      expect(check).toThrow(/symbolic link/);
    }
    expect(readdirSync(real)).toEqual([]);
    const mine = join(d, 'mine');
    symlinkSync(real, mine);
    writeNewFile(join(mine, 'x.yaml'), 'x\n', '--out');
    expect(readFileSync(join(real, 'x.yaml'), 'utf8')).toBe('x\n');
  });

  it('a new folder is never a link (whoever made it), and is made 0700', () => {
    const real = join(d, 'real2');
    mkdirSync(real);
    symlinkSync(real, join(d, 'dirlink'));
    expect(() => ensureNewDir(join(d, 'dirlink'), '--out', 'give a new folder')).toThrow(
      /--out .*dirlink: is a symbolic link/,
    );
    ensureNewDir(join(d, 'bundle'), '--out', 'fix');
    expect(
      execFileSync('stat', ['-c', '%a', join(d, 'bundle')])
        .toString()
        .trim(),
    ).toBe('700');
  });
});
