// The real vLLM (the CPU build the real-vLLM suites run) serving in a real podman container, as an
// operator runs their own image: the image is built here offline from the venv (test/podman.ts),
// carries no version label, and sparkctl reads the version from the image's own vLLM. Against it:
// serve, status (the container proven by id and marker), probe, prewarm, a short bench, then stop
// with a stream in flight, which vLLM drains. One vLLM start for the whole file.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execa } from 'execa';
import { readFileSync, readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { BIN, ROOT, cli, freePort, tempDir, rmrf, waitFor } from '../helpers.js';
import { PODMAN, buildVllmImage, podmanIn, podmanUnavailable, vllmSources } from '../podman.js';
import { MODEL_DIR, PROFILES, oneRealVllmAtATime, realVllmUnavailable } from './real.js';

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
const started = Date.now();
const took: Record<string, number> = {};

const env = () => ({ ...podmanEnv, SPARKCTL_STATE_DIR: state });
const sparkctl = (args: string[], timeout = 2 * MIN) => cli(args, { env: env(), cwd: ROOT, timeout });
const ours = async () => (await podman(['ps', '-a', '--filter', `label=io.sparkctl.state=${state}`, '--format', '{{.Names}}'])).stdout.split('\n').filter(Boolean);
const url = () => `http://127.0.0.1:${port}`;

/** The venv's vLLM version, from its dist-info (what the image's own vLLM must say). */
function venvVllmVersion(): string {
  if ('why' in src) return '';
  const site = join(src.venv, 'lib', 'python3.11', 'site-packages');
  const d = readdirSync(site).find((n) => /^vllm-\d.*\.dist-info$/.test(n))!;
  return /^Version: (.+)$/m.exec(readFileSync(join(site, d, 'METADATA'), 'utf8'))![1]!.trim();
}

function writeProfile() {
  mkdirSync(profiles, { recursive: true });
  const tiny = yaml.load(readFileSync(join(PROFILES, 'tiny.yaml'), 'utf8')) as Record<string, any>;
  const p = {
    ...tiny,
    name: NAME,
    // auto: the version is read from the image (it has no label). model.path stays tiny's relative
    // .cache/tiny-qwen3 (sparkctl runs in the repository root): mounted read-only by its absolute path
    engine: { ...tiny.engine, vllmVersion: 'auto', runtime: 'container' },
    // The image has no C++ compiler, and this vLLM's sampler goes through torch.compile even with
    // --enforce-eager: the first sampled (temperature > 0) request kills the engine with inductor's
    // "No working C++ compiler found" (greedy ones pass). Dynamo off: the sampler runs eagerly.
    env: { ...tiny.env, TORCHDYNAMO_DISABLE: '1' },
    server: { ...tiny.server, port, shutdownTimeoutSeconds: 30 },
    container: {
      cli: 'podman',
      image,
      cliArgs: PODMAN,
      gpus: 'none',
      network: 'host',
      // this sandbox's hard memlock limit refuses memlock=-1; a DGX host takes it
      ulimits: {},
      hfCache: join(work, 'no-hf-cache'),
    },
  };
  writeFileSync(join(profiles, `${NAME}.yaml`), yaml.dump(p));
}

describe.skipIf(Boolean(why)).sequential('the real vLLM in a podman container', () => {
  oneRealVllmAtATime('real vLLM in podman');
  beforeAll(async () => {
    prepare();
    port = await freePort();
    const t0 = Date.now();
    const built = await buildVllmImage(podman, work);
    image = built.image;
    took['image (build or reuse)'] = Date.now() - t0;
    if (built.builtMs) console.info(`real vLLM image ${image} built in ${(built.builtMs / 1000).toFixed(0)} s, ${((built.bytes ?? 0) / 1e9).toFixed(2)} GB`);
    writeProfile();
  }, 12 * MIN);
  afterAll(async () => {
    await sparkctl(['stop', '--all', '--grace', '20'], 2 * MIN);
    // whatever a failed case left: ours by the state label
    for (const n of await ours()) await podman(['rm', '-f', '-t', '0', n]);
    const left = await ours();
    rmrf(work);
    console.info(
      `real vLLM in podman: ${((Date.now() - started) / 1000).toFixed(0)} s in all; ${Object.entries(took)
        .map(([k, v]) => `${k} ${(v / 1000).toFixed(1)} s`)
        .join(', ')}`,
    );
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
      const t0 = Date.now();
      const r = await sparkctl(['serve', NAME, '--profiles', profiles, '--no-prewarm'], 10 * MIN);
      took['serve to ready'] = Date.now() - t0;
      expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0);
      expect(r.stderr).toMatch(/preflight \(container\): container\.cli pass, container\.image pass, container\.oci-runtime pass/);
      expect(r.stdout + r.stderr).toMatch(/probe .*: healthy/);
      const st = await sparkctl(['status', '--json']);
      const inst = JSON.parse(st.stdout).instances.find((i: { name: string }) => i.name === `${NAME}-0`);
      expect(inst, st.stdout).toMatchObject({ alive: true, container: { cli: 'podman', name: `sparkctl-${NAME}-0` } });
      expect(inst.container.id).toMatch(/^[a-f0-9]{64}$/);
      const labels = JSON.parse((await podman(['inspect', '--format', '{{json .Config.Labels}}', inst.container.id])).stdout);
      expect(labels['io.sparkctl.instance']).toBe(inst.container.marker);
      // the server says its version without the wheel's local part (.cpu) that its metadata carries
      const version = (await (await fetch(`${url()}/version`, { signal: AbortSignal.timeout(30_000) })).json()) as { version: string };
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
        ['bench', `${NAME}-0`, '--json', '--requests', '4', '--warmup', '0', '--concurrency', '2', '--input-len', '48', '--output-len', '8', '--scrape-interval', '0'],
        5 * MIN,
      );
      // exit 1 (run marked invalid, client-bound) is bench's self-check on a starved 2-core host: the counts must hold either way
      expect([0, 1], bench.stderr).toContain(bench.exitCode);
      expect(JSON.parse(bench.stdout).result).toMatchObject({ completed: 4, failed: 0, total_input_tokens: 4 * 48, total_output_tokens: 4 * 8 });
    },
    12 * MIN,
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
        const req = request(`${url()}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } });
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
        req.end(JSON.stringify({ model: 'tiny-qwen3', prompt: 'hello', max_tokens: [480, 300, 390][streams.length % 3], ignore_eos: true, stream: true }));
      };
      startStream();
      expect(await waitFor(() => streams[0]!.firstData !== undefined, 2 * MIN, 20)).toBe(true);
      // Three at a time, a new one as soon as one ends, until stop returns: whenever the runtime's SIGTERM
      // lands (seconds after stop says so, on a loaded host), streams are running (one took about 10 s
      // on the hosts this was written on). Those vLLM accepted must all finish; those sent after the signal are refused, never cut.
      let stopped = false;
      const refused = () => streams.some((s) => s.end !== undefined && !s.text.includes('"choices"'));
      const feeder = setInterval(() => !stopped && !refused() && streams.filter((s) => s.end === undefined).length < 3 && startStream(), 100);
      const t0 = Date.now();
      const run = execa(process.execPath, [BIN, 'stop', NAME, '--json'], { reject: false, cwd: ROOT, timeout: 3 * MIN, env: { NO_COLOR: '1', ...env() } });
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
      expect(served.map(finish), 'every stream vLLM served ends with length: none cut off').toEqual(served.map(() => 'length'));
      expect(served.every((s) => s.text.includes('data: [DONE]'))).toBe(true);
      const o = JSON.parse(String(r.stdout)).stopped[0];
      expect(o, String(r.stdout)).toMatchObject({ result: 'stopped', requests: { kind: 'drained' }, portFree: true, removed: true });
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
        ctx.skip(`nothing was in flight when the runtime's SIGTERM landed (${inFlight.length} served stream(s) ended after it, vLLM counted ${o.requests.count}): the drain is not shown by this run`);
    },
    5 * MIN,
  );
});
