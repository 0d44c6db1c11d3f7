// Two more fields read back from a record that become a command or an argument:
// - an image (a host entry's container, its launch record, a pin file, an upgrade record) goes to
//   docker/podman as one argv word: `--privileged` would be read as an option, a newline is no
//   reference. One rule (util/image-ref.ts, the profile's own): anything else is a corrupt record.
// - the vLLM executable a record names (a host entry's argv[0], a pin's vllmBin) is started again as
//   root by restart and upgrade: only a regular executable file writable by its owner alone, in a
//   folder only its owner can write to (engine/record-exec.ts; its owner may be the operator's login user).
import { hostEntryJson } from '../host-entry.js';
import { describe, it, expect } from 'vitest';
import { chmodSync, chownSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Registry, type Entry, type Instance } from '../../src/engine/registry.js';
import { relaunchRunsHostInstall } from '../../src/engine/runtime/index.js';
import { imageRefProblem } from '../../src/util/image-ref.js';
import { readPins } from '../../src/engine/pins.js';
import { readUpgrades } from '../../src/upgrade/record.js';
import { historyDir } from '../../src/history/store.js';
import { recordedExecProblem, checkRecordedExec } from '../../src/engine/record-exec.js';
import { relaunchPlan } from '../../src/engine/relaunch-plan.js';
import { UsageError, ExitCode } from '../../src/errors.js';
import { tempDirs } from '../helpers.js';

const fresh = tempDirs('sparkctl-recwords2-');
const HEX = 'b'.repeat(64);

describe('an image read back from a record: a reference or an image ID, else corrupt', () => {
  it.each([
    'nvcr.io/nvidia/vllm:26.03-py3',
    'vllm/vllm-openai:v0.11.0',
    'localhost:5000/team/vllm:dev',
    `nvcr.io/nvidia/vllm@sha256:${HEX}`,
    `sha256:${HEX}`,
    HEX,
  ])('%s is one', (ref) => expect(imageRefProblem(ref)).toBeUndefined());

  it.each<[string, unknown]>([
    ['an option', '--privileged'],
    ['a volume option', '-v/:/host'],
    ['a reference and a newline', 'vllm/vllm-openai:v1\n--privileged'],
    ['a reference and a space', 'vllm/vllm-openai:v1 --privileged'],
    ['a tab', 'a\tb'],
    ['an escape sequence', 'a\u001b[2J'],
    ['nothing', ''],
    ['no string', 7],
    ['too long', `a/${'b'.repeat(700)}`],
  ])('%s is not, shown escaped and cut', (_, v) => {
    const p = imageRefProblem(v)!;
    expect(p).toMatch(/is not an image reference .*check the file/);
    expect(p).not.toMatch(/[\n\t\u001b]/);
    expect(p.length).toBeLessThan(400);
  });

  const entry = hostEntryJson;
  const container = (image: string) => ({
    container: { cli: 'podman', cliArgs: [], name: 'sparkctl-x-0', image, id: 'a'.repeat(64) },
  });
  const launch = (image: string) => ({
    launch: { sets: [], vllm: { asked: 'auto', resolved: '0.11.0', how: 'unknown' }, image },
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    [
      "a host entry's container image --privileged",
      container('--privileged'),
      /^container\.image: "--privileged" is not an image reference/,
    ],
    [
      "a host entry's container image with a newline",
      container('vllm:1\n--privileged'),
      /^container\.image: "vllm:1\\\\x0a--privileged" is not an image reference/,
    ],
    [
      "a launch record's image --privileged",
      launch('--privileged'),
      /^launch\.image: "--privileged" is not an image reference/,
    ],
    ["a launch record's image with a newline", launch('x\n-v/:/h'), /^launch\.image: "x\\\\x0a-v\/:\/h" is not/],
  ])('%s: corrupt, never read', (_, over, why) => {
    const reg = new Registry(fresh());
    writeFileSync(join(reg.dir, 'x-0.json'), JSON.stringify(entry(over)));
    expect(reg.list().filter((e) => e.inst.name === 'x-0')).toEqual([]);
    expect(reg.corrupt).toHaveLength(1);
    expect(reg.corrupt[0]!.reason).toMatch(why);
  });

  it('a good image in both reads (the rule passes what sparkctl writes)', () => {
    const reg = new Registry(fresh());
    writeFileSync(
      join(reg.dir, 'x-0.json'),
      JSON.stringify(entry({ launch: launch('vllm/vllm-openai:v0.11.0').launch })),
    );
    reg.list();
    expect(reg.corrupt).toEqual([]);
  });

  const pinFile = (image: string) => ({
    version: 1,
    profile: 'x',
    current: { at: '2026-12-04T00:00:00.000Z', vllmVersion: '0.11.0', image, sets: [] },
    previous: [],
  });
  it.each([['--privileged'], ['vllm:1\n--privileged']])(
    'a pin file naming the image %j: not a pin file, with the field',
    (image) => {
      const dir = fresh();
      mkdirSync(join(dir, 'pins'), { recursive: true });
      writeFileSync(join(dir, 'pins', 'x.json'), JSON.stringify(pinFile(image)));
      expect(() => readPins(dir, 'x')).toThrow(/not a pin file \(current\.image: ".*" is not an image reference/);
    },
  );
  it('a pin file with a good image reads', () => {
    const dir = fresh();
    mkdirSync(join(dir, 'pins'), { recursive: true });
    writeFileSync(join(dir, 'pins', 'x.json'), JSON.stringify(pinFile('vllm/vllm-openai:v0.11.0')));
    expect(readPins(dir, 'x')?.current.image).toBe('vllm/vllm-openai:v0.11.0');
  });

  it('an upgrade record naming an image --privileged is not trusted (counted)', () => {
    const dir = fresh();
    const rec = (image: string) =>
      JSON.stringify({
        at: 'now',
        profile: 'x',
        kind: 'upgrade',
        from: { vllmVersion: '1' },
        to: { vllmVersion: '2', image },
        status: 'done',
        failed: [],
        ms: 1,
        by: 'root',
      });
    mkdirSync(historyDir(dir), { recursive: true });
    writeFileSync(join(historyDir(dir), 'upgrades.jsonl'), `${rec('--privileged')}\n${rec('vllm/vllm-openai:v2')}\n`);
    const r = readUpgrades(dir);
    expect(r.skipped).toBe(1);
    expect(r.records.map((x) => x.to.image)).toEqual(['vllm/vllm-openai:v2']);
  });
});

describe('a vLLM executable read back from a record: checked before it runs again', () => {
  /** a folder (0700, as mkdtemp makes it) holding `vllm`, mode `mode` */
  const exe = (mode = 0o755, dirMode = 0o700) => {
    const d = join(fresh(), 'bin');
    mkdirSync(d);
    const f = join(d, 'vllm');
    writeFileSync(f, '#!/bin/sh\nexit 0\n');
    chmodSync(f, mode);
    chmodSync(d, dirMode);
    return f;
  };

  it('a root-owned (or own) 0755 file in a 0700 folder runs', () => expect(recordedExecProblem(exe())).toBeUndefined());
  it('a 0755 folder too', () => expect(recordedExecProblem(exe(0o755, 0o755))).toBeUndefined());
  it('a symlink to a good file runs', () => {
    const l = join(fresh(), 'vllm');
    symlinkSync(exe(), l);
    expect(recordedExecProblem(l)).toBeUndefined();
  });
  it('a bare name is found on the PATH, not named by the record: not checked here', () =>
    expect(recordedExecProblem('vllm')).toBeUndefined());

  it.each<[string, () => string, RegExp]>([
    ['group-writable', () => exe(0o775), /writable by its group \(mode 775\)/],
    ['world-writable', () => exe(0o757), /writable by others/],
    ['in a world-writable folder', () => exe(0o755, 0o777), /its folder .* is writable by others .*could replace it/],
    ['in a group-writable folder', () => exe(0o755, 0o770), /its folder .* is writable by its group/],
    ['in a sticky world-writable folder (as /tmp)', () => exe(0o755, 0o1777), /its folder .* is writable by others/],
    ['not executable', () => exe(0o644), /is not executable/],
    [
      'not a regular file (a folder)',
      () => {
        const d = join(fresh(), 'vllm');
        mkdirSync(d, { mode: 0o755 });
        return d;
      },
      /is not a regular file/,
    ],
    ['not there', () => join(fresh(), 'nothing', 'vllm'), /does not exist/],
    [
      'a symlink to a file in a world-writable folder',
      () => {
        const l = join(fresh(), 'vllm');
        symlinkSync(exe(0o755, 0o777), l);
        return l;
      },
      /its folder .* is writable by others/,
    ],
    [
      'a symlink placed in a world-writable folder',
      () => {
        const d = join(fresh(), 'open');
        mkdirSync(d);
        chmodSync(d, 0o777);
        symlinkSync(exe(), join(d, 'vllm'));
        return join(d, 'vllm');
      },
      /its folder .*open is writable by others/,
    ],
  ])('%s: refused', (_, make, why) => expect(recordedExecProblem(make())).toMatch(why));

  // an operator's own venv (owned by the login user, served with sudo): watch must be able to restart it
  it.runIf(process.getuid?.() === 0)(
    "owned by another user (uid 65534), writable by that owner alone: runs (an operator's venv)",
    () => {
      const f = exe();
      chownSync(f, 65534, 65534);
      expect(recordedExecProblem(f)).toBeUndefined();
    },
  );
  it.runIf(process.getuid?.() === 0)('owned by another user but group-writable: refused all the same', () => {
    const f = exe(0o775);
    chownSync(f, 65534, 65534);
    expect(recordedExecProblem(f)).toMatch(/writable by its group/);
  });

  it('the refusal is bad input (exit 2), naming the path and why, the path shown escaped', () => {
    const f = exe(0o775);
    let err: unknown;
    try {
      checkRecordedExec(f, 'x');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UsageError);
    expect((err as UsageError).exitCode).toBe(ExitCode.badInput);
    expect((err as UsageError).message).toContain(JSON.stringify(f));
    expect((err as UsageError).message).toMatch(/is not started again: .*writable by its group/);
  });

  /** a host replica whose entry names `bin` as its executable */
  const replica = (bin: string): Entry =>
    ({
      inst: {
        name: 'x-0',
        profile: 'x',
        replica: 0,
        engine: 'vllm',
        argv: [bin, 'serve', 'm'],
        role: undefined,
      } as unknown as Instance,
      alive: true,
      proof: { state: 'alive' },
    }) as unknown as Entry;

  it.each<[string, () => string]>([
    ['group-writable', () => exe(0o775)],
    ['in a world-writable folder', () => exe(0o755, 0o777)],
  ])(
    'restart/upgrade (relaunchPlan) refuses a recorded executable %s before anything is read or run',
    async (_, make) => {
      await expect(relaunchPlan('x', [replica(make())], { set: [], prewarm: false })).rejects.toThrow(
        /the vLLM executable ".*vllm" is not started again/,
      );
    },
  );
  it("an upgrade candidate given on the command line (--vllm-bin) is the operator's, not the record's: the record's is not the one checked", async () => {
    // the plan goes on past the check (and fails later, reading a profile that is not there)
    await expect(
      relaunchPlan('no-such-profile', [replica(exe(0o775))], { set: [], prewarm: false, vllmBin: 'vllm' }),
    ).rejects.not.toThrow(/is not started again/);
  });
});

describe('relaunchRunsHostInstall: the recorded executable is checked only where the relaunch runs it on this host', () => {
  const host = {};
  const box = { container: { cli: 'podman' as const } };
  it.each<[string, 'host' | 'container' | undefined, object[], boolean]>([
    ['host replicas, nothing asked', undefined, [host, host], true],
    ['host replicas, --runtime host', 'host', [host], true],
    ['host replicas, --runtime container (the image runs vLLM)', 'container', [host], false],
    ['container replicas, nothing asked', undefined, [box], false],
    ['one replica of each', undefined, [host, box], false],
  ])('%s', (_, runtime, recorded, runs) => expect(relaunchRunsHostInstall(runtime, recorded as never)).toBe(runs));
});
