// The branch-site count of scripts/lib/branch-sites.mjs (the house figures' "host versus container
// branches outside src/engine/runtime/"): what counts as a branch on the runtime kind, table-tested
// on snippets, and that it reads the syntax tree (comments and plain strings are not branches).
import { describe, it, expect } from 'vitest';
import ts from 'typescript';
// @ts-expect-error: a plain .mjs module (shared with scripts/house-figures.mjs), no types
import { branchSites, sitesOf } from '../../scripts/lib/branch-sites.mjs';

const sites = (code: string): number => sitesOf(ts.createSourceFile('x.ts', code, ts.ScriptTarget.Latest, true)).length;

describe('branch sites on the runtime kind', () => {
  it.each([
    ['if on a launch record', 'if (l.container) stop(l);', 1],
    ['a ternary on a plan', 'const x = plan.container ? a : b;', 1],
    ["engine.runtime against 'container'", "if (p.engine.runtime === 'container') f();", 1],
    ["engine.runtime against 'host'", "const v = p.engine.runtime === 'host' ? read() : undefined;", 1],
    ['a predicate named for it', 'if (inContainer(ctx)) return skip();', 1],
    ['the CLI kind', "const a = cli === 'docker' ? ['-t'] : ['--time'];", 1],
    ['a guard used as a value', 'const ok = l.container && prove(l);', 1],
    ['one if, however many reads', "if (l.container && p.engine.runtime === 'container') f();", 1],
    ['two branches', 'if (l.container) a(); const y = l.container ? 1 : 2;', 2],
    ['a read that is no branch', 'const rec = { ...l.container };', 0],
    ['a comment', '// if (l.container) this is prose\nf();', 0],
    ["'host' that is not a runtime", "if (x.name === 'host') f();", 0],
    ['asking the runtime', 'await runtimeOf(inst).stop(inst, grace);', 0],
  ])('%s', (_what, code, n) => {
    expect(sites(code)).toBe(n);
  });

  it('counts over sources outside src/engine/runtime/ only, naming each site', () => {
    const mk = (rel: string, code: string) => ({
      rel,
      sf: ts.createSourceFile(rel, code, ts.ScriptTarget.Latest, true),
    });
    const r = branchSites([
      mk('engine/serve.ts', 'if (l.container) a();\nconst b = 1;'),
      mk('engine/runtime/index.ts', 'if (t.container) b();'),
      mk('verbs/x/run.ts', 'f();'),
    ]);
    expect(r.count).toBe(1);
    expect(r.sites).toEqual([{ file: 'src/engine/serve.ts', line: 1, text: 'l.container' }]);
  });
});
