#!/usr/bin/env node
// Throughput of the simulator itself: non-streamed 1-token completions, time model off
// (--sim-time-factor 0), the simulator pinned to one core (taskset) and autocannon on the other.
// Usage: node scripts/bench-sim.mjs [seconds=10] [connections=64]
import { spawn, execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import autocannon from 'autocannon';

const seconds = Number(process.argv[2] ?? 10);
const connections = Number(process.argv[3] ?? 64);
const bin = new URL('../bin/sparkctl.js', import.meta.url).pathname;
const port = await new Promise((r) => {
  const s = createServer();
  s.listen(0, '127.0.0.1', () => {
    const p = s.address().port;
    s.close(() => r(p));
  });
});
let hasTaskset = true;
try {
  execFileSync('taskset', ['-V'], { stdio: 'ignore' });
} catch {
  hasTaskset = false;
}
const simArgv = [
  process.execPath,
  bin,
  'sim',
  'serve',
  'Qwen/Qwen3.5-9B',
  '--host',
  '127.0.0.1',
  '--port',
  String(port),
  '--sim-load-seconds',
  '0',
  '--sim-time-factor',
  '0',
  '--max-model-len',
  '4096',
];
const child = hasTaskset ? spawn('taskset', ['-c', '0', ...simArgv], { stdio: 'ignore', detached: true }) : spawn(simArgv[0], simArgv.slice(1), { stdio: 'ignore', detached: true });
const stop = () => {
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {}
};
process.on('exit', stop);
for (let i = 0; ; i++) {
  try {
    if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) break;
  } catch {}
  if (i > 200) {
    console.error('simulator did not start');
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 50));
}
const result = await autocannon({
  url: `http://127.0.0.1:${port}/v1/completions`,
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ model: 'Qwen/Qwen3.5-9B', prompt: 'Hello', max_tokens: 1, temperature: 0 }),
  connections,
  duration: seconds,
});
console.log(
  JSON.stringify(
    {
      pinnedToOneCore: hasTaskset,
      seconds,
      connections,
      requestsPerSecond: { mean: result.requests.average, p50: result.requests.p50, min: result.requests.min },
      latencyMs: { p50: result.latency.p50, p99: result.latency.p99 },
      non2xx: result.non2xx,
      errors: result.errors,
    },
    null,
    2,
  ),
);
stop();
