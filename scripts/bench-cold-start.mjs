#!/usr/bin/env node
// A start, side by side in one run on the real vLLM (the CPU build in .venv-vllm, the tiny Qwen3 in
// .cache/tiny-qwen3): a plain `vllm serve` with empty caches (what a container without mounts gets
// at every start), sparkctl's first start (its cache folder empty) and sparkctl's restart (the folder
// kept). For each: seconds to the API answering /v1/models and to the first token of a ~200-token
// prompt (prewarm's first request for sparkctl; the same size for plain vLLM: this build's worker
// dies on a short first request), and sparkctl's own phase report. torch.compile on (no
// --enforce-eager), as a GPU profile runs.
//
//   flock /tmp/heavy.lock node scripts/bench-cold-start.mjs [--out FILE.json]
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, existsSync, openSync, readFileSync } from 'node:fs';
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
const outFile = process.argv.includes('--out') ? process.argv[process.argv.indexOf('--out') + 1] : undefined;
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

/** Plain vllm serve, its caches in empty folders of its own. */
async function plain() {
  const port = await freePort();
  const caches = join(tmp, 'plain-caches');
  const env = {
    ...process.env,
    HF_HUB_OFFLINE: '1',
    VLLM_NO_USAGE_STATS: '1',
    VLLM_CACHE_ROOT: join(caches, 'vllm'),
    TORCHINDUCTOR_CACHE_DIR: join(caches, 'inductor'),
    TRITON_CACHE_DIR: join(caches, 'triton'),
  };
  delete env.VLLM_CPU_KVCACHE_SPACE;
  const log = openSync(join(tmp, 'plain.log'), 'w');
  const t0 = performance.now();
  const launchedAt = Date.now();
  const child = spawn(
    VLLM,
    ['serve', MODEL, '--served-model-name', 'tiny-qwen3', '--max-model-len', '512', '--dtype', 'bfloat16', '--kv-cache-memory-bytes', '33554432', '--host', '127.0.0.1', '--port', String(port)],
    { env, detached: true, stdio: ['ignore', log, log] },
  );
  let readyS;
  try {
    for (const deadline = Date.now() + 900_000; Date.now() < deadline; await sleep(250)) {
      if (child.exitCode !== null) throw new Error(`plain vllm exited ${child.exitCode} (${join(tmp, 'plain.log')})`);
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
    return { readyS, firstTokenS, ...(await plainPhases(join(tmp, 'plain.log'), launchedAt, readyS, firstTokenS)) };
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
    out = execFileSync(process.execPath, [BIN, ...args], { env, cwd: ROOT, maxBuffer: 64 << 20, timeout: 900_000, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
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
  return { status: j.status, readyS: s?.readyMs / 1000, firstTokenS: s?.firstTokenMs / 1000, compile: s?.compile, phases: s?.phases };
};

async function main() {
  const port = await freePort();
  const env = { ...process.env, SPARKCTL_STATE_DIR: join(tmp, 'state'), SPARKCTL_CACHE_DIR: join(tmp, 'sparkctl-caches') };
  const common = ['--profiles', 'test/real-vllm/profiles', '--engine', 'vllm', '--vllm-bin', VLLM, '--skip-preflight', '--set', `server.port=${port}`, '--set', 'engine.enforceEager=false', '--json'];
  const rows = {};
  // the host's load beside each start: on shared cores it moves these figures more than anything measured
  const load = () => loadavg()[0].toFixed(1);
  console.error(`plain vllm serve (empty caches) ..., load ${load()}`);
  rows.plain = await plain();
  console.error(JSON.stringify(rows.plain));
  console.error(`sparkctl serve (first start, empty cache folder) ..., load ${load()}`);
  rows.first = figures(sparkctl(['serve', 'tiny', ...common], env).j);
  console.error(JSON.stringify(rows.first));
  console.error(`sparkctl restart (cache folder kept) ..., load ${load()}`);
  rows.restart = figures(sparkctl(['restart', 'tiny', '--skip-preflight', '--json'], env).j);
  console.error(JSON.stringify(rows.restart));
  try {
    execFileSync(process.execPath, [BIN, 'stop', 'tiny'], { env, cwd: ROOT, stdio: 'ignore', timeout: 120_000 });
  } catch {}
  const cores = execFileSync('nproc').toString().trim();
  const table = [
    ['start', 'API up (s)', 'first token (s)', 'compile'],
    [
      'plain vllm serve',
      rows.plain.readyS.toFixed(1),
      rows.plain.firstTokenS.toFixed(1),
      rows.plain.compile ? `${rows.plain.compile.cache ?? 'no hit/miss line'}, ${(rows.plain.compile.seconds ?? rows.plain.compile.clockSeconds)?.toFixed(1) ?? '?'} s (its log)` : '-',
    ],
    ...[
      ['sparkctl first start', rows.first],
      ['sparkctl restart', rows.restart],
    ].map(([n, r]) => [
      n,
      r.readyS?.toFixed(1) ?? '?',
      r.firstTokenS?.toFixed(1) ?? '?',
      r.compile ? `${r.compile.cache ?? 'no hit/miss line'}, ${(r.compile.seconds ?? r.compile.clockSeconds)?.toFixed(1) ?? '?'} s` : '-',
    ]),
  ];
  console.log(`vLLM ${execFileSync(VLLM, ['--version']).toString().trim().split('\n').pop()} (CPU build), ${cores} cores, ${new Date().toISOString()}`);
  for (const r of table) console.log(r.map((c, i) => (i === 3 ? `  ${c}` : i ? c.padStart(16) : c.padEnd(22))).join(''));
  for (const [n, r] of Object.entries(rows)) if (r.phases) console.log(`${n.padEnd(8)} phases: ${r.phases.map((p) => `${p.id} ${(p.atMs / 1000).toFixed(1)}`).join(', ')}`);
  if (outFile) writeFileSync(outFile, JSON.stringify(rows, null, 2));
  rmSync(tmp, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e.message);
  console.error(`kept for a look: ${tmp}`);
  process.exit(1);
});
