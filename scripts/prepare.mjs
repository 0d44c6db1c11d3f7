#!/usr/bin/env node
// npm's `prepare`: the build (tsc, the baseline check, the bundle), skipped when dist/ was already
// built from exactly these sources. npm runs prepare after `npm ci`, and npm 11 runs it again on the
// first `npx sparkctl` in a checkout: npx installs the project itself into its own cache to link its
// bin, and that install runs prepare. Measured on a fresh clone (2 loaded cores): that second build
// was 66-115 s of the first `npx sparkctl serve ...`, which then said "ready in 3.9 s".
// The key is a SHA-256 of every input of the build; `npm run build` (--always) always builds, and
// writes the key of what it built.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const INPUTS = [
  'src',
  'profiles/platforms',
  'scripts/bundle.mjs',
  'scripts/gen-platforms.mjs',
  'scripts/prepare.mjs',
  'tsconfig.json',
  'package.json',
  'package-lock.json',
];
const KEY = join(root, 'dist', '.build-key');

function files(p) {
  const abs = join(root, p);
  if (!existsSync(abs)) return [];
  if (!statSync(abs).isDirectory()) return [abs];
  return readdirSync(abs, { withFileTypes: true }).flatMap((e) => files(relative(root, join(abs, e.name))));
}

const h = createHash('sha256');
for (const f of INPUTS.flatMap(files).sort())
  h.update(`${relative(root, f)}\0`)
    .update(readFileSync(f))
    .update('\0');
h.update(process.version.split('.')[0]);
const key = h.digest('hex');
const built =
  existsSync(join(root, 'dist', 'bundle', 'cli.js')) && existsSync(KEY) && readFileSync(KEY, 'utf8').trim() === key;
if (built && !process.argv.includes('--always')) {
  console.error('prepare: dist/ is already built from these sources (npm run build rebuilds it)');
} else {
  const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit' });
  run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json']);
  run(process.execPath, [join(root, 'scripts', 'gen-platforms.mjs'), '--check']);
  run(process.execPath, [join(root, 'scripts', 'bundle.mjs')]);
  writeFileSync(KEY, `${key}\n`);
}
