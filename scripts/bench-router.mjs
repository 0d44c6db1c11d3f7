#!/usr/bin/env node
// What the router costs: the latency HAProxy adds per request (p50/p99, through the router against
// a direct connection, one request at a time, interleaved in rounds) and its throughput ceiling on
// this machine (autocannon, closed loop), against the simulator with its time model off. The
// simulators are pinned to core 0; HAProxy (nbthread 1) and the load to core 1. The config is the one
// sparkctl runs (src/profiles/router.ts: keep-alive to the replicas), plus an `option http-server-close`
// variant (a new connection to the replica per request), the alternative the config comments price.
// Usage: node scripts/bench-router.mjs [latencyRequests=2000] [seconds=8] [connections=32]
//        node scripts/bench-router.mjs ttft [streams=300]: the time to first token of a stream (the
//        simulator's time model on: tokens come one by one, as from vLLM) direct, through the router
//        as sparkctl configures it, and through the same config without `option http-no-delay`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, hasTaskset, startSim } from './lib/sim.mjs';
import {
  startHaproxy,
  completionBody,
  interleaved,
  p50p99,
  ceiling as ceilingOf,
  streamBody,
  interleavedTtft,
} from './lib/proxy-bench.mjs';

const TTFT = process.argv[2] === 'ttft';
const N = Number(TTFT ? (process.argv[3] ?? 300) : (process.argv[2] ?? 2000));
const seconds = Number(process.argv[3] ?? 8);
const connections = Number(process.argv[4] ?? 32);
const { planRouter, renderConfig } = await import('../dist/profiles/router.js');
const { Profile } = await import('../dist/profiles/schema.js');

const dir = mkdtempSync(join(tmpdir(), 'bench-router-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

const sims = TTFT
  ? [await startSim(['--max-model-len', '4096'], { core: 0 })]
  : [
      await startSim(['--sim-time-factor', '0', '--max-model-len', '4096'], { core: 0 }),
      await startSim(['--sim-time-factor', '0', '--max-model-len', '4096'], { core: 0 }),
    ];

async function startRouter(servers, serverClose, noDelay = true) {
  const port = await freePort();
  const stats = await freePort();
  const profile = Profile.parse({
    name: 'bench',
    model: {
      id: 'Qwen/Qwen3.5-9B',
      parameters: 9e9,
      layers: 32,
      attentionHeads: 16,
      kvHeads: 4,
      headDim: 256,
      maxContext: 4096,
    },
    server: { host: '127.0.0.1', port },
    router: { statsPort: stats },
  });
  const plan = planRouter(profile, servers.length, dir);
  plan.servers = servers.map((s, i) => ({ name: `bench-${i}`, host: '127.0.0.1', port: s.port }));
  let cfg = renderConfig(plan, { logStdout: true });
  if (serverClose) cfg = cfg.replace('option http-keep-alive\n    http-reuse safe', 'option http-server-close');
  if (serverClose && !cfg.includes('http-server-close'))
    throw new Error('the config no longer has the keep-alive lines this variant replaces');
  if (!noDelay) {
    if (!cfg.includes('    option http-no-delay\n'))
      throw new Error('the config no longer has the http-no-delay line this variant removes');
    cfg = cfg.replace('    option http-no-delay\n', '');
  }
  return startHaproxy(cfg, join(dir, `haproxy-${port}.cfg`), port);
}

const body = completionBody('Qwen/Qwen3.5-9B');

async function latency(routerPort) {
  const [direct, routed] = await interleaved([sims[0].port, routerPort], N, body);
  const d = p50p99(direct);
  const v = p50p99(routed);
  return { direct: d, viaRouter: v, addedMs: { p50: +(v.p50 - d.p50).toFixed(3), p99: +(v.p99 - d.p99).toFixed(3) } };
}

const ceiling = (port) => ceilingOf(port, body, connections, seconds);

if (TTFT) {
  const withIt = await startRouter(sims, false, true);
  const without = await startRouter(sims, false, false);
  const [d, r, w] = (
    await interleavedTtft([sims[0].port, withIt.port, without.port], N, streamBody('Qwen/Qwen3.5-9B'))
  ).map(p50p99);
  const added = (x) => ({ p50: +(x.p50 - d.p50).toFixed(3), p99: +(x.p99 - d.p99).toFixed(3) });
  console.log(
    JSON.stringify(
      {
        ttftMs: {
          streams: N,
          direct: d,
          router: r,
          routerWithoutHttpNoDelay: w,
          addedByRouter: added(r),
          addedWithoutHttpNoDelay: added(w),
        },
      },
      null,
      2,
    ),
  );
  withIt.stop();
  without.stop();
  for (const s of sims) s.stop();
  process.exit(0);
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
