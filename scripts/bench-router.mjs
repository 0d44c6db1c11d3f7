#!/usr/bin/env node
// What the router costs: the latency HAProxy adds per request (p50/p99, through the router against
// a direct connection, one request at a time, interleaved in rounds) and its throughput ceiling on
// this machine (autocannon, closed loop), against the simulator with its time model off. The
// simulators are pinned to core 0; HAProxy (nbthread 1) and the load to core 1. The config is the one
// sparkctl runs (src/router/config.ts: keep-alive to the replicas), plus an `option http-server-close`
// variant (a new connection to the replica per request), the alternative the config comments price.
// Usage: node scripts/bench-router.mjs [latencyRequests=2000] [seconds=8] [connections=32]
import autocannon from 'autocannon';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request, Agent } from 'undici';
import { freePort, hasTaskset, pin, spawnKept, startSim, untilHealthy } from './lib/sim.mjs';

const N = Number(process.argv[2] ?? 2000);
const seconds = Number(process.argv[3] ?? 8);
const connections = Number(process.argv[4] ?? 32);
const HAPROXY = process.env.HAPROXY ?? '/usr/sbin/haproxy';
const { planRouter, renderConfig } = await import('../dist/profiles/router.js');
const { Profile } = await import('../dist/profiles/schema.js');

const dir = mkdtempSync(join(tmpdir(), 'bench-router-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

const sims = [await startSim(['--sim-time-factor', '0', '--max-model-len', '4096'], { core: 0 }), await startSim(['--sim-time-factor', '0', '--max-model-len', '4096'], { core: 0 })];

async function startRouter(servers, serverClose) {
  const port = await freePort();
  const stats = await freePort();
  const profile = Profile.parse({
    name: 'bench',
    model: { id: 'Qwen/Qwen3.5-9B', parameters: 9e9, layers: 32, attentionHeads: 16, kvHeads: 4, headDim: 256, maxContext: 4096 },
    server: { host: '127.0.0.1', port },
    router: { statsPort: stats },
  });
  const plan = planRouter(profile, servers.length, dir);
  plan.servers = servers.map((s, i) => ({ name: `bench-${i}`, host: '127.0.0.1', port: s.port }));
  let cfg = renderConfig(plan, { logStdout: true }).replace('global\n', 'global\n    nbthread 1\n');
  if (serverClose) cfg = cfg.replace('option http-keep-alive\n    http-reuse safe', 'option http-server-close');
  if (serverClose && !cfg.includes('http-server-close')) throw new Error('the config no longer has the keep-alive lines this variant replaces');
  const file = join(dir, `haproxy-${port}.cfg`);
  writeFileSync(file, cfg);
  const [cmd, argv] = pin(1, [HAPROXY, '-db', '-f', file]);
  const child = spawnKept(cmd, argv);
  await untilHealthy(port, 'haproxy', 200);
  return { port, stop: () => process.kill(-child.pid, 'SIGKILL') };
}

const body = JSON.stringify({ model: 'Qwen/Qwen3.5-9B', prompt: 'Hello', max_tokens: 1, temperature: 0 });
const agent = new Agent({ connections: 1, pipelining: 1 });
async function once(port) {
  const t = performance.now();
  const r = await request(`http://127.0.0.1:${port}/v1/completions`, { method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher: agent });
  await r.body.text();
  if (r.statusCode !== 200) throw new Error(`HTTP ${r.statusCode}`);
  return performance.now() - t;
}
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  const i = (s.length - 1) * p;
  const lo = Math.floor(i);
  return s[lo] + (s[Math.ceil(i)] - s[lo]) * (i - lo);
};

async function latency(routerPort) {
  const direct = [];
  const routed = [];
  for (let i = 0; i < 200; i++) await once(sims[0].port), await once(routerPort); // warm both paths
  // Rounds of 50, alternating, so drift on a shared machine hits both sides alike.
  for (let done = 0; done < N; done += 50) {
    for (let i = 0; i < 50; i++) direct.push(await once(sims[0].port));
    for (let i = 0; i < 50; i++) routed.push(await once(routerPort));
  }
  const r = (xs) => ({ p50: +pct(xs, 0.5).toFixed(3), p99: +pct(xs, 0.99).toFixed(3) });
  const d = r(direct);
  const v = r(routed);
  return { direct: d, viaRouter: v, addedMs: { p50: +(v.p50 - d.p50).toFixed(3), p99: +(v.p99 - d.p99).toFixed(3) } };
}

async function ceiling(port) {
  const res = await autocannon({ url: `http://127.0.0.1:${port}/v1/completions`, method: 'POST', headers: { 'content-type': 'application/json' }, body, connections, duration: seconds });
  return { reqPerSec: Math.round(res.requests.average), p50Ms: res.latency.p50, p99Ms: res.latency.p99, non2xx: res.non2xx, errors: res.errors };
}

const r1 = await startRouter([sims[0]], false);
const lat = await latency(r1.port);
const directCeiling = await ceiling(sims[0].port);
const routerOne = await ceiling(r1.port);
r1.stop();
const r2 = await startRouter(sims, false);
const routerTwo = await ceiling(r2.port);
r2.stop();
const c2 = await startRouter(sims, true);
const closeTwo = await ceiling(c2.port);
const closeLat = await latency(c2.port);
c2.stop();
console.log(
  JSON.stringify(
    {
      pinned: hasTaskset ? 'simulators on core 0; HAProxy (1 thread) and the load on core 1' : 'no taskset: not pinned',
      latency: { requests: N, oneAtATime: true, keepAlive: lat, httpServerCloseVariant: closeLat },
      throughput: {
        seconds,
        connections,
        directOneSimulator: directCeiling,
        routerOneSimulator: routerOne,
        routerTwoSimulators: routerTwo,
        routerTwoSimulatorsHttpServerClose: closeTwo,
      },
    },
    null,
    2,
  ),
);
for (const s of sims) s.stop();
process.exit(0);
