// The floors of the house, held: every import of every module under src/ (static, type-only,
// re-export, dynamic) read from the TypeScript compiler's syntax tree and judged against the one
// floor table, scripts/lib/floors.mjs (the prose: docs/development.md, "House rules"). A new import
// that runs up the floors, sideways where the table does not allow it, or closes a circle fails here.
import { describe, it, expect } from 'vitest';
import ts from 'typescript';
// @ts-expect-error: a plain .mjs module (shared with scripts/house-figures.mjs), no types
import { importsOfSource, importGraph, arrowsUp, importCircles } from '../../scripts/lib/house.mjs';
// @ts-expect-error: a plain .mjs module, no types
import { STOREYS, SIDEWAYS, roomOf, storeyOf, mayImport } from '../../scripts/lib/floors.mjs';

const SRC = new URL('../../src/', import.meta.url).pathname;
type Edge = {
  from: string;
  to: string;
  fromRoom: string;
  toRoom: string;
  line: number;
  typeOnly: boolean;
  dynamic: boolean;
};

/**
 * Arrows up that were in the house when the table was written, each to be fixed (the list only
 * shrinks: a fixed one must leave it, and nothing new may join it). 'from -> to', paths under src/.
 */
const KNOWN_ARROWS_UP: string[] = [];

/** Module circles that were in the house when the table was written (type-only), to be broken. */
const KNOWN_CIRCLES: string[] = [];

const graph = importGraph(SRC);
const edges: Edge[] = graph.edges;

describe('the import scanner', () => {
  it('sees static, type-only, re-export, side-effect, dynamic and import-type imports', () => {
    const text = [
      `import { a } from '../engine/x.js';`,
      `import type { B } from "../engine/y.js";`,
      `export { c } from '../engine/z.js';`,
      `export type { D } from '../engine/t.js';`,
      `const m = await import('../engine/w.js');`,
      `import '../engine/side.js';`,
      `let q: import('../engine/q.js').Q;`,
      `const s = "import x from '../engine/not-an-import.js'";`,
    ].join('\n');
    const sf = ts.createSourceFile('x.ts', text, ts.ScriptTarget.Latest, true);
    const got = importsOfSource(sf).map((i: { spec: string; typeOnly: boolean; dynamic: boolean }) => [
      i.spec,
      i.typeOnly,
      i.dynamic,
    ]);
    expect(got).toEqual([
      ['../engine/x.js', false, false],
      ['../engine/y.js', true, false],
      ['../engine/z.js', false, false],
      ['../engine/t.js', true, false],
      ['../engine/w.js', false, true],
      ['../engine/side.js', false, false],
      ['../engine/q.js', true, false],
    ]);
  });

  it('sees the house: hundreds of imports, and the ones every verb makes', () => {
    expect(graph.sources.length).toBeGreaterThan(100);
    expect(edges.some((e) => e.from === 'cli.ts' && e.to === 'verbs/serve/flags.ts')).toBe(true);
    expect(edges.some((e) => e.from === 'verbs/serve/flags.ts' && e.to === 'verbs/define.ts')).toBe(true);
  });
});

describe('the floor table', () => {
  it('places every room of src/ on exactly one storey', () => {
    const rooms = [...new Set<string>(graph.sources.map((s: { rel: string }) => roomOf(s.rel)))];
    expect(rooms.filter((r) => !storeyOf(r))).toEqual([]);
    const keys = STOREYS.flatMap((s: { rooms: string[] }) => s.rooms);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('allows down, refuses up and sideways unless the table says so', () => {
    expect(roomOf('engine/runtime/ops.ts')).toBe('engine/runtime');
    expect(roomOf('engine/cluster/ray.ts')).toBe('engine');
    expect(roomOf('verbs/serve/run.ts')).toBe('verbs/serve');
    expect(roomOf('verbs/args.ts')).toBe('verbs');
    expect(roomOf('errors.ts')).toBe('errors');
    expect(mayImport('engine', 'profiles')).toBe(true);
    expect(mayImport('profiles', 'engine')).toBe(false);
    expect(mayImport('engine', 'engine/runtime')).toBe(true);
    expect(mayImport('engine/runtime', 'engine')).toBe(false);
    expect(mayImport('verbs/serve', 'verbs')).toBe(true);
    expect(mayImport('verbs', 'verbs/serve')).toBe(false);
    expect(mayImport('verbs/report', 'verbs/cost')).toBe(false);
    expect(mayImport('verbs/restart', 'verbs/serve')).toBe(true); // in SIDEWAYS
    expect(mayImport('router', 'engine')).toBe(true);
    expect(mayImport('engine', 'router')).toBe(false);
    expect(mayImport('health', 'bench')).toBe(false); // same storey, not in SIDEWAYS
    expect(mayImport('preflight', 'router')).toBe(false); // same storey, not in SIDEWAYS
    expect(mayImport('engine', 'preflight')).toBe(false); // preflight stands above the engine
    expect(mayImport('preflight', 'engine/runtime')).toBe(true); // it asks the runtime's checks
    expect(mayImport('model', 'host')).toBe(true); // same storey, in SIDEWAYS
  });

  it('has no pair of rooms allowed to import each other sideways', () => {
    const pairs = Object.entries(SIDEWAYS as Record<string, string[]>).flatMap(([a, bs]) =>
      bs.filter((b) => (SIDEWAYS[b] ?? []).includes(a)).map((b) => `${a} <-> ${b}`),
    );
    expect(pairs).toEqual([]);
  });
});

describe('the house keeps to its floors', () => {
  const up = arrowsUp(edges) as Edge[];
  const found = [...new Set(up.map((e) => `${e.from} -> ${e.to}`))];

  it('no import runs up the floors or sideways, but the known ones being fixed', () => {
    const fresh = up
      .filter((e) => !KNOWN_ARROWS_UP.includes(`${e.from} -> ${e.to}`))
      .map(
        (e) =>
          `src/${e.from}:${e.line} (${e.fromRoom}) imports src/${e.to} (${e.toRoom}): not allowed by scripts/lib/floors.mjs (docs/development.md, House rules)`,
      );
    expect(fresh).toEqual([]);
  });

  it('the known arrows up are still there (a fixed one leaves KNOWN_ARROWS_UP)', () => {
    expect(KNOWN_ARROWS_UP.filter((k) => !found.includes(k))).toEqual([]);
  });

  it("nothing outside src/cli.ts and src/verbs/ imports a verb, and src/cli.ts only a verb's flags", () => {
    const bad = edges.filter(
      (e) =>
        e.toRoom.startsWith('verbs') &&
        !e.fromRoom.startsWith('verbs') &&
        !(e.from === 'cli.ts' && /^verbs\/([^/]+\/flags|define)\.ts$/.test(e.to)),
    );
    expect(bad.map((e) => `src/${e.from}:${e.line} imports src/${e.to}`)).toEqual([]);
  });

  it('no import circle between modules (type-only imports included), but the known ones being broken', () => {
    const { modules, rooms } = importCircles(graph) as { modules: string[][]; rooms: string[][] };
    const names = modules.map((c) => c.join(' <-> '));
    expect(names.filter((c) => !KNOWN_CIRCLES.includes(c))).toEqual([]);
    expect(KNOWN_CIRCLES.filter((c) => !names.includes(c))).toEqual([]);
    // rooms in a loop are the arrows up seen from above: none once KNOWN_ARROWS_UP is empty
    if (KNOWN_ARROWS_UP.length === 0) expect(rooms).toEqual([]);
  });
});
