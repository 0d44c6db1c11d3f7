#!/usr/bin/env node
// A DGX Spark owner's first hour, replayed on the simulator and timed: the commands the task pages
// (docs/one-spark.md, check-it-works.md, connect-a-client.md, any-model.md) give, in a fresh HOME and
// state folder, each step's wall time, exit code and what it said, then the totals.
//   node scripts/first-hour.mjs [--fast] [--keep] [--json]
// --fast: the simulator's clock at 0 (SPARKCTL_SIM_TIME_FACTOR=0: load, prewarm and generation take no
// simulated time), so what is left is sparkctl's own cost; without it the simulator plays a GB10's speed
// and the times are what an owner waits for on the simulator. --keep leaves the temp folder.
// The server listens on a free port of 127.0.0.1 (not 8000, which another server of this machine may hold);
// the model id step puts gpt-oss-120b's published config.json (test/fixtures/models) in the temp HF
// cache, as `sparkctl pull openai/gpt-oss-120b --config-only` would. The host's own preflight runs for
// real: on a machine without an NVIDIA driver its GPU checks fail or skip (exit 1), which is the truth.
// Reads the built CLI (bin/sparkctl.js; run `npm run build` first). Stops everything it started.
import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';

const root = new URL('..', import.meta.url).pathname;
const bin = join(root, 'bin', 'sparkctl.js');
const args = process.argv.slice(2);
const fast = args.includes('--fast');
const keep = args.includes('--keep');
const asJson = args.includes('--json');
const work = mkdtempSync(join(tmpdir(), 'sparkctl-first-hour-'));
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

/** One command of the CLI: wall time, exit code, output (bounded). */
function sparkctl(argv, { timeoutMs = 300_000 } = {}) {
  return new Promise((res) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [bin, ...argv], { env, cwd: work, stdio: ['ignore', 'pipe', 'pipe'] });
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
async function step(label, argv, { expect = [0], summary = (o) => o.trim().split('\n').at(-1), ...o } = {}) {
  const r = await sparkctl(argv, o);
  for (const m of r.out.matchAll(/\bfix(?:es)?:\s*([^\n]+)/g)) fixes.add(`${argv[0]}: ${m[1].slice(0, 200)}`);
  const ok = expect.includes(r.code);
  const row = { step: label, command: `sparkctl ${argv.join(' ')}`, exit: r.code, ok, seconds: +(r.ms / 1000).toFixed(2), said: (summary(r.out) ?? '').slice(0, 220) };
  steps.push(row);
  if (!asJson) console.log(`${ok ? '  ' : '! '}${row.seconds.toFixed(2).padStart(7)} s  exit ${String(r.code).padEnd(3)} ${label}\n             $ ${row.command}\n             ${row.said}`);
  return r;
}

const port = await freePort();
const t0 = performance.now();
if (!asJson)
  console.log(
    `first hour on the simulator${fast ? ' (--fast: the simulated clock at 0)' : " (the simulator at a GB10's speed)"}; HOME=${home}; port ${port}; load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}\n`,
  );
try {
  await step('install check', ['--version']);
  await step('check the box (this host, for real)', ['preflight', '--profile', P], { expect: [0, 1], summary: (o) => o.trim().split('\n').at(-1) });
  await step('plan the model on one Spark', ['plan', P], { summary: (o) => o.split('\n').find((l) => /fits|does not fit|KV cache/i.test(l)) ?? '' });
  await step('the vllm serve command', ['serve', P, '--engine', 'sim', '--dry-run', '--set', `server.port=${port}`], { summary: (o) => o.split('\n').find((l) => /unified memory/.test(l)) ?? '' });
  await step('serve it (preflight, launch, ready, prewarm, probe)', ['serve', P, '--engine', 'sim', '--set', `server.port=${port}`], {
    summary: (o) => o.split('\n').find((l) => /^serve took|^ready:/.test(l)) ?? '',
  });
  await step('is it right: the deep probe', ['probe', P]);
  await step('a Claude Code-sized turn', ['probe', P, '--client', 'claude-code']);
  await step('what Claude Code needs', ['client-env', P, '--claude-code'], { summary: (o) => o.split('\n').find((l) => /CLAUDE_CODE_MAX_OUTPUT_TOKENS/.test(l)) ?? '' });
  const oa = await step('what an OpenAI client needs', ['client-env', P, '--openai'], { summary: (o) => o.split('\n').find((l) => /OPENAI_BASE_URL/.test(l)) ?? '' });
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
    const row = { step: 'a chat completion through that environment', command: `POST ${base}/chat/completions`, exit: ok ? 0 : 1, ok, seconds: +((performance.now() - t) / 1000).toFixed(2), said };
    steps.push(row);
    if (!asJson) console.log(`${ok ? '  ' : '! '}${row.seconds.toFixed(2).padStart(7)} s  exit ${String(row.exit).padEnd(3)} ${row.step}\n             $ ${row.command}\n             ${said}`);
  }
  await step('status', ['status'], { summary: (o) => o.split('\n').find((l) => l.startsWith(P)) ?? '' });
  // A model id: its config.json in the HF cache (what `pull --config-only` leaves), then plan and the dry-run.
  {
    const commit = '0123456789abcdef0123456789abcdef01234567';
    const repo = join(env.HF_HUB_CACHE, 'models--openai--gpt-oss-120b');
    mkdirSync(join(repo, 'refs'), { recursive: true });
    mkdirSync(join(repo, 'snapshots', commit), { recursive: true });
    writeFileSync(join(repo, 'refs', 'main'), commit);
    cpSync(join(root, 'test', 'fixtures', 'models', 'gpt-oss-120b', 'config.json'), join(repo, 'snapshots', commit, 'config.json'));
    await step('a model id: plan (config.json from the cache)', ['plan', 'openai/gpt-oss-120b', '--platform', 'dgx-spark-gb10'], {
      summary: (o) => o.split('\n').find((l) => /^chosen: gpt-oss/.test(l)) ?? '',
    });
    await step('a model id: serve --dry-run', ['serve', 'openai/gpt-oss-120b', '--dry-run', '--platform', 'dgx-spark-gb10'], {
      summary: (o) => o.split('\n').find((l) => /^chosen: port/.test(l)) ?? '',
    });
  }
  await step('stop it', ['stop', P]);
  await step('nothing left', ['status'], { summary: (o) => o.trim().split('\n').at(-1) });
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
  serve: sum(/^serve it/),
  everythingElse: +(total - sum(/^serve it/)).toFixed(2),
  steps: steps.length,
  failed: steps.filter((s) => !s.ok).map((s) => s.step),
};
if (asJson) console.log(JSON.stringify({ fast, steps, fixes: [...fixes], totals }, null, 2));
else {
  console.log(`\nfixes printed along the way (${fixes.size}):`);
  for (const f of fixes) console.log(`  - ${f}`);
  console.log(
    `\ntotal ${totals.seconds} s: serve ${totals.serve} s, the other ${steps.length - 1} steps ${totals.everythingElse} s; ${totals.failed.length ? `not as expected: ${totals.failed.join(', ')}` : 'every step as expected'}`,
  );
}
process.exitCode = totals.failed.length ? 1 : 0;
