#!/usr/bin/env node
// The house's figures, from the TypeScript compiler's syntax tree over src/: imports that break
// the floor table (scripts/lib/floors.mjs), import circles (type-only imports included), functions
// over 80 lines (data tables aside), and the host-versus-container branch sites (counted by
// scripts/lib/branch-sites.mjs when that file is there).
//
//   node scripts/house-figures.mjs            a summary, then every arrow, circle and long function
//   node scripts/house-figures.mjs --json     the same as one JSON object
//   node scripts/house-figures.mjs --src DIR  another tree (e.g. an older checkout's src/)
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { importGraph, arrowsUp, importCircles, longFunctions, loadSources, LONG_FUNCTION_LINES } from './lib/house.mjs';

const args = process.argv.slice(2);
const json = args.includes('--json');
const srcArg = args.indexOf('--src');
const src = resolve(srcArg >= 0 ? args[srcArg + 1] : new URL('../src/', import.meta.url).pathname);
if (!existsSync(src)) {
  console.error(`house-figures: no such folder: ${src}`);
  process.exit(2);
}

/**
 * The branch-site count belongs to scripts/lib/branch-sites.mjs (kept by whoever owns the Runtime
 * interface). Its contract here: export `branchSites(sources)` taking [{ rel, path, text, sf }]
 * (sf: a TypeScript SourceFile) and returning { count, sites: [{ file, line, text }] }.
 */
async function branchSites(sources) {
  const lib = new URL('./lib/branch-sites.mjs', import.meta.url);
  if (!existsSync(lib))
    return { count: null, sites: [], note: 'scripts/lib/branch-sites.mjs is not there yet: no count' };
  const mod = await import(pathToFileURL(lib.pathname).href);
  const fn = mod.branchSites ?? mod.default;
  if (typeof fn !== 'function')
    return { count: null, sites: [], note: 'scripts/lib/branch-sites.mjs exports no branchSites(sources)' };
  return await fn(sources);
}

const sources = loadSources(src);
const graph = importGraph(src, sources);
const up = arrowsUp(graph.edges);
const circ = importCircles(graph);
const long = longFunctions(sources);
const branches = await branchSites(sources);
const lines = sources.reduce((n, s) => n + s.text.split('\n').length - (s.text.endsWith('\n') ? 1 : 0), 0);

const figures = {
  src,
  modules: sources.length,
  lines,
  imports: graph.edges.length,
  arrowsUp: up.length,
  roomArrowsUp: [...new Set(up.map((e) => `${e.fromRoom} -> ${e.toRoom}`))].length,
  moduleCircles: circ.modules.length,
  roomsInCircles: circ.rooms.reduce((n, c) => n + c.length, 0),
  longFunctions: long.length,
  longLibraryFunctions: long.filter((f) => !f.file.startsWith('verbs/') && f.file !== 'cli.ts').length,
  branchSites: branches.count,
};

if (json) {
  console.log(
    JSON.stringify({ figures, arrowsUp: up, circles: circ, longFunctions: long, branchSites: branches }, null, 2),
  );
} else {
  const out = [];
  out.push(`src: ${figures.modules} modules, ${figures.lines} lines, ${figures.imports} imports`);
  out.push(
    `arrows up (imports the floor table forbids): ${figures.arrowsUp} imports, ${figures.roomArrowsUp} room pairs`,
  );
  out.push(`module circles (type-only included): ${figures.moduleCircles}`);
  out.push(
    `rooms in a room circle: ${figures.roomsInCircles}${circ.rooms.length ? ` (${circ.rooms.length} loop${circ.rooms.length > 1 ? 's' : ''})` : ''}`,
  );
  out.push(
    `functions over ${LONG_FUNCTION_LINES} lines (data tables aside): ${figures.longFunctions} (${figures.longLibraryFunctions} in the library, the rest in verbs)`,
  );
  out.push(`host/container branch sites: ${branches.count ?? `- (${branches.note})`}`);
  out.push('', 'arrows up, by room pair:');
  const byPair = new Map();
  for (const e of up) {
    const k = `${e.fromRoom} -> ${e.toRoom}`;
    byPair.set(k, [...(byPair.get(k) ?? []), e]);
  }
  for (const [k, es] of [...byPair].sort()) {
    out.push(`  ${k} (${es.length})`);
    for (const e of es)
      out.push(
        `    src/${e.from}:${e.line} -> src/${e.to}${e.typeOnly ? ' (type)' : ''}${e.dynamic ? ' (dynamic)' : ''}`,
      );
  }
  out.push('', 'module circles:');
  for (const c of circ.modules) out.push(`  ${c.map((f) => `src/${f}`).join(' <-> ')}`);
  out.push('', 'room circles:');
  for (const c of circ.rooms) out.push(`  ${c.join(', ')}`);
  out.push('', `functions over ${LONG_FUNCTION_LINES} lines:`);
  for (const f of long) out.push(`  ${String(f.lines).padStart(4)}  ${f.name}  src/${f.file}:${f.line}`);
  if (branches.sites?.length) {
    out.push('', 'branch sites:');
    for (const b of branches.sites) out.push(`  ${b.file}:${b.line}${b.text ? `  ${b.text}` : ''}`);
  }
  console.log(out.join('\n'));
}
