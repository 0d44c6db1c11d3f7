#!/usr/bin/env node
// Wall time of `sparkctl preflight` (the whole process, and the report's own wallMs), N runs.
// Usage: node scripts/bench-preflight.mjs [runs=10] [extra preflight args...]
import { execFileSync } from 'node:child_process';
const runs = Number(process.argv[2] ?? 10);
const extra = process.argv.slice(3);
const bin = new URL('../bin/sparkctl.js', import.meta.url).pathname;
const proc = [];
const inner = [];
for (let i = 0; i < runs; i++) {
  const s = performance.now();
  let out;
  try { out = execFileSync(process.execPath, [bin, 'preflight', '--json', ...extra], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }); }
  catch (e) { out = e.stdout; }
  proc.push(performance.now() - s);
  inner.push(JSON.parse(out).wallMs);
}
const stats = (a) => { const s = [...a].sort((x, y) => x - y); return { min: +s[0].toFixed(1), median: +s[Math.floor(s.length / 2)].toFixed(1), max: +s.at(-1).toFixed(1) }; };
console.log(JSON.stringify({ runs, args: extra, processWallMs: stats(proc), reportWallMs: stats(inner) }, null, 2));
