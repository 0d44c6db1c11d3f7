// vLLM's start caches (src/engine/caches.ts): one folder per profile and vLLM version (and image),
// made 0700 by sparkctl, never through a link, never shared across versions or images.
import { mkdirSync, symlinkSync, statSync, writeFileSync, existsSync, chmodSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  cacheDirOf,
  cacheRoot,
  ensureCaches,
  listCaches,
  planCaches,
  removeCaches,
  hasEntries,
  CACHE_VARS,
} from '../../src/engine/caches.js';
import { UsageError } from '../../src/errors.js';
import { tempDir } from '../temp-dirs.js';

const tmp = tempDir('sparkctl-caches-');
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('where the caches live', () => {
  it.each([
    [{ SPARKCTL_CACHE_DIR: '/srv/c', SPARKCTL_STATE_DIR: '/s', XDG_CACHE_HOME: '/x', HOME: '/h' }, '/srv/c'],
    [{ SPARKCTL_STATE_DIR: '/s', XDG_CACHE_HOME: '/x', HOME: '/h' }, '/s/cache'],
    [{ XDG_CACHE_HOME: '/x', HOME: '/h' }, '/x/sparkctl'],
    [{ HOME: '/h' }, '/h/.cache/sparkctl'],
  ])('%j -> %s', (env, want) => expect(cacheRoot(env)).toBe(want));
});

describe('one folder per profile, vLLM version and image', () => {
  const dir = (k: Parameters<typeof cacheDirOf>[1]) => cacheDirOf('/r', k);
  it('never shares a folder across versions, images or profiles', () => {
    const all = [
      dir({ profile: 'a', vllm: '0.11.0' }),
      dir({ profile: 'a', vllm: '0.12.0' }),
      dir({ profile: 'a', vllm: '0.11.0', image: 'sha256:1111' }),
      dir({ profile: 'a', vllm: '0.11.0', image: 'sha256:2222' }),
      dir({ profile: 'b', vllm: '0.11.0' }),
    ];
    expect(new Set(all).size).toBe(all.length);
    expect(all[0]).toBe('/r/vllm/a/0.11.0');
    expect(all[2]).toMatch(/^\/r\/vllm\/a\/0\.11\.0@[0-9a-f]{12}$/);
  });
  it('keeps a hostile name to one path component, and two names that clean alike apart', () => {
    const a = dir({ profile: '../../etc', vllm: '0.1/../../x' });
    expect(a.startsWith('/r/vllm/')).toBe(true);
    expect(a.split('/').length).toBe(5);
    expect(dir({ profile: 'a/b', vllm: '1' })).not.toBe(dir({ profile: 'a_b', vllm: '1' }));
  });
  it('points every variable into the folder, leaving the ones the profile sets', () => {
    const p = planCaches({ profile: 'p', vllm: '0.27.2' }, { TRITON_CACHE_DIR: '/mine' }, '/r');
    expect(p.env.VLLM_CACHE_ROOT).toBe('/r/vllm/p/0.27.2/vllm');
    expect(p.env.FLASHINFER_WORKSPACE_BASE).toBe('/r/vllm/p/0.27.2/flashinfer');
    expect(p.env).not.toHaveProperty('TRITON_CACHE_DIR');
    expect(p.kept).toEqual(['TRITON_CACHE_DIR']);
    expect(Object.keys(p.env).length).toBe(CACHE_VARS.length - 1);
  });
});

describe('made by sparkctl, 0700, never through a link', () => {
  it('creates the chain 0700 and lists it with its size', () => {
    const root = join(tmp, 'ok');
    const p = planCaches({ profile: 'p', vllm: '0.27.2' }, {}, root);
    ensureCaches(p, root);
    for (const d of [root, join(root, 'vllm'), p.dir, p.env.VLLM_CACHE_ROOT!])
      expect(statSync(d).mode & 0o777).toBe(0o700);
    expect(hasEntries(p.dir)).toBe(false);
    writeFileSync(join(p.env.VLLM_CACHE_ROOT!, 'x.bin'), Buffer.alloc(1000));
    expect(hasEntries(p.dir)).toBe(true);
    const [e] = listCaches(root);
    expect(e).toMatchObject({ profile: 'p', version: '0.27.2', bytes: 1000, files: 1, parts: { vllm: 1000 } });
    // again: nothing to do, nothing refused
    ensureCaches(p, root);
  });
  it('refuses a link planted anywhere on the way, and writes nothing through it', () => {
    const root = join(tmp, 'link');
    const elsewhere = join(tmp, 'elsewhere');
    mkdirSync(join(root, 'vllm'), { recursive: true, mode: 0o700 });
    mkdirSync(elsewhere, { mode: 0o700 });
    symlinkSync(elsewhere, join(root, 'vllm', 'p'));
    const p = planCaches({ profile: 'p', vllm: '1' }, {}, root);
    expect(() => ensureCaches(p, root)).toThrow(UsageError);
    expect(() => ensureCaches(p, root)).toThrow(/symbolic link/);
    expect(existsSync(join(elsewhere, '1'))).toBe(false);
  });
  it('refuses a folder others can write', () => {
    const root = join(tmp, 'open');
    mkdirSync(join(root, 'vllm'), { recursive: true });
    chmodSync(join(root, 'vllm'), 0o777);
    expect(() => ensureCaches(planCaches({ profile: 'p', vllm: '1' }, {}, root), root)).toThrow(/writable by others/);
  });
});

describe('cache rm', () => {
  it("removes one version or all of a profile's, not another profile's, and not a link's target", () => {
    const root = join(tmp, 'rm');
    for (const [profile, vllm] of [
      ['a', '1'],
      ['a', '2'],
      ['b', '1'],
    ])
      ensureCaches(planCaches({ profile: profile!, vllm: vllm! }, {}, root), root);
    const target = join(tmp, 'target');
    mkdirSync(target);
    writeFileSync(join(target, 'keep'), 'x');
    symlinkSync(target, join(root, 'vllm', 'a', '1', 'vllm', 'link'));
    removeCaches(
      listCaches(root, 'a').filter((e) => e.version === '1'),
      root,
    );
    expect(listCaches(root).map((e) => `${e.profile}/${e.version}`)).toEqual(['a/2', 'b/1']);
    expect(existsSync(join(target, 'keep'))).toBe(true);
    removeCaches(listCaches(root, 'a'), root);
    expect(listCaches(root).map((e) => e.profile)).toEqual(['b']);
  });
});

describe("a CPU build's compile: torch's caches, their hit or miss made visible", async () => {
  const { loadProfile } = await import('../../src/profiles/load.js');
  const { resolveLoaded } = await import('../../src/profiles/resolve.js');
  const { buildServePlan, TORCH_CACHE_LOGS } = await import('../../src/engine/plan.js');
  const { ROOT } = await import('../helpers.js');
  const plan = (installedVllm: string | undefined, sets: string[] = [], engine: 'vllm' | 'sim' = 'vllm') => {
    const r = resolveLoaded(loadProfile('tiny', { profilesDir: join(ROOT, 'test', 'real-vllm', 'profiles'), sets }), {
      gpus: 1,
    });
    const p = buildServePlan(r, {
      engine,
      vllmBin: 'vllm',
      prewarm: false,
      installedVllm,
      stateDir: '/tmp/sparkctl-caches-test',
    });
    return { env: p.replicas[0]!.env, notes: p.caches?.notes ?? [] };
  };
  it.each([
    // installed vLLM, sets, engine -> VLLM_USE_AOT_COMPILE, TORCH_LOGS
    ['0.27.2.dev0+g6adad0876.cpu', [], 'vllm', '0', TORCH_CACHE_LOGS],
    ['0.27.2.dev0+g6adad0876', [], 'vllm', undefined, undefined],
    [undefined, [], 'vllm', undefined, undefined],
    ['0.27.2.dev0+g6adad0876.cpu', [], 'sim', undefined, undefined],
    // the profile's own wins
    ['0.27.2.dev0+g6adad0876.cpu', ['env.TORCH_LOGS=+dynamo'], 'vllm', '0', '+dynamo'],
    ['0.27.2.dev0+g6adad0876.cpu', ['env.VLLM_USE_AOT_COMPILE="1"'], 'vllm', '1', TORCH_CACHE_LOGS],
    // no start caches: nothing set for them
    ['0.27.2.dev0+g6adad0876.cpu', ['engine.startCaches=false'], 'vllm', undefined, undefined],
  ] as const)('%s %j %s -> AOT %s, TORCH_LOGS %s', (v, sets, engine, aot, logs) => {
    const { env, notes } = plan(v, [...sets], engine);
    expect(env.VLLM_USE_AOT_COMPILE).toBe(aot);
    expect(env.TORCH_LOGS).toBe(logs);
    expect(notes.some((n) => n.startsWith('TORCH_LOGS='))).toBe(logs === TORCH_CACHE_LOGS);
  });
});

// A container's start caches are keyed by the image's content id, read from the image, never by the
// reference the profile names: the same image under a tag, a digest or another tag is one folder (a
// restart through the pin still finds its compile cache), and a tag rebuilt to another image is
// another folder (a stale kernel of another image's torch is never loaded). Where the id could not be
// read the reference keys it. The folder is what the container argv mounts, read-write, at its own path.
describe("a container's caches: the folder keyed by the image's content id, mounted", async () => {
  const { loadProfile } = await import('../../src/profiles/load.js');
  const { resolveLoaded } = await import('../../src/profiles/resolve.js');
  const { buildServePlan, replicaRun } = await import('../../src/engine/plan.js');
  const { renderContainerRun } = await import('../../src/engine/runtime/container.js');
  const { ROOT } = await import('../helpers.js');
  const ID_A = 'a'.repeat(64);
  const ID_B = 'b'.repeat(64);
  const root = join(tmp, 'ctr-state');
  const planFor = (image: string, imageId: string | undefined, runtime: 'container' | 'host' = 'container') => {
    const sets = [
      'engine.runtime=container',
      `container.image=${image}`,
      'container.cli=podman',
      'container.gpus=none',
    ];
    const r = resolveLoaded(
      loadProfile('tiny', {
        profilesDir: join(ROOT, 'test', 'real-vllm', 'profiles'),
        sets: runtime === 'container' ? sets : [],
      }),
      { gpus: 1 },
    );
    const plan = buildServePlan(r, {
      engine: 'vllm',
      vllmBin: 'vllm',
      prewarm: false,
      installedVllm: '0.27.2.dev0+g6adad0876.cpu',
      stateDir: root,
      runtime,
      ...(imageId ? { imageId } : {}),
    });
    const x = replicaRun(plan, plan.replicas[0]!);
    const argv =
      runtime === 'container'
        ? renderContainerRun({
            ...x,
            marker: 'm-1',
            cli: 'podman',
            env: { HOME: '/nonexistent' },
            stopTimeoutS: 30,
            cwd: ROOT,
          }).argv
        : [];
    return { plan, argv, dir: plan.caches!.dir };
  };
  const TAG = 'localhost/vllm-cpu:latest';
  const DIGEST = `localhost/vllm-cpu@sha256:${'c'.repeat(64)}`;
  it.each([
    // [image reference, content id read] x 2 -> the same folder?
    [[TAG, ID_A], [DIGEST, ID_A], true, 'a tag and its pinned digest: one image, one folder'],
    [[TAG, ID_A], ['localhost/other:1', ID_A], true, 'another tag of the same image'],
    [[TAG, ID_A], [TAG, ID_B], false, 'the tag rebuilt to another image'],
    [[TAG, ID_A], [TAG, undefined], false, 'the id not read: keyed by the reference, not shared with the id'],
  ] as const)('%j and %j: same folder %s (%s)', (a, b, same) => {
    const one = planFor(a[0], a[1]);
    const two = planFor(b[0], b[1]);
    expect(one.dir === two.dir).toBe(same);
    for (const p of [one, two]) {
      // keyed by the id where read: the key names it, the folder ends in its hash
      expect(p.plan.caches!.key.image).toBe(p === one ? (a[1] ?? a[0]) : (b[1] ?? b[0]));
      expect(p.dir).toMatch(/\/vllm\/tiny\/0\.27\.2\.dev0\+g6adad0876\.cpu@[0-9a-f]{12}$/);
      // the container mounts that folder read-write at its own path, and every cache variable points inside it
      expect(p.argv.join(' ')).toContain(`--volume ${p.dir}:${p.dir}`);
      expect(p.argv.join(' ')).not.toContain(`--volume ${p.dir}:${p.dir}:ro`);
      for (const [name] of CACHE_VARS)
        expect(p.argv, name).toContain(`${name}=${join(p.dir, CACHE_VARS.find(([n]) => n === name)![1])}`);
    }
  });
  it("the host's vLLM: no image in the key, never the folder of a container of the same version", () => {
    const host = planFor(TAG, undefined, 'host');
    expect(host.dir).toMatch(/\/vllm\/tiny\/0\.27\.2\.dev0\+g6adad0876\.cpu$/);
    expect(host.plan.caches!.key.image).toBeUndefined();
    expect(host.dir).not.toBe(planFor(TAG, ID_A).dir);
  });
});
