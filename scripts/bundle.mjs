#!/usr/bin/env node
// Build step after tsc: bundle the CLI into dist/bundle/ (code-split, so each verb's modules still
// load lazily). One file per verb instead of ~60 small modules and package entry points: start-up
// of `sparkctl serve --dry-run` drops by ~10 % (scripts/bench-startup.mjs).
import { build } from 'esbuild';

await build({
  entryPoints: [new URL('../src/cli.ts', import.meta.url).pathname],
  outdir: new URL('../dist/bundle/', import.meta.url).pathname,
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
