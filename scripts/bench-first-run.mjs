#!/usr/bin/env node
// A newcomer's first minutes, timed: `npm ci` in a fresh clone (first run: no node_modules; steady:
// again, over the first one's), then the README's main command `npx sparkctl serve qwen3.5-9b
// --engine sim` (first run: a fresh state folder; steady: the same folder, after a stop), each with
// what serve itself says it spent ("ready in N s") beside the wall time.
//   node scripts/bench-first-run.mjs [--skip-ci] [--keep] [--from DIR]
// --from: the checkout to clone (default: this one, at HEAD); --skip-ci links this checkout's
// node_modules instead of running npm ci; --keep leaves the temp clone. The machine's load is printed:
// on a shared machine the times are that load's, not sparkctl's alone.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, readFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';

const args = process.argv.slice(2);
const here = new URL('..', import.meta.url).pathname;
const from = args.includes('--from') ? args[args.indexOf('--from') + 1] : here;
const work = mkdtempSync(join(tmpdir(), 'sparkctl-first-run-'));
const clone = join(work, 'sparkctl');
const state = join(work, 'state');

function timed(label, cmd, argv, opts = {}) {
  const t0 = performance.now();
  const r = spawnSync(cmd, argv, { cwd: clone, encoding: 'utf8', maxBuffer: 64 << 20, timeout: 900_000, ...opts });
  const s = (performance.now() - t0) / 1000;
  if (r.status !== 0) {
    console.error(`${label}: exit ${r.status}\n${(r.stderr ?? '').slice(-2000)}`);
    process.exitCode = 1;
  }
  return { s, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

/** Four free consecutive ports from 8000 (the README's), else from a free one. */
async function basePort() {
  const free = (p) =>
    new Promise((res) => {
      const srv = createServer()
        .once('error', () => res(false))
        .listen(p, '0.0.0.0', () => srv.close(() => res(true)));
    });
  for (const start of [8000, 18000, 28000, 38000]) {
    let ok = true;
    for (let i = 0; i < 5 && ok; i++) ok = await free(start + i);
    if (ok) return start;
  }
  throw new Error('no 5 free consecutive ports');
}

const rows = [];
const row = (what, s, said) => rows.push({ what, wall: `${s.toFixed(1)} s`, said: said ?? '' });
console.error(
  `load average before: ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')} (${(await import('node:os')).cpus().length} cores)`,
);
execFileSync('git', ['clone', '-q', from, clone]);
const cacheNote = `npm cache: ${execFileSync('npm', ['config', 'get', 'cache'], { encoding: 'utf8' }).trim()}`;
if (args.includes('--skip-ci')) {
  symlinkSync(join(here, 'node_modules'), join(clone, 'node_modules'));
  timed('build', 'npm', ['run', 'build']);
} else {
  row('npm ci (first: fresh clone)', timed('npm ci', 'npm', ['ci', '--no-audit', '--no-fund']).s);
  row('npm ci (steady: over the first)', timed('npm ci', 'npm', ['ci', '--no-audit', '--no-fund']).s);
}
const port = await basePort();
const serveArgv = [
  'sparkctl',
  'serve',
  'qwen3.5-9b',
  '--engine',
  'sim',
  ...(port === 8000 ? [] : ['--set', `server.port=${port}`]),
];
const env = { ...process.env, SPARKCTL_STATE_DIR: state };
for (const run of ['first: fresh state', 'steady: same state']) {
  const r = timed('serve', 'npx', serveArgv, { env });
  const ready = /replica\(s\) in ([\d.]+ ?m?s)/.exec(r.out)?.[1];
  const took = /serve took ([^\n]+)/.exec(r.out)?.[1];
  row(
    `serve qwen3.5-9b --engine sim (${run})`,
    r.s,
    [ready && `ready in ${ready}`, took && `serve took ${took}`].filter(Boolean).join('; '),
  );
  timed('stop', 'npx', ['sparkctl', 'stop', 'qwen3.5-9b'], { env });
}
console.log(
  `| what | wall | serve said |\n|---|---|---|\n${rows.map((r) => `| ${r.what} | ${r.wall} | ${r.said} |`).join('\n')}`,
);
console.log(
  `\n${cacheNote}; load average after: ${loadavg()
    .map((l) => l.toFixed(1))
    .join(
      ' ',
    )}; node_modules: ${spawnSync('du', ['-sh', join(clone, 'node_modules')], { encoding: 'utf8' }).stdout.split('\t')[0]}; clone of ${from} at ${readFileSync(join(clone, '.git', 'HEAD'), 'utf8').trim()}`,
);
if (!args.includes('--keep')) rmSync(work, { recursive: true, force: true });
else console.log(`kept: ${clone}`);
