// A probe of --url targets (a cron line's usual form, every minute) loads only what it uses: the
// modules its verb imports statically never reach zod (about 80 KiB of the bundle to parse at every
// start; the registry, the start-report shape and the history readers that use it are imported when
// needed). Found: engine/phases.ts's zod shape put zod back on that path (a warm probe 2.0x `node -e 0`
// on the H200 against 1.8x before it, scripts/bench-probe.mjs); the shape is now engine/start-shape.ts.
import { describe, it, expect } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

const root = join(__dirname, '..', '..');
const STATIC = /^(?:import|export)\s+(?!type\s)(?:[^'";]*?\sfrom\s+)?'([^']+)';/gm;

/** Every module reached from `entry` by static (value) imports, with the import that reached it. */
function staticGraph(entry: string): Map<string, string | null> {
  const seen = new Map<string, string | null>([[entry, null]]);
  const queue = [entry];
  while (queue.length) {
    const file = queue.shift()!;
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(STATIC)) {
      const spec = m[1]!;
      const to = spec.startsWith('.')
        ? join(dirname(file), spec.replace(/\.js$/, '.ts'))
        : `pkg:${spec.split('/')[0]!.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]}`;
      if (seen.has(to)) continue;
      seen.set(to, file);
      if (!to.startsWith('pkg:') && existsSync(to)) queue.push(to);
    }
  }
  return seen;
}

const chain = (g: Map<string, string | null>, to: string) => {
  const out: string[] = [];
  for (let at: string | null | undefined = to; at; at = g.get(at))
    out.unshift(at.startsWith('pkg:') ? at : relative(root, at));
  return out.join(' -> ');
};

describe('what a probe loads at start', () => {
  it.each(['src/verbs/probe/run.ts', 'src/cli.ts'])('%s: no static import reaches zod', (entry) => {
    const g = staticGraph(join(root, entry));
    expect(g.size).toBeGreaterThan(5);
    expect(g.has('pkg:zod') ? chain(g, 'pkg:zod') : 'no zod').toBe('no zod');
  });
  it("src/verbs/probe/run.ts: no static import reaches engine/phases.ts (vLLM's log readers and their cause tables)", () => {
    const g = staticGraph(join(root, 'src/verbs/probe/run.ts'));
    const phases = join(root, 'src/engine/phases.ts');
    expect(g.has(phases) ? chain(g, phases) : 'not loaded').toBe('not loaded');
  });
  it('the walker finds zod where it is imported (so the test above can fail)', () => {
    const g = staticGraph(join(root, 'src/engine/start-shape.ts'));
    expect(chain(g, 'pkg:zod')).toBe('src/engine/start-shape.ts -> pkg:zod');
  });
});
