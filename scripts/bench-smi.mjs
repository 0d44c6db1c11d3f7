#!/usr/bin/env node
// How long the nvidia-smi calls of a preflight take on this host, alone and together: the whole
// `nvidia-smi -q` against the narrow pair preflight asks instead (its GSP section and the fabric
// fields of --query-gpu), each beside the other nvidia-smi calls, and the whole -q while the process
// that spawned it keeps its own main thread busy (what a CLI still loading its modules does).
// The calls are the ones `collect` records here (what this build's preflight runs); the whole -q is
// the fallback preflight asks only where a narrow call is refused.
// Needs a GPU host; prints what the narrow pair answered, then one JSON object of spreads (ms).
// Usage: node scripts/bench-smi.mjs [runs=15]
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { spread } from './lib/stats.mjs';
import { collected } from './lib/collected.mjs';

const runs = Number(process.argv[2] ?? 15);
const smi = collected(join(new URL('..', import.meta.url).pathname, 'bin', 'sparkctl.js')).commands.filter(
  (a) => a[0] === 'nvidia-smi',
);
const FULL_Q = ['nvidia-smi', '-q'];
const GSP = smi.find((a) => a[1] === '-q' && a[2] === '-d');
const FABRIC = smi.find((a) => a[1]?.startsWith('--query-gpu=') && a[1].includes('fabric.'));
const OTHERS = smi.filter((a) => a !== GSP && a !== FABRIC && a.join(' ') !== FULL_Q.join(' '));
if (!GSP || !FABRIC) {
  console.error(
    `this host's preflight did not ask the narrow pair (it ran: ${smi.map((a) => a.join(' ')).join('; ') || 'no nvidia-smi'})`,
  );
  process.exit(1);
}
const env = { ...process.env, LC_ALL: 'C' };
const run = (argv) =>
  new Promise((resolve) => {
    const s = performance.now();
    const c = spawn(argv[0], argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    c.stdout.on('data', (b) => (out += b));
    c.stderr.on('data', (b) => (out += b));
    c.on('error', () => resolve({ ms: Number.NaN, code: null, out: 'not installed' }));
    c.on('close', (code) => resolve({ ms: performance.now() - s, code, out }));
  });
const wall = async (calls) => {
  const s = performance.now();
  await Promise.all(calls.map(run));
  return performance.now() - s;
};
const busy = (ms) => {
  const t = Date.now();
  while (Date.now() - t < ms) {}
};

for (const argv of [GSP, FABRIC]) {
  const r = await run(argv);
  console.log(`## ${argv.join(' ')} (exit ${r.code})\n${r.out.slice(0, 2000)}`);
}
const variants = {
  'whole -q alone': async () => (await run(FULL_Q)).ms,
  'whole -q beside the other nvidia-smi calls': async () =>
    (await Promise.all([run(FULL_Q), ...OTHERS.map(run)]))[0].ms,
  'whole -q, the spawning main thread busy 80 ms': async () => {
    const p = run(FULL_Q);
    busy(80);
    return (await p).ms;
  },
  'GSP section alone': async () => (await run(GSP)).ms,
  'fabric query alone': async () => (await run(FABRIC)).ms,
  'narrow pair together': () => wall([GSP, FABRIC]),
  'every nvidia-smi call, with the whole -q': () => wall([FULL_Q, ...OTHERS]),
  'every nvidia-smi call, with the narrow pair': () => wall([GSP, FABRIC, ...OTHERS]),
};
const got = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
for (let i = 0; i < 2; i++) for (const v of Object.values(variants)) await v();
for (let i = 0; i < runs; i++) for (const [k, v] of Object.entries(variants)) got[k].push(await v());
console.log(
  JSON.stringify({ runs, ms: Object.fromEntries(Object.entries(got).map(([k, v]) => [k, spread(v)])) }, null, 2),
);
