#!/usr/bin/env node
// How fast `sparkctl watch` brings a wedged server back, and what it costs:
//   node scripts/bench-watch.mjs [--real] [--soak SECONDS] [--servers N]
// - time from the first stuck request to the verdict, to the restart, and to the first answered
//   request again (default watch policy: 20 s window, 5 s... here --interval 2s);
//   the simulator wedges by its zombie-if switch; --real serves the real vLLM CPU build
//   (test/real-vllm/profiles/tiny.yaml) and wedges it by SIGSTOP of its EngineCore process while a
//   stream runs (the API keeps answering /health);
// - the watcher's CPU and memory per watched server (N simulator replicas, 30 s of steady ticks;
//   --real: the one real server, busy with a request loop, before it is wedged);
// - false verdicts in a soak: a saturated simulator with 15 s prefills and slow decode under load for --soak s:
//   every wedged or dead verdict there is a false one (must be 0).
// Uses the built CLI (npm run build first). Everything it serves is stopped at the end.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sets, simServe } from './lib/serve-args.mjs';

const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin', 'sparkctl.js');
const args = process.argv.slice(2);
const REAL = args.includes('--real');
const SOAK_S = Number(args[args.indexOf('--soak') + 1] ?? 60) || 60;
const SERVERS = Number(args[args.indexOf('--servers') + 1] ?? 4) || 4;
const CLK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());

const freePort = () =>
  new Promise((res) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const state = mkdtempSync(join(tmpdir(), 'sparkctl-bench-watch-'));
const env = { ...process.env, SPARKCTL_STATE_DIR: state, SPARKCTL_SIM_LOAD_SECONDS: '0.5', NO_COLOR: '1' };
const cli = (a) =>
  execFileSync(process.execPath, [BIN, ...a], {
    env,
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: 600_000,
  }).toString();

// one profile at a time (restart serves a profile again by its file's name, so no --set name=)
function serveSim(replicas, port, fault) {
  cli(['serve', 'qwen3.5-9b', ...simServe({ port, replicas }), ...sets({ 'env.SPARKCTL_SIM_FAULT': fault })]);
}
function serveReal(port) {
  cli([
    'serve',
    'tiny',
    '--profiles',
    'test/real-vllm/profiles',
    '--engine',
    'vllm',
    '--vllm-bin',
    '.venv-vllm/bin/vllm',
    '--skip-preflight',
    '--no-prewarm',
    '--set',
    `server.port=${port}`,
  ]);
}

function watcher(extra = []) {
  const p = spawn(process.execPath, [BIN, 'watch', '--all', '--json', '--interval', '2s', ...extra], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const events = [];
  let buf = '';
  p.stdout.on('data', (d) => {
    buf += d;
    const lines = buf.split('\n');
    buf = lines.pop();
    for (const l of lines) if (l.trim()) events.push({ ...JSON.parse(l), seenAt: Date.now() });
  });
  return {
    p,
    events,
    stop: () => new Promise((r) => (p.exitCode !== null ? r() : (p.once('exit', r), p.kill('SIGTERM')))),
  };
}
const until = async (cond, ms) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await sleep(100);
  }
  return false;
};
const post = (port, body, signal) =>
  fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  });
const served = (port) =>
  JSON.parse(
    readFileSync(
      join(
        state,
        'instances',
        readdirSync(join(state, 'instances')).find((f) => f.endsWith('.json')),
      ),
      'utf8',
    ),
  ).servedName ?? undefined;
async function answered(port, model) {
  try {
    return (await post(port, { model, prompt: 'hi', max_tokens: 2 }, AbortSignal.timeout(5000))).status === 200;
  } catch {
    return false;
  }
}
function cpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(x[11]) + Number(x[12])) / CLK;
}
const rssMiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
// the engine core by proof, as src/watch/read.ts engineCoreOf: a child of the API server (the
// registry's proven pid), in its group, started after it, named VLLM::EngineCore by setproctitle
const statOf = (pid) => {
  const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return st.slice(st.lastIndexOf(')') + 2).split(' ');
};
const engineCore = (apiPid, pgid) => {
  const apiStart = Number(statOf(apiPid)[19]);
  for (const d of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const f = statOf(d);
      if (
        Number(f[1]) === apiPid &&
        Number(f[2]) === pgid &&
        Number(f[19]) >= apiStart &&
        readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'VLLM::EngineCor'
      )
        return Number(d);
    } catch {}
  }
  return undefined;
};

async function wedgeCase() {
  const port = await freePort();
  const wedge = join(state, 'wedge-now');
  if (REAL) serveReal(port);
  else serveSim(1, port, `zombie-if:${wedge}`);
  const model = served(port);
  const w = watcher();
  await until(() => w.events.some((e) => e.event === 'verdict'), 30_000);
  const ac = new AbortController();
  let t0;
  let stopped;
  // --real: the watcher's own cost watching the real server (its /metrics is vLLM's, not the simulator's), busy with a
  // request loop
  if (REAL)
    await measureCost(
      w,
      1,
      30_000,
      async (end) => {
        while (Date.now() < end)
          await post(port, { model, prompt: 'hello', max_tokens: 32 }, AbortSignal.timeout(120_000))
            .then((r) => r.text())
            .catch(() => {});
      },
      port,
    );
  if (REAL) {
    // a stream running, then its engine core stopped: the API keeps answering /health
    const res = await post(
      port,
      { model, prompt: 'hello', max_tokens: 400, stream: true, ignore_eos: true },
      ac.signal,
    );
    const reader = res.body.getReader();
    await reader.read();
    const inst = JSON.parse(readFileSync(join(state, 'instances', readdirSync(join(state, 'instances'))[0]), 'utf8'));
    stopped = engineCore(inst.pid, inst.pgid);
    if (!stopped) throw new Error('no EngineCore process found in the server group');
    process.kill(stopped, 'SIGSTOP');
    t0 = Date.now();
    reader.read().catch(() => {});
  } else {
    writeFileSync(wedge, '');
    t0 = Date.now();
    post(port, { model, prompt: 'hello', max_tokens: 1000, stream: true }, ac.signal).catch(() => {});
  }
  const at = (pred) => w.events.find(pred)?.seenAt;
  await until(() => at((e) => e.verdict === 'wedged'), 120_000);
  if (!REAL) rmSync(wedge, { force: true });
  await until(() => at((e) => e.action === 'restart'), 60_000);
  await until(() => at((e) => e.action === 'restarted'), 600_000);
  let back;
  await until(async () => (await answered(port, model)) && (back = Date.now()), 120_000);
  ac.abort();
  await w.stop();
  const s = (t) => (t ? ((t - t0) / 1000).toFixed(1) : 'never');
  console.log(
    `${REAL ? 'real vLLM (SIGSTOP of EngineCore pid ' + stopped + ')' : 'simulator (zombie-if)'}: stuck at 0 s -> verdict ${s(at((e) => e.verdict === 'wedged'))} s -> restart begun ${s(at((e) => e.action === 'restart'))} s -> restart done ${s(at((e) => e.action === 'restarted'))} s -> first answered request ${s(back)} s`,
  );
  cli(['stop', '--all', '--grace', '5']);
}

/**
 * The watcher's CPU (utime + stime from /proc) and RSS over `ms` of steady ticks, while `load` runs, said per server.
 */
async function measureCost(w, servers, ms, load, port) {
  const end = Date.now() + ms;
  const loading = load ? load(end) : undefined;
  await sleep(2000);
  const c0 = cpuSeconds(w.p.pid);
  const t0 = Date.now();
  await sleep(Math.max(0, end - Date.now()));
  const cpu = cpuSeconds(w.p.pid) - c0;
  const wall = (Date.now() - t0) / 1000;
  const rss = rssMiB(w.p.pid);
  await loading;
  const metricsKiB = port ? (await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).length / 1024 : undefined;
  console.log(
    `cost (${REAL ? 'real vLLM, busy' : 'simulator'}): ${servers} server(s), interval 2 s, ${wall.toFixed(0)} s: watcher CPU ${((cpu / wall) * 100).toFixed(2)} % of a core (${(((cpu / wall) * 100) / servers).toFixed(2)} % per server), RSS ${rss.toFixed(0)} MiB (${(rss / servers).toFixed(1)} MiB per server, node's own ~40 MiB included)${metricsKiB ? `; /metrics ${metricsKiB.toFixed(0)} KiB a read` : ''}`,
  );
}

async function costCase() {
  serveSim(SERVERS, await freePort(), 'slow:0');
  const w = watcher();
  await until(() => w.events.filter((e) => e.event === 'verdict').length >= SERVERS, 30_000);
  await sleep(3000);
  await measureCost(w, SERVERS, 32_000);
  await w.stop();
  cli(['stop', '--all', '--grace', '5']);
}

async function soakCase() {
  const b = await freePort();
  serveSim(1, b, 'long-prefill:15,saturate:1,slow:30');
  const w = watcher();
  const end = Date.now() + SOAK_S * 1000;
  const load = async (port, n, body) => {
    const one = async () => {
      while (Date.now() < end)
        await post(port, body, AbortSignal.timeout(120_000))
          .then((r) => r.text())
          .catch(() => {});
    };
    await Promise.all(Array.from({ length: n }, one));
  };
  await Promise.all([
    load(b, 3, { model: 'Qwen/Qwen3.5-9B', prompt: 'long '.repeat(4000), max_tokens: 4 }),
    load(b, 2, { model: 'Qwen/Qwen3.5-9B', prompt: 'x', max_tokens: 100 }),
  ]);
  await w.stop();
  const verdicts = w.events.filter((e) => e.event === 'verdict');
  const bad = verdicts.filter((e) => e.verdict === 'wedged' || e.verdict === 'dead');
  const count = {};
  for (const v of verdicts) count[v.verdict] = (count[v.verdict] ?? 0) + 1;
  console.log(
    `soak: ${SOAK_S} s, one server: 15 s prefills, one running at a time (the rest waiting), slow decode, under load: verdict changes ${JSON.stringify(count)}; false wedged/dead verdicts: ${bad.length}; restarts: ${w.events.filter((e) => e.action === 'restart').length}`,
  );
  cli(['stop', '--all', '--grace', '5']);
}

try {
  await wedgeCase();
  if (!REAL) {
    await costCase();
    await soakCase();
  }
} finally {
  try {
    cli(['stop', '--all', '--grace', '5']);
  } catch {}
  rmSync(state, { recursive: true, force: true });
}
