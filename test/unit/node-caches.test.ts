// vLLM's start caches on a cluster's nodes (src/engine/cluster/node-caches.ts): keyed as on one host,
// made on the node by the launch line under the node user's cache root, by the same rule as
// ensureCaches (0700, never through a link, never a folder of another user or open to others). The
// script is run here by a real sh with HOME pointing at a temporary folder, as the node's shell runs it.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CACHE_REFUSED_EXIT,
  cachesFrom,
  nodeCacheScript,
  planNodeCaches,
} from '../../src/engine/cluster/node-caches.js';
import { CACHE_VARS, cacheDirOf } from '../../src/engine/caches.js';
import { tempDir } from '../temp-dirs.js';

const tmp = tempDir('sparkctl-node-caches-');
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The launch line's cache part, then the variables it exported, run by sh as on a node. */
function onNode(home: string, c: ReturnType<typeof planNodeCaches>, env: Record<string, string> = {}) {
  const script = `${nodeCacheScript(c)}; ${CACHE_VARS.map(([n]) => `echo "@var ${n}=\${${n}-unset}"`).join('; ')}`;
  const r = spawnSync('sh', ['-c', script], { env: { PATH: process.env.PATH, HOME: home, ...env }, encoding: 'utf8' });
  const vars = Object.fromEntries(
    r.stdout
      .split('\n')
      .filter((l) => l.startsWith('@var '))
      .map((l) => l.slice(5).split('=') as [string, string]),
  );
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, vars };
}

describe('keyed as on one host', () => {
  it.each([
    [{ profile: 'qwen3-200b', vllm: '0.17.0' }, 'vllm/qwen3-200b/0.17.0'],
    [{ profile: 'a', vllm: '0.27.2.dev0+g6adad0876' }, 'vllm/a/0.27.2.dev0+g6adad0876'],
    [
      { profile: 'a', vllm: '0.17.0', image: 'sha256:1111' },
      cacheDirOf('/', { profile: 'a', vllm: '0.17.0', image: 'sha256:1111' }).slice(1),
    ],
    // a hostile name stays one component (the host's rule)
    [{ profile: '../../etc', vllm: '1' }, cacheDirOf('/', { profile: '../../etc', vllm: '1' }).slice(1)],
  ])('%j -> %s', (k, rel) => {
    const c = planNodeCaches(k);
    expect(c.rel).toBe(rel);
    expect(c.rel.split('/')).toHaveLength(3);
    expect(c.rel.startsWith('vllm/')).toBe(true);
  });
  it("leaves the profile's own variables alone (kept)", () => {
    const c = planNodeCaches({ profile: 'p', vllm: '1' }, { TRITON_CACHE_DIR: '/mine' });
    expect(c.kept).toEqual(['TRITON_CACHE_DIR']);
    expect(c.vars.map(([n]) => n)).toEqual(CACHE_VARS.map(([n]) => n).filter((n) => n !== 'TRITON_CACHE_DIR'));
  });
});

describe('made on the node by the launch line', () => {
  const c = planNodeCaches({ profile: 'qwen3-200b', vllm: '0.17.0' });
  it('first start: the chain made 0700 under ~/.cache/sparkctl, every variable pointing into it, reported empty; then warm once it holds a file', () => {
    const home = join(tmp, 'h1');
    mkdirSync(home);
    const r = onNode(home, c);
    expect(r.code, r.stderr).toBe(0);
    const dir = join(home, '.cache', 'sparkctl', 'vllm', 'qwen3-200b', '0.17.0');
    expect(cachesFrom(r.stdout, c)).toEqual({ dir, warm: false });
    for (const d of [
      join(home, '.cache', 'sparkctl'),
      join(home, '.cache', 'sparkctl', 'vllm'),
      dir,
      join(dir, 'vllm'),
      join(dir, 'inductor'),
    ])
      expect(statSync(d).mode & 0o777, d).toBe(0o700);
    for (const [name, sub] of CACHE_VARS) expect(r.vars[name], name).toBe(join(dir, sub));
    writeFileSync(join(dir, 'inductor', 'x'), 'compiled');
    const again = onNode(home, c);
    expect(again.code).toBe(0);
    expect(cachesFrom(again.stdout, c)).toEqual({ dir, warm: true });
  });
  it("XDG_CACHE_HOME is the node user's cache root where set, as on a host", () => {
    const home = join(tmp, 'h2');
    const xdg = join(tmp, 'xdg2');
    mkdirSync(home);
    const r = onNode(home, c, { XDG_CACHE_HOME: xdg });
    expect(r.code, r.stderr).toBe(0);
    expect(cachesFrom(r.stdout, c)?.dir).toBe(join(xdg, 'sparkctl', 'vllm', 'qwen3-200b', '0.17.0'));
    expect(existsSync(join(home, '.cache'))).toBe(false);
  });
  it("the profile's own variable is not exported over (the launch line exported it before)", () => {
    const home = join(tmp, 'h3');
    mkdirSync(home);
    const r = onNode(home, planNodeCaches({ profile: 'p', vllm: '1' }, { TRITON_CACHE_DIR: '/mine' }), {
      TRITON_CACHE_DIR: '/mine',
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.vars.TRITON_CACHE_DIR).toBe('/mine');
  });
  it.each([
    [
      'a link planted on the way (the profile folder)',
      (home: string, elsewhere: string) => {
        mkdirSync(join(home, '.cache', 'sparkctl', 'vllm'), { recursive: true, mode: 0o700 });
        chmodSync(join(home, '.cache', 'sparkctl'), 0o700);
        symlinkSync(elsewhere, join(home, '.cache', 'sparkctl', 'vllm', 'qwen3-200b'));
      },
    ],
    [
      'the version folder a link',
      (home: string, elsewhere: string) => {
        mkdirSync(join(home, '.cache', 'sparkctl', 'vllm', 'qwen3-200b'), { recursive: true, mode: 0o700 });
        for (const d of ['', 'vllm', 'vllm/qwen3-200b']) chmodSync(join(home, '.cache', 'sparkctl', d), 0o700);
        symlinkSync(elsewhere, join(home, '.cache', 'sparkctl', 'vllm', 'qwen3-200b', '0.17.0'));
      },
    ],
    [
      'a folder others can write',
      (home: string) => {
        mkdirSync(join(home, '.cache', 'sparkctl', 'vllm'), { recursive: true });
        chmodSync(join(home, '.cache', 'sparkctl', 'vllm'), 0o777);
      },
    ],
    [
      'a file where a folder goes',
      (home: string) => {
        mkdirSync(join(home, '.cache', 'sparkctl'), { recursive: true, mode: 0o700 });
        chmodSync(join(home, '.cache', 'sparkctl'), 0o700);
        writeFileSync(join(home, '.cache', 'sparkctl', 'vllm'), 'not a folder');
      },
    ],
  ])('refused, naming the folder and the fix, nothing written through it: %s', (_label, plant) => {
    const home = mkdtempSync(join(tmp, 'bad-'));
    const elsewhere = mkdtempSync(join(tmp, 'elsewhere-'));
    plant(home, elsewhere);
    const r = onNode(home, c);
    expect(r.code).toBe(CACHE_REFUSED_EXIT);
    expect(r.stderr).toMatch(
      /sparkctl: cache folder \/\S+ on \S+ is a link, not a folder, not this user's, or writable by others: remove it and start again/,
    );
    expect(r.stdout).not.toMatch(/@caches/);
    expect(readdirSync(elsewhere)).toEqual([]);
  });
});

describe("the node's answer is hostile", () => {
  const c = planNodeCaches({ profile: 'p', vllm: '1' });
  it.each([
    ['@caches warm /home/u/.cache/sparkctl/vllm/p/1', { dir: '/home/u/.cache/sparkctl/vllm/p/1', warm: true }],
    ['noise\n@caches empty /x/vllm/p/1\n1234 5678', { dir: '/x/vllm/p/1', warm: false }],
    // another folder than the planned one, a relative path, another word, a flood on one line
    ['@caches warm /home/u/.cache/sparkctl/vllm/q/1', undefined],
    ['@caches warm relative/vllm/p/1', undefined],
    ['@caches hot /x/vllm/p/1', undefined],
    [`@caches warm /${'a'.repeat(5000)}/vllm/p/1`, undefined],
    ['', undefined],
  ])('%j -> %j', (stdout, want) => expect(cachesFrom(stdout, c)).toEqual(want));
});
