// Issue 44, in a container: the real vLLM (the CPU build) compiles with torch.compile inside a podman
// container, into sparkctl's cache folder mounted from the host; the container's restart (a new
// container, the same image) loads the compiled graphs from that folder, in torch's own words; another
// image (its own content id) is planned into a folder of its own.
//
// The real-vLLM test image (test/podman.ts buildVllmImage) has no compiler, and inductor's CPU backend
// writes C++ and runs g++: so the image here is that one plus Debian's g++ (the files of the packages
// this host installed from Debian's archive, buildToolchainImage), built offline, cached by what it
// was built from. Two real container starts, the first a cold inductor compile: minutes on 2 shared
// cores, so opt-in (SPARKCTL_REAL_COMPILE_CONTAINER=1); CI's cheap check of the same keying is the
// unit table in test/unit/caches.test.ts and the podman-serve case (real podman, dry-runs).
//
//   SPARKCTL_REAL_COMPILE_CONTAINER=1 SPARKCTL_REAL_VLLM_ONLY=compile-container \
//     flock /tmp/heavy.lock npx vitest run test/real-vllm/all.test.ts
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { cpSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, cli, freePort, tempDir, rmrf } from '../helpers.js';
import {
  PODMAN,
  buildToolchainImage,
  buildVllmImage,
  derivedImage,
  podmanIn,
  podmanUnavailable,
  toolchainPackages,
  vllmSources,
} from '../podman.js';
import { cacheDirOf } from '../../src/engine/caches.js';
import { oneRealVllmAtATime, realVllmUnavailable } from './real.js';
import { compileSeconds, filesUnder, started, suiteClock, writeContainerProfile, type Start } from './suite-kit.js';

const MIN = 60_000;
const OPT_IN = Boolean(process.env.SPARKCTL_REAL_COMPILE_CONTAINER);
// made only when it runs: skipped (CI's default), it leaves nothing behind
const work = OPT_IN ? tempDir('sparkctl-real-cc-') : join(tmpdir(), 'sparkctl-real-cc-unused');
const { env: podmanEnv, podman, prepare } = podmanIn(work);
const src = vllmSources();
const tc = OPT_IN ? await toolchainPackages() : undefined;
const why = !OPT_IN
  ? 'opt-in: SPARKCTL_REAL_COMPILE_CONTAINER=1 (two real container starts, one a cold inductor compile: minutes here)'
  : (podmanUnavailable() ??
    realVllmUnavailable() ??
    ('why' in src ? src.why : undefined) ??
    (tc && 'why' in tc ? tc.why : undefined));
if (why) console.warn(`real vLLM compile in a container skipped: ${why}`);

const NAME = `tiny-cc-${process.pid}`;
const state = join(work, 'state');
const profiles = join(work, 'profiles');
const REBUILD = `localhost/sparkctl-vllm-cc-rebuild:${process.pid}`;
let port = 0;
let image = '';
const clock = suiteClock('real vLLM compile in a container');
const took = clock.took;

const env = () => ({ ...podmanEnv, SPARKCTL_STATE_DIR: state });
const sparkctl = (args: string[], timeout = 2 * MIN) => cli(args, { env: env(), cwd: ROOT, timeout });
const ours = async () =>
  (await podman(['ps', '-a', '--filter', `label=io.sparkctl.state=${state}`, '--format', '{{.Names}}'])).stdout
    .split('\n')
    .filter(Boolean);
const imageId = async (ref: string) => (await podman(['image', 'inspect', '--format', '{{.Id}}', ref])).stdout.trim();

function writeProfile() {
  // torch.compile on (tiny turns it off for the other suites)
  writeContainerProfile({
    dir: profiles,
    name: NAME,
    port,
    image,
    cli: 'podman',
    cliArgs: PODMAN,
    work,
    engine: { enforceEager: false },
    server: { shutdownTimeoutSeconds: 20 },
  });
}

/** The container's own output (podman logs: vLLM's stdout and stderr). */
const logsOf = async (id: string) => {
  const r = await podman(['logs', id], {}, MIN);
  return r.stdout + r.stderr;
};

/** The venv's vLLM version, from its dist-info (what the image's own vLLM says: the cache key's version). */
function venvVllmVersion(): string {
  if ('why' in src) return '';
  const site = join(src.venv, 'lib', 'python3.11', 'site-packages');
  const d = readdirSync(site).find((n) => /^vllm-\d.*\.dist-info$/.test(n))!;
  return /^Version: (.+)$/m.exec(readFileSync(join(site, d, 'METADATA'), 'utf8'))![1]!.trim();
}

/** The replica's container: its id, image, and the host folders it mounts (podman's own account). */
async function container(): Promise<{
  id: string;
  image: string;
  mounts: Array<{ Source: string; Destination: string; RW: boolean }>;
}> {
  const r = await podman(['inspect', '--format', '{{.Id}} {{.Image}} {{json .Mounts}}', `sparkctl-${NAME}-0`]);
  const [id = '', img = '', ...rest] = r.stdout.trim().split(' ');
  return { id, image: img, mounts: JSON.parse(rest.join(' ') || '[]') };
}

let first: Start | undefined;
let cacheDir = '';
let firstId = '';

describe
  .skipIf(Boolean(why))
  .sequential(
    'real vLLM compiling in a podman container: the restart reuses the compile cache through the mount',
    () => {
      oneRealVllmAtATime('compile in a container');
      beforeAll(async () => {
        prepare();
        port = await freePort();
        const t0 = Date.now();
        const base = await buildVllmImage(podman, work);
        const cc = await buildToolchainImage(podman, work, base.image);
        image = cc.image;
        took['images (build or reuse)'] = Date.now() - t0;
        if (cc.builtMs)
          console.info(
            `toolchain image ${image} built in ${(cc.builtMs / 1000).toFixed(0)} s, ${((cc.bytes ?? 0) / 1e9).toFixed(2)} GB`,
          );
        writeProfile();
      }, 15 * MIN);
      afterAll(async () => {
        await sparkctl(['stop', '--all', '--grace', '20'], 2 * MIN);
        for (const n of await ours()) await podman(['rm', '-f', '-t', '0', n]);
        const left = await ours();
        await podman(['rmi', '-f', REBUILD]);
        // COMPILE_CONTAINER_KEEP_LOG=DIR: the replica's logs (every start's, as sparkctl kept them) copied there first
        const keep = process.env.COMPILE_CONTAINER_KEEP_LOG;
        if (keep && existsSync(join(state, 'logs'))) cpSync(join(state, 'logs'), keep, { recursive: true });
        rmrf(work);
        console.info(clock.summary());
        expect(left, 'containers left by the suite').toEqual([]);
      }, 3 * MIN);

      it(
        "first start in the container: inductor compiles (g++ in the image), a miss in torch's words, written into the mounted folder keyed by the image's id",
        async () => {
          const r = await started(clock, 'first start', () =>
            sparkctl(['serve', NAME, '--profiles', profiles, '--no-prewarm', '--json'], 20 * MIN),
          );
          const s = JSON.parse(r.stdout).replicas[0].start as Start;
          first = s;
          const id = await imageId(image);
          const version = venvVllmVersion();
          cacheDir = s.caches!.dir;
          expect(s.caches?.warm).toBe(false);
          // keyed by the version read in the image and the image's content id
          expect(cacheDir).toMatch(
            new RegExp(`^${join(state, 'cache', 'vllm', NAME).replace(/[.+]/g, '\\$&')}/0\\.27\\.2[^/]*@[0-9a-f]{12}$`),
          );
          expect(cacheDir).toBe(cacheDirOf(join(state, 'cache'), { profile: NAME, vllm: version, image: id }));
          // podman's own account: the container runs that image and mounts that folder read-write at its own path
          const c = await container();
          firstId = c.id;
          expect(c.image).toBe(id);
          expect(c.mounts).toEqual(
            expect.arrayContaining([expect.objectContaining({ Source: cacheDir, Destination: cacheDir, RW: true })]),
          );
          // the container's own output: torch compiled (a miss), no compiler error
          const log = await logsOf(c.id);
          expect(log).not.toMatch(/No working C\+\+ compiler|InvalidCxxCompiler/);
          expect(log).toMatch(/fx graph cache miss for key/);
          expect(s.compile?.cache).toBe('miss');
          expect(compileSeconds(s)).toBeGreaterThan(0);
          // written into the host folder through the mount
          expect(filesUnder(join(cacheDir, 'inductor')).some((f) => f.startsWith('fxgraph/'))).toBe(true);
        },
        21 * MIN,
      );

      it(
        'restart (a new container, the same image): the same folder, warm; torch in the container says it loaded the graphs from the cache; nothing compiled again',
        async () => {
          expect(first, 'the first start ran').toBeDefined();
          const before = new Set(filesUnder(join(cacheDir, 'inductor')).filter((f) => f.startsWith('fxgraph/')));
          const r = await started(clock, 'restart', () =>
            sparkctl(['restart', NAME, '--profiles', profiles, '--no-prewarm', '--json'], 20 * MIN),
          );
          const s = JSON.parse(r.stdout).replicas[0].start as Start;
          const c = await container();
          expect(c.id, 'a new container').not.toBe(firstId);
          expect(c.mounts).toEqual(
            expect.arrayContaining([expect.objectContaining({ Source: cacheDir, Destination: cacheDir, RW: true })]),
          );
          expect(s.caches).toEqual({ dir: cacheDir, warm: true });
          const log = await logsOf(c.id);
          expect(log).toMatch(/fx graph cache hit for key/);
          expect(log).not.toMatch(/fx graph cache miss for key/);
          expect(s.compile?.cache).toBe('hit');
          const after = filesUnder(join(cacheDir, 'inductor')).filter((f) => f.startsWith('fxgraph/'));
          expect(after.filter((f) => !before.has(f))).toEqual([]);
          expect(compileSeconds(s)!).toBeLessThan(compileSeconds(first!)! * 0.6);
          console.info(
            `in the container: first start compile ${compileSeconds(first!)} s (miss), API up ${(first!.readyMs! / 1000).toFixed(1)} s; ` +
              `restart compile ${compileSeconds(s)} s (hit), API up ${(s.readyMs! / 1000).toFixed(1)} s`,
          );
        },
        21 * MIN,
      );

      it(
        'another image (a rebuild: its own content id, the same files) is planned into a folder of its own, empty; the filled one untouched',
        async () => {
          expect(cacheDir).not.toBe('');
          const rebuilt = await derivedImage(
            podman,
            work,
            image,
            [`LABEL io.sparkctl.test.rebuild=${process.pid}`],
            REBUILD,
          );
          const r = await sparkctl(
            ['serve', NAME, '--profiles', profiles, '--set', `container.image=${REBUILD}`, '--dry-run', '--json'],
            5 * MIN,
          );
          expect(r.exitCode, r.stderr).toBe(0);
          const plan = JSON.parse(r.stdout);
          expect(plan.caches.key.image).toBe(rebuilt);
          expect(plan.caches.dir).not.toBe(cacheDir);
          expect(plan.caches.dir.startsWith(`${cacheDir}/`)).toBe(false);
          for (const v of ['VLLM_CACHE_ROOT', 'TORCHINDUCTOR_CACHE_DIR', 'TRITON_CACHE_DIR'])
            expect(plan.replicas[0].env[v].startsWith(`${plan.caches.dir}/`), v).toBe(true);
          expect(filesUnder(plan.caches.dir)).toEqual([]);
          expect(plan.replicas[0].container.argv.join(' ')).toContain(
            `--volume ${plan.caches.dir}:${plan.caches.dir} `,
          );
        },
        6 * MIN,
      );
    },
  );
