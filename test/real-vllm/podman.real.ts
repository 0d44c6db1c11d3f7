// The real vLLM (the CPU build the real-vLLM suites run) serving in a real podman container, as an
// operator runs their own image: the image is built here offline from the venv (test/podman.ts),
// carries no version label, and sparkctl reads the version from the image's own vLLM. Against it:
// serve, status (the container proven by id and marker), probe, prewarm, a short bench, then stop
// with a stream in flight, which vLLM drains. One vLLM start for the served replica; between bench and
// stop, `sparkctl upgrade` against it (the "current") with real images: another tag of the very image it
// runs (nothing starts), one whose chat template changed (the canary fails its comparison and everything
// stays as it was: one canary start; the same vLLM and weights in another image answer every raw golden
// prompt exactly as the replica does). A rebuild of the same image under another tag (greedy answers
// and the chat template exact, the comparison passes: one more canary start, about 90 s on CI, --no-roll)
// is opt-in, SPARKCTL_REAL_UPGRADE_REBUILD=1: what it adds to the case above is the passing verdict's
// path (compared, nothing changed), which the simulator's upgrade suites prove in every CI run
// (test/e2e/upgrade-canary-gpus.test.ts: --no-roll compared; test/e2e/upgrade.test.ts). Rolling that
// rebuild forward and rolling it back again costs four more starts (about 500 s here on a loaded host):
// opt-in, SPARKCTL_REAL_UPGRADE_ROLL=1 (which runs the rebuild case too).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execa } from 'execa';
import { readFileSync, readdirSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { BIN, ROOT, cli, freePort, tempDir, rmrf, waitFor } from '../helpers.js';
import { PODMAN, buildVllmImage, derivedImage, podmanIn, podmanUnavailable, vllmSources } from '../podman.js';
import { MODEL_DIR, oneRealVllmAtATime, realVllmUnavailable } from './real.js';
import { started, suiteClock, writeContainerProfile } from './suite-kit.js';
import {
  CANDIDATE_LABEL,
  EXACT_CHECKS,
  UPGRADE_SETTINGS,
  showVerdict,
  templatedContext,
  type Comparison,
} from './upgrade-candidates.js';

const MIN = 60_000;
const work = tempDir('sparkctl-real-podman-');
const { env: podmanEnv, podman, prepare } = podmanIn(work);
const src = vllmSources();
const why = podmanUnavailable() ?? realVllmUnavailable() ?? ('why' in src ? src.why : undefined);
if (why) console.warn(`real vLLM in podman skipped: ${why}`);

const NAME = `tiny-ctr-${process.pid}`;
const state = join(work, 'state');
const profiles = join(work, 'profiles');
let port = 0;
let image = '';
const clock = suiteClock('real vLLM in podman');
const took = clock.took;

const env = () => ({ ...podmanEnv, SPARKCTL_STATE_DIR: state });
const sparkctl = (args: string[], timeout = 2 * MIN) => cli(args, { env: env(), cwd: ROOT, timeout });
const ours = async () =>
  (await podman(['ps', '-a', '--filter', `label=io.sparkctl.state=${state}`, '--format', '{{.Names}}'])).stdout
    .split('\n')
    .filter(Boolean);
const url = () => `http://127.0.0.1:${port}`;

/** The venv's vLLM version, from its dist-info (what the image's own vLLM must say). */
function venvVllmVersion(): string {
  if ('why' in src) return '';
  const site = join(src.venv, 'lib', 'python3.11', 'site-packages');
  const d = readdirSync(site).find((n) => /^vllm-\d.*\.dist-info$/.test(n))!;
  return /^Version: (.+)$/m.exec(readFileSync(join(site, d, 'METADATA'), 'utf8'))![1]!.trim();
}

function writeProfile() {
  writeContainerProfile({
    dir: profiles,
    name: NAME,
    port,
    image,
    cli: 'podman',
    cliArgs: PODMAN,
    work,
    // The image has no C++ compiler, and this vLLM's sampler goes through torch.compile even with
    // --enforce-eager: the first sampled (temperature > 0) request kills the engine with inductor's
    // "No working C++ compiler found" (greedy ones pass). Dynamo off: the sampler runs eagerly.
    env: { TORCHDYNAMO_DISABLE: '1' },
    server: { shutdownTimeoutSeconds: 30 },
    // upgrade's comparison: greedy answers and the chat template judged, latency ratios not (see UPGRADE_SETTINGS)
    rest: { upgrade: UPGRADE_SETTINGS },
  });
}

// ---- the upgrade candidates: two more images of the same vLLM ----

const REBUILT = `localhost/sparkctl-vllm-rebuild:${process.pid}`;
const TEMPLATED = `localhost/sparkctl-vllm-template:${process.pid}`;
/** Another tag of the very image the replica runs (the same image ID) */
const ALIAS_REPO = 'localhost/sparkctl-vllm-alias';
const ALIAS = `${ALIAS_REPO}:${process.pid}`;
/** Roll the passing rebuild forward, then roll it back (four more vLLM starts): opt-in for CI's time. */
const ROLL = Boolean(process.env.SPARKCTL_REAL_UPGRADE_ROLL);
/** The passing rebuild (one canary start): opt-in for CI's time; the roll goes through it. */
const REBUILD = ROLL || Boolean(process.env.SPARKCTL_REAL_UPGRADE_REBUILD);
const imageId = async (ref: string) => (await podman(['image', 'inspect', '--format', '{{.Id}}', ref])).stdout.trim();

/** The image with a changed chat template (upgrade-candidates.ts templatedContext), built by podman. */
async function templatedImage(from: string, venv: string): Promise<string> {
  const dir = templatedContext(join(work, 'build-templated'), from, venv);
  const r = await podman(['build', '-q', '--pull=never', '-t', TEMPLATED, dir], {}, 5 * MIN);
  if (r.exitCode !== 0) throw new Error(`podman build ${TEMPLATED}: ${r.stderr}`);
  return imageId(TEMPLATED);
}

/**
 * Images of the candidate label: a killed earlier run's go before this one builds, this run's at the end (one still in
 * use stays: rmi refuses).
 */
async function removeCandidates() {
  const ids = (await podman(['images', '-q', '--filter', `label=${CANDIDATE_LABEL}`])).stdout
    .split('\n')
    .filter(Boolean);
  for (const id of new Set(ids)) await podman(['rmi', '-f', id]);
  // the alias tags (the base image's own ID: only the name goes)
  const aliases = (await podman(['images', '--format', '{{.Repository}}:{{.Tag}}', ALIAS_REPO])).stdout
    .split('\n')
    .filter((x) => x.startsWith(`${ALIAS_REPO}:`));
  for (const a of aliases) await podman(['untag', a, a]);
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
    .map((l) => JSON.parse(l) as { kind: string; status: string; failed: string[] });
/** The replica's container as podman sees it: its id and the image it runs (its own, not what the record says). */
async function replicaContainer(): Promise<{ id: string; image: string; running: boolean }> {
  const r = await podman(['inspect', '--format', '{{.Id}} {{.Image}} {{.State.Running}}', `sparkctl-${NAME}-0`]);
  const [id = '', img = '', running = ''] = r.stdout.trim().split(' ');
  return { id, image: img, running: running === 'true' };
}
const upgradeRun = (args: string[]) => sparkctl(['upgrade', NAME, '--profiles', profiles, '--json', ...args], 15 * MIN);

describe.skipIf(Boolean(why)).sequential('the real vLLM in a podman container', () => {
  oneRealVllmAtATime('real vLLM in podman');
  beforeAll(async () => {
    prepare();
    port = await freePort();
    const t0 = Date.now();
    const built = await buildVllmImage(podman, work);
    image = built.image;
    took['image (build or reuse)'] = Date.now() - t0;
    await removeCandidates();
    if (built.builtMs)
      console.info(
        `real vLLM image ${image} built in ${(built.builtMs / 1000).toFixed(0)} s, ${((built.bytes ?? 0) / 1e9).toFixed(2)} GB`,
      );
    writeProfile();
  }, 12 * MIN);
  afterAll(async () => {
    await sparkctl(['stop', '--all', '--grace', '20'], 2 * MIN);
    // whatever a failed case left: ours by the state label
    for (const n of await ours()) await podman(['rm', '-f', '-t', '0', n]);
    const left = await ours();
    await removeCandidates();
    rmrf(work);
    console.info(clock.summary());
    expect(left, 'containers left by the suite').toEqual([]);
  }, 3 * MIN);

  it(
    "the plan renders for the image's own vLLM, read in the image (no label): the venv's version; no GPU device",
    async () => {
      const r = await sparkctl(['serve', NAME, '--profiles', profiles, '--dry-run', '--json'], 3 * MIN);
      expect(r.exitCode, r.stderr).toBe(0);
      const plan = JSON.parse(r.stdout);
      expect(plan.vllmVersion).toBe(venvVllmVersion());
      expect(plan.vllmVersion).toMatch(/^0\.27\.2/);
      const argv: string[] = plan.replicas[0].container.argv;
      expect(argv.some((a) => a.includes('nvidia.com/gpu') || a === '--gpus')).toBe(false);
      expect(argv.join(' ')).toContain(`--volume ${MODEL_DIR}:${MODEL_DIR}:ro`);
      expect(argv).toEqual(expect.arrayContaining(['--shutdown-timeout', '30']));
    },
    4 * MIN,
  );

  it(
    'serve: ready in the container, probe healthy; status proves it by id and marker',
    async () => {
      const r = await started(clock, 'serve to ready', () =>
        sparkctl(['serve', NAME, '--profiles', profiles, '--no-prewarm'], 10 * MIN),
      );
      expect(r.stderr).toMatch(
        /preflight \(container\): container\.cli pass, container\.image pass, container\.oci-runtime pass/,
      );
      expect(r.stdout + r.stderr).toMatch(/probe .*: healthy/);
      const st = await sparkctl(['status', '--json']);
      const inst = JSON.parse(st.stdout).instances.find((i: { name: string }) => i.name === `${NAME}-0`);
      expect(inst, st.stdout).toMatchObject({ alive: true, container: { cli: 'podman', name: `sparkctl-${NAME}-0` } });
      expect(inst.container.id).toMatch(/^[a-f0-9]{64}$/);
      const labels = JSON.parse(
        (await podman(['inspect', '--format', '{{json .Config.Labels}}', inst.container.id])).stdout,
      );
      expect(labels['io.sparkctl.instance']).toBe(inst.container.marker);
      // the server says its version without the wheel's local part (.cpu) that its metadata carries
      const version = (await (await fetch(`${url()}/version`, { signal: AbortSignal.timeout(30_000) })).json()) as {
        version: string;
      };
      expect(version.version).toMatch(/^0\.27\.2/);
      expect(venvVllmVersion().startsWith(version.version)).toBe(true);
    },
    11 * MIN,
  );

  it(
    'probe, prewarm and a short bench against it',
    async () => {
      const probe = await sparkctl(['probe', `${NAME}-0`, '--json'], 4 * MIN);
      expect(probe.exitCode, probe.stdout + probe.stderr).toBe(0);
      // whether latency settles in 2 rounds depends on the host's load: what must hold is that every request was served
      const prewarm = await sparkctl(['prewarm', `${NAME}-0`, '--json', '--rounds', '2'], 5 * MIN);
      const pw = JSON.parse(prewarm.stdout).results[0];
      expect(pw.exactLengths, prewarm.stdout).toBe(true);
      expect(pw.requests.length).toBeGreaterThanOrEqual(6);
      expect(pw.requests.every((q: { ok: boolean }) => q.ok)).toBe(true);
      const bench = await sparkctl(
        [
          'bench',
          `${NAME}-0`,
          '--json',
          '--requests',
          '4',
          '--warmup',
          '0',
          '--concurrency',
          '2',
          '--input-len',
          '48',
          '--output-len',
          '8',
          '--scrape-interval',
          '0',
        ],
        5 * MIN,
      );
      // exit 1 (run marked invalid, client-bound) is bench's self-check on a starved 2-core host: the counts must hold
      // either way
      expect([0, 1], bench.stderr).toContain(bench.exitCode);
      expect(JSON.parse(bench.stdout).result).toMatchObject({
        completed: 4,
        failed: 0,
        total_input_tokens: 4 * 48,
        total_output_tokens: 4 * 8,
      });
    },
    12 * MIN,
  );

  it(
    'upgrade to an image whose chat template changed: the canary beside fails its comparison (the template renders another prompt), everything stays as it was',
    async () => {
      const before = await replicaContainer();
      const pinBefore = pinsOf().current;
      expect(before.running).toBe(true);
      expect(pinBefore.imageId, 'serve pinned the image it ran').toBe(before.image);
      // first, another tag of the very image it runs: nothing would change, nothing starts
      expect((await podman(['tag', image, ALIAS])).exitCode).toBe(0);
      const same = await upgradeRun(['--image', ALIAS]);
      expect(same.exitCode, `${same.stdout}\n${same.stderr}`).toBe(0);
      expect(JSON.parse(same.stdout)).toMatchObject({ kind: 'upgrade', status: 'unchanged', exitCode: 0 });
      expect(await replicaContainer()).toEqual(before);
      const t0 = Date.now();
      const candidate = await templatedImage(image, 'why' in src ? '' : src.venv);
      took['candidate images (build)'] = Date.now() - t0;
      const t1 = Date.now();
      const r = await upgradeRun(['--image', TEMPLATED]);
      took['upgrade: changed template (canary, fails)'] = Date.now() - t1;
      expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(1);
      const o = JSON.parse(r.stdout);
      showVerdict(
        `changed chat template, ${took['upgrade: changed template (canary, fails)']} ms`,
        o.verdict?.comparisons ?? [],
      );
      expect(o).toMatchObject({
        kind: 'upgrade',
        status: 'canary-failed',
        where: 'beside',
        from: o.to,
        canary: { replica: `${NAME}-canary-0` },
        onCandidate: [],
      });
      const by = (check: string) => (o.verdict.comparisons as Comparison[]).find((c) => c.check === check);
      // the same vLLM and weights: every raw completion answers exactly as before (these alone would have passed it)
      for (const g of ['arithmetic', 'list', 'code'])
        expect(by(`golden "${g}"`), g).toMatchObject({ ok: true, canary: 'identical' });
      // the template adds a system turn where there is none: the one-turn rendering differs, the conversation with its
      // own system turn does not
      expect(by('chat template (one user turn)')).toMatchObject({
        ok: false,
        canary: expect.stringMatching(/tokens, differs from token \d+/),
      });
      expect(by('chat template (a conversation)')).toMatchObject({ ok: true, canary: 'identical' });
      expect(o.verdict.why.join('\n')).toMatch(/^chat template \(one user turn\)/m);
      // the chat golden prompt's greedy answer goes through the changed template: shown whichever way it came out
      console.info(`golden "chat" on the changed template: ${JSON.stringify(by('golden "chat"'))}`);
      // as it was: the same container, still running the pinned image; no canary left; the pin untouched
      expect(await replicaContainer()).toEqual(before);
      expect(await ours()).toEqual([`sparkctl-${NAME}-0`]);
      expect(pinsOf().current).toEqual(pinBefore);
      expect(candidate).not.toBe(before.image);
      expect(history().at(-1)).toMatchObject({
        kind: 'upgrade',
        status: 'canary-failed',
        failed: [expect.stringMatching(/^chat template \(one user turn\)/)],
      });
      const probe = await sparkctl(['probe', `${NAME}-0`, '--json'], 4 * MIN);
      expect(probe.exitCode, probe.stdout).toBe(0);
      const st = JSON.parse((await sparkctl(['status', '--json'])).stdout);
      expect(st.drift, 'status: the replica runs its pin').toEqual([]);
      const rep = await sparkctl(['report', NAME]);
      expect(rep.stdout).toMatch(/upgrade/);
      expect(rep.stdout).toMatch(/canary-failed/);
    },
    16 * MIN,
  );

  it.skipIf(!REBUILD)(
    `upgrade to a rebuild of the same image under another tag (SPARKCTL_REAL_UPGRADE_REBUILD=1): greedy answers and the chat template exact; ${ROLL ? 'rolled forward: the replica runs the new image, pinned' : '--no-roll: compared, nothing changed (SPARKCTL_REAL_UPGRADE_ROLL=1 rolls it)'}`,
    async () => {
      const before = await replicaContainer();
      const rebuilt = await derivedImage(podman, work, image, [`LABEL ${CANDIDATE_LABEL}=rebuild`], REBUILT);
      expect(rebuilt, 'another image (its own ID), the same content').not.toBe(before.image);
      const t0 = Date.now();
      const r = await upgradeRun(['--image', REBUILT, ...(ROLL ? [] : ['--no-roll'])]);
      const label = ROLL ? 'upgrade: rebuild (canary, passes, rolled)' : 'upgrade: rebuild (canary, passes, --no-roll)';
      took[label] = Date.now() - t0;
      expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
      const o = JSON.parse(r.stdout);
      showVerdict(`rebuild under another tag, ${took[label]} ms`, o.verdict.comparisons);
      expect(o).toMatchObject({
        kind: 'upgrade',
        status: ROLL ? 'rolled' : 'compared',
        where: 'beside',
        onCandidate: ROLL ? [`${NAME}-0`] : [],
        verdict: { pass: true, why: [] },
      });
      const exact = (o.verdict.comparisons as Comparison[]).filter(
        (c) => c.check.startsWith('golden') || c.check.startsWith('chat template'),
      );
      expect(exact.map((c) => c.check)).toEqual(EXACT_CHECKS);
      expect(exact.every((c) => c.canary === 'identical')).toBe(true);
      // the bench measured on both sides (numbers, not judged tightly here: see the profile)
      expect(o.candidate.bench).toMatchObject({ requests: 4, failed: 0 });
      expect(o.current.bench).toMatchObject({ requests: 4, failed: 0 });
      expect(await ours()).toEqual([`sparkctl-${NAME}-0`]);
      const pins = pinsOf();
      if (ROLL) {
        const after = await replicaContainer();
        expect(after).toMatchObject({ image: rebuilt, running: true });
        expect(after.id).not.toBe(before.id);
        // podman gives a locally built image a repository digest: the pin is that (else its image ID)
        expect(pins.current.imageId).toBe(rebuilt);
        expect(pins.current.imagePinned).toMatch(
          new RegExp(`^(localhost/sparkctl-vllm-rebuild@sha256:[a-f0-9]{64}|${rebuilt})$`),
        );
        expect(pins.previous[0]?.imageId).toBe(before.image);
      } else {
        // compared only: the same container on the same image, the pin as it was
        expect(await replicaContainer()).toEqual(before);
        expect(pins.current.imageId).toBe(before.image);
      }
      const st = JSON.parse((await sparkctl(['status', '--json'])).stdout);
      expect(st.drift, 'status: the replica runs its pin').toEqual([]);
      expect(history().at(-1)).toMatchObject({ kind: 'upgrade', status: ROLL ? 'rolled' : 'compared', failed: [] });
      const rep = await sparkctl(['report', NAME]);
      expect(rep.stdout).toMatch(/upgrade/);
      expect(rep.stdout).toMatch(/canary-failed/);
    },
    16 * MIN,
  );

  it.skipIf(!ROLL)(
    '--rollback (SPARKCTL_REAL_UPGRADE_ROLL=1): the canary on the image before, compared, rolled back; the replica runs the first image',
    async () => {
      const pinned = pinsOf();
      const t0 = Date.now();
      const r = await upgradeRun(['--rollback']);
      took['upgrade --rollback (canary, rolled)'] = Date.now() - t0;
      expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
      const o = JSON.parse(r.stdout);
      showVerdict(`rollback, ${took['upgrade --rollback (canary, rolled)']} ms`, o.verdict.comparisons);
      expect(o).toMatchObject({ kind: 'upgrade', action: 'rollback', status: 'rolled' });
      expect(await replicaContainer()).toMatchObject({ image: pinned.previous[0]!.imageId, running: true });
      expect(pinsOf().current.imageId).toBe(pinned.previous[0]!.imageId);
      expect(history().at(-1)).toMatchObject({ kind: 'rollback', status: 'rolled' });
    },
    16 * MIN,
  );

  it(
    'stop with a stream in flight: vLLM drains it (finish_reason length), stop says drained; the container is gone',
    async (ctx) => {
      type Stream = { firstData?: number; end?: number; text: string };
      const streams: Stream[] = [];
      let termAt: number | undefined;
      const startStream = () => {
        const s: Stream = { text: '' };
        streams.push(s);
        const req = request(`${url()}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
        });
        req.on('response', (res) => {
          res.on('data', (d: Buffer) => {
            s.firstData ??= Date.now();
            s.text += d.toString();
          });
          res.on('close', () => (s.end = Date.now()));
        });
        req.on('error', () => (s.end = Date.now()));
        // lengths that differ, so the streams in flight end at different times and a new one is always
        // mid-generation when the runtime's SIGTERM lands (two of one length ended together, and a signal in
        // the gap between them and the next found vLLM with nothing in flight)
        req.end(
          JSON.stringify({
            model: 'tiny-qwen3',
            prompt: 'hello',
            max_tokens: [480, 300, 390][streams.length % 3],
            ignore_eos: true,
            stream: true,
          }),
        );
      };
      startStream();
      expect(await waitFor(() => streams[0]!.firstData !== undefined, 2 * MIN, 20)).toBe(true);
      // Three at a time, a new one as soon as one ends, until stop returns: whenever the runtime's SIGTERM lands
      // (seconds after stop says so, on a loaded host), streams are running (one took about 10 s on the hosts this was
      // written on). Those vLLM accepted must all finish; those sent after the signal are refused, never cut.
      let stopped = false;
      const refused = () => streams.some((s) => s.end !== undefined && !s.text.includes('"choices"'));
      const feeder = setInterval(
        () => !stopped && !refused() && streams.filter((s) => s.end === undefined).length < 3 && startStream(),
        100,
      );
      const t0 = Date.now();
      const run = execa(process.execPath, [BIN, 'stop', NAME, '--json'], {
        reject: false,
        cwd: ROOT,
        timeout: 3 * MIN,
        env: { NO_COLOR: '1', ...env() },
      });
      run.stderr?.on('data', (d: Buffer) => {
        if (termAt === undefined && new RegExp(`${NAME}-0: SIGTERM`).test(d.toString())) termAt = Date.now();
      });
      const r = await run;
      stopped = true;
      clearInterval(feeder);
      took['stop (drain)'] = Date.now() - t0;
      expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
      expect(termAt, String(r.stderr)).toBeDefined();
      expect(await waitFor(() => streams.every((s) => s.end !== undefined), MIN, 50)).toBe(true);
      const finish = (s: Stream) => [...s.text.matchAll(/"finish_reason":"(\w+)"/g)].map((m) => m[1]).at(-1);
      // served: vLLM generated for it (a chunk with choices); the others were refused once the drain began
      const served = streams.filter((s) => s.text.includes('"choices"'));
      const inFlight = served.filter((s) => s.end! > termAt!);
      expect(served.map(finish), 'every stream vLLM served ends with length: none cut off').toEqual(
        served.map(() => 'length'),
      );
      expect(served.every((s) => s.text.includes('data: [DONE]'))).toBe(true);
      const o = JSON.parse(String(r.stdout)).stopped[0];
      expect(o, String(r.stdout)).toMatchObject({
        result: 'stopped',
        requests: { kind: 'drained' },
        portFree: true,
        removed: true,
      });
      expect(o.evidence).toEqual(expect.arrayContaining([expect.stringContaining('mode=drain timeout=30s')]));
      console.info(
        `container drain: ${streams.length} stream(s) sent, ${served.length} served, ${inFlight.length} finished after stop signalled; vLLM counted ${o.requests.count}; stop took ${took['stop (drain)']} ms (${o.ms} ms SIGTERM to gone)`,
      );
      expect(await ours()).toEqual([]);
      const st = JSON.parse((await sparkctl(['status', '--json'])).stdout);
      expect(st.instances.filter((i: { name: string }) => i.name.startsWith(NAME))).toEqual([]);
      // The drain itself is shown only when vLLM had a request in flight as the runtime's SIGTERM landed
      // (its own /metrics, read by stop) and a served stream ended after it. Where this CPU had finished
      // them all first, the run proves stop and the cleanup but not the drain: said so, as a skip.
      if (!inFlight.length || !o.requests.count)
        ctx.skip(
          `nothing was in flight when the runtime's SIGTERM landed (${inFlight.length} served stream(s) ended after it, vLLM counted ${o.requests.count}): the drain is not shown by this run`,
        );
    },
    5 * MIN,
  );
});
