#!/usr/bin/env node
// Two builds' whole `sparkctl preflight --json` processes, in alternating pairs (the order flips each
// pair), so both share the machine's conditions: a change's cost or gain on one host, where the
// spread between runs (Node's start, the probes) is larger than the change.
//
// Runs from built packages alone (bin/, dist/, profiles/; no node_modules needed).
// Usage: node scripts/pair-preflight.mjs A/bin/sparkctl.js B/bin/sparkctl.js [pairs=30]
// Prints one JSON object: each build's median and minimum (ms), the median of B - A per pair, and
// in how many pairs B was faster.
import { execFile } from 'node:child_process';
import { median } from './lib/stats.mjs';

const [a, b, n = '30'] = process.argv.slice(2);
if (!a || !b) {
  console.error('usage: node scripts/pair-preflight.mjs A_BIN B_BIN [pairs=30]');
  process.exit(2);
}
const env = { ...process.env, LC_ALL: 'C', NO_COLOR: '1' };
const once = (bin) =>
  new Promise((resolve) => {
    const s = performance.now();
    execFile(process.execPath, [bin, 'preflight', '--json'], { env, maxBuffer: 1 << 24 }, () =>
      resolve(performance.now() - s),
    );
  });

// warm the page cache and the tools (nvidia-smi's first call after idle is slower)
for (let i = 0; i < 3; i++) {
  await once(a);
  await once(b);
}
const A = [];
const B = [];
for (let i = 0; i < Number(n); i++) {
  if (i % 2) {
    B.push(await once(b));
    A.push(await once(a));
  } else {
    A.push(await once(a));
    B.push(await once(b));
  }
}
const d = B.map((x, i) => x - A[i]);
console.log(
  JSON.stringify({
    pairs: A.length,
    a: { bin: a, median: median(A), min: +Math.min(...A).toFixed(1) },
    b: { bin: b, median: median(B), min: +Math.min(...B).toFixed(1) },
    'median of b-a per pair': median(d),
    'pairs where b was faster': d.filter((x) => x < 0).length,
  }),
);
