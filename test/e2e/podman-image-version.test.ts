// The container runtime renders vLLM's flags for the image's own vLLM, read from the real podman:
// NVIDIA's label (com.nvidia.vllm.version), else `vllm --version` run in the image (here the
// simulator's, which prints the version it plays), cached by the image's content id. Images are
// the simulator's plus a LABEL or an ENV (podman build, no RUN: offline, seconds).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, freePort, tempDir, rmrf } from '../helpers.js';
import { PODMAN, podmanIn, podmanUnavailable, buildSimImage, derivedImage } from '../podman.js';

const work = tempDir('sparkctl-podman-version-');
const { env, podman, prepare } = podmanIn(work);
const why = podmanUnavailable();
if (why) console.warn(`podman image-version suite skipped: ${why}`);
const REPO = `localhost/sparkctl-ver-${process.pid}`;
const TAG = `${REPO}:serve`;
const stateDir = join(work, 'state');
const cacheFile = join(stateDir, 'cache', 'image-vllm-versions.json');
const ids: Record<string, string> = {};

const profiles = join(work, 'profiles');
function writeProfile() {
  mkdirSync(profiles, { recursive: true });
  const p = {
    name: 'imgver',
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
    engine: { vllmVersion: 'auto', runtime: 'container', maxModelLen: 4096 },
    server: { host: '127.0.0.1', port: 8000, shutdownTimeoutSeconds: 10 },
    container: { cli: 'podman', image: TAG, cliArgs: PODMAN, ulimits: {}, hfCache: join(work, 'no-hf-cache') },
  };
  writeFileSync(join(profiles, 'imgver.yaml'), JSON.stringify(p));
}

const run = (args: string[]) =>
  cli(['serve', 'imgver', '--profiles', profiles, ...args], { stateDir, env, timeout: 120_000 });
async function dryRun() {
  const r = await run(['--dry-run', '--json']);
  expect(r.exitCode, r.stderr).toBe(0);
  const plan = JSON.parse(r.stdout);
  return {
    version: plan.vllmVersion as string,
    argv: plan.replicas[0].container.argv as string[],
    warnings: plan.warnings as string[],
  };
}
const tagAs = async (image: string) => expect((await podman(['tag', image, TAG])).exitCode).toBe(0);
const cache = () => JSON.parse(readFileSync(cacheFile, 'utf8'));
// what serve runs for TAG: its pin (pinned by default: the repository digest, or the image ID where it has none)
const PINNED = `(?:localhost/sparkctl-ver-\\d+@sha256:[a-f0-9]{64}|[a-f0-9]{64})`;

describe.skipIf(Boolean(why))("the image's vLLM version, on the real podman", { timeout: 240_000 }, () => {
  beforeAll(async () => {
    prepare();
    writeProfile();
    const sim = await buildSimImage(podman, work);
    ids.label25 = await derivedImage(podman, work, sim, ['LABEL com.nvidia.vllm.version=0.25.0'], `${REPO}:label25`);
    ids.env16 = await derivedImage(podman, work, sim, ['ENV SPARKCTL_SIM_VLLM_VERSION=0.16.0'], `${REPO}:env16`);
    ids.hostile = await derivedImage(
      podman,
      work,
      sim,
      ['LABEL com.nvidia.vllm.version=latest', 'ENV SPARKCTL_SIM_VLLM_VERSION="0.25.0; rm -rf /"'],
      `${REPO}:hostile`,
    );
    // as vLLM's own images are built: the entrypoint is `vllm serve`, the command only its arguments
    ids.ep = await derivedImage(
      podman,
      work,
      sim,
      ['LABEL com.nvidia.vllm.version=0.25.0', 'ENTRYPOINT ["/usr/local/bin/vllm", "serve"]'],
      `${REPO}:ep`,
    );
  }, 200_000);
  afterAll(async () => {
    for (const n of (
      await podman(['ps', '-a', '--filter', `label=io.sparkctl.state=${stateDir}`, '--format', '{{.Names}}'])
    ).stdout
      .split('\n')
      .filter(Boolean))
      await podman(['rm', '-f', '-t', '0', n]);
    for (const t of ['serve', 'label25', 'env16', 'hostile', 'ep']) await podman(['rmi', `${REPO}:${t}`]);
    const left = (
      await podman(['ps', '-a', '--filter', 'label=io.sparkctl.version-probe', '--format', '{{.Names}}'])
    ).stdout.trim();
    rmrf(work);
    expect(left, 'version probes left behind').toBe('');
  }, 60_000);

  it("NVIDIA's label decides the flags (0.25.0 has --shutdown-timeout); nothing is run in the image", async () => {
    await tagAs(`${REPO}:label25`);
    const p = await dryRun();
    expect(p.version).toBe('0.25.0');
    expect(p.argv.join(' ')).toMatch(/ vllm serve Qwen\/Qwen3\.5-9B .*--shutdown-timeout 10/);
    const text = await run(['--dry-run']);
    expect(text.stderr).toMatch(
      new RegExp(
        `vLLM: vLLM 0\\.25\\.0 \\(in the image ${PINNED}, read from its label; the nearest table at or below it is 0\\.25\\.0\\)`,
      ),
    );
    // pinned by default: what runs is the tag's image as it is now, by content, and that is said
    expect(text.stderr).toMatch(new RegExp(`image ${TAG}: pinned to ${PINNED}`));
  });

  it('a re-tagged image is read again (the cache is by content id): vllm --version in the image says 0.16.0, which has no --shutdown-timeout', async () => {
    await tagAs(`${REPO}:env16`);
    const p = await dryRun();
    expect(p.version).toBe('0.16.0');
    expect(p.argv).not.toContain('--shutdown-timeout');
    expect(cache()).toEqual({ [ids.env16!]: { version: '0.16.0', source: 'image' } });
    // the cache is what is read for this id: an entry edited by hand is taken, and said to come from the cache
    writeFileSync(cacheFile, JSON.stringify({ [ids.env16!]: { version: '0.28.0', source: 'image' } }));
    expect((await dryRun()).version).toBe('0.28.0');
    expect((await run(['--dry-run'])).stderr).toMatch(/vLLM 0\.28\.0 \(in the image \S+, cached by the image id;/);
    // and the tag moved back to the labelled image renders for it again
    await tagAs(`${REPO}:label25`);
    expect((await dryRun()).version).toBe('0.25.0');
  });

  it('a hostile label and a hostile --version answer: a warning with the fix, flags for the newest table, exit 0 (never 70)', async () => {
    await tagAs(`${REPO}:hostile`);
    const p = await dryRun();
    expect(p.version).toBe('0.28.0');
    const w = p.warnings.join('\n');
    expect(w).toMatch(
      /the vLLM version of the image \S+ was not read \(its com\.nvidia\.vllm\.version label is not a version \("latest"\);/,
    );
    expect(w).toMatch(/vllm --version printed no version/);
    expect(w).toMatch(/fix: pin the image's version, --set engine\.vllmVersion=X\.Y\.Z/);
    expect(Object.keys(cache())).not.toContain(ids.hostile);
  });

  it("serve with a pin that is not the image's vLLM refuses before anything runs (exit 2, both fixes)", async () => {
    await tagAs(`${REPO}:label25`);
    const r = await run(['--skip-preflight', '--set', 'engine.vllmVersion=0.28.0']);
    expect(r.exitCode, r.stderr).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`pinned to 0\\.28\\.0, but the image ${PINNED} has vLLM 0\\.25\\.0`));
    expect(r.stderr).toMatch(/--set engine\.vllmVersion=auto \(render for the image's 0\.25\.0\)/);
    expect(
      (
        await podman(['ps', '-a', '--filter', `label=io.sparkctl.state=${stateDir}`, '--format', '{{.Names}}'])
      ).stdout.trim(),
    ).toBe('');
  });

  it("an image whose entrypoint is `vllm serve` gets only vLLM's arguments, and serves with them", async () => {
    await tagAs(`${REPO}:ep`);
    const p = await dryRun();
    const after = p.argv.slice(p.argv.indexOf('--stop-timeout') + 2);
    expect(after[0]).toMatch(new RegExp(`^${PINNED}$`));
    expect(after[1]).toBe('Qwen/Qwen3.5-9B');
    expect(after).not.toContain('serve');
    // the simulator in that image, for real: ready, probe healthy, then stopped and removed
    const port = await freePort();
    const dir = join(work, 'profiles-ep');
    mkdirSync(dir, { recursive: true });
    const prof = JSON.parse(readFileSync(join(profiles, 'imgver.yaml'), 'utf8'));
    writeFileSync(
      join(dir, 'imgep.yaml'),
      JSON.stringify({
        ...prof,
        name: 'imgep',
        engine: { ...prof.engine, vllmVersion: '0.25.0' },
        server: { ...prof.server, port },
        container: { ...prof.container, network: 'host' },
      }),
    );
    const r = await cli(
      ['serve', 'imgep', '--profiles', dir, '--engine', 'sim', '--no-prewarm', '--sim-load-seconds', '0.3'],
      { stateDir, env, timeout: 120_000 },
    );
    expect(r.exitCode, r.stderr + r.stdout).toBe(0);
    expect(r.stdout + r.stderr).toMatch(/probe .*: healthy/);
    const stop = await cli(['stop', 'imgep'], { stateDir, env, timeout: 120_000 });
    expect(stop.exitCode, stop.stderr).toBe(0);
  });
});
