#!/usr/bin/env node
// A start, side by side in one run on the real vLLM (the CPU build in .venv-vllm, the tiny Qwen3 in
// .cache/tiny-qwen3): a plain `vllm serve` with empty caches (what a container without mounts gets
// at every start), sparkctl's first start (its cache folder empty) and sparkctl's restart (the folder
// kept). For each: seconds to the API answering /v1/models and to the first token of a ~200-token
// prompt (prewarm's first request for sparkctl; the same size for plain vLLM: this build's worker
// dies on a short first request), and sparkctl's own phase report. torch.compile on (no
// --enforce-eager), as a GPU profile runs.
//
// --rounds N runs N rounds, interleaved: odd rounds plain first, even rounds sparkctl first (its first
// start and restart, then plain), each round with empty caches of its own, so a host whose load
// drifts (other jobs on shared cores) weighs on both sides alike. --logs DIR keeps every start's vLLM
// log (plain's included) for a look afterwards.
//
//   flock /tmp/heavy.lock node scripts/bench-cold-start.mjs [--rounds N] [--out FILE.json] [--logs DIR]
import { spawn, execFileSync } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  writeFileSync,
  existsSync,
  openSync,
  readFileSync,
  readdirSync,
} from 'node:fs';
import { tmpdir, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { createServer } from 'node:net';

const ROOT = resolve(new URL('..', import.meta.url).pathname);
const VLLM = join(ROOT, '.venv-vllm/bin/vllm');
const MODEL = join(ROOT, '.cache/tiny-qwen3');
const BIN = join(ROOT, 'bin/sparkctl.js');
if (!existsSync(VLLM) || !existsSync(MODEL)) {
  console.error(`needs ${VLLM} and ${MODEL} (.ci/run installs them)`);
  process.exit(2);
}
const arg = (name) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
const outFile = arg('--out');
const logsDir = arg('--logs');
const rounds = Number(arg('--rounds') ?? 1);
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 10) {
  console.error(`--rounds ${arg('--rounds')}: a whole number from 1 to 10`);
  process.exit(2);
}
const tmp = mkdtempSync(join(tmpdir(), 'bench-cold-start-'));
const freePort = () =>
  new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => res(p));
    });
  });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const PROMPT = 'hello world '.repeat(100);

async function completion(port) {
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny-qwen3', prompt: PROMPT, max_tokens: 1 }),
    signal: AbortSignal.timeout(300_000),
  });
  return r.ok;
}

/** Plain vllm serve, its caches in empty folders of its own (one per round). */
async function plain(round) {
  const port = await freePort();
  const caches = join(tmp, `plain-caches-${round}`);
  const env = {
    ...process.env,
    HF_HUB_OFFLINE: '1',
    VLLM_NO_USAGE_STATS: '1',
    VLLM_CACHE_ROOT: join(caches, 'vllm'),
    TORCHINDUCTOR_CACHE_DIR: join(caches, 'inductor'),
    TRITON_CACHE_DIR: join(caches, 'triton'),
  };
  delete env.VLLM_CPU_KVCACHE_SPACE;
  const logFile = join(tmp, `plain-${round}.log`);
  const log = openSync(logFile, 'w');
  const t0 = performance.now();
  const launchedAt = Date.now();
  const child = spawn(
    VLLM,
    [
      'serve',
      MODEL,
      '--served-model-name',
      'tiny-qwen3',
      '--max-model-len',
      '512',
      '--dtype',
      'bfloat16',
      '--kv-cache-memory-bytes',
      '33554432',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
    ],
    { env, detached: true, stdio: ['ignore', log, log] },
  );
  let readyS;
  try {
    for (const deadline = Date.now() + 900_000; Date.now() < deadline; await sleep(250)) {
      if (child.exitCode !== null) throw new Error(`plain vllm exited ${child.exitCode} (${logFile})`);
      const ok = await fetch(`http://127.0.0.1:${port}/v1/models`, { signal: AbortSignal.timeout(2000) }).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) {
        readyS = (performance.now() - t0) / 1000;
        break;
      }
    }
    if (readyS === undefined) throw new Error('plain vllm: not ready in 900 s');
    await completion(port);
    const firstTokenS = (performance.now() - t0) / 1000;
    return { readyS, firstTokenS, ...(await plainPhases(logFile, launchedAt, readyS, firstTokenS)) };
  } finally {
    if (child.exitCode === null && child.signalCode === null)
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {}
    await sleep(5000);
    // only while its leader runs: an ended leader's group number may belong to another program by now
    if (child.exitCode === null && child.signalCode === null)
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
    if (logsDir) cpSync(logFile, join(logsDir, `plain-${round}.log`));
  }
}

/**
 * Plain vLLM's own phases: its log replayed through sparkctl's parser (dist/engine/phases.js), each
 * line timed by vLLM's own timestamp ("INFO 12-05 00:18:01 [...]", whole seconds, this host's local
 * time) against the launch; ready and first token from this script's clock.
 */
async function plainPhases(file, launchedAt, readyS, firstTokenS) {
  const { StartClock } = await import(join(ROOT, 'dist', 'engine', 'phases.js'));
  const clock = new StartClock(launchedAt);
  const year = new Date(launchedAt).getFullYear();
  let at = launchedAt;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /(?:INFO|WARNING|DEBUG|ERROR) (\d\d)-(\d\d) (\d\d:\d\d:\d\d)/.exec(line);
    if (m) at = Math.max(at, new Date(`${year}-${m[1]}-${m[2]}T${m[3]}`).getTime());
    clock.line(line, at);
  }
  clock.ready(launchedAt + readyS * 1000);
  clock.firstToken(launchedAt + firstTokenS * 1000);
  const r = clock.report();
  return { compile: r.compile, phases: r.phases };
}

function sparkctl(args, env) {
  const t0 = performance.now();
  let out = '';
  try {
    out = execFileSync(process.execPath, [BIN, ...args], {
      env,
      cwd: ROOT,
      maxBuffer: 64 << 20,
      timeout: 900_000,
      stdio: ['ignore', 'pipe', 'pipe'],
    }).toString();
  } catch (e) {
    out = e.stdout?.toString() ?? '';
    if (!out) throw new Error(`sparkctl ${args[0]} failed: ${e.stderr?.toString().slice(-2000)}`);
  }
  const j = JSON.parse(out);
  return { wallS: (performance.now() - t0) / 1000, j };
}

const figures = (j) => {
  const r = j.replicas?.[0];
  const s = r?.start;
  return {
    status: j.status,
    readyS: s?.readyMs / 1000,
    firstTokenS: s?.firstTokenMs / 1000,
    compile: s?.compile,
    phases: s?.phases,
  };
};

/** sparkctl's first start (its own empty cache folder and state for this round) and its restart. */
async function sparkctlPair(round, load) {
  const port = await freePort();
  const state = join(tmp, `state-${round}`);
  const env = { ...process.env, SPARKCTL_STATE_DIR: state, SPARKCTL_CACHE_DIR: join(tmp, `sparkctl-caches-${round}`) };
  const common = [
    '--profiles',
    'test/real-vllm/profiles',
    '--engine',
    'vllm',
    '--vllm-bin',
    VLLM,
    '--skip-preflight',
    '--set',
    `server.port=${port}`,
    '--set',
    'engine.enforceEager=false',
    '--json',
  ];
  const out = {};
  try {
    console.error(`round ${round}: sparkctl serve (first start, empty cache folder) ..., load ${load()}`);
    out.first = { load: load(), ...figures(sparkctl(['serve', 'tiny', ...common], env).j) };
    console.error(JSON.stringify(out.first));
    console.error(`round ${round}: sparkctl restart (cache folder kept) ..., load ${load()}`);
    out.restart = { load: load(), ...figures(sparkctl(['restart', 'tiny', '--skip-preflight', '--json'], env).j) };
    console.error(JSON.stringify(out.restart));
  } finally {
    try {
      execFileSync(process.execPath, [BIN, 'stop', 'tiny'], { env, cwd: ROOT, stdio: 'ignore', timeout: 120_000 });
    } catch {}
    if (logsDir) {
      const logs = join(state, 'logs');
      for (const f of existsSync(logs) ? readdirSync(logs) : [])
        cpSync(join(logs, f), join(logsDir, `sparkctl-${round}-${f}`));
    }
  }
  return out;
}

const cell = (r) => [
  r.readyS?.toFixed(1) ?? '?',
  r.firstTokenS?.toFixed(1) ?? '?',
  r.compile
    ? `${r.compile.cache ?? 'no hit/miss line'}, ${(r.compile.seconds ?? r.compile.clockSeconds)?.toFixed(1) ?? '?'} s`
    : '-',
  r.load ?? '?',
];

async function main() {
  if (logsDir) mkdirSync(logsDir, { recursive: true });
  // the host's load beside each start: on shared cores it moves these figures more than anything measured
  const load = () => loadavg()[0].toFixed(1);
  const all = [];
  for (let round = 1; round <= rounds; round++) {
    const row = { round, order: round % 2 ? 'plain first' : 'sparkctl first' };
    const doPlain = async () => {
      console.error(`round ${round}: plain vllm serve (empty caches) ..., load ${load()}`);
      row.plain = { load: load(), ...(await plain(round)) };
      console.error(JSON.stringify(row.plain));
    };
    if (round % 2) {
      await doPlain();
      Object.assign(row, await sparkctlPair(round, load));
    } else {
      Object.assign(row, await sparkctlPair(round, load));
      await doPlain();
    }
    all.push(row);
  }
  const cores = execFileSync('nproc').toString().trim();
  console.log(
    `vLLM ${execFileSync(VLLM, ['--version']).toString().trim().split('\n').pop()} (CPU build), ${cores} cores, ${new Date().toISOString()}`,
  );
  const table = [['round', 'start', 'API up (s)', 'first token (s)', 'compile', 'load']];
  for (const row of all)
    for (const [n, r] of [
      ['plain vllm serve', row.plain],
      ['sparkctl first start', row.first],
      ['sparkctl restart', row.restart],
    ])
      table.push([`${row.round} (${row.order})`, n, ...cell(r)]);
  for (const r of table)
    console.log(
      r
        .map((c, i) =>
          i === 0 ? c.padEnd(22) : i === 1 ? c.padEnd(22) : i === 4 ? `  ${c.padEnd(22)}` : c.padStart(16),
        )
        .join(''),
    );
  const mean = (k, f) => all.reduce((a, row) => a + (row[k][f] ?? Number.NaN), 0) / all.length;
  if (all.length > 1)
    console.log(
      `mean over ${all.length} rounds, first token: plain ${mean('plain', 'firstTokenS').toFixed(1)} s, sparkctl first ${mean('first', 'firstTokenS').toFixed(1)} s, restart ${mean('restart', 'firstTokenS').toFixed(1)} s`,
    );
  for (const row of all)
    for (const n of ['plain', 'first', 'restart'])
      if (row[n].phases)
        console.log(
          `${row.round} ${n.padEnd(8)} phases: ${row[n].phases.map((p) => `${p.id} ${(p.atMs / 1000).toFixed(1)}`).join(', ')}`,
        );
  if (outFile) writeFileSync(outFile, JSON.stringify(all, null, 2));
  rmSync(tmp, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e.message);
  console.error(`kept for a look: ${tmp}`);
  process.exit(1);
});
