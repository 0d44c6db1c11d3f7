// A tag moves; the pin does not. The real podman (as the container suites run it: runc, root): an
// image imported under a tag is pinned by resolveImagePin to its repository digest; the tag is then
// moved to another image, and the pin still names the first image, while the tag names the second.
import { describe, it, expect, afterAll } from 'vitest';
import { writeFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { execa } from 'execa';
import { podmanUnavailable, podmanSuite, derivedImage, PODMAN } from '../podman.js';
import { resolveImagePin } from '../../src/engine/pins.js';
import { ofCli } from '../../src/engine/runtime/index.js';
import { tempDir, rmrf, cli, freePort } from '../helpers.js';
import { UsageError } from '../../src/errors.js';
import { registryUnavailable, startRegistry } from '../registry.js';

const why = podmanUnavailable();
if (why) console.warn(`upgrade pins (podman) skipped: ${why}`);

const work = tempDir('sparkctl-pin-podman-');
const repo = `localhost/sparkctl-pin-${randomBytes(4).toString('hex')}`;
// podman's runtime reads the images (Runtime.images), as serve and upgrade ask it
const images = ofCli('podman').images!;
const podman = (args: string[]) => execa('podman', [...PODMAN, ...args], { reject: false, timeout: 60_000 });

/** An image of one file, imported under TAG: its content differs by `text`. */
async function imageWith(text: string, tag: string): Promise<string> {
  const dir = join(work, text);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'f'), text);
  await execa('tar', ['-C', dir, '-cf', `${dir}.tar`, 'f']);
  const r = await podman(['import', `${dir}.tar`, tag]);
  expect(r.exitCode, r.stderr).toBe(0);
  const id = await podman(['image', 'inspect', '--format', '{{.Id}}', tag]);
  return id.stdout.trim().replace(/^sha256:/, '');
}

afterAll(async () => {
  if (!why) {
    const ls = await podman(['images', '--format', '{{.ID}}', '--filter', `reference=${repo}`]);
    for (const id of new Set(ls.stdout.split('\n').filter(Boolean))) await podman(['rmi', '-f', id]);
  }
  rmrf(work);
});

describe.skipIf(why !== undefined)('upgrade pins on the real podman', () => {
  it('pins a tag to its digest; moving the tag later does not move the pin', async () => {
    const firstId = await imageWith('first', `${repo}:latest`);
    const pin = await resolveImagePin(images, PODMAN, `${repo}:latest`);
    expect(pin.how).toBe('digest');
    expect(pin.pinned).toMatch(new RegExp(`^${repo}@sha256:[a-f0-9]{64}$`));
    // the tag moves to another image
    const secondId = await imageWith('second', `${repo}:latest`);
    expect(secondId).not.toBe(firstId);
    const byPin = await podman(['image', 'inspect', '--format', '{{.Id}}', pin.pinned]);
    expect(byPin.stdout.trim().replace(/^sha256:/, '')).toBe(firstId);
    const again = await resolveImagePin(images, PODMAN, `${repo}:latest`);
    expect(again.pinned).not.toBe(pin.pinned);
  }, 120_000);

  it('an image that is not here is bad input naming the pull', async () => {
    const e = await resolveImagePin(images, PODMAN, `${repo}:absent`).catch((x) => x);
    expect(e).toBeInstanceOf(UsageError);
    expect(e.message).toMatch(/image not known/);
    expect(e.details.join('\n')).toMatch(/podman pull .*:absent/);
  }, 60_000);
});

// Pinned by default: serve pins the image the profile names (its repository digest) the first time it
// serves it; the tag is then moved to another image (podman build, a LABEL apart), and a restart keeps
// the pinned image, proven by the running container's own image ID, and says the tag moved; --repin
// takes the tag as it is now, and keeps the pin before it for a rollback.
const suite = podmanSuite('sparkctl-pin-serve-');
const serveRepo = `localhost/sparkctl-pinserve-${randomBytes(4).toString('hex')}`;
const regWhy = registryUnavailable();
if (regWhy && !why) console.warn(`upgrade pulls the candidate from a registry: skipped (${regWhy})`);
/** the candidate's repository in the suite's registry (host:port set once it runs) */
let remoteRepo = '';

describe.skipIf(why !== undefined)(
  'serve pins the image by default (real podman, the simulator image)',
  { timeout: 480_000 },
  () => {
    suite.hooks();
    afterAll(async () => {
      for (const ref of [serveRepo, remoteRepo].filter(Boolean)) {
        const ls = await suite.podman(['images', '--format', '{{.ID}}', '--filter', `reference=${ref}`]);
        for (const id of new Set(ls.stdout.split('\n').filter(Boolean))) await suite.podman(['rmi', '-f', id]);
      }
    });
    const run = (args: string[]) => cli(args, { stateDir: suite.stateDir, env: suite.env, timeout: 120_000 });
    /** the image ID the running replica's container was created from (podman's own answer) */
    const runningImage = async (name: string) => {
      const st = JSON.parse((await run(['status', '--json'])).stdout);
      const inst = st.instances.find((i: { name: string }) => i.name === `${name}-0`);
      expect(inst?.alive, JSON.stringify(st)).toBe(true);
      return (await suite.podman(['inspect', '--format', '{{.Image}}', inst.container.id])).stdout
        .trim()
        .replace(/^sha256:/, '');
    };

    it('first serve pins the tag; the tag moves; restart keeps the pinned image and says so; --repin takes the new one', async () => {
      const tag = `${serveRepo}:prod`;
      const idA = (
        await derivedImage(suite.podman, suite.work, suite.image(), ['LABEL io.sparkctl.test.side=a'], tag)
      ).replace(/^sha256:/, '');
      const port = await freePort();
      const name = `pin-${process.pid}`;
      const dir = join(suite.work, 'profiles');
      mkdirSync(dir, { recursive: true });
      writeFileSync(
        join(dir, `${name}.yaml`),
        JSON.stringify({
          name,
          model: {
            id: 'Qwen/Qwen3.5-9B',
            parameters: 9e9,
            layers: 32,
            kvHeads: 4,
            headDim: 256,
            attentionHeads: 16,
            hiddenSize: 4096,
            weightBytesPerParam: 2,
            maxContext: 32768,
          },
          engine: { vllmVersion: '0.25.0', runtime: 'container', maxModelLen: 4096 },
          server: { host: '127.0.0.1', port, shutdownTimeoutSeconds: 5 },
          container: {
            cli: 'podman',
            image: tag,
            cliArgs: PODMAN,
            network: 'host',
            ulimits: {},
            hfCache: join(suite.work, 'no-hf-cache'),
          },
          // the operator's choice: the pin also in NAME.lock.json beside this file
          pinnedIn: 'lockfile',
        }),
      );
      const serve = (extra: string[] = []) =>
        run([
          'serve',
          name,
          '--profiles',
          dir,
          '--engine',
          'sim',
          '--no-prewarm',
          '--sim-load-seconds',
          '0.3',
          ...extra,
        ]);
      const pins = () => JSON.parse(readFileSync(join(suite.stateDir, 'pins', `${name}.json`), 'utf8'));
      const lockPath = join(dir, `${name}.lock.json`);
      const lock = () => JSON.parse(readFileSync(lockPath, 'utf8'));

      const first = await serve();
      expect(first.exitCode, first.stderr + first.stdout).toBe(0);
      expect(first.stderr).toMatch(
        new RegExp(`image ${tag}: pinned to ${serveRepo}@sha256:[a-f0-9]{64} \\(its repository digest\\)`),
      );
      expect(pins().current).toMatchObject({
        image: tag,
        imageId: idA,
        imagePinned: expect.stringMatching(/@sha256:/),
      });
      expect(await runningImage(name)).toBe(idA);
      // pinnedIn: lockfile: the same pin beside the profile, saying who writes it
      expect(lock()).toMatchObject({
        generatedBy: expect.stringMatching(/^sparkctl: /),
        current: pins().current,
        previous: [],
      });

      // the tag moves to another image
      const idB = (
        await derivedImage(suite.podman, suite.work, suite.image(), ['LABEL io.sparkctl.test.side=b'], tag)
      ).replace(/^sha256:/, '');
      expect(idB).not.toBe(idA);
      const dry = await run(['serve', name, '--profiles', dir, '--engine', 'sim', '--dry-run', '--json']);
      const plan = JSON.parse(dry.stdout);
      expect(plan.replicas[0].container.argv).toContain(pins().current.imagePinned);
      expect(plan.replicas[0].container.argv).not.toContain(tag);
      expect(plan.warnings.join('\n')).toMatch(
        new RegExp(`the tag ${tag} moved: it now names image ${idB.slice(0, 12)}, not the pinned ${idA.slice(0, 12)}`),
      );

      const again = await run(['restart', name]);
      expect(again.exitCode, again.stderr + again.stdout).toBe(0);
      expect(again.stderr).toMatch(/the tag \S+:prod moved/);
      expect(await runningImage(name)).toBe(idA);
      expect(pins().current.imageId).toBe(idA);

      // --repin: the tag as it is now; the pin before it is kept (upgrade --rollback returns to it)
      const stopped = await run(['stop', name]);
      expect(stopped.exitCode, stopped.stderr + stopped.stdout).toBe(0);
      const repin = await serve(['--repin']);
      expect(repin.exitCode, repin.stderr + repin.stdout).toBe(0);
      expect(repin.stderr).toMatch(/pinned anew \(--repin\)/);
      expect(await runningImage(name)).toBe(idB);
      expect(pins().current.imageId).toBe(idB);
      expect(pins().previous[0].imageId).toBe(idA);
      expect(lock().current.imageId).toBe(idB);
      expect(lock().previous[0].imageId).toBe(idA);

      // a lock file copied here from another host (not written by sparkctl here), pinning A while this
      // host's state says B: the lock file's pin is what would run, said with the fix; an upgrade that would
      // write over it is refused before anything starts
      writeFileSync(lockPath, JSON.stringify({ ...lock(), current: lock().previous[0], previous: [] }, null, 2));
      const copied = JSON.parse(
        (await run(['serve', name, '--profiles', dir, '--engine', 'sim', '--dry-run', '--json'])).stdout,
      );
      expect(copied.warnings.join('\n')).toMatch(
        /lock\.json pins \S+@sha256:[a-f0-9]{64}, vLLM .*; the state folder \(\S+\) pins .*: the lock file's pin runs\. Fix: /,
      );
      expect(copied.replicas[0].container.argv).toContain(pins().previous[0].imagePinned);
      const refused = await run([
        'upgrade',
        name,
        '--profiles',
        dir,
        '--image',
        `${serveRepo}:prod`,
        '--candidate-set',
        'engine.maxModelLen=2048',
      ]);
      expect(refused.exitCode, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(
        /lock\.json was not written by sparkctl on this host .*: sparkctl does not write over it/,
      );
      expect(await runningImage(name)).toBe(idB);
      // the fix: remove it; until the next pin writes it again, the state folder's pin runs (said)
      rmSync(lockPath);
      const notYet = JSON.parse(
        (await run(['serve', name, '--profiles', dir, '--engine', 'sim', '--dry-run', '--json'])).stdout,
      );
      expect(notYet.warnings.join('\n')).toMatch(
        /lock\.json is not written yet \(pinnedIn: lockfile\): the state folder's pin runs/,
      );

      if (!regWhy) await upgradePulls(name, dir, idB, pins, runningImage, lockPath);
      expect((await run(['stop', name])).exitCode).toBe(0);
    });
  },
);

/**
 * upgrade pulls a candidate that is not here (the issue: "resolves and pulls the candidate"): a real
 * registry (test/registry.ts) holds image C, which this host does not; the replica runs B (pinned).
 * --dry-run says it would pull and pulls nothing; --no-pull refuses naming the pull (exit 2); a tag
 * the registry lacks is exit 2, a registry nothing listens at exit 3; then the upgrade pulls C with
 * podman's own pull (its progress on stderr), pins it to the registry's digest, runs the canary and
 * rolls: the replica's container runs C (podman's own inspect).
 */
async function upgradePulls(
  name: string,
  dir: string,
  idB: string,
  pins: () => { current: { imagePinned: string; imageId: string }; previous: Array<{ imageId: string }> },
  runningImage: (n: string) => Promise<string>,
  lockPath: string,
) {
  const reg = await startRegistry(suite.work);
  try {
    const podmanR = (args: string[]) => suite.podman(args, reg.env);
    const up = (args: string[]) =>
      cli(['upgrade', name, '--profiles', dir, ...args], {
        stateDir: suite.stateDir,
        env: { ...suite.env, ...reg.env },
        timeout: 240_000,
      });
    remoteRepo = `${reg.addr}/sparkctl-up/sim`;
    const cand = `${remoteRepo}:cand`;
    const idC = (
      await derivedImage(suite.podman, suite.work, suite.image(), ['LABEL io.sparkctl.test.side=c'], cand)
    ).replace(/^sha256:/, '');
    const push = await podmanR(['push', cand]);
    expect(push.exitCode, push.stderr).toBe(0);
    expect((await podmanR(['rmi', '-f', idC])).exitCode).toBe(0);
    const isHere = async () => (await podmanR(['image', 'exists', cand])).exitCode === 0;
    expect(await isHere()).toBe(false);

    const dry = await up(['--image', cand, '--dry-run']);
    expect(dry.exitCode, dry.stderr + dry.stdout).toBe(0);
    expect(dry.stdout).toContain(`image: ${cand} is not here: the upgrade would pull it (podman pull ${cand})`);
    expect(await isHere()).toBe(false);

    const noPull = await up(['--image', cand, '--no-pull']);
    expect(noPull.exitCode, noPull.stderr).toBe(2);
    expect(noPull.stderr).toMatch(new RegExp(`--image ${cand.replace(/[.]/g, '\\.')}: not here`));
    expect(noPull.stderr).toContain(`podman pull ${cand}, then upgrade again`);

    const unknown = await up(['--image', `${remoteRepo}:nope`]);
    expect(unknown.exitCode, unknown.stderr).toBe(2);
    expect(unknown.stderr).toMatch(/has no such image \(podman pull: Error: .*manifest unknown/);

    const closed = `127.0.0.1:${await freePort()}/sparkctl-up/sim:cand`;
    const down = await up(['--image', closed]);
    expect(down.exitCode, down.stderr).toBe(3);
    expect(down.stderr).toMatch(/could not be pulled from 127\.0\.0\.1:\d+ \(podman pull: .*connection refused/);
    expect(pins().current.imageId).toBe(idB);
    expect(await runningImage(name)).toBe(idB);

    // the pull for real; stopped right after it (and the pin) by a refusal of upgrade's own flags, so CI
    // pays no canary (the full roll: ~60 s here, SPARKCTL_E2E_UPGRADE_PULL_ROLL=1)
    const pulled = await up(['--image', cand, '--canary-gpus', '1,2']);
    expect(pulled.exitCode, pulled.stderr + pulled.stdout).toBe(2);
    expect(pulled.stderr).toContain(`${cand}: not here; podman pull ${cand} (deadline 30m00s)`);
    expect(pulled.stderr).toMatch(/ {2}Copying (blob|config) /);
    expect(pulled.stderr).toMatch(/--canary-gpus: 1,2 is 2 GPU\(s\); one replica of \S+ uses 1/);
    expect(await isHere()).toBe(true);
    expect(
      (await podmanR(['image', 'inspect', '--format', '{{.Id}}', cand])).stdout.trim().replace(/^sha256:/, ''),
    ).toBe(idC);
    // here now: the plan pins it to the registry's digest
    const plan = await up(['--image', cand, '--dry-run', '--json']);
    expect(plan.exitCode, plan.stderr).toBe(0);
    const digest = new RegExp(`^${remoteRepo.replace(/[.]/g, '\\.')}@sha256:[a-f0-9]{64}$`);
    expect(JSON.parse(plan.stdout)).toMatchObject({
      kind: 'upgrade-plan',
      image: expect.stringMatching(digest),
      pull: { state: 'here' },
    });
    // the candidate plays another version than the profile's 0.25.0 (the image's vllm says 0.17.0):
    // each side's own `vllm serve --help=all` asked inside its image by real podman
    // (the current's table was read by the first upgrade of this case that got that far: cached since)
    expect(JSON.parse(plan.stdout).flags.current).toMatchObject({ source: 'cache', findings: [] });
    expect(JSON.parse(plan.stdout).flags.candidate).toMatchObject({ source: 'read', findings: [] });
    expect(pins().current.imageId).toBe(idB);
    expect(await runningImage(name)).toBe(idB);
    // an image of another vLLM version (the simulator image playing 0.12.0): each side's own
    // `vllm serve --help=all` asked inside its image by real podman (no network, never pulling)
    const older = `localhost/sparkctl-up-older:${process.pid}`;
    await derivedImage(suite.podman, suite.work, suite.image(), ['ENV SPARKCTL_SIM_VLLM_VERSION=0.12.0'], older);
    const olderPlan = await up(['--image', older, '--dry-run', '--json']);
    expect(olderPlan.exitCode, olderPlan.stderr).toBe(0);
    const fl = JSON.parse(olderPlan.stdout).flags;
    expect(fl.current).toMatchObject({ source: 'cache', findings: [] }); // not paid again
    expect(fl.candidate).toMatchObject({ source: 'read', findings: [] });
    expect(fl.candidate.what).toMatch(
      /^podman .*run --rm --network=none --pull=never --label io\.sparkctl\.version-probe=[a-f0-9]+ --entrypoint vllm [a-f0-9]{64} serve --help=all$/,
    );
    expect(fl.defaultsRelied).toContainEqual({ flag: '--api-server-count', from: 'None', to: '1' });
    // run --rm: podman's conmon removes the probe after `run` returned; on a loaded host that took a moment in CI
    const probesLeft = async () =>
      (await suite.podman(['ps', '-a', '-q', '--filter', 'label=io.sparkctl.version-probe'])).stdout.trim();
    for (let i = 0; i < 40 && (await probesLeft()); i++) await new Promise((r) => setTimeout(r, 500));
    expect(await probesLeft()).toBe('');
    if (process.env.SPARKCTL_E2E_UPGRADE_PULL_ROLL !== '1') return;

    const t0 = Date.now();
    const rolled = await up([
      '--image',
      cand,
      '--canary-gpus',
      '1',
      '--set',
      'upgrade.ttftRatio=4',
      '--set',
      'upgrade.tpotRatio=4',
      '--set',
      'upgrade.throughputRatio=0.25',
    ]);
    console.log(`upgrade to the pulled candidate (canary, compare, roll): ${Date.now() - t0} ms`);
    expect(rolled.exitCode, rolled.stderr + rolled.stdout).toBe(0);
    expect(pins().current.imagePinned).toMatch(digest);
    expect(pins().current.imageId).toBe(idC);
    expect(pins().previous[0].imageId).toBe(idB);
    expect(await runningImage(name)).toBe(idC);
    // pinnedIn: lockfile: the roll wrote the lock file again, the same pin as the state folder's
    expect(JSON.parse(readFileSync(lockPath, 'utf8')).current).toEqual(pins().current);
  } finally {
    await reg.stop();
  }
}
