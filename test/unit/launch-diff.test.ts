import { describe, it, expect } from 'vitest';
import { argvDiff, resolvedDiff, launchChanges } from '../../src/engine/launch-diff.js';
import { lastOfEach, servedAs, changeLines, recordedProfiles, reusedFlags } from '../../src/engine/relaunch.js';
import type { LaunchRecord } from '../../src/engine/registry.js';

const base = ['vllm', 'serve', 'Qwen/Qwen3-8B', '--max-model-len', '16384', '--enforce-eager', '--port', '8001'];
const rec = (over: Partial<LaunchRecord> = {}): LaunchRecord => ({
  sets: [],
  vllm: { asked: 'auto', resolved: '0.17.0', how: 'installed' },
  ...over,
});

describe('argvDiff: what a restart changes in a running argv', () => {
  it.each([
    ['the same argv', base, []],
    ['a value changed', [...base.slice(0, 4), '8192', ...base.slice(5)], ['--max-model-len: 16384 -> 8192']],
    ['a flag added', [...base, '--max-num-seqs', '7'], ['+ --max-num-seqs 7']],
    ['a bare flag removed', base.filter((a) => a !== '--enforce-eager'), ['- --enforce-eager']],
    ['a bare flag added', [...base, '--trust-remote-code'], ['+ --trust-remote-code']],
    [
      'the model changed',
      ['vllm', 'serve', 'Qwen/Qwen3-14B', ...base.slice(3)],
      ['command: vllm serve Qwen/Qwen3-8B -> vllm serve Qwen/Qwen3-14B'],
    ],
    ['--flag=value against --flag value', [...base.slice(0, 3), '--max-model-len=16384', ...base.slice(5)], []],
    [
      'flags in another order',
      ['vllm', 'serve', 'Qwen/Qwen3-8B', '--port', '8001', '--enforce-eager', '--max-model-len', '16384'],
      [],
    ],
  ])('%s', (_, after, want) => {
    expect(argvDiff(base, after)).toEqual(want);
  });

  it('a repeated flag compares every occurrence', () => {
    const a = ['vllm', 'serve', 'm', '--middleware', 'a', '--middleware', 'b'];
    expect(argvDiff(a, a)).toEqual([]);
    expect(argvDiff(a, ['vllm', 'serve', 'm', '--middleware', 'a'])).toEqual(['--middleware: a, b -> a']);
  });
});

describe('resolvedDiff: auto and the version it resolved to are no change', () => {
  it.each([
    ['auto, the same vLLM found', rec(), rec(), []],
    [
      'auto, another vLLM found now',
      rec(),
      rec({ vllm: { asked: 'auto', resolved: '0.18.0', how: 'installed' } }),
      ['vLLM 0.17.0 -> 0.18.0 (engine.vllmVersion auto: the vLLM found now is another)'],
    ],
    [
      'auto pinned to what it resolved to',
      rec(),
      rec({ vllm: { asked: '0.17.0', resolved: '0.17.0', how: 'pinned' } }),
      [],
    ],
    [
      'a new pin',
      rec(),
      rec({ vllm: { asked: '0.18.0', resolved: '0.18.0', how: 'pinned' } }),
      ['vLLM 0.17.0 -> 0.18.0 (engine.vllmVersion auto -> 0.18.0)'],
    ],
    ['another image', rec({ image: 'a:1' }), rec({ image: 'a:2' }), ['image: a:1 -> a:2']],
  ])('%s', (_, before, after, want) => {
    expect(resolvedDiff(before, after)).toEqual(want);
  });

  it('an entry from before records were kept compares by argv alone', () => {
    expect(launchChanges({ argv: base }, { argv: base, launch: rec() })).toEqual([]);
  });
});

describe("servedAs: serve's inputs, restart's on top", () => {
  it("keeps serve's --set first, restart's after, each assignment once at its later place", () => {
    const r = rec({ sets: ['server.port=9000', 'engine.maxNumSeqs=7'], profilesDir: '/p', gpus: 4, router: true });
    expect(servedAs(r, { set: ['engine.maxNumSeqs=7', 'engine.maxModelLen=8192'] }, false)).toEqual({
      set: ['server.port=9000', 'engine.maxNumSeqs=7', 'engine.maxModelLen=8192'],
      profiles: '/p',
      gpus: 4,
      platform: undefined,
      runtime: undefined,
      router: true,
    });
    expect(servedAs(r, { set: [], profiles: '/q', gpus: 2 }, false)).toMatchObject({ profiles: '/q', gpus: 2 });
    expect(servedAs(undefined, { set: ['a=1'] }, true)).toMatchObject({ set: ['a=1'], router: true });
  });

  it.each<[string, string | undefined, string | undefined | RegExp]>([
    ['none recorded', undefined, undefined],
    ['a whole path, there or not', '/nowhere/profiles', '/nowhere/profiles'],
    ['relative, and there from here', 'test', 'test'],
    [
      'relative, not there from here (a record from before whole paths)',
      './no-such-profiles-here',
      /record names its profiles folder as "\.\/no-such-profiles-here", relative/,
    ],
  ])("the record's profiles folder: %s", (_n, dir, want) => {
    if (want instanceof RegExp) expect(() => recordedProfiles(dir)).toThrow(want);
    else expect(recordedProfiles(dir)).toBe(want);
  });

  it("a restart's own --profiles wins over a record's relative folder that is not there", () => {
    expect(servedAs(rec({ sets: [], profilesDir: './no-such' }), { set: [], profiles: '/q' }, false)).toMatchObject({
      profiles: '/q',
    });
    expect(() => servedAs(rec({ sets: [], profilesDir: './no-such' }), { set: [] }, false)).toThrow(
      /relative to the folder it was served from/,
    );
  });

  it("reusedFlags: serve's flags as a shell takes them back: a value with a space or a quote is quoted, a plain one left as typed", () => {
    expect(
      reusedFlags(
        rec({
          sets: ['server.port=9000', "model.servedName=it's mine"],
          profilesDir: '/srv/my profiles',
          gpus: 2,
          router: true,
        }),
      ),
    ).toEqual([
      '--set server.port=9000',
      `--set 'model.servedName=it'\\''s mine'`,
      "--profiles '/srv/my profiles'",
      '--gpus 2',
      '--router',
    ]);
    expect(reusedFlags(rec({ sets: [], profilesDir: '/etc/sparkctl/profiles' }))).toEqual([
      '--profiles /etc/sparkctl/profiles',
    ]);
  });

  it('lastOfEach keeps what --set in order would give', () => {
    expect(lastOfEach(['a=1', 'a=2', 'a=1'])).toEqual(['a=2', 'a=1']);
    expect(lastOfEach(['a=1', 'b=1'])).toEqual(['a=1', 'b=1']);
  });
});

describe('changeLines', () => {
  it('unchanged, changed alike, changed per replica', () => {
    expect(changeLines('p', [{ name: 'p-0', changes: [] }], ['--set x=1'])).toEqual([
      "p: unchanged since it was served (serve's --set x=1 kept): each replica starts with the argv it runs with now",
    ]);
    expect(
      changeLines(
        'p',
        [
          { name: 'p-0', changes: ['+ --a 1'] },
          { name: 'p-1', changes: ['+ --a 1'] },
        ],
        [],
      ),
    ).toEqual(['p: changed since it was served:', '  + --a 1']);
    expect(
      changeLines(
        'p',
        [
          { name: 'p-0', changes: ['+ --a 1'] },
          { name: 'p-1', changes: [] },
        ],
        [],
      ),
    ).toEqual(['p: changed since it was served:', '  p-0: + --a 1', '  p-1: unchanged']);
  });
});
