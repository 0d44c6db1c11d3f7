#!/usr/bin/env node
// Build step after tsc: bundle the CLI into dist/bundle/ (code-split, so each verb's modules still
// load lazily). One file per verb instead of ~60 small modules and package entry points: start-up
// of `sparkctl serve --dry-run` drops by ~10 % (scripts/bench-startup.mjs).
import { build } from 'esbuild';
import { rmSync } from 'node:fs';

const outdir = new URL('../dist/bundle/', import.meta.url).pathname;
// Chunk names carry a content hash: without this, every rebuild leaves the old chunks behind
// (seen: 270 files after a day of builds, all of it carried to the GPU machine).
rmSync(outdir, { recursive: true, force: true });
await build({
  entryPoints: [new URL('../src/cli.ts', import.meta.url).pathname],
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'bundle',
  logLevel: 'warning',
  // CommonJS dependencies (prom-client, js-yaml's require paths) need a require in ESM.
  banner: { js: "import { createRequire as __sparkctlRequire } from 'node:module'; const require = __sparkctlRequire(import.meta.url);" },
});
