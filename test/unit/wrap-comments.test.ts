// scripts/wrap-comments.mjs: the lint gate that holds comment prose to the house's line width (biome
// formats code only). What it may rewrap and what it must leave as written, at a width of 40.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
// @ts-expect-error: a plain .mjs script without types
import { wrapComments } from '../../scripts/wrap-comments.mjs';

const W = 40;
const wrap = (text: string, path = 'x.ts') => wrapComments(text, path, W) as { text: string; long: number[] };
const lines = (s: string) => s.split('\n');

describe('wrap-comments', () => {
  it('a // paragraph with a long line is refilled at the width, the prefix and indent kept', () => {
    const src = '  // one two three four five six seven eight nine ten eleven\n  // twelve\n  x();\n';
    const r = wrap(src);
    expect(lines(r.text)).toEqual([
      '  // one two three four five six seven',
      '  // eight nine ten eleven twelve',
      '  x();',
      '',
    ]);
    expect(r.long).toEqual([1]);
    expect(wrap(r.text).text).toBe(r.text); // idempotent
  });

  it('a short comment, and a paragraph with no long line, are left byte for byte', () => {
    const src = '// short\n// also short\n\n// alpha beta gamma delta epsilon zeta\n// eta\n\n// a\n// b\nf();\n';
    expect(wrap(src).text).toBe(src);
  });

  it('list items keep their hanging indent; a blank comment line stays', () => {
    const src =
      '// - first item with many words that run past the width\n//\n// 1. numbered item that also runs well past\n';
    expect(lines(wrap(src).text)).toEqual([
      '// - first item with many words that run',
      '//   past the width',
      '//',
      '// 1. numbered item that also runs well',
      '//    past',
      '',
    ]);
  });

  it('indented blocks (code, tables) and fences inside a comment are kept as written', () => {
    const src = [
      '// prose that is long enough to be wrapped here',
      '//     node scripts/some-tool.mjs --with --a --long --command line',
      '// | a | b | c | d | e | f | g | h | i | j |',
      '// ```',
      '// inside a fence the words are kept as they are written',
      '// ```',
      '',
    ].join('\n');
    expect(lines(wrap(src).text)).toEqual([
      '// prose that is long enough to be',
      '// wrapped here',
      '//     node scripts/some-tool.mjs --with --a --long --command line',
      '// | a | b | c | d | e | f | g | h | i | j |',
      '// ```',
      '// inside a fence the words are kept as they are written',
      '// ```',
      '',
    ]);
  });

  it('a one-line /** */ that is too long becomes a block; a block is refilled inside its stars', () => {
    const one = '  /** What this does, said in more words than fit. */\n  function f() {}\n';
    expect(lines(wrap(one).text)).toEqual([
      '  /**',
      '   * What this does, said in more words',
      '   * than fit.',
      '   */',
      '  function f() {}',
      '',
    ]);
    const block = '/**\n * A block comment whose single line is too long for the width.\n * @param x the value\n */\n';
    expect(lines(wrap(block).text)).toEqual([
      '/**',
      ' * A block comment whose single line is',
      ' * too long for the width.',
      ' * @param x the value',
      ' */',
      '',
    ]);
  });

  it('never touches a string or template that looks like a comment, nor a comment after code, nor a directive', () => {
    const src = [
      'const s = `',
      '// this line is inside a template literal and is long',
      '`;',
      "const t = '// a string that looks like a long comment line here';",
      'g(); // a trailing comment after code that runs past the width',
      '// biome-ignore lint/suspicious/noExplicitAny: a long reason given here',
      '',
    ].join('\n');
    expect(wrap(src).text).toBe(src);
  });

  it('a comment that opens with a path is prose like any other (only tool directives are left)', () => {
    expect(lines(wrap('// /proc/net/tcp texts: the listening ports of these inodes\n').text)).toEqual([
      '// /proc/net/tcp texts: the listening',
      '// ports of these inodes',
      '',
    ]);
  });

  it('a word longer than the width stands alone and the result is stable', () => {
    const src = '// see https://example.com/a/very/long/path/that/cannot/be/split for why\n';
    const r = wrap(src);
    expect(lines(r.text)).toEqual([
      '// see',
      '// https://example.com/a/very/long/path/that/cannot/be/split',
      '// for why',
      '',
    ]);
    expect(wrap(r.text).text).toBe(r.text);
  });

  it("the house's own sources are within the width (what npm run lint checks)", () => {
    const width = JSON.parse(readFileSync(join(__dirname, '..', '..', 'biome.json'), 'utf8')).formatter.lineWidth;
    expect(width).toBe(120);
    const self = join(__dirname, '..', '..', 'scripts', 'wrap-comments.mjs');
    const text = readFileSync(self, 'utf8');
    expect(wrapComments(text, self, width).text).toBe(text);
  });
});
