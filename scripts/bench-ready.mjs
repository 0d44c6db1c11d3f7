#!/usr/bin/env node
// Readiness lag: how long after the server first answers /health 200 does `sparkctl serve` say ready?
// The simulator logs "Application startup complete." the moment it listens; a watcher here polls
// /health every 5 ms to timestamp that moment independently. Compared with NVIDIA's playbook loop
// (`until curl -sf localhost:8000/health; do sleep 10; done`), whose lag is uniform in [0, 10 s).
// Usage: node scripts/bench-ready.mjs [runs=5]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN as bin, freePort } from './lib/sim.mjs';

const runs = Number(process.argv[2] ?? 5);
const lags = [];
for (let i = 0; i < runs; i++) {
  const state = mkdtempSync(join(tmpdir(), 'bench-ready-'));
  const port = await freePort();
  const env = { ...process.env, SPARKCTL_STATE_DIR: state, SPARKCTL_SIM_LOAD_SECONDS: '1.5', NO_COLOR: '1', CI: '1' };
  let firstHealthy;
  let stop = false;
  const watcher = (async () => {
    while (!stop && !firstHealthy) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) firstHealthy = performance.now();
      } catch {}
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  let readyAt;
  const child = spawn(
    process.execPath,
    [
      bin,
      'serve',
      'qwen3.5-9b',
      '--engine',
      'sim',
      '--no-prewarm',
      '--set',
      `server.port=${port}`,
      '--set',
      'server.host=127.0.0.1',
      '--set',
      'parallel.replicas=1',
    ],
    { env, stdio: ['ignore', 'pipe', 'ignore'] },
  );
  child.stdout.on('data', (d) => {
    if (!readyAt && /^ready:/m.test(String(d))) readyAt = performance.now();
  });
  await new Promise((r) => child.on('exit', r));
  stop = true;
  await watcher;
  spawn(process.execPath, [bin, 'stop', '--all'], { env, stdio: 'ignore' }).on('exit', () =>
    rmSync(state, { recursive: true, force: true }),
  );
  await new Promise((r) => setTimeout(r, 800));
  if (firstHealthy && readyAt) lags.push(readyAt - firstHealthy);
}
lags.sort((a, b) => a - b);
console.log(
  JSON.stringify(
    {
      runs: lags.length,
      readinessLagMs: {
        min: +lags[0].toFixed(1),
        median: +lags[Math.floor(lags.length / 2)].toFixed(1),
        max: +lags.at(-1).toFixed(1),
      },
      curlLoop10s: { expectedMeanMs: 5000, worstMs: 10000 },
    },
    null,
    2,
  ),
);
