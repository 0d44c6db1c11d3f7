#!/usr/bin/env node
// (0) A warm deep probe, whole process (`probe --url` against a warm simulator), against `node -e 0`.
// (1) What a healthy deep probe costs beyond its 1-token generation (sim with zero model time).
// (2) 100 simulated servers (one process, 100 ports) probed together by one `sparkctl probe`.
// Usage: node scripts/bench-probe.mjs [servers=100] [runs=15]
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
const run = promisify(execFile);
import { Engine, createMetrics } from '../dist/sim/engine.js';
import { SimServer } from '../dist/sim/server.js';

const n = Number(process.argv[2] ?? 100);
const bin = new URL('../bin/sparkctl.js', import.meta.url).pathname;
const timing = { prefillTps: 1e9, decodeMs: 0, batchSlowdown: 0, coldMs: 0, timeFactor: 0, slowMs: 0 };
const servers = [];
for (let i = 0; i < n; i++) {
  const metrics = await createMetrics('m');
  const engine = new Engine({ maxNumSeqs: 256, kvTokens: 1e6, maxModelLen: 4096 }, timing, metrics, {});
  const s = new SimServer({ model: 'm', servedName: 'm', maxModelLen: 4096, vllmVersion: '0.17.0', seed: i, errorRate: 0, errorTypes: [], log: () => {} }, engine, metrics);
  await new Promise((r) => s.server.listen(0, '127.0.0.1', r));
  servers.push(s);
}
const urls = servers.map((s) => `http://127.0.0.1:${s.server.address().port}`);
const env = { ...process.env, SPARKCTL_STATE_DIR: '/tmp/sparkctl-bench-probe', NO_COLOR: '1' };
// The servers live in this process: the probe must run asynchronously beside them.
const runProbe = async (targets) => {
  const args = [bin, 'probe', ...targets.flatMap((u) => ['--url', u]), '--json'];
  const s = performance.now();
  const { stdout } = await run(process.execPath, args, { env, encoding: 'utf8', maxBuffer: 64 << 20 });
  return { wallMs: performance.now() - s, results: JSON.parse(stdout).results };
};
// (0) whole process, one warm target; medians of `runs` after two warm-up runs each (page cache)
const runs = Number(process.argv[3] ?? 15);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const wall = async (args) => {
  const t = [];
  for (let i = 0; i < runs + 2; i++) {
    const s = performance.now();
    await run(process.execPath, args, { env, encoding: 'utf8', maxBuffer: 64 << 20 }).catch(() => {});
    if (i >= 2) t.push(performance.now() - s);
  }
  return +median(t).toFixed(1);
};
const nodeMs = await wall(['-e', '0']);
const probeMs = await wall([bin, 'probe', '--url', urls[0], '--json']);
const stepsMs = [];
for (let i = 0; i < 5; i++) stepsMs.push((await runProbe([urls[0]])).results[0].ms);
// (1) one target, several runs: probe time minus the generation step
const overhead = [];
for (let i = 0; i < 10; i++) {
  const { results } = await runProbe([urls[0]]);
  const r = results[0];
  overhead.push(r.ms - r.inferenceMs);
}
overhead.sort((a, b) => a - b);
// (2) all of them at once
const all = [];
for (let i = 0; i < 3; i++) all.push(await runProbe(urls));
const best = all.map((x) => x.wallMs).sort((a, b) => a - b);
console.log(
  JSON.stringify(
    {
      warmProbeWholeProcessMs: { 'node -e 0': nodeMs, 'probe --url --json': probeMs, ratioToNode: +(probeMs / nodeMs).toFixed(2), probeStepsMs: median(stepsMs) },
      probeOverheadBeyondGenerationMs: { min: overhead[0], median: overhead[5], max: overhead.at(-1) },
      [`${n}ServersTogether`]: { processWallMs: best.map((x) => +x.toFixed(0)), healthy: all[0].results.filter((r) => r.state === 'healthy').length },
    },
    null,
    2,
  ),
);
for (const s of servers) s.server.close();
process.exit(0);
