#!/usr/bin/env node
// What the gateway costs: the latency it adds per request (p50/p99, one request at a time, in
// alternating rounds of 50) against a direct connection to the simulator, and its throughput ceiling
// (autocannon, closed loop) at the simulator's limit (time model off), for the configuration sparkctl
// runs (src/gateway/config.ts: the body buffered, req.body,json_query('$.model') and the map file)
// and for the same configuration with the routing lines taken out (one default backend, the body
// still buffered): the difference is what reading the model costs. HAProxy (1 thread) and the load on
// core 1, the simulator on core 0, where taskset exists. Several rounds (a shared 2-core host drifts):
// each round measures everything again on the same processes; the report gives every figure as
// min / median / max over the rounds, and the rounds themselves. A third configuration, the gateway
// without admission and prefix routing (no 429 rule, no maxconn, leastconn), gives what those cost
// (with the usage filter, which that one lacks); a fourth, sparkctl's config without the usage filter,
// gives what the filter costs alone.
// Usage: node scripts/bench-gateway.mjs [latencyRequests=2000] [seconds=8] [connections=32] [rounds=3]
//        node scripts/bench-gateway.mjs ttft [streams=300]: the time to first token of a stream (the
//        simulator's time model on) direct, through the gateway as sparkctl configures it, and through
//        the same config without `option http-no-delay`.
import { mkdtempSync, writeFileSync, rmSync, mkdirSync } from 'node:fs';
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
import { spread } from './lib/stats.mjs';

const TTFT = process.argv[2] === 'ttft';
const N = Number(TTFT ? (process.argv[3] ?? 300) : (process.argv[2] ?? 2000));
const seconds = Number(process.argv[3] ?? 8);
const connections = Number(process.argv[4] ?? 32);
const rounds = Number(process.argv[5] ?? 3);
const { GatewaySettings, planGateway } = await import('../dist/gateway/plan.js');
const { renderGatewayConfig, modelsJson, modelsMap, aliasesMap, unknownModelBody } = await import(
  '../dist/gateway/config.js'
);
const { USAGE_LUA } = await import('../dist/gateway/usage.js');

const dir = mkdtempSync(join(tmpdir(), 'bench-gateway-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
const sim = await startSim(TTFT ? ['--max-model-len', '4096'] : ['--sim-time-factor', '0', '--max-model-len', '4096'], {
  core: 0,
});
const MODEL = 'Qwen/Qwen3.5-9B';

async function startGateway(routing, admission = true, noDelay = true, usage = true) {
  const port = await freePort();
  const s = GatewaySettings.parse({
    port,
    statsPort: await freePort(),
    wakerPort: await freePort(),
    balance: admission ? 'prefix' : 'leastconn',
  });
  const other = { name: 'other-0', profile: 'other', servedName: 'other-model', host: '127.0.0.1', port: 1, argv: [] };
  const plan = planGateway(
    s,
    [{ name: 'bench-0', profile: 'bench', servedName: MODEL, host: '127.0.0.1', port: sim.port, argv: [] }, other],
    join(dir, String(port)),
  );
  mkdirSync(plan.dir, { recursive: true });
  // the usage filter as the keeper runs it when HAProxy has Lua (src/gateway/usage.ts); its log lines
  // go to stderr here (the keeper reads them from a pipe): one write per request either way
  let lua;
  if (usage && admission) {
    lua = join(plan.dir, 'usage.lua');
    writeFileSync(lua, USAGE_LUA);
  }
  let cfg = renderGatewayConfig(plan, { logStdout: true, ...(lua ? { usage: { lua, logFd: 2 } } : {}) });
  if (!routing) {
    const before = cfg;
    cfg = cfg
      .split('\n')
      .filter((l) => !/json_query|map\(|set-var|use_backend|lf-file|names no model|X-Sparkctl/.test(l))
      .join('\n')
      .replace(
        'frontend gateway\n',
        `frontend gateway\n    default_backend ${plan.models.find((m) => m.name === MODEL).backend}\n`,
      );
    if (cfg === before || cfg.includes('json_query'))
      throw new Error('the routing lines this variant removes are no longer there');
  }
  if (!admission) {
    // the gateway as it was before admission and prefix routing (issue 46): no 429 rule, no maxconn, no http-error,
    // leastconn
    const before = cfg;
    cfg = cfg
      .split('\n')
      .filter((l) => !/status 429|http-error/.test(l))
      .map((l) => l.replace(/ maxconn \d+$/, ''))
      .join('\n');
    if (cfg === before) throw new Error('the admission lines this variant removes are no longer there');
  }
  if (!noDelay) {
    if (!cfg.includes('    option http-no-delay\n'))
      throw new Error('the config no longer has the http-no-delay line this variant removes');
    cfg = cfg.replace('    option http-no-delay\n', '');
  }
  writeFileSync(plan.files.models, modelsJson(plan));
  writeFileSync(plan.files.map, modelsMap(plan));
  writeFileSync(plan.files.aliasMap, aliasesMap(plan));
  writeFileSync(plan.files.unknown, unknownModelBody(plan));
  return startHaproxy(cfg, plan.files.config, port);
}

const body = completionBody(MODEL);

async function latency(routed, plain, bare, noUsage) {
  const [d, g, p, b, u] = (await interleaved([sim.port, routed, plain, bare, noUsage], N, body)).map(p50p99);
  return {
    direct: d,
    gateway: g,
    gatewayWithoutRouting: p,
    gatewayWithoutAdmission: b,
    gatewayWithoutUsageFilter: u,
    // admission, prefix hash and the usage filter together; then the filter alone
    admissionAndPrefixMs: { p50: +(g.p50 - b.p50).toFixed(3), p99: +(g.p99 - b.p99).toFixed(3) },
    usageFilterMs: { p50: +(g.p50 - u.p50).toFixed(3), p99: +(g.p99 - u.p99).toFixed(3) },
    addedByGatewayMs: { p50: +(g.p50 - d.p50).toFixed(3), p99: +(g.p99 - d.p99).toFixed(3) },
    jsonQueryAndMapMs: { p50: +(g.p50 - p.p50).toFixed(3), p99: +(g.p99 - p.p99).toFixed(3) },
  };
}

const ceiling = (port) => ceilingOf(port, body, connections, seconds);

if (TTFT) {
  const withIt = await startGateway(true, true, true);
  const without = await startGateway(true, true, false);
  const [d, g, w] = (await interleavedTtft([sim.port, withIt.port, without.port], N, streamBody(MODEL))).map(p50p99);
  const added = (x) => ({ p50: +(x.p50 - d.p50).toFixed(3), p99: +(x.p99 - d.p99).toFixed(3) });
  console.log(
    JSON.stringify(
      {
        ttftMs: {
          streams: N,
          direct: d,
          gateway: g,
          gatewayWithoutHttpNoDelay: w,
          addedByGateway: added(g),
          addedWithoutHttpNoDelay: added(w),
        },
      },
      null,
      2,
    ),
  );
  withIt.stop();
  without.stop();
  sim.stop();
  process.exit(0);
}

const routed = await startGateway(true);
const plain = await startGateway(false);
const bare = await startGateway(true, false);
const noUsage = await startGateway(true, true, true, false);
const all = [];
for (let i = 0; i < rounds; i++) {
  const lat = await latency(routed.port, plain.port, bare.port, noUsage.port);
  all.push({
    latency: lat,
    throughput: {
      direct: await ceiling(sim.port),
      gateway: await ceiling(routed.port),
      gatewayWithoutRouting: await ceiling(plain.port),
    },
  });
  process.stderr.write(
    `round ${i + 1}/${rounds}: +${lat.addedByGatewayMs.p50} ms p50 through the gateway, json_query ${lat.jsonQueryAndMapMs.p50} ms, admission + prefix hash + usage ${lat.admissionAndPrefixMs.p50} ms, usage filter ${lat.usageFilterMs.p50} ms\n`,
  );
}
routed.stop();
plain.stop();
bare.stop();
noUsage.stop();
sim.stop();
const over = (f) => spread(all.map(f), 3);
console.log(
  JSON.stringify(
    {
      pinned: hasTaskset ? 'simulator on core 0; HAProxy (1 thread) and the load on core 1' : 'no taskset: not pinned',
      rounds,
      latencyRequestsPerRound: N,
      summary: {
        note: 'min / median / max over the rounds; ms except reqPerSec',
        p50: {
          direct: over((r) => r.latency.direct.p50),
          gateway: over((r) => r.latency.gateway.p50),
          gatewayWithoutRouting: over((r) => r.latency.gatewayWithoutRouting.p50),
        },
        p99: {
          direct: over((r) => r.latency.direct.p99),
          gateway: over((r) => r.latency.gateway.p99),
          gatewayWithoutRouting: over((r) => r.latency.gatewayWithoutRouting.p99),
        },
        addedByGatewayMs: {
          p50: over((r) => r.latency.addedByGatewayMs.p50),
          p99: over((r) => r.latency.addedByGatewayMs.p99),
        },
        jsonQueryAndMapMs: {
          p50: over((r) => r.latency.jsonQueryAndMapMs.p50),
          p99: over((r) => r.latency.jsonQueryAndMapMs.p99),
        },
        admissionAndPrefixMs: {
          p50: over((r) => r.latency.admissionAndPrefixMs.p50),
          p99: over((r) => r.latency.admissionAndPrefixMs.p99),
        },
        usageFilterMs: { p50: over((r) => r.latency.usageFilterMs.p50), p99: over((r) => r.latency.usageFilterMs.p99) },
        reqPerSec: {
          connections,
          seconds,
          direct: over((r) => r.throughput.direct.reqPerSec),
          gateway: over((r) => r.throughput.gateway.reqPerSec),
          gatewayWithoutRouting: over((r) => r.throughput.gatewayWithoutRouting.reqPerSec),
        },
        failed: all.reduce((n, r) => n + Object.values(r.throughput).reduce((m, t) => m + t.non2xx + t.errors, 0), 0),
      },
      perRound: all,
    },
    null,
    2,
  ),
);
process.exit(0);
