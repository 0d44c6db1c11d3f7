#!/usr/bin/env node
// Where a whole `sparkctl preflight --json` process spends its time: when its first and last probe
// start, when the last one ends (and which), and how long the process runs after that, in ms since
// the process started (medians over the runs; the wall is measured from outside). Companion of
// bench-preflight.mjs, which gives the totals; this gives the timeline.
//
// Runs from the built package alone (bin/, dist/, profiles/, scripts/; no node_modules needed).
// Usage: node scripts/trace-preflight.mjs [runs=15] [extra preflight args...]
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median, spread } from './lib/stats.mjs';

const runs = Number(process.argv[2] ?? 15);
const extra = process.argv.slice(3);
const root = new URL('..', import.meta.url).pathname;
const bin = join(root, 'bin', 'sparkctl.js');
const hook = join(root, 'scripts', 'lib', 'spawn-trace.cjs');
const dir = mkdtempSync(join(tmpdir(), 'trace-preflight-'));

const once = (i) =>
  new Promise((resolve) => {
    const file = join(dir, `t${i}.json`);
    const env = { ...process.env, LC_ALL: 'C', NO_COLOR: '1', SPARKCTL_SPAWN_TRACE: file };
    const s = performance.now();
    execFile(
      process.execPath,
      ['--require', hook, bin, 'preflight', '--json', ...extra],
      { env, maxBuffer: 16 << 20 },
      (_e, stdout) => {
        const wall = performance.now() - s;
        let wallMs = null;
        try {
          wallMs = JSON.parse(stdout).wallMs;
        } catch {}
        resolve({ wall, wallMs, t: JSON.parse(readFileSync(file, 'utf8')) });
      },
    );
  });

const rows = [];
try {
  for (let i = 0; i < 2; i++) await once(`w${i}`);
  for (let i = 0; i < runs; i++) rows.push(await once(i));
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const last = {};
const pick = rows.map(({ wall, wallMs, t }) => {
  const ev = t.events;
  const end = (e) => e.closeAt ?? e.exitAt ?? t.exitAt;
  const lastEnd = ev.reduce((a, e) => (end(e) > end(a) ? e : a), ev[0]);
  last[lastEnd.argv] = (last[lastEnd.argv] ?? 0) + 1;
  return {
    wall,
    wallMs,
    exitAt: t.exitAt,
    firstSpawnAt: Math.min(...ev.map((e) => e.at)),
    lastSpawnAt: Math.max(...ev.map((e) => e.at)),
    spawnCallsMs: ev.reduce((a, e) => a + e.spawnedIn, 0),
    lastProbeEndAt: end(lastEnd),
    afterLastProbe: t.exitAt - end(lastEnd),
    probes: ev.length,
  };
});
const col = (k) => spread(pick.map((r) => r[k]).filter((v) => typeof v === 'number'));
const probeSpans = {};
for (const { t } of rows)
  for (const e of t.events) (probeSpans[e.argv] ??= []).push((e.closeAt ?? e.exitAt ?? t.exitAt) - e.at);
console.log(
  JSON.stringify(
    {
      runs,
      args: extra,
      ms: {
        'whole process (outside)': col('wall'),
        'report wallMs': col('wallMs'),
        'first probe spawned at': col('firstSpawnAt'),
        'last probe spawned at': col('lastSpawnAt'),
        'time inside spawn() calls': col('spawnCallsMs'),
        'last probe ended at': col('lastProbeEndAt'),
        'process exit at': col('exitAt'),
        'from the last probe to exit': col('afterLastProbe'),
      },
      probes: pick[0]?.probes,
      'the last probe to end (runs)': last,
      'each probe, spawn to close (median ms)': Object.fromEntries(
        Object.entries(probeSpans)
          .map(([k, v]) => [k, median(v)])
          .sort((a, b) => b[1] - a[1]),
      ),
    },
    null,
    2,
  ),
);
