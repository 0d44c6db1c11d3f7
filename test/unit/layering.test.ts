// The house's one-way flow: verbs (src/cli.ts and src/verbs/) call
// the library; the library never reaches back into a verb. Scans every import (static and dynamic) of every module under src/.
import { describe, it, expect } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve, dirname } from 'node:path';

const SRC = new URL('../../src/', import.meta.url).pathname;

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : /\.ts$/.test(e.name) ? [join(dir, e.name)] : []));
}

/** Module specifiers of import/export ... from '...' and import('...'). */
export function importsOf(text: string): string[] {
  const out: string[] = [];
  const re = /(?:^|[^.\w])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;
  for (const m of text.matchAll(re)) out.push((m[1] ?? m[2] ?? m[3])!);
  return out;
}

describe('layering', () => {
  it('the scanner sees static, type-only, re-export and dynamic imports', () => {
    const text = `import { a } from '../commands/x.js';\nimport type { B } from "../commands/y.js";\nexport { c } from '../commands/z.js';\nconst m = await import('../commands/w.js');\nimport '../commands/side.js';`;
    expect(importsOf(text)).toEqual(['../commands/x.js', '../commands/y.js', '../commands/z.js', '../commands/w.js', '../commands/side.js']);
  });

  it('no module under src/ other than src/cli.ts and src/verbs/ imports from src/verbs/', () => {
    const commands = join(SRC, 'verbs') + '/';
    const offenders: string[] = [];
    for (const file of walk(SRC)) {
      const rel = relative(SRC, file);
      if (rel === 'cli.ts' || rel.startsWith('verbs/')) continue;
      for (const spec of importsOf(readFileSync(file, 'utf8'))) {
        if (!spec.startsWith('.')) continue;
        const target = resolve(dirname(file), spec);
        if ((target + '/').startsWith(commands) || target.startsWith(commands)) offenders.push(`src/${rel} imports ${spec}`);
      }
    }
    expect(offenders).toEqual([]);
  });
});
