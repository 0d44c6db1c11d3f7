// src/engine/runtime/ipc-folder.ts: vLLM's IPC sockets in a folder of the replica's own, made at a host
// launch, gone with the replica's record. Socket files are made the way a killed server leaves them: a
// process binds one and exits without closing it (the kernel keeps the file).
import { spawnSync } from 'node:child_process';
import {
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  IPC_VAR,
  ipcEnv,
  ipcFolderOf,
  prepareIpcFolder,
  removeIpcFolder,
} from '../../src/engine/runtime/ipc-folder.js';
import { hostRuntime } from '../../src/engine/runtime/host.js';
import { Registry } from '../../src/engine/registry.js';
import { UsageError } from '../../src/errors.js';
import { rmrf } from '../helpers.js';
import { tempDir } from '../temp-dirs.js';

const root = tempDir('sparkctl-ipc-');
afterAll(() => rmrf(root));
let n = 0;
const fresh = () => {
  const d = join(root, `s${n++}`);
  mkdirSync(d);
  return d;
};

/** A socket file left behind: bound by a process that exits without closing it. */
function leftSocket(path: string) {
  const r = spawnSync(
    process.execPath,
    ['-e', `require('node:net').createServer().listen(${JSON.stringify(path)}, () => process.exit(0))`],
    { timeout: 10_000 },
  );
  expect(r.status).toBe(0);
  expect(lstatSync(path).isSocket()).toBe(true);
}

const replica = (env: Record<string, string> = {}, envFrom: Record<string, string> = {}, name = 'tiny-0') =>
  ({ name, env, envFrom }) as never;

describe('where the sockets go', () => {
  const uuid = '0'.repeat(36);
  it.each([
    // [state folder length, fits]: vLLM's path is <folder>/<36-character uuid>, at most 107 bytes
    ['a short state folder', '/var/lib/sparkctl', true],
    ['exactly 107 bytes with the uuid', `/${'a'.repeat(107 - 1 - 36 - '/ipc/tiny-0'.length - 1)}`, true],
    ['one byte over', `/${'a'.repeat(107 - 1 - 36 - '/ipc/tiny-0'.length)}`, false],
  ])('%s', (_, state, fits) => {
    const dir = ipcFolderOf(state, 'tiny-0');
    if (!fits) return expect(dir).toBeUndefined();
    expect(dir).toBe(join(state, 'ipc', 'tiny-0'));
    expect(Buffer.byteLength(`${dir}/${uuid}`)).toBeLessThanOrEqual(107);
  });

  it('a relative state folder is made absolute (vLLM may run elsewhere; the record is removed from anywhere)', () => {
    expect(ipcFolderOf('st', 'x-0')).toBe(join(process.cwd(), 'st', 'ipc', 'x-0'));
  });

  it.each([
    ['nothing set: the replica folder', {}, {}, true],
    ["the profile's env sets it: kept", { [IPC_VAR]: '/srv/ipc' }, {}, false],
    ["taken from sparkctl's environment by name: kept", {}, { [IPC_VAR]: IPC_VAR }, false],
  ])('%s', (_, env, envFrom, ours) => {
    const got = ipcEnv({ stateDir: '/var/lib/sparkctl', replica: replica(env, envFrom) });
    expect(got).toEqual(ours ? { [IPC_VAR]: '/var/lib/sparkctl/ipc/tiny-0' } : {});
  });

  it("the host's rendered line leaves it out (a dry-run's line runs by hand, where the folder would not exist)", () => {
    const render = (stateDir: string) =>
      hostRuntime.render(
        { stateDir, replica: { ...replica({ A: '1' }), argv: ['vllm', 'serve', 'm'] } } as never,
        '<marker>',
      );
    const line = render('/var/lib/sparkctl');
    expect(line.env).toEqual({ A: '1' });
    // ... and names it in a note the dry-run prints as a comment
    expect(line.notes).toEqual([{ what: expect.stringContaining(IPC_VAR), value: '/var/lib/sparkctl/ipc/tiny-0' }]);
    // too long a state folder: vLLM keeps its default, nothing to say
    expect(render(`/${'x'.repeat(80)}`).notes).toEqual([]);
  });
});

describe('made at launch', () => {
  it('made 0700; the sockets a gone replica of the name left are removed; anything else in it stays', () => {
    const dir = join(fresh(), 'ipc', 'tiny-0');
    prepareIpcFolder(dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, '..')).mode & 0o777).toBe(0o700);
    leftSocket(join(dir, 'a1b2'));
    writeFileSync(join(dir, 'notes.txt'), 'not ours');
    prepareIpcFolder(dir);
    expect(readdirSync(dir)).toEqual(['notes.txt']);
  });

  it('a socket something still listens on is left (a live server whose record was lost keeps its sockets)', async () => {
    const dir = join(fresh(), 'ipc', 'live-0');
    prepareIpcFolder(dir);
    const { createServer } = await import('node:net');
    const live = createServer();
    await new Promise<void>((r) => live.listen(join(dir, 'live'), r));
    leftSocket(join(dir, 'dead'));
    try {
      prepareIpcFolder(dir);
      expect(readdirSync(dir)).toEqual(['live']);
    } finally {
      await new Promise((r) => live.close(r));
    }
  });

  it.each([
    ['the folder is a link', (d: string) => symlinkSync(fresh(), d)],
    ['the folder is a file', (d: string) => writeFileSync(d, '')],
    ['the folder is another user’s', (d: string) => (mkdirSync(d, { mode: 0o700 }), chownSync(d, 65534, 65534))],
    ['the ipc folder above it is a link', (d: string) => (symlinkSync(fresh(), join(d, '..')), undefined)],
  ])('refused, naming the folder and the fix: %s', (what, plant) => {
    const state = fresh();
    const dir = join(state, 'ipc', 'tiny-0');
    if (what.includes('above')) symlinkSync(fresh(), join(state, 'ipc'));
    else {
      mkdirSync(join(state, 'ipc'), { mode: 0o700 });
      plant(dir);
    }
    if (what.includes('another') && process.getuid?.() !== 0) return; // only root can give a folder away
    const e = (() => {
      try {
        prepareIpcFolder(dir);
      } catch (err) {
        return err as Error;
      }
    })();
    expect(e).toBeInstanceOf(UsageError);
    expect(e!.message).toContain('IPC folder');
    expect((e as UsageError).details.join(' ')).toMatch(/remove .*sparkctl creates it/);
  });
});

describe('gone with the record', () => {
  it('sockets and folder removed; a folder holding something else keeps it (and the folder); a link is never followed; none is fine', () => {
    const state = fresh();
    const dir = ipcFolderOf(state, 'a-0')!;
    prepareIpcFolder(dir);
    leftSocket(join(dir, 's1'));
    leftSocket(join(dir, 's2'));
    removeIpcFolder(state, 'a-0');
    expect(existsSync(dir)).toBe(false);

    const kept = ipcFolderOf(state, 'b-0')!;
    prepareIpcFolder(kept);
    leftSocket(join(kept, 's1'));
    writeFileSync(join(kept, 'file'), '');
    removeIpcFolder(state, 'b-0');
    expect(readdirSync(kept)).toEqual(['file']);

    const elsewhere = fresh();
    leftSocket(join(elsewhere, 's1'));
    symlinkSync(elsewhere, join(state, 'ipc', 'c-0'));
    removeIpcFolder(state, 'c-0');
    expect(readdirSync(elsewhere)).toEqual(['s1']);

    expect(() => removeIpcFolder(state, 'never-0')).not.toThrow();
  });

  it("the registry's remover: a host record's folder goes, a cluster record's same name leaves it", () => {
    const state = fresh();
    const reg = new Registry(state);
    const dir = ipcFolderOf(state, 'm-0')!;
    prepareIpcFolder(dir);
    leftSocket(join(dir, 's'));
    reg.remove('nodes', 'm-0');
    expect(existsSync(dir)).toBe(true);
    reg.remove('host', 'm-0');
    expect(existsSync(dir)).toBe(false);
  });
});
