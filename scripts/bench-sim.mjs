#!/usr/bin/env node
// Throughput of the simulator itself: non-streamed 1-token completions, time model off
// (--sim-time-factor 0), the simulator pinned to one core (taskset) and autocannon on the other.
// cpuMsPer1kRequests is the simulator's own CPU time per 1000 answered requests: on a host that is
// busy with other work it moves far less than requests per second does.
// Usage: node scripts/bench-sim.mjs [seconds=10] [connections=64]
import autocannon from 'autocannon';
import { cpuSeconds, hasTaskset, startSim } from './lib/sim.mjs';

const seconds = Number(process.argv[2] ?? 10);
const connections = Number(process.argv[3] ?? 64);
const sim = await startSim(['--sim-time-factor', '0', '--max-model-len', '4096'], { core: 0 });
const port = sim.port;
const cpu0 = cpuSeconds(sim.pid);
const result = await autocannon({
  url: `http://127.0.0.1:${port}/v1/completions`,
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ model: 'Qwen/Qwen3.5-9B', prompt: 'Hello', max_tokens: 1, temperature: 0 }),
  connections,
  duration: seconds,
});
const cpu1 = cpuSeconds(sim.pid);
const answered = result.requests.total - result.non2xx;
console.log(
  JSON.stringify(
    {
      pinnedToOneCore: hasTaskset,
      seconds,
      connections,
      requestsPerSecond: { mean: result.requests.average, p50: result.requests.p50, min: result.requests.min },
      latencyMs: { p50: result.latency.p50, p99: result.latency.p99 },
      cpuMsPer1kRequests:
        cpu0 !== undefined && cpu1 !== undefined && answered
          ? +(((cpu1 - cpu0) * 1e6) / answered).toFixed(1)
          : undefined,
      non2xx: result.non2xx,
      errors: result.errors,
    },
    null,
    2,
  ),
);
sim.stop();
