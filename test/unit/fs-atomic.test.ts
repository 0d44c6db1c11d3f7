// Item 7 of issue 13: a planted symlink at a predictable temp name must not redirect a write.
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { symlinkSync, writeFileSync, readFileSync, readdirSync, lstatSync } from 'node:fs';
import { join } from 'node:path';
import { Registry, type Instance } from '../../src/engine/registry.js';
import { writePrometheus } from '../../src/commands/probe.js';
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
  for (const name of [`${target}.${process.pid}.tmp`, `${target}.tmp`, `${target}~`, `${target}.new`]) symlinkSync(victim, name);
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
    reg.write(inst('x'));
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(JSON.parse(readFileSync(join(reg.dir, 'x.json'), 'utf8')).name).toBe('x');
  });

  it('Prometheus textfile', () => {
    const prom = join(dir, 'sparkctl.prom');
    plant(prom);
    writePrometheus(prom, []);
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(readFileSync(prom, 'utf8')).toContain('sparkctl_probe_healthy');
  });

  it('a link AT the target name is replaced, not followed; no temp file is left', () => {
    const prom = join(dir, 'linked.prom');
    symlinkSync(victim, prom);
    writePrometheus(prom, []);
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(lstatSync(prom).isSymbolicLink()).toBe(false);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp') && !lstatSync(join(dir, f)).isSymbolicLink())).toEqual([]);
  });
});
