// No source file imports a module both statically and lazily (issue 41, "small truths"): a lazy
// `await import()` of a module the file already loads at its top saves nothing and says something
// false (that the module is loaded only when needed). A type-only import beside a lazy one is the
// intended pairing (the types at no cost, the code when needed), and `import('x').T` in a type is no load.
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const SRC = join(__dirname, '..', '..', 'src');
const files = (d: string): string[] =>
  readdirSync(d).flatMap((f) =>
    statSync(join(d, f)).isDirectory() ? files(join(d, f)) : f.endsWith('.ts') ? [join(d, f)] : [],
  );

/** The modules a file imports by value at its top, and those it loads with `await import()` (resolved paths). */
function importsOf(file: string, text: string): { statics: Set<string>; lazies: Set<string> } {
  const at = (m: string) => (m.startsWith('.') ? resolve(dirname(file), m) : m);
  // `import { a, type B } from` and `import x from` count; `import type ... from` does not
  const statics = new Set(
    [...text.matchAll(/^import\s+(?!type\s)[^;]*?\sfrom\s+['"]([^'"]+)['"]/gm)].map((m) => at(m[1]!)),
  );
  // a load is `import('...')` called as code: awaited, or its promise taken (.then); a type position `import('x').T` is
  // not one
  const lazies = new Set(
    [...text.matchAll(/(?:await\s+|\(\s*|=\s*|,\s*|return\s+)import\(\s*['"]([^'"]+)['"]\s*\)(?!\.[A-Z])/g)].map((m) =>
      at(m[1]!),
    ),
  );
  return { statics, lazies };
}

describe('imports: a module is loaded at the top or when needed, not both', () => {
  it.each([
    [
      'static and awaited: found',
      "import { a } from './x.js';\nasync function f() { const { b } = await import('./x.js'); }",
      true,
    ],
    [
      'type-only at the top, awaited: the intended pairing',
      "import type { A } from './x.js';\nasync function f() { await import('./x.js'); }",
      false,
    ],
    [
      'a type written as import(): no load',
      "import { open } from 'node:fs/promises';\nlet fh: import('node:fs/promises').FileHandle;",
      false,
    ],
    ['two different modules', "import { a } from './x.js';\nasync function f() { await import('./y.js'); }", false],
  ] as const)('%s', (_, text, both) => {
    const { statics, lazies } = importsOf('/r/src/m.ts', text);
    expect([...lazies].some((l) => statics.has(l))).toBe(both);
  });

  it('no file under src/ does both', () => {
    const both: string[] = [];
    for (const f of files(SRC)) {
      const { statics, lazies } = importsOf(f, readFileSync(f, 'utf8'));
      for (const l of lazies)
        if (statics.has(l)) both.push(`${f.slice(SRC.length + 1)}: ${l.startsWith('/') ? l.slice(SRC.length + 1) : l}`);
    }
    expect(both).toEqual([]);
  });
});
