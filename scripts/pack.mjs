#!/usr/bin/env node
// The install path for an operator's box (issue 48 item 8): one npm tarball that installs offline.
//   node scripts/pack.mjs [--out DIR] [--json]        (npm run pack; writes DIR/sparkctl-VERSION.tgz, default release/)
//   sudo npm install -g ./sparkctl-VERSION.tgz         (on the box: no registry, no build, no node_modules)
// The built CLI is already self-contained: dist/bundle/ holds every dependency (scripts/bundle.mjs,
// packages: 'bundle'; uPlot's files inlined), so the tarball is the launcher (bin/sparkctl.js, with its
// old-Node message), the bundle, the shipped profiles, cron-probe.sh and a package.json that names no
// dependency and runs no script. `npm install -g` of it then needs nothing from a registry (tested with
// the registry pointed at a closed port: test/e2e/install-tarball.test.ts), and `sparkctl` on PATH
// starts as fast as `node bin/sparkctl.js` (npx paid about 3 s a command: scripts/bench-startup.mjs).
// Why not a Node single executable application: Node 20's SEA runs one CommonJS script only (no ESM,
// no dynamic import of the bundle's per-verb chunks), needs postject, and must be built per
// architecture from that architecture's node binary (a DGX Spark is arm64); the simulator and the
// watcher's units also run `node bin/sparkctl.js` as a second process. (Node 20's docs: "currently only
// supports running a single embedded script using the CommonJS module system",
// nodejs.org/docs/latest-v20.x/api/single-executable-applications.html; ESM came in later majors.)
// Builds first when dist/ is not built from these sources (scripts/prepare.mjs decides).
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const args = process.argv.slice(2);
const outArg = args.indexOf('--out');
if (outArg >= 0 && !args[outArg + 1]) {
  process.stderr.write('pack: --out needs a folder (for example: --out release)\n');
  process.exit(2);
}
const out = resolve(outArg >= 0 ? args[outArg + 1] : join(root, 'release'));
const asJson = args.includes('--json');

execFileSync(process.execPath, [join(root, 'scripts', 'prepare.mjs')], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
// Only what the installed CLI reads: no dependencies (they are in the bundle), no scripts (no
// prepare: nothing is built on the box), no devDependencies.
const release = {
  name: pkg.name,
  version: pkg.version,
  description: pkg.description,
  license: pkg.license,
  type: pkg.type,
  bin: pkg.bin,
  engines: pkg.engines,
  files: ['bin', 'dist/bundle', 'profiles', 'scripts/cron-probe.sh'],
};

const stage = mkdtempSync(join(tmpdir(), 'sparkctl-pack-'));
try {
  for (const p of ['bin/sparkctl.js', 'dist/bundle', 'profiles', 'scripts/cron-probe.sh', 'README.md', 'LICENSE']) {
    try {
      statSync(join(root, p));
    } catch {
      if (p === 'LICENSE') continue;
      throw new Error(`pack: ${p} is missing (run npm run build)`);
    }
    cpSync(join(root, p), join(stage, p), { recursive: true });
  }
  writeFileSync(join(stage, 'package.json'), `${JSON.stringify(release, null, 2)}\n`);
  mkdirSync(out, { recursive: true });
  // --ignore-scripts: the staged package has none, and a user's npmrc must not add any.
  const res = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', out], {
      cwd: stage,
      encoding: 'utf8',
      env: { ...process.env, npm_config_loglevel: 'error', npm_config_update_notifier: 'false' },
    }),
  )[0];
  const file = join(out, res.filename);
  const sha256 = createHash('sha256').update(readFileSync(file)).digest('hex');
  const summary = { file, version: release.version, bytes: statSync(file).size, unpackedBytes: res.unpackedSize, files: res.entryCount, sha256 };
  if (asJson) console.log(JSON.stringify(summary, null, 2));
  else
    console.log(
      `${file}\n  ${summary.files} files, ${(summary.bytes / 1024 / 1024).toFixed(2)} MiB (${(summary.unpackedBytes / 1024 / 1024).toFixed(2)} MiB unpacked), sha256 ${sha256}\n` +
        `  install (no registry needed): sudo npm install -g ${file}\n  or for one user:              npm install -g --prefix ~/.local ${file}`,
    );
} finally {
  rmSync(stage, { recursive: true, force: true });
}
