// The install path (issue 48 item 8): scripts/pack.mjs makes one npm tarball, `npm install -g` puts it
// in a prefix with no registry reachable (the registry is a closed loopback port), and the `sparkctl`
// npm linked runs from a folder with no node_modules anywhere above it: the bundle carries every
// dependency. The launcher's old-Node message holds for the installed copy too.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execa } from 'execa';
import { existsSync, readFileSync, readdirSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, tempDir, rmrf } from '../helpers.js';

const dir = tempDir('sparkctl-install-');
const prefix = join(dir, 'prefix');
const home = join(dir, 'home');
const sparkctl = join(prefix, 'bin', 'sparkctl');
const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version as string;
// What a fresh box has: node on PATH, no npm cache of ours, no NODE_PATH, no checkout.
const bare = () => ({
  PATH: `${join(prefix, 'bin')}:${process.env.PATH}`,
  HOME: home,
  NO_COLOR: '1',
  SPARKCTL_STATE_DIR: join(dir, 'state'),
});
let tarball: string;

describe('sparkctl from its tarball', { timeout: 90_000 }, () => {
  beforeAll(async () => {
    const p = await execa(
      process.execPath,
      [join(ROOT, 'scripts', 'pack.mjs'), '--out', join(dir, 'release'), '--json'],
      { cwd: ROOT },
    );
    tarball = JSON.parse(p.stdout).file;
    const i = await execa(
      'npm',
      [
        'install',
        '-g',
        '--prefix',
        prefix,
        '--no-audit',
        '--no-fund',
        '--fetch-retries',
        '0',
        '--registry',
        'http://127.0.0.1:9/',
        '--cache',
        join(dir, 'npm-cache'),
        tarball,
      ],
      { cwd: dir, env: { HOME: home, npm_config_update_notifier: 'false' }, extendEnv: true, reject: false },
    );
    expect(i.exitCode, i.stderr).toBe(0);
  }, 90_000);
  afterAll(() => rmrf(dir));

  it('is one file, named by version, whose package needs nothing from a registry and builds nothing', () => {
    expect(tarball).toBe(join(dir, 'release', `sparkctl-${version}.tgz`));
    const lib = realpathSync(join(prefix, 'lib', 'node_modules', 'sparkctl'));
    const pkg = JSON.parse(readFileSync(join(lib, 'package.json'), 'utf8'));
    expect(pkg).toMatchObject({
      name: 'sparkctl',
      version,
      bin: { sparkctl: 'bin/sparkctl.js' },
      engines: { node: '>=20.18' },
    });
    expect(pkg.dependencies).toBeUndefined();
    expect(pkg.scripts).toBeUndefined();
    // nothing was fetched: no node_modules inside the installed package
    expect(existsSync(join(lib, 'node_modules'))).toBe(false);
    expect(readdirSync(join(lib, 'profiles'))).toContain('qwen3.5-9b-spark.yaml');
    expect(existsSync(join(lib, 'dist', 'bundle', 'cli.js'))).toBe(true);
    // the unbundled tsc output is not shipped (the CLI runs only from the bundle)
    expect(existsSync(join(lib, 'dist', 'cli.js'))).toBe(false);
  });

  it('`sparkctl --version` and `serve --dry-run` from PATH, in a folder with no node_modules above it', async () => {
    const v = await execa('sparkctl', ['--version'], { cwd: dir, env: bare(), extendEnv: false, reject: false });
    expect(v.exitCode, v.stderr).toBe(0);
    expect(v.stdout).toBe(version);
    const d = await execa('sparkctl', ['serve', 'qwen3.5-9b-spark', '--dry-run', '--json'], {
      cwd: dir,
      env: bare(),
      extendEnv: false,
      reject: false,
    });
    expect(d.exitCode, d.stderr).toBe(0);
    const j = JSON.parse(d.stdout);
    // the shipped profile was found inside the installed package, and the command is vLLM's
    expect(j).toMatchObject({ kind: 'launch-plan', profile: 'qwen3.5-9b-spark', platform: 'dgx-spark-gb10' });
    expect(j.replicas[0].argv.slice(0, 3)).toEqual(['vllm', 'serve', 'Qwen/Qwen3.5-9B']);
    expect(j.replicas[0].argv.join(' ')).toContain('--tool-call-parser qwen3_coder');
    // and it is the very plan the checkout's CLI makes
    const here = await execa(
      process.execPath,
      [join(ROOT, 'bin', 'sparkctl.js'), 'serve', 'qwen3.5-9b-spark', '--dry-run', '--json'],
      { cwd: dir, env: bare(), extendEnv: false, reject: false },
    );
    expect(d.stdout).toBe(here.stdout);
  });

  it('on an old Node the installed launcher says what it needs and how to get it (exit 2), before anything loads', async () => {
    const bin = realpathSync(sparkctl);
    const r = await execa(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `Object.defineProperty(process.versions, 'node', { value: '18.19.1' }); process.argv.push('status'); await import(${JSON.stringify(bin)});`,
      ],
      { cwd: dir, env: bare(), extendEnv: false, reject: false },
    );
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('needs Node.js 20.18 or newer; this is 18.19.1');
    expect(r.stderr).toMatch(/fix: install Node 20 LTS or newer/);
    expect(r.stdout).toBe('');
  });
});
