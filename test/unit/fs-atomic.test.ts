// A planted symlink at a predictable temp name must not redirect a write; one at the target is refused.
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { symlinkSync, writeFileSync, readFileSync, readdirSync, lstatSync, mkdirSync, existsSync } from 'node:fs';
import { writeFileAtomic } from '../../src/util/atomic.js';
import { fsProblem } from '../../src/util/dirs.js';
import { checkOutputFile } from '../../src/util/new-file.js';
import { UsageError } from '../../src/errors.js';
import { join } from 'node:path';
import { Registry, type Instance } from '../../src/engine/registry.js';
import { writePrometheus } from '../../src/health/prometheus.js';
import { tempDir, rmrf } from '../helpers.js';

let dir: string;
let victim: string;
beforeEach(() => {
  dir = tempDir('sparkctl-atomic-');
  victim = join(dir, 'victim');
  writeFileSync(victim, 'precious\n');
});
afterEach(() => rmrf(dir));

/** Links at every temp name an old-style writer could predict (pid, pid+-few, common suffixes). */
function plant(target: string) {
  for (const name of [`${target}.${process.pid}.tmp`, `${target}.tmp`, `${target}~`, `${target}.new`])
    symlinkSync(victim, name);
}

const inst = (name: string): Instance => ({
  version: 1,
  name,
  profile: 'p',
  replica: 0,
  pid: 1,
  pgid: 1,
  startTime: 1,
  host: '127.0.0.1',
  port: 1,
  url: 'http://127.0.0.1:1',
  servedName: 'm',
  gpus: [],
  logFile: '/dev/null',
  engine: 'sim',
  argv: [],
  startedAt: new Date().toISOString(),
  readyTimeoutSeconds: 1,
});

describe('atomic writes never follow a planted link', () => {
  it('registry entry', () => {
    const reg = new Registry(join(dir, 'state'));
    plant(join(reg.dir, 'x.json'));
    reg.write('host', inst('x'));
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(JSON.parse(readFileSync(join(reg.dir, 'x.json'), 'utf8')).name).toBe('x');
  });

  it('Prometheus textfile', () => {
    const prom = join(dir, 'sparkctl.prom');
    plant(prom);
    writePrometheus(prom, [], [], { stateDir: join(dir, 'state') });
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(readFileSync(prom, 'utf8')).toContain('sparkctl_probe_healthy');
  });

  it('a link AT the target name is refused (exit 2), not followed nor replaced; no temp file is left', () => {
    const prom = join(dir, 'linked.prom');
    symlinkSync(victim, prom);
    expect(() => writePrometheus(prom, [], [], { stateDir: join(dir, 'state') })).toThrow(/symbolic link/);
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(lstatSync(prom).isSymbolicLink()).toBe(true);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp') && !lstatSync(join(dir, f)).isSymbolicLink())).toEqual([]);
  });

  it.each([
    ['a symlink', (p: string) => symlinkSync(victim, p), /ELOOP/],
    ['a folder', (p: string) => mkdirSync(p), /EISDIR/],
  ])('writeFileAtomic refuses %s at the target', (_n, make, code) => {
    const p = join(dir, 'target');
    make(p);
    expect(() => writeFileAtomic(p, 'x')).toThrow(expect.objectContaining({ code: expect.stringMatching(code) }));
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
  });

  it('writeFileAtomic refuses a device (/dev/full): ENOTREG, and fsProblem makes it exit 2', () => {
    let err: unknown;
    try {
      writeFileAtomic('/dev/full', 'x');
    } catch (e) {
      err = e;
    }
    expect((err as NodeJS.ErrnoException).code).toBe('ENOTREG');
    const u = fsProblem(err, '--html', '/dev/full', 'fix') as UsageError;
    expect(u).toBeInstanceOf(UsageError);
    expect(u.exitCode).toBe(2);
    expect(u.message).toMatch(/not a regular file/);
  });

  it('checkOutputFile: a missing folder is exit 2 and nothing is created; a good path leaves no temp file', () => {
    expect(() => checkOutputFile(join(dir, 'no', 'such', 'x.json'), '--save-result')).toThrow(/does not exist/);
    expect(existsSync(join(dir, 'no'))).toBe(false);
    checkOutputFile(join(dir, 'fine.json'), '--save-result');
    expect(readdirSync(dir).sort()).toEqual(['victim']);
  });
});
