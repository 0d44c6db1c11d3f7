// Where a source file's own tests are: the largest files in src/ each have a unit test named after them
// (test/unit/<base>.test.ts, or <folder>-<base>.test.ts; the folder's form where the base name is not unique in src/),
// and that test imports the file. A reader who opens src/gateway/keeper.ts finds test/unit/keeper.test.ts, not a
// search through 160 files named after behaviours. When a file grows into this list, this test names the test to add.
import { describe, it, expect } from 'vitest';
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join, basename, dirname, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');
const SRC = join(ROOT, 'src');
const UNIT = join(ROOT, 'test', 'unit');
/** How many of the largest source files the rule covers (issue 41: "starting with the 20 largest"). */
const LARGEST = 20;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : /\.ts$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

const all = sources(SRC);
const lines = (f: string) => readFileSync(f, 'utf8').split('\n').length;
const largest = all
  .map((f) => ({ f, n: lines(f) }))
  .sort((a, b) => b.n - a.n || a.f.localeCompare(b.f))
  .slice(0, LARGEST);
const baseOf = (f: string) => basename(f, '.ts');
const unique = (f: string) => all.filter((g) => baseOf(g) === baseOf(f)).length === 1;

/** The test names a source file may have: its base name (when unique in src/) or its folder and base name. */
function testNamesOf(f: string): string[] {
  const folder = `${basename(dirname(f))}-${baseOf(f)}.test.ts`;
  return unique(f) ? [`${baseOf(f)}.test.ts`, folder] : [folder];
}

/**
 * Whether a test file imports the source file: by its path relative to the test, or (a program run whole, in a child
 * built from its source) by its path from the repository's root, quoted where the test builds it.
 */
function imports(testFile: string, src: string): boolean {
  const text = readFileSync(testFile, 'utf8');
  const quoted = [relative(dirname(testFile), src).replace(/\.ts$/, '.js'), relative(ROOT, src)];
  return quoted.some((q) => text.includes(`'${q}'`) || text.includes(`"${q}"`));
}

describe('the largest source files each have a unit test named after them', () => {
  it.each(largest.map(({ f, n }) => [relative(ROOT, f), n, f] as const))('%s (%i lines)', (rel, _n, f) => {
    const names = testNamesOf(f);
    const found = names.map((t) => join(UNIT, t)).filter((t) => existsSync(t));
    expect(found.length, `${rel}: no test/unit/${names.join(' or test/unit/')}: add one that imports ${rel}`).toBe(1);
    expect(
      imports(found[0]!, f),
      `${relative(ROOT, found[0]!)} is named after ${rel} but does not import it (import '${relative(UNIT, f).replace(/\.ts$/, '.js')}')`,
    ).toBe(true);
  });

  it('the names: a unique base name, or the folder where the base name repeats', () => {
    expect(testNamesOf(join(SRC, 'gateway', 'keeper.ts'))).toEqual(['keeper.test.ts', 'gateway-keeper.test.ts']);
    expect(testNamesOf(join(SRC, 'engine', 'plan.ts'))).toEqual(['engine-plan.test.ts']);
    expect(testNamesOf(join(SRC, 'verbs', 'upgrade', 'nodes.ts'))).toEqual(['upgrade-nodes.test.ts']);
    expect(largest).toHaveLength(LARGEST);
  });
});
