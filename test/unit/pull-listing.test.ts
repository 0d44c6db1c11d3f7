// A Hub listing is checked whole before any byte is written (issue 42, item 6), and a name that is
// no file name (a lone surrogate: legal in JSON, refused by encodeURIComponent and the file system)
// is a finding. Pure: table tests.
import { describe, it, expect } from 'vitest';
import { checkListing, type TreeFile } from '../../src/model/select.js';
import { checkRepoPath } from '../../src/model/cache.js';
import { maxConnectionsFor } from '../../src/model/hub.js';
import { minRateOf } from '../../src/verbs/pulling.js';

const f = (path: string, oid: string, size: number, lfs?: { oid: string; size: number }): TreeFile => ({
  path,
  oid,
  size,
  ...(lfs ? { lfs } : {}),
});
const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const S = 's'.repeat(64);

describe('checkListing', () => {
  it.each<[string, TreeFile[], string | undefined]>([
    ['distinct files', [f('config.json', A, 10), f('tokenizer.json', B, 20)], undefined],
    ['two paths of one blob (same size): allowed, fetched once', [f('a.json', A, 10), f('b.json', A, 10)], undefined],
    ['one path twice, same blob', [f('config.json', A, 10), f('config.json', A, 10)], '"config.json" is listed twice'],
    [
      'one path twice, other blobs',
      [f('config.json', A, 10), f('config.json', B, 11)],
      '"config.json" is listed twice',
    ],
    [
      'one blob with two sizes',
      [f('a.json', A, 10), f('b.json', A, 11)],
      `the blob ${A} is listed with two sizes (10 and 11 bytes)`,
    ],
    [
      'one LFS blob with two sizes',
      [f('a.safetensors', A, 100, { oid: S, size: 5 }), f('b.safetensors', B, 100, { oid: S, size: 6 })],
      `the blob ${S} is listed with two sizes (5 and 6 bytes)`,
    ],
  ])('%s', (_what, tree, want) => {
    expect(checkListing(tree)).toBe(want);
  });
});

describe('checkRepoPath: names that cannot be a file', () => {
  it.each([
    ['tok\ud800.json', 'a lone UTF-16 surrogate'],
    ['tok\udc00.json', 'a lone UTF-16 surrogate'],
    ['\ud800', 'a lone UTF-16 surrogate'],
    ['x\udc00\ud800.json', 'a lone UTF-16 surrogate'],
  ])('%j is refused (%s)', (name, why) => {
    expect(checkRepoPath(name)).toContain(why);
  });
  it.each(['emoji-\ud83d\ude00.json', 'naïve.json', '日本語.txt'])('%j (well-formed) is accepted', (name) => {
    expect(checkRepoPath(name)).toBeUndefined();
  });
});

describe('the bounds a server cannot move', () => {
  it('connections for one file grow with its size, never without end', () => {
    expect(maxConnectionsFor(1000)).toBe(10);
    expect(maxConnectionsFor(10 * 1024 ** 3)).toBe(5 + 3 + 40 * 2);
  });
  it.each<[Record<string, string>, { bytes: number; windowMs: number } | string]>([
    [{}, { bytes: 1 << 20, windowMs: 60_000 }],
    [
      { SPARKCTL_PULL_MIN_BYTES: '1024', SPARKCTL_PULL_WINDOW_S: '1' },
      { bytes: 1024, windowMs: 1000 },
    ],
    [{ SPARKCTL_PULL_WINDOW_S: '0.5' }, { bytes: 1 << 20, windowMs: 500 }],
    [{ SPARKCTL_PULL_WINDOW_S: '0' }, 'SPARKCTL_PULL_WINDOW_S=0'],
    [{ SPARKCTL_PULL_WINDOW_S: 'soon' }, 'SPARKCTL_PULL_WINDOW_S=soon'],
    [{ SPARKCTL_PULL_MIN_BYTES: '-5' }, 'SPARKCTL_PULL_MIN_BYTES=-5'],
    [{ SPARKCTL_PULL_WINDOW_S: '99999' }, 'SPARKCTL_PULL_WINDOW_S=99999'],
  ])('minRateOf(%j)', (env, want) => {
    if (typeof want === 'string') expect(() => minRateOf(env)).toThrow(want);
    else expect(minRateOf(env)).toEqual(want);
  });
});
