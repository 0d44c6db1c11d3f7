#!/usr/bin/env node
// A DGX Spark owner's first hour, replayed on the simulator and timed: the commands the task pages
// (docs/one-spark.md, check-it-works.md, connect-a-client.md, any-model.md, two-sparks.md) give, in a
// fresh HOME and state folder, each step's wall time, exit code and what it said, then the totals.
//   node scripts/first-hour.mjs [--fast] [--keep] [--json] [--checkout] [--two-sparks | --only-two-sparks] [--fake-ssh] [--real-vllm]
// Install first, as the owner would: the tarball `npm run pack` makes (scripts/pack.mjs), installed with
// `npm install -g` into a temp prefix with the registry on a closed port; every step then runs that
// installed `sparkctl`. --checkout runs this checkout's bin/sparkctl.js instead (no install steps).
// --two-sparks adds docs/two-sparks.md on two network-namespace nodes posing as Sparks (test/cluster.ts:
// each its own netns, PID and mount namespaces and /tmp, Debian's sshd, logged in to over real ssh;
// needs root, else (or with --fake-ssh) the harness's fake ssh runs the nodes' commands here; --only-two-sparks
// skips the one-Spark part): the Hub stand-in (test/hub-server.ts)
// serves openai/gpt-oss-120b's published config.json and a small placeholder shard; each node's
// preflight answers from a support bundle of the simulator's GB10 host (test/sim-bundle.ts: no GB10
// capture exists here); serve runs the simulator's ranks on the nodes (--engine sim; native launch,
// TP 2 over both). Run it under `flock /tmp/heavy.lock` on a shared machine. The harness is TypeScript,
// bundled by esbuild (a devDependency) into a module under dist (a build output) and imported.
// --fast: the simulator's clock at 0 (SPARKCTL_SIM_TIME_FACTOR=0: load, prewarm and generation take no
// simulated time), so what is left is sparkctl's own cost; without it the simulator plays a GB10's speed
// and the times are what an owner waits for on the simulator. --keep leaves the temp folder.
// --real-vllm adds the real vLLM CPU build (.venv-vllm and the tiny Qwen3 in .cache/tiny-qwen3, both
// installed by .ci/run): serve, the deep probe, a chat through client-env's variables, stop (minutes on
// 2 cores; under flock /tmp/heavy.lock on a shared machine).
// The server listens on a free port of 127.0.0.1 (not 8000, which another server of this machine may hold);
// the model id step puts gpt-oss-120b's published config.json (test/fixtures/models) in the temp HF
// cache, as `sparkctl pull openai/gpt-oss-120b --config-only` would. The host's own preflight runs for
// real: on a machine without an NVIDIA driver its GPU checks fail or skip (exit 1), which is the truth.
// Reads the built CLI (bin/sparkctl.js; run `npm run build` first). Stops everything it started.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';

const root = new URL('..', import.meta.url).pathname;
const args = process.argv.slice(2);
const fast = args.includes('--fast');
const keep = args.includes('--keep');
const asJson = args.includes('--json');
const fromCheckout = args.includes('--checkout');
const onlyTwo = args.includes('--only-two-sparks');
const twoSparks = onlyTwo || args.includes('--two-sparks');
const realVllm = args.includes('--real-vllm');
// The network-namespace nodes mount their own /tmp: what they run (the installed prefix) lives outside it.
const work = mkdtempSync(join(twoSparks ? '/var/tmp' : tmpdir(), 'sparkctl-first-hour-'));
/** the command that runs sparkctl: the installed one once the install step ran */
let sparkctlCmd = [process.execPath, join(root, 'bin', 'sparkctl.js')];
const home = join(work, 'home');
mkdirSync(home);
const env = {
  ...process.env,
  HOME: home,
  XDG_STATE_HOME: join(home, '.local', 'state'),
  SPARKCTL_STATE_DIR: join(work, 'state'),
  HF_HOME: join(home, '.cache', 'huggingface'),
  HF_HUB_CACHE: join(home, '.cache', 'huggingface', 'hub'),
  NO_COLOR: '1',
  ...(fast ? { SPARKCTL_SIM_TIME_FACTOR: '0' } : {}),
};
for (const k of ['HF_HUB_OFFLINE', 'SPARKCTL_PROFILES', 'SPARKCTL_LOG']) delete env[k];

const freePort = () =>
  new Promise((res, rej) => {
    const s = createServer()
      .once('error', rej)
      .listen(0, '127.0.0.1', () => {
        const { port } = s.address();
        s.close(() => res(port));
      });
  });

/** One command (sparkctl's unless `cmd` says): wall time, exit code, output (bounded). */
function sparkctl(argv, { timeoutMs = 300_000, extraEnv = {}, cmd = sparkctlCmd } = {}) {
  return new Promise((res) => {
    const t0 = performance.now();
    const child = spawn(cmd[0], [...cmd.slice(1), ...argv], {
      env: { ...env, ...extraEnv },
      cwd: work,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const take = (b) => {
      if (out.length < 1 << 20) out += b;
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      res({ code: code ?? signal, ms: performance.now() - t0, out });
    });
  });
}

const P = 'qwen3.5-9b-spark';
const steps = [];
const fixes = new Set();
async function step(
  label,
  argv,
  { expect = [0], summary = (o) => o.trim().split('\n').at(-1), check, shown, ...o } = {},
) {
  const r = await sparkctl(argv, o);
  for (const m of r.out.matchAll(/\bfix(?:es)?:\s*([^\n]+)/g)) fixes.add(`${argv[0]}: ${m[1].slice(0, 200)}`);
  // `check`: what the output must say besides the exit code (a step can exit 0 and still be wrong)
  const why = expect.includes(r.code) ? check?.(r.out) : `exit ${r.code}, expected ${expect.join(' or ')}`;
  const ok = !why;
  const said = (summary(r.out) ?? '').slice(0, 220);
  const row = {
    step: label,
    command: shown ?? `sparkctl ${argv.join(' ')}`,
    exit: r.code,
    ok,
    seconds: +(r.ms / 1000).toFixed(2),
    said: ok ? said : `${why}: ${said}`,
  };
  if (!ok) row.output = r.out.slice(-4000);
  record(row);
  return r;
}
function record(row) {
  steps.push(row);
  if (!asJson)
    console.log(
      `${row.ok ? '  ' : '! '}${row.seconds.toFixed(2).padStart(7)} s  exit ${String(row.exit).padEnd(3)} ${row.step}\n             $ ${row.command}\n             ${row.said}${row.output ? `\n${row.output.replace(/^/gm, '             | ')}` : ''}`,
    );
}
/** A step that is not a command: timed, ok unless it throws. */
async function task(label, shown, fn) {
  const t = performance.now();
  let said = '';
  let ok = true;
  try {
    said = (await fn()) ?? '';
  } catch (e) {
    ok = false;
    said = String(e?.message ?? e).slice(0, 2000);
  }
  record({
    step: label,
    command: shown,
    exit: ok ? 0 : 1,
    ok,
    seconds: +((performance.now() - t) / 1000).toFixed(2),
    said,
  });
  return ok;
}

const port = await freePort();
const t0 = performance.now();
if (!asJson)
  console.log(
    `first hour on the simulator${fast ? ' (--fast: the simulated clock at 0)' : " (the simulator at a GB10's speed)"}; HOME=${home}; port ${port}; load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}\n`,
  );

/** Get it: the tarball, installed with no registry reachable; every later step runs what it installed. */
async function install() {
  const prefix = join(work, 'prefix');
  const pack = await step(
    'make the install tarball (in a checkout: npm run pack)',
    [join(root, 'scripts', 'pack.mjs'), '--out', join(work, 'release'), '--json'],
    {
      cmd: [process.execPath],
      shown: 'npm run pack',
      summary: (o) => {
        try {
          const j = JSON.parse(o.slice(o.indexOf('{')));
          return `${j.file.split('/').at(-1)}: ${j.files} files, ${(j.bytes / 1048576).toFixed(2)} MiB`;
        } catch {
          return o.trim().split('\n').at(-1);
        }
      },
    },
  );
  const tarball = /"file": "([^"]+)"/.exec(pack.out)?.[1] ?? 'sparkctl.tgz';
  // the registry on a closed loopback port: the install must need nothing from it
  await step(
    'install it (npm install -g of the tarball, no registry)',
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
      join(work, 'npm-cache'),
      tarball,
    ],
    { cmd: ['npm'], shown: `npm install -g ${tarball.split('/').at(-1)}`, summary: (o) => o.trim().split('\n').at(-1) },
  );
  sparkctlCmd = [join(prefix, 'bin', 'sparkctl')];
}

/** One Spark on the simulator: docs/one-spark.md, check-it-works.md, connect-a-client.md, any-model.md. */
async function oneSpark() {
  await step('check the box (this host, for real)', ['preflight', '--profile', P], {
    expect: [0, 1],
    summary: (o) => o.trim().split('\n').at(-1),
  });
  await step('plan the model on one Spark', ['plan', P], {
    summary: (o) => o.split('\n').find((l) => /fits|does not fit|KV cache/i.test(l)) ?? '',
  });
  await step('the vllm serve command', ['serve', P, '--engine', 'sim', '--dry-run', '--set', `server.port=${port}`], {
    summary: (o) => o.split('\n').find((l) => /unified memory/.test(l)) ?? '',
  });
  await step(
    'serve it (preflight, launch, ready, prewarm, probe)',
    ['serve', P, '--engine', 'sim', '--set', `server.port=${port}`],
    {
      summary: (o) => o.split('\n').find((l) => /^serve took|^ready:/.test(l)) ?? '',
    },
  );
  await step('is it right: the deep probe', ['probe', P]);
  await step('a Claude Code-sized turn', ['probe', P, '--client', 'claude-code']);
  await step('what Claude Code needs', ['client-env', P, '--claude-code'], {
    summary: (o) => o.split('\n').find((l) => /CLAUDE_CODE_MAX_OUTPUT_TOKENS/.test(l)) ?? '',
  });
  const oa = await step('what an OpenAI client needs', ['client-env', P, '--openai'], {
    summary: (o) => o.split('\n').find((l) => /OPENAI_BASE_URL/.test(l)) ?? '',
  });
  // The environment client-env printed, used as a client would: one chat completion.
  {
    const base = /OPENAI_BASE_URL=(\S+)/.exec(oa.out)?.[1];
    const model = /# model: (\S+)/.exec(oa.out)?.[1];
    const t = performance.now();
    let said = '';
    let ok = false;
    try {
      const r = await fetch(`${base}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer EMPTY' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }),
        signal: AbortSignal.timeout(60_000),
      });
      const j = await r.json();
      ok = r.ok && typeof j?.choices?.[0]?.message?.content === 'string';
      said = `HTTP ${r.status}, ${j?.usage?.completion_tokens ?? '?'} tokens`;
    } catch (e) {
      said = String(e);
    }
    record({
      step: 'a chat completion through that environment',
      command: `POST ${base}/chat/completions`,
      exit: ok ? 0 : 1,
      ok,
      seconds: +((performance.now() - t) / 1000).toFixed(2),
      said,
    });
  }
  await step('status', ['status'], { summary: (o) => o.split('\n').find((l) => l.startsWith(P)) ?? '' });
  // A model id: its config.json in the HF cache (what `pull --config-only` leaves), then plan and the dry-run.
  {
    const commit = '0123456789abcdef0123456789abcdef01234567';
    const repo = join(env.HF_HUB_CACHE, 'models--openai--gpt-oss-120b');
    mkdirSync(join(repo, 'refs'), { recursive: true });
    mkdirSync(join(repo, 'snapshots', commit), { recursive: true });
    writeFileSync(join(repo, 'refs', 'main'), commit);
    cpSync(
      join(root, 'test', 'fixtures', 'models', 'gpt-oss-120b', 'config.json'),
      join(repo, 'snapshots', commit, 'config.json'),
    );
    await step(
      'a model id: plan (config.json from the cache)',
      ['plan', 'openai/gpt-oss-120b', '--platform', 'dgx-spark-gb10'],
      {
        summary: (o) => o.split('\n').find((l) => /^chosen: gpt-oss/.test(l)) ?? '',
      },
    );
    await step(
      'a model id: serve --dry-run',
      ['serve', 'openai/gpt-oss-120b', '--dry-run', '--platform', 'dgx-spark-gb10'],
      {
        summary: (o) => o.split('\n').find((l) => /^chosen: port/.test(l)) ?? '',
      },
    );
  }
  // Community recipes, as docs/any-model.md gives them: real sparkrun recipes (test/fixtures/recipes,
  // SOURCE.md there: spark-arena/recipe-registry and eugr's spark-vllm-docker, verbatim), imported for a
  // Spark; the one whose model's config.json is in the cache (gpt-oss-120b, above) planned and its serve
  // shown: it runs in the recipe's own image, which is not on this host (the dry-run names the pull).
  // The recipe listens on 0.0.0.0 with no key: the docs' fix, --set server.host=127.0.0.1, is given.
  {
    const my = join(work, 'my');
    mkdirSync(my, { recursive: true });
    const recipes = [
      'spark-arena--openai-gpt-oss-120b-vllm',
      'eugr--nemotron-3-nano-nvfp4',
      'spark-arena--qwen3.6-27b-fp8-vllm',
    ];
    for (const r of recipes)
      await step(
        `a community recipe: import ${r}`,
        [
          'profiles',
          'import',
          join(root, 'test', 'fixtures', 'recipes', `${r}.yaml`),
          '--out',
          join(my, `${r}.yaml`),
          '--platform',
          'dgx-spark-gb10',
        ],
        {
          summary: (o) => o.split('\n').find((l) => l.startsWith('wrote ')) ?? '',
          check: (o) => (o.includes('wrote ') ? undefined : 'no profile written'),
          shown: `sparkctl profiles import ${r}.yaml --out my/${r}.yaml`,
        },
      );
    const g = recipes[0];
    await step('a community recipe: plan', ['plan', join(my, `${g}.yaml`), '--platform', 'dgx-spark-gb10'], {
      summary: (o) => o.split('\n').find((l) => /^fits\s/.test(l)) ?? '',
      check: (o) => (/^fits\s+yes/m.test(o) ? undefined : 'the plan does not say it fits one Spark'),
    });
    await step(
      'a community recipe: serve --dry-run',
      ['serve', g, '--profiles', my, '--dry-run', '--platform', 'dgx-spark-gb10', '--set', 'server.host=127.0.0.1'],
      {
        summary: (o) => o.split('\n').find((l) => /podman (run|pull)/.test(l)) ?? '',
        check: (o) => (/podman run/.test(o) ? undefined : 'no container command shown'),
      },
    );
  }
  await step('stop it', ['stop', P]);
  await step('nothing left', ['status'], { summary: (o) => o.trim().split('\n').at(-1) });
}

/**
 * The real vLLM CPU build serving the tiny Qwen3 (test/real-vllm/profiles/tiny.yaml), as the one-Spark steps serve the
 * simulator.
 */
async function realVllmPart() {
  const bin = join(root, '.venv-vllm', 'bin', 'vllm');
  const model = join(root, '.cache', 'tiny-qwen3');
  const missing = [bin, model].find((f) => !existsSync(f));
  if (missing) {
    record({
      step: 'real vLLM (CPU build)',
      command: '-',
      exit: 0,
      ok: true,
      seconds: 0,
      said: `skipped: ${missing} is missing (.ci/run installs it)`,
    });
    return;
  }
  const { CPU_VLLM } = await import('./lib/serve-args.mjs');
  const rport = await freePort();
  const profiles = ['--profiles', join(root, 'test', 'real-vllm', 'profiles')];
  await step(
    'real vLLM (CPU build): serve the tiny model',
    [
      'serve',
      'tiny',
      ...profiles,
      '--engine',
      'vllm',
      '--vllm-bin',
      bin,
      '--skip-preflight',
      '--set',
      `server.port=${rport}`,
      '--set',
      `model.path=${model}`,
      ...CPU_VLLM,
    ],
    {
      timeoutMs: 900_000,
      summary: (o) => o.split('\n').find((l) => /^ready:/.test(l)) ?? '',
    },
  );
  await step('real vLLM: the deep probe', ['probe', 'tiny'], { timeoutMs: 120_000 });
  const envOut = await sparkctl(['client-env', 'tiny', '--openai']);
  const base = /OPENAI_BASE_URL=(\S+)/.exec(envOut.out)?.[1];
  await task('real vLLM: a chat completion through that environment', `POST ${base}/chat/completions`, async () => {
    const r = await fetch(`${base}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-qwen3', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
      signal: AbortSignal.timeout(120_000),
    });
    const j = await r.json();
    if (!r.ok || typeof j?.choices?.[0]?.message?.content !== 'string')
      throw new Error(`HTTP ${r.status}: ${JSON.stringify(j).slice(0, 300)}`);
    return `HTTP ${r.status}, ${j?.usage?.completion_tokens ?? '?'} tokens`;
  });
  await step('real vLLM: stop', ['stop', 'tiny'], { timeoutMs: 120_000 });
}

/** Two Sparks on network-namespace nodes: docs/two-sparks.md, top to bottom. */
async function twoSparksPart() {
  // directly under dist/: the harness finds the checkout one folder up, as it does from test/
  const harness = join(root, 'dist', 'first-hour-harness.mjs');
  const entry = join(root, 'dist', 'first-hour-entry.ts');
  mkdirSync(join(root, 'dist'), { recursive: true });
  writeFileSync(
    entry,
    ['cluster', 'hub-server', 'sim-bundle', 'helpers']
      .map(
        (m, i) =>
          `export { ${['makeCluster, netnsUnavailable', 'startHub', 'simBundle', 'processesMarked'][i]} } from ${JSON.stringify(join(root, 'test', `${m}.ts`))};`,
      )
      .join('\n'),
  );
  execFileSync(join(root, 'node_modules', '.bin', 'esbuild'), [
    entry,
    '--bundle',
    '--platform=node',
    '--format=esm',
    '--packages=external',
    `--outfile=${harness}`,
    '--log-level=warning',
  ]);
  const { makeCluster, netnsUnavailable, startHub, simBundle, processesMarked } = await import(harness);
  // Without root or netns (or with --fake-ssh): the harness's fake ssh runs each node's commands here
  // with the node's environment. The same sparkctl paths, but one /tmp: pull --nodes finds the head's
  // copy already on every node, and the processes left are looked for by the run's marker.
  const why = args.includes('--fake-ssh') ? '--fake-ssh' : netnsUnavailable();
  const mode = why ? 'fake-ssh' : 'netns';
  if (why && !asJson) console.log(`two Sparks over fake ssh (${why}): no network namespaces, no sshd\n`);
  const marker = randomUUID();
  // each node's /tmp is its own: a cache under /tmp is really per Spark, and pull --nodes fills it
  const hub2 = mkdtempSync(join(tmpdir(), 'sparkctl-first-hour-hub-'));
  const hf = { HF_HUB_CACHE: join(hub2, 'hub'), HF_HOME: join(hub2, 'hf-home'), SPARKCTL_TEST_CASE: marker };
  let hub;
  let cl;
  try {
    await task('two Sparks: the Hub stand-in serves openai/gpt-oss-120b', 'startHub()', async () => {
      hub = await startHub();
      const { commit } = hub.addRepo('openai/gpt-oss-120b', {
        files: {
          'config.json': readFileSync(join(root, 'test', 'fixtures', 'models', 'gpt-oss-120b', 'config.json')),
          'generation_config.json': Buffer.from('{"bos_token_id": 199998, "eos_token_id": [200002, 199999, 200012]}\n'),
          'tokenizer.json': Buffer.from('{}'),
          // a placeholder shard: the real ones are 65 GB; the plan reads config.json
          'model-00000-of-00001.safetensors': randomBytes(4 * 1024 * 1024),
        },
      });
      return `${hub.url}, commit ${commit.slice(0, 12)}`;
    });
    if (!hub) return;
    Object.assign(hf, { HF_ENDPOINT: hub.url });
    const bundle = join(work, 'gb10-bundle');
    await task(
      'two Sparks: two nodes come up (netns, sshd), each answering as a GB10',
      'makeCluster(2 nodes)',
      async () => {
        await simBundle('dgx-spark-gb10', bundle);
        cl = await makeCluster(mode, marker, {
          nodes: 2,
          gpusPerNode: 1,
          bundle,
          sparkctl: sparkctlCmd.join(' '),
          // no HF_HUB_CACHE of the nodes' own: pull --nodes copies to this host's cache path and serve
          // --nodes tells every rank that path (each node's HOME is its own folder, as another login's is)
          env: { ...(fast ? { SPARKCTL_SIM_TIME_FACTOR: '0' } : {}) },
        });
        return `${cl.addresses.join(', ')} (nodes file ${cl.nodesFile})`;
      },
    );
    if (!cl) return;
    Object.assign(hf, cl.env);
    const F = cl.nodesFile;
    const M = 'openai/gpt-oss-120b';
    const N = 'gpt-oss-120b';
    const port2 = await freePort();
    const o = { extraEnv: hf };
    await step('pull the config: enough to plan', ['pull', M, '--config-only'], o);
    await step('plan over both Sparks', ['plan', M, '--nodes', F], {
      ...o,
      summary: (x) => x.split('\n').find((l) => /planned for 2 nodes/.test(l)) ?? '',
      check: (x) => (/fits\s+yes/.test(x) ? undefined : 'plan does not say it fits'),
    });
    await step('preflight every node over ssh, and the fabric', ['preflight', '--nodes', F, '--profile', M], {
      ...o,
      expect: [0, 1],
      summary: (x) =>
        x
          .split('\n')
          .find((l) => /\(summary\)/.test(l))
          ?.replace(/\s+/g, ' ') ?? '',
      check: (x) => (/CHECK\s+n0\s+n1/.test(x) ? undefined : 'no column per node'),
    });
    await step('pull the weights here, then to every node', ['pull', M, '--nodes', F], {
      ...o,
      summary: (x) => x.trim().split('\n').at(-1),
    });
    await step("each node's command (dry run)", ['serve', M, '--nodes', F, '--dry-run'], {
      ...o,
      check: (x) => (/--nnodes 2/.test(x) && /--tensor-parallel-size 2/.test(x) ? undefined : 'no TP 2 over two nodes'),
    });
    await step(
      'serve over both Sparks (simulator ranks on the nodes)',
      ['serve', M, '--nodes', F, '--engine', 'sim', '--set', `server.port=${port2}`],
      {
        ...o,
        summary: (x) => x.split('\n').find((l) => /^serve took|^ready/.test(l)) ?? x.trim().split('\n').at(-1),
      },
    );
    await step('status: the cluster, its head, each node', ['status'], {
      ...o,
      summary: (x) => x.split('\n').find((l) => l.startsWith(N)) ?? '',
    });
    await step('is it right: the deep probe of the head', ['probe', N], o);
    await step('stop it on both Sparks', ['stop', N, '--nodes', F], o);
    await task('nothing left on either Spark', `(each node's processes)`, async () => {
      const left =
        mode === 'netns'
          ? [0, 1].flatMap((i) => cl.processes(i).map((p) => `n${i}: ${p}`))
          : processesMarked(marker).map(String);
      if (left.length) throw new Error(`left running: ${left.join('; ')}`);
      return mode === 'netns' ? 'no process but sshd and init on n0 and n1' : 'no process of this run left (fake ssh)';
    });
  } finally {
    await sparkctl(['stop', '--all'], { timeoutMs: 60_000, extraEnv: hf });
    for (const pid of processesMarked(marker)) process.kill(pid, 'SIGKILL');
    cl?.teardown();
    await hub?.close();
    rmSync(hub2, { recursive: true, force: true });
  }
}

try {
  if (!fromCheckout) await install();
  await step('install check', ['--version']);
  if (!onlyTwo) await oneSpark();
  if (realVllm) await realVllmPart();
  if (twoSparks) await twoSparksPart();
} finally {
  await sparkctl(['stop', '--all'], { timeoutMs: 60_000 });
  if (!keep) rmSync(work, { recursive: true, force: true });
}
const total = (performance.now() - t0) / 1000;
const sum = (re) =>
  +steps
    .filter((s) => re.test(s.step))
    .reduce((a, s) => a + s.seconds, 0)
    .toFixed(2);
const totals = {
  seconds: +total.toFixed(2),
  serve: sum(/^serve (it|over)/),
  everythingElse: +(total - sum(/^serve (it|over)/)).toFixed(2),
  steps: steps.length,
  failed: steps.filter((s) => !s.ok).map((s) => s.step),
};
if (asJson) console.log(JSON.stringify({ fast, steps, fixes: [...fixes], totals }, null, 2));
else {
  console.log(`\nfixes printed along the way (${fixes.size}):`);
  for (const f of fixes) console.log(`  - ${f}`);
  console.log(
    `\ntotal ${totals.seconds} s: serve ${totals.serve} s, the other ${steps.length - (onlyTwo || !twoSparks ? 1 : 2)} steps ${totals.everythingElse} s; ${totals.failed.length ? `not as expected: ${totals.failed.join(', ')}` : 'every step as expected'}`,
  );
}
process.exitCode = totals.failed.length ? 1 : 0;
