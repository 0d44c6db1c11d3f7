// `sparkctl upgrade` on a real docker daemon (Debian's docker.io 20.10, a private dockerd: test/docker.ts)
// with the real vLLM (the CPU build) in the project's real-vLLM image: the image podman builds
// (test/podman.ts buildVllmImage), saved once to a docker archive kept outside the clone by image ID and
// loaded into the daemon (the same image ID: docker gives a loaded image no repository digest, so
// every pin here is an image ID, and the canary runs `docker run <64 hex>`). One served replica (the
// "current"); against it another tag of the very image (nothing starts), an image whose chat template
// changed (the canary fails, everything stays as it was) and a rebuild under another tag (the canary
// passes every exact check, then rolls forward: the replica runs the rebuild's image ID).
//
// Opt-in, SPARKCTL_REAL_UPGRADE_DOCKER=1: three vLLM starts and a 2 GB load (about 5 min here) do not
// fit CI's time; the same comparison runs in CI on podman (podman.real.ts), whose path is the same
// code but for the runtime's CLI words, and docker's own words are the docker e2e suite's (simulator).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, cli, freePort, tempDir, rmrf } from '../helpers.js';
import { buildVllmImage, podmanIn, podmanUnavailable, vllmSources } from '../podman.js';
import { dockerUnavailable, loadVllmImage, startDockerd, type Dockerd } from '../docker.js';
import { MODEL_DIR, oneRealVllmAtATime, realVllmUnavailable } from './real.js';
import { started, suiteClock, writeContainerProfile } from './suite-kit.js';
import {
  EXACT_CHECKS,
  UPGRADE_SETTINGS,
  rebuildContext,
  showVerdict,
  templatedContext,
  type Comparison,
} from './upgrade-candidates.js';

const MIN = 60_000;
const OPT_IN = Boolean(process.env.SPARKCTL_REAL_UPGRADE_DOCKER);
const src = vllmSources();
const why = OPT_IN
  ? (dockerUnavailable() ?? podmanUnavailable() ?? realVllmUnavailable() ?? ('why' in src ? src.why : undefined))
  : 'opt-in: SPARKCTL_REAL_UPGRADE_DOCKER=1 (three real vLLM starts and a 2 GB image load; podman.real.ts runs the same comparison in CI)';
if (OPT_IN && why) console.warn(`real vLLM upgrade on docker skipped: ${why}`);

// made only where the suite runs: a skipped file runs no hooks to remove it
const work = why ? '' : tempDir('sparkctl-real-docker-');
const NAME = `tiny-dkr-${process.pid}`;
const state = join(work, 'state');
const profiles = join(work, 'profiles');
const TEMPLATED = `localhost/sparkctl-vllm-template:d${process.pid}`;
const REBUILD = `localhost/sparkctl-vllm-rebuild:d${process.pid}`;
const ALIAS = `localhost/sparkctl-vllm-alias:d${process.pid}`;
let d: Dockerd | undefined;
let image = '';
let imageHex = '';
const clock = suiteClock('real vLLM upgrade on docker');
const took = clock.took;

const docker = (args: string[], timeout?: number) => d!.docker(args, timeout);
const sparkctl = (args: string[], timeout = 2 * MIN) =>
  cli(args, { env: { ...d!.env, SPARKCTL_STATE_DIR: state }, cwd: ROOT, timeout });
const upgradeRun = (args: string[]) => sparkctl(['upgrade', NAME, '--profiles', profiles, '--json', ...args], 15 * MIN);
/** this state folder's containers (the daemon is the suite's own: any other is a failure too) */
const ours = async () =>
  ((await docker(['ps', '-a', '--format', '{{.Names}} {{.Label "io.sparkctl.state"}}'])).stdout as string)
    .split('\n')
    .filter(Boolean);
/** docker's image IDs carry `sha256:`; pins and podman's do not */
const hex = (id: string) => id.replace(/^sha256:/, '');
const imageId = async (ref: string) =>
  hex(((await docker(['image', 'inspect', '--format', '{{.Id}}', ref])).stdout as string).trim());
/** The replica's container as docker sees it: its id and the image it runs (its own, not what the record says). */
async function replicaContainer(): Promise<{ id: string; image: string; running: boolean }> {
  const r = await docker(['inspect', '--format', '{{.Id}} {{.Image}} {{.State.Running}}', `sparkctl-${NAME}-0`]);
  const [id = '', img = '', running = ''] = (r.stdout as string).trim().split(' ');
  return { id, image: hex(img), running: running === 'true' };
}
const pinsOf = () =>
  JSON.parse(readFileSync(join(state, 'pins', `${NAME}.json`), 'utf8')) as {
    current: { imageId?: string; imagePinned?: string };
    previous: Array<{ imageId?: string }>;
  };
const history = () =>
  readFileSync(join(state, 'history', 'upgrades.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { kind: string; status: string; failed: string[]; to: { image?: string } });
async function build(tag: string, dir: string): Promise<string> {
  const r = await docker(['build', '-q', '-f', join(dir, 'Containerfile'), '-t', tag, dir], 5 * MIN);
  if (r.exitCode !== 0) throw new Error(`docker build ${tag}: ${r.stderr}`);
  return imageId(tag);
}

function writeProfile(port: number) {
  writeContainerProfile({
    dir: profiles,
    name: NAME,
    port,
    image,
    cli: 'docker',
    work,
    // no C++ compiler in the image: the sampler runs eagerly (podman.real.ts says why)
    env: { TORCHDYNAMO_DISABLE: '1' },
    server: { shutdownTimeoutSeconds: 30 },
    rest: { upgrade: UPGRADE_SETTINGS },
  });
}

describe
  .skipIf(Boolean(why))
  .sequential('sparkctl upgrade with the real vLLM on a real docker daemon (SPARKCTL_REAL_UPGRADE_DOCKER=1)', () => {
    oneRealVllmAtATime('real vLLM upgrade on docker');
    beforeAll(async () => {
      const { podman, prepare } = podmanIn(work);
      prepare();
      let t0 = Date.now();
      const built = await buildVllmImage(podman, work);
      image = built.image;
      took['image (podman build or reuse)'] = Date.now() - t0;
      t0 = Date.now();
      const r = await startDockerd(join(work, 'dockerd'));
      if ('why' in r) throw new Error(r.why);
      d = r;
      took['dockerd up'] = Date.now() - t0;
      const loaded = await loadVllmImage(d, podman, image);
      imageHex = loaded.id;
      if (loaded.savedMs !== undefined) took['podman save (archive cached)'] = loaded.savedMs;
      took['docker load'] = loaded.loadedMs;
      writeProfile(await freePort());
    }, 25 * MIN);
    afterAll(async () => {
      if (d) {
        await sparkctl(['stop', '--all', '--grace', '20'], 2 * MIN);
        const left = (await ours()).filter((l) => l.endsWith(` ${state}`));
        // the daemon's every container and image go with it (its data-root is under work)
        await d.stop();
        expect(left, 'containers left by sparkctl stop --all').toEqual([]);
      }
      rmrf(work);
      console.info(clock.summary());
    }, 4 * MIN);

    it(
      'serve in a docker container: ready, probe healthy; the loaded image (no repository digest) pinned by its image ID; status proves it',
      async () => {
        const r = await started(clock, 'serve to ready', () =>
          sparkctl(['serve', NAME, '--profiles', profiles, '--no-prewarm'], 12 * MIN),
        );
        expect(r.stdout + r.stderr).toMatch(/probe .*: healthy/);
        const c = await replicaContainer();
        expect(c).toMatchObject({ image: imageHex, running: true });
        expect(pinsOf().current).toMatchObject({ imageId: imageHex, imagePinned: imageHex });
        const st = JSON.parse((await sparkctl(['status', '--json'])).stdout);
        const inst = st.instances.find((i: { name: string }) => i.name === `${NAME}-0`);
        expect(inst, JSON.stringify(st)).toMatchObject({
          alive: true,
          container: { cli: 'docker', name: `sparkctl-${NAME}-0`, id: c.id },
        });
        expect(st.drift).toEqual([]);
        const dry = JSON.parse(
          (await sparkctl(['serve', NAME, '--profiles', profiles, '--dry-run', '--json'], 3 * MIN)).stdout,
        );
        expect(dry.replicas[0].container.argv.join(' ')).toContain(`--volume ${MODEL_DIR}:${MODEL_DIR}:ro`);
      },
      13 * MIN,
    );

    it(
      'upgrade to an image whose chat template changed (docker build): exit 1, the canary beside fails on the template, the replica untouched, no canary left',
      async () => {
        const before = await replicaContainer();
        const pinBefore = pinsOf().current;
        let t0 = Date.now();
        const candidate = await build(
          TEMPLATED,
          templatedContext(join(work, 'build-templated'), image, 'why' in src ? '' : src.venv),
        );
        took['candidate image (docker build)'] = Date.now() - t0;
        expect(candidate).not.toBe(before.image);
        t0 = Date.now();
        const r = await upgradeRun(['--image', TEMPLATED]);
        took['upgrade: changed template (canary, fails)'] = Date.now() - t0;
        expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(1);
        const o = JSON.parse(r.stdout);
        showVerdict('docker, changed chat template', o.verdict?.comparisons ?? []);
        expect(o).toMatchObject({
          kind: 'upgrade',
          status: 'canary-failed',
          where: 'beside',
          canary: { replica: `${NAME}-canary-0` },
          onCandidate: [],
        });
        const by = (check: string) => (o.verdict.comparisons as Comparison[]).find((c) => c.check === check);
        for (const g of ['arithmetic', 'list', 'code'])
          expect(by(`golden "${g}"`), g).toMatchObject({ ok: true, canary: 'identical' });
        expect(by('chat template (one user turn)')).toMatchObject({
          ok: false,
          canary: expect.stringMatching(/tokens, differs from token \d+/),
        });
        expect(by('chat template (a conversation)')).toMatchObject({ ok: true, canary: 'identical' });
        // as it was: the same container on the pinned image, no canary container, the pin untouched
        expect(await replicaContainer()).toEqual(before);
        expect((await ours()).map((l) => l.split(' ')[0])).toEqual([`sparkctl-${NAME}-0`]);
        expect(pinsOf().current).toEqual(pinBefore);
        // the candidate was pinned by its image ID (a docker build has no repository digest): what the canary ran
        expect(history().at(-1)).toMatchObject({
          kind: 'upgrade',
          status: 'canary-failed',
          failed: [expect.stringMatching(/^chat template \(one user turn\)/)],
          to: { image: candidate },
        });
        const probe = await sparkctl(['probe', `${NAME}-0`, '--json'], 4 * MIN);
        expect(probe.exitCode, probe.stdout).toBe(0);
      },
      17 * MIN,
    );

    it(
      'another tag of the running image starts nothing; a rebuild under another tag passes every exact check and rolls forward: the replica runs its image ID, pinned',
      async () => {
        const before = await replicaContainer();
        expect((await docker(['tag', image, ALIAS])).exitCode).toBe(0);
        let t0 = Date.now();
        const same = await upgradeRun(['--image', ALIAS]);
        took['upgrade: another tag (nothing starts)'] = Date.now() - t0;
        expect(same.exitCode, `${same.stdout}\n${same.stderr}`).toBe(0);
        expect(JSON.parse(same.stdout)).toMatchObject({ kind: 'upgrade', status: 'unchanged', exitCode: 0 });
        expect(await replicaContainer()).toEqual(before);
        expect((await ours()).map((l) => l.split(' ')[0])).toEqual([`sparkctl-${NAME}-0`]);

        const rebuilt = await build(REBUILD, rebuildContext(join(work, 'build-rebuild'), image));
        expect(rebuilt, 'another image ID, the same content').not.toBe(before.image);
        t0 = Date.now();
        const r = await upgradeRun(['--image', REBUILD]);
        took['upgrade: rebuild (canary, passes, rolled)'] = Date.now() - t0;
        expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
        const o = JSON.parse(r.stdout);
        showVerdict('docker, rebuild under another tag', o.verdict.comparisons);
        expect(o).toMatchObject({
          kind: 'upgrade',
          status: 'rolled',
          where: 'beside',
          onCandidate: [`${NAME}-0`],
          verdict: { pass: true, why: [] },
        });
        const exact = (o.verdict.comparisons as Comparison[]).filter(
          (c) => c.check.startsWith('golden') || c.check.startsWith('chat template'),
        );
        expect(exact.map((c) => c.check)).toEqual(EXACT_CHECKS);
        expect(exact.every((c) => c.canary === 'identical')).toBe(true);
        expect(o.candidate.bench).toMatchObject({ requests: 4, failed: 0 });
        expect(o.current.bench).toMatchObject({ requests: 4, failed: 0 });
        // rolled: a new container on the rebuild's image ID (docker's own inspect), pinned by that ID, the first image
        // kept for --rollback
        const after = await replicaContainer();
        expect(after).toMatchObject({ image: rebuilt, running: true });
        expect(after.id).not.toBe(before.id);
        const pins = pinsOf();
        expect(pins.current).toMatchObject({ imageId: rebuilt, imagePinned: rebuilt });
        expect(pins.previous[0]?.imageId).toBe(before.image);
        expect((await ours()).map((l) => l.split(' ')[0])).toEqual([`sparkctl-${NAME}-0`]);
        const st = JSON.parse((await sparkctl(['status', '--json'])).stdout);
        expect(st.drift, 'status: the replica runs its pin').toEqual([]);
        expect(history().at(-1)).toMatchObject({ kind: 'upgrade', status: 'rolled', failed: [] });
        const rep = await sparkctl(['report', NAME]);
        expect(rep.stdout).toMatch(/canary-failed/);
        expect(rep.stdout).toMatch(/rolled/);
      },
      20 * MIN,
    );
  });
