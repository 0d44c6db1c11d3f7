#!/usr/bin/env node
// Build step after tsc: bundle the CLI into dist/bundle/ (code-split, so each verb's modules still
// load lazily). One file per verb instead of ~60 small modules and package entry points: start-up
// of `sparkctl serve --dry-run` drops by ~10 % (scripts/bench-startup.mjs).
import { build } from 'esbuild';
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const outdir = new URL('../dist/bundle/', import.meta.url).pathname;
// Chunk names carry a content hash: without this, every rebuild leaves the old chunks behind
// (seen: 270 files after a day of builds, all of it carried to the GPU machine).
rmSync(outdir, { recursive: true, force: true });
// Files the CLI would otherwise read from node_modules at run time go into the bundle: the built
// bin/ + dist/ + profiles/ run on a GPU host where nothing was installed (report --html, bench --html).
const req = createRequire(import.meta.url);
const uplot = {
  js: readFileSync(req.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8'),
  css: readFileSync(req.resolve('uplot/dist/uPlot.min.css'), 'utf8'),
};
const BANNER =
  "import { createRequire as __sparkctlRequire } from 'node:module'; const require = __sparkctlRequire(import.meta.url);";
await build({
  // early.ts: what bin/sparkctl.js runs before the CLI loads (a plain preflight's probes start there).
  entryPoints: [
    new URL('../src/cli.ts', import.meta.url).pathname,
    new URL('../src/early.ts', import.meta.url).pathname,
  ],
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'bundle',
  logLevel: 'warning',
  // Less to parse at every start; identifiers keep their names (error classes are matched by name).
  minifyWhitespace: true,
  minifySyntax: true,
  // Two strings, inlined where they are used (an object would become a shared module every verb loads).
  define: { __SPARKCTL_UPLOT_JS__: JSON.stringify(uplot.js), __SPARKCTL_UPLOT_CSS__: JSON.stringify(uplot.css) },
  // CommonJS dependencies (prom-client, js-yaml's require paths) need a require in ESM.
  banner: { js: BANNER },
});
// ... but only the chunks that name it (esbuild's __require shim, a module that calls require
// itself): createRequire costs about a millisecond per chunk, and a probe loads over twenty.
for (const f of readdirSync(outdir)) {
  if (!f.endsWith('.js')) continue;
  const text = readFileSync(outdir + f, 'utf8');
  if (text.startsWith(BANNER) && !/\brequire\b/.test(text.slice(BANNER.length)))
    writeFileSync(outdir + f, text.slice(BANNER.length).replace(/^\n/, ''));
}
