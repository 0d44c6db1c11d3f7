#!/usr/bin/env node
// What prefix routing gains (router.balance / gateway.balance: prefix, src/profiles/haproxy.ts) on the
// real vLLM CPU build: two replicas with prefix caching on, served by sparkctl, and two HAProxys in
// front of the same two, one with the config sparkctl writes (bounded-load consistent hash of the
// prompt's first bytes) and one with balance leastconn, side by side in one run. The workload is long
// shared prefixes (documents of --doc-tokens tokens, each asked --questions different questions), long
// enough that the CPU prefill dominates a request. Each round sends a fresh set of documents through
// each HAProxy (never the same document through both: a document the other balance already cached
// would flatter it), in alternating order, --concurrency clients at a time; TTFT (streamed, to the
// first content chunk), end-to-end time and throughput per balance, and the replicas' own prefix
// cache counters (vllm:prefix_cache_hits_total / _queries_total) before and after.
// The model: the tiny random Qwen3 of the real-vLLM suite (.cache/tiny-qwen3), its context raised to
// 16,384 (a copy in a temporary folder; rope and weights unchanged), answers capped at --max-tokens.
// Usage: node scripts/bench-prefix.mjs [--rounds 3] [--docs 6] [--questions 4] [--doc-tokens 6000]
//        [--concurrency 4] [--max-tokens 4] [--port 18700] [--json]
// Needs .venv-vllm (the real vLLM), HAProxy and a built sparkctl (node scripts/prepare.mjs).
// On a shared machine take /tmp/heavy.lock first: flock /tmp/heavy.lock node scripts/bench-prefix.mjs
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { startHaproxy, pct } from './lib/proxy-bench.mjs';
import { freePort } from './lib/sim.mjs';
import { CPU_VLLM } from './lib/serve-args.mjs';

const ROOT = new URL('..', import.meta.url).pathname;
const { values: a } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    docs: { type: 'string', default: '6' },
    questions: { type: 'string', default: '4' },
    'doc-tokens': { type: 'string', default: '6000' },
    concurrency: { type: 'string', default: '4' },
    'max-tokens': { type: 'string', default: '4' },
    port: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const n = (k) => Number(a[k]);
const CONTEXT = 16_384;
const { planRouter, renderConfig } = await import('../dist/profiles/router.js');
const { Profile } = await import('../dist/profiles/schema.js');

const work = mkdtempSync(join(tmpdir(), 'bench-prefix-'));
const state = join(work, 'state');
const env = { ...process.env, SPARKCTL_STATE_DIR: state, NO_COLOR: '1' };
const sparkctl = (args, timeout = 1_200_000) =>
  execFileSync(process.execPath, [join(ROOT, 'bin', 'sparkctl.js'), ...args], {
    env,
    cwd: ROOT,
    encoding: 'utf8',
    timeout,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
const log = (s) => process.stderr.write(`bench-prefix: ${s}\n`);
const stops = [];
let cleaned = false;
function cleanup() {
  if (cleaned) return;
  cleaned = true;
  for (const s of stops) s();
  try {
    sparkctl(['stop', '--all', '--grace', '10'], 120_000);
  } catch (e) {
    log(`stop --all: ${e.message}`);
  }
  rmSync(work, { recursive: true, force: true });
}
process.on('exit', cleanup);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));

// the model: tiny-qwen3 with a longer context
const model = join(work, 'model');
cpSync(join(ROOT, '.cache', 'tiny-qwen3'), model, { recursive: true });
const cfg = JSON.parse(readFileSync(join(model, 'config.json'), 'utf8'));
writeFileSync(join(model, 'config.json'), JSON.stringify({ ...cfg, max_position_embeddings: CONTEXT }));
const tok = JSON.parse(readFileSync(join(model, 'tokenizer_config.json'), 'utf8'));
writeFileSync(join(model, 'tokenizer_config.json'), JSON.stringify({ ...tok, model_max_length: CONTEXT }));

// the profile: the suite's tiny one, that model, prefix caching said explicitly, a KV cache that holds every document
// of a run
const profiles = join(work, 'profiles');
cpSync(join(ROOT, 'test', 'real-vllm', 'profiles'), profiles, { recursive: true });
const base = Number(a.port ?? (await freePort()));
const docsPerRun = n('rounds') * n('docs') * 2;
const kvBytes = Math.max(256 << 20, docsPerRun * (n('doc-tokens') + 256) * 512 * 2);
/**
 * serve: exit 1 is a probe's finding after every replica was ready (a reset /health on 2 loaded cores); the bench
 * checks each replica itself.
 */
function serve(args) {
  try {
    sparkctl(args, 1_800_000);
  } catch (e) {
    if (e.status !== 1 || !/^ready: /m.test(String(e.stdout))) throw e;
    log(
      `serve found problems after the replicas were ready: ${String(e.stdout)
        .split('\n')
        .filter((l) => /fail/.test(l))
        .join(' | ')}`,
    );
  }
}
log(
  `2 replicas of the tiny Qwen3 (context ${CONTEXT}, KV ${Math.round(kvBytes / 2 ** 20)} MiB each, prefix caching on) on ${base}, ${base + 1}`,
);
serve([
  'serve',
  'tiny',
  '--profiles',
  profiles,
  '--engine',
  'vllm',
  '--vllm-bin',
  '.venv-vllm/bin/vllm',
  '--skip-preflight',
  '--no-prewarm',
  '--set',
  `model.path=${model}`,
  '--set',
  `model.maxContext=${CONTEXT}`,
  '--set',
  `engine.maxModelLen=${CONTEXT}`,
  '--set',
  'engine.enablePrefixCaching=true',
  '--set',
  `engine.kvCacheMemoryBytes=${kvBytes}`,
  '--set',
  `server.port=${base}`,
  '--set',
  'parallel.replicas=2',
  '--set',
  'router.enabled=false',
  ...CPU_VLLM,
]);
const replicas = [base, base + 1];

async function router(balance) {
  const port = await freePort();
  const profile = Profile.parse({
    name: `bench-${balance}`,
    model: { id: 'tiny' },
    server: { host: '127.0.0.1', port },
    router: { statsPort: await freePort(), balance },
  });
  const plan = planRouter(profile, 2, work);
  plan.servers = replicas.map((p, i) => ({ name: `r${i}`, host: '127.0.0.1', port: p }));
  const h = await startHaproxy(renderConfig(plan, { logStdout: true }), join(work, `haproxy-${balance}.cfg`), port);
  stops.push(h.stop);
  return h.port;
}
const ports = { prefix: await router('prefix'), leastconn: await router('leastconn') };

// documents of distinct words (the tokenizer has 2,048 pieces: a word is a few tokens)
const WORDS =
  'alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu'.split(
    ' ',
  );
let seed = 7;
const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed / 0x7fffffff);
function documentOf(tokens) {
  const w = [];
  for (let i = 0; i < tokens / 2.5; i++) w.push(WORDS[Math.floor(rnd() * WORDS.length)]);
  return w.join(' ');
}

/** One streamed chat request: TTFT (first content chunk) and total, ms; prompt tokens from usage. */
async function ask(port, doc, q) {
  const t0 = performance.now();
  const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'tiny-qwen3',
      messages: [
        { role: 'system', content: `Answer from this document.\n${doc}` },
        { role: 'user', content: `Question ${q}: what is word ${q * 37}?` },
      ],
      max_tokens: n('max-tokens'),
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
    signal: AbortSignal.timeout(600_000),
  });
  if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${(await r.text()).slice(0, 300)}`);
  let ttft;
  let prompt = 0;
  const dec = new TextDecoder();
  let buf = '';
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i).replace(/^data: /, '');
      buf = buf.slice(i + 2);
      if (ev === '[DONE]') continue;
      const j = JSON.parse(ev);
      if (ttft === undefined && j.choices?.length) ttft = performance.now() - t0;
      if (j.usage) prompt = j.usage.prompt_tokens;
    }
  }
  return { ttft: ttft ?? performance.now() - t0, total: performance.now() - t0, prompt };
}

/**
 * A phase: `docs` fresh documents, each asked `questions` times (the questions of one document spread over the phase),
 * `concurrency` at a time.
 */
async function phase(port) {
  const docs = Array.from({ length: n('docs') }, () => documentOf(n('doc-tokens')));
  const jobs = [];
  for (let q = 0; q < n('questions'); q++) for (const d of docs) jobs.push([d, q]);
  const out = [];
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: n('concurrency') }, async () => {
      while (next < jobs.length) {
        const [d, q] = jobs[next++];
        out.push(await ask(port, d, q));
      }
    }),
  );
  return { results: out, seconds: (performance.now() - t0) / 1000 };
}

async function cacheCounters() {
  let hits = 0;
  let queries = 0;
  for (const p of replicas) {
    const text = await (await fetch(`http://127.0.0.1:${p}/metrics`)).text();
    for (const l of text.split('\n')) {
      const m = /^vllm:prefix_cache_(hits|queries)_total\{[^}]*\} ([0-9.e+]+)/.exec(l);
      if (m) m[1] === 'hits' ? (hits += Number(m[2])) : (queries += Number(m[2]));
    }
  }
  return { hits, queries };
}

log('warm-up: one request through each');
for (const p of Object.values(ports)) await ask(p, documentOf(200), 0);
const acc = { prefix: { r: [], s: 0, hits: 0, queries: 0 }, leastconn: { r: [], s: 0, hits: 0, queries: 0 } };
for (let round = 0; round < n('rounds'); round++) {
  const order = round % 2 ? ['leastconn', 'prefix'] : ['prefix', 'leastconn'];
  for (const b of order) {
    const before = await cacheCounters();
    const ph = await phase(ports[b]);
    const after = await cacheCounters();
    acc[b].r.push(...ph.results);
    acc[b].s += ph.seconds;
    acc[b].hits += after.hits - before.hits;
    acc[b].queries += after.queries - before.queries;
    const tt = ph.results.map((x) => x.ttft);
    log(
      `round ${round + 1} ${b}: ${ph.results.length} requests in ${ph.seconds.toFixed(1)} s, TTFT p50 ${pct(tt, 0.5).toFixed(0)} ms`,
    );
  }
}
const summary = (x) => {
  const tt = x.r.map((y) => y.ttft);
  const tot = x.r.map((y) => y.total);
  return {
    requests: x.r.length,
    promptTokensMean: Math.round(x.r.reduce((s, y) => s + y.prompt, 0) / x.r.length),
    ttftMs: {
      p50: Math.round(pct(tt, 0.5)),
      p90: Math.round(pct(tt, 0.9)),
      mean: Math.round(tt.reduce((s, y) => s + y, 0) / tt.length),
    },
    e2eMs: { p50: Math.round(pct(tot, 0.5)), p90: Math.round(pct(tot, 0.9)) },
    reqPerSec: +(x.r.length / x.s).toFixed(3),
    prefixCacheHitRate: x.queries ? +(x.hits / x.queries).toFixed(3) : null,
  };
};
const res = { prefix: summary(acc.prefix), leastconn: summary(acc.leastconn) };
const gain = {
  ttftP50: +(res.leastconn.ttftMs.p50 / res.prefix.ttftMs.p50).toFixed(2),
  ttftMean: +(res.leastconn.ttftMs.mean / res.prefix.ttftMs.mean).toFixed(2),
  throughput: +(res.prefix.reqPerSec / res.leastconn.reqPerSec).toFixed(2),
};
const settings = {
  rounds: n('rounds'),
  docs: n('docs'),
  questions: n('questions'),
  docTokens: n('doc-tokens'),
  concurrency: n('concurrency'),
  maxTokens: n('max-tokens'),
  cores: (await import('node:os')).cpus().length,
};
if (a.json)
  process.stdout.write(`${JSON.stringify({ version: 1, kind: 'bench-prefix', settings, ...res, gain }, null, 2)}\n`);
else {
  console.log(`settings: ${JSON.stringify(settings)}`);
  for (const b of ['prefix', 'leastconn'])
    console.log(
      `${b.padEnd(9)} ${res[b].requests} req (${res[b].promptTokensMean} prompt tokens): TTFT p50 ${res[b].ttftMs.p50} ms, p90 ${res[b].ttftMs.p90} ms, mean ${res[b].ttftMs.mean} ms; e2e p50 ${res[b].e2eMs.p50} ms; ${res[b].reqPerSec} req/s; prefix cache hit rate ${res[b].prefixCacheHitRate}`,
    );
  console.log(
    `gain (leastconn / prefix): TTFT p50 x${gain.ttftP50}, mean x${gain.ttftMean}; throughput x${gain.throughput}`,
  );
}
cleanup();
