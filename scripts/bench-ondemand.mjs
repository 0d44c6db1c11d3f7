#!/usr/bin/env node
// What a swap costs at the gateway (gateway.models, on-demand start, room made by the plan): the time
// from a request for a model that is not serving to its first token, through the gateway, while the
// other model holds the memory (--gpu-memory: the two do not fit together), so every request
// alternating between them evicts one and brings the other back. By stop and start (a model that
// was stopped) and by sleep (level 2: a model that was asleep; the simulator only, the CPU build of
// vLLM has no sleep mode). Each swap's parts come from the keeper's own record
// (<state>/gateway/swaps.jsonl: the eviction's and the start's ms).
//   --engine sim (default): two simulator profiles (qwen-dev and qwen3.5-9b-code at 0.6 of 80 GiB),
//     the simulator's load time as SPARKCTL_SIM_LOAD_SECONDS (default 2 s).
//   --engine vllm: two tiny real vLLM CPU servers (test/real-vllm/profiles/tiny.yaml, the second with
//     its own served name and port), --gpu-memory 3GiB (each needs about 2.05 GiB by the plan:
//     weights, its 32 MiB KV cache, the 1.5 GiB reserve and the CUDA context): stop and start only.
// Usage: node scripts/bench-ondemand.mjs [--engine sim|vllm] [--swaps 4] [--json]
// Real vLLM on a shared machine: flock /tmp/heavy.lock node scripts/bench-ondemand.mjs --engine vllm --swaps 2
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { freePort } from './lib/sim.mjs';
import { CPU_VLLM, copyTinyPair, simServe } from './lib/serve-args.mjs';

const ROOT = new URL('..', import.meta.url).pathname;
const { values: a } = parseArgs({
  options: {
    engine: { type: 'string', default: 'sim' },
    swaps: { type: 'string', default: '4' },
    json: { type: 'boolean', default: false },
  },
});
const swapsWanted = Number(a.swaps);
const work = mkdtempSync(join(tmpdir(), 'bench-ondemand-'));
const env = {
  ...process.env,
  SPARKCTL_STATE_DIR: join(work, 'state'),
  NO_COLOR: '1',
  SPARKCTL_SIM_LOAD_SECONDS: process.env.SPARKCTL_SIM_LOAD_SECONDS ?? '2',
};
const sparkctl = (args, timeout = 120_000) =>
  execFileSync(process.execPath, [join(ROOT, 'bin', 'sparkctl.js'), ...args], {
    env,
    cwd: ROOT,
    encoding: 'utf8',
    timeout,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
const log = (s) => process.stderr.write(`bench-ondemand: ${s}\n`);
let cleaned = false;
function cleanup(code = 0) {
  if (cleaned) return;
  cleaned = true;
  for (const args of [
    ['gateway', 'down'],
    ['stop', '--all', '--grace', '10'],
  ])
    try {
      sparkctl(args);
    } catch (e) {
      log(`${args.join(' ')}: ${e.message.split('\n')[0]}`);
    }
  // a failed run keeps its state folder (the keeper's log, swaps.jsonl) to read
  if (code) log(`kept ${work} (the keeper's log: state/logs/gateway-keeper.log)`);
  else rmSync(work, { recursive: true, force: true });
}
process.on('exit', cleanup);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));

const base = await freePort();
// each run its own gateway port: a gateway brought up again at once on the port of one just brought
// down had its first connection closed by the old HAProxy's listener (measured here; SO_REUSEPORT)
let port = base;

function modelsFor(engine, sleep) {
  if (engine === 'vllm') {
    // the suite's tiny profile twice: tiny-b its copy with its own name and served name
    const dir = join(work, 'profiles');
    mkdirSync(dir, { recursive: true });
    copyTinyPair(join(ROOT, 'test', 'real-vllm', 'profiles'), dir);
    const common = [
      '--profiles',
      dir,
      '--engine',
      'vllm',
      '--vllm-bin',
      '.venv-vllm/bin/vllm',
      '--skip-preflight',
      '--no-prewarm',
      ...CPU_VLLM,
    ];
    // the same tiny model twice: a second served name and port make it a second model
    return {
      names: ['tiny-qwen3', 'tiny-b'],
      models: {
        tiny: { serve: [...common, '--set', `server.port=${base + 10}`] },
        'tiny-b': { serve: [...common, '--set', `server.port=${base + 11}`] },
      },
      gpuMemory: '3GiB',
    };
  }
  const s = (p, share, gpu, extra = []) => [
    ...simServe({ port: p, gpu, share, replicas: 1, tensor: 1 }),
    ...(sleep ? ['--set', 'server.sleepMode=true'] : []),
    ...extra,
  ];
  return {
    names: ['qwen-dev', 'coder-b'],
    models: {
      'qwen-dev': { serve: s(base + 10, 0.6, 0) },
      'qwen3.5-9b-code': { serve: s(base + 11, 0.6, 2, ['--set', 'model.servedName=coder-b']) },
    },
    gpuMemory: '80GiB',
  };
}

/** One streamed request: ms to the first token and to the end (a non-200 throws). */
async function firstToken(model) {
  const t0 = performance.now();
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, prompt: 'hello', max_tokens: 4, stream: true }),
    signal: AbortSignal.timeout(1_800_000),
  });
  if (r.status !== 200) throw new Error(`${model}: HTTP ${r.status}: ${(await r.text()).slice(0, 300)}`);
  let first;
  for await (const chunk of r.body)
    if (first === undefined && String(Buffer.from(chunk)).includes('"choices"')) first = performance.now() - t0;
  return { firstMs: Math.round(first ?? performance.now() - t0), totalMs: Math.round(performance.now() - t0) };
}

const swapsFile = () => join(env.SPARKCTL_STATE_DIR, 'gateway', 'swaps.jsonl');
const swaps = () =>
  existsSync(swapsFile())
    ? readFileSync(swapsFile(), 'utf8')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
    : [];

async function run(evict) {
  port = await freePort();
  const m = modelsFor(a.engine, evict !== 'stop');
  const cfg = join(work, `gateway-${evict}.json`);
  writeFileSync(
    cfg,
    JSON.stringify({
      gateway: {
        port,
        checkIntervalMs: 500,
        models: m.models,
        onDemand: { gpuMemory: m.gpuMemory, evict, startTimeout: '30m' },
      },
    }),
  );
  sparkctl(['gateway', 'up', '--config', cfg]);
  log(`${evict}: first start of each, then ${swapsWanted} swaps`);
  const cold = [];
  for (const n of m.names) cold.push({ model: n, ...(await firstToken(n)) });
  const swapped = [];
  for (let i = 0; i < swapsWanted; i++) {
    const n = m.names[i % 2];
    const before = swaps().length;
    const t = await firstToken(n);
    const parts = swaps().slice(before);
    swapped.push({
      model: n,
      ...t,
      evictMs: parts.find((p) => p.what === 'evict')?.ms,
      startMs: parts.find((p) => p.what === 'start')?.ms,
    });
    log(`${evict} swap ${i + 1}: ${n} first token after ${t.firstMs} ms`);
  }
  // the same model again, already serving: the gateway's own path
  const warm = [];
  for (let i = 0; i < 5; i++) warm.push((await firstToken(m.names[(swapsWanted - 1) % 2])).firstMs);
  sparkctl(['gateway', 'down']);
  sparkctl(['stop', '--all', '--grace', '10'], 180_000);
  return { evict, cold, swapped, warmFirstMs: warm };
}

const med = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : undefined;
};
const out = { version: 1, kind: 'bench-ondemand', engine: a.engine, runs: [] };
if (!process.env.BENCH_ONDEMAND_SLEEP_ONLY) out.runs.push(await run('stop'));
if (a.engine === 'sim' && !process.env.BENCH_ONDEMAND_STOP_ONLY) out.runs.push(await run('sleep2'));
if (a.json) process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
else
  for (const r of out.runs) {
    console.log(
      `${a.engine} evict=${r.evict}: cold start ${r.cold.map((c) => `${c.model} ${c.firstMs} ms`).join(', ')}; swap to first token median ${med(r.swapped.map((s) => s.firstMs))} ms (${r.swapped.map((s) => s.firstMs).join(', ')}; eviction ${r.swapped.map((s) => s.evictMs ?? '-').join(', ')} ms, start ${r.swapped.map((s) => s.startMs ?? '-').join(', ')} ms); already serving ${med(r.warmFirstMs)} ms`,
    );
  }
cleanup();
