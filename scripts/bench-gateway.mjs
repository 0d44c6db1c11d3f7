#!/usr/bin/env node
// What the gateway costs: the latency it adds per request (p50/p99, one request at a time, in
// alternating rounds of 50) against a direct connection to the simulator, and its throughput ceiling
// (autocannon, closed loop) at the simulator's limit (time model off), for the configuration sparkctl
// runs (src/gateway/config.ts: the body buffered, req.body,json_query('$.model') and the map file)
// and for the same configuration with the routing lines taken out (one default backend, the body
// still buffered): the difference is what reading the model costs. HAProxy (1 thread) and the load on
// core 1, the simulator on core 0, where taskset exists.
// Usage: node scripts/bench-gateway.mjs [latencyRequests=2000] [seconds=8] [connections=32]
import autocannon from 'autocannon';
import { mkdtempSync, writeFileSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request, Agent } from 'undici';
import { freePort, hasTaskset, pin, spawnKept, startSim, untilHealthy } from './lib/sim.mjs';

const N = Number(process.argv[2] ?? 2000);
const seconds = Number(process.argv[3] ?? 8);
const connections = Number(process.argv[4] ?? 32);
const HAPROXY = process.env.HAPROXY ?? '/usr/sbin/haproxy';
const { GatewaySettings, planGateway } = await import('../dist/gateway/plan.js');
const { renderGatewayConfig, modelsJson, modelsMap, aliasesMap, unknownModelBody } = await import('../dist/gateway/config.js');

const dir = mkdtempSync(join(tmpdir(), 'bench-gateway-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
const sim = await startSim(['--sim-time-factor', '0', '--max-model-len', '4096'], { core: 0 });
const MODEL = 'Qwen/Qwen3.5-9B';

async function startGateway(routing) {
  const port = await freePort();
  const s = GatewaySettings.parse({ port, statsPort: await freePort(), wakerPort: await freePort() });
  const other = { name: 'other-0', profile: 'other', servedName: 'other-model', host: '127.0.0.1', port: 1, argv: [] };
  const plan = planGateway(s, [{ name: 'bench-0', profile: 'bench', servedName: MODEL, host: '127.0.0.1', port: sim.port, argv: [] }, other], join(dir, String(port)));
  mkdirSync(plan.dir, { recursive: true });
  let cfg = renderGatewayConfig(plan, { logStdout: true }).replace('global\n', 'global\n    nbthread 1\n');
  if (!routing) {
    const before = cfg;
    cfg = cfg
      .split('\n')
      .filter((l) => !/json_query|map\(|set-var|use_backend|lf-file|names no model|X-Sparkctl/.test(l))
      .join('\n')
      .replace('frontend gateway\n', `frontend gateway\n    default_backend ${plan.models.find((m) => m.name === MODEL).backend}\n`);
    if (cfg === before || cfg.includes('json_query')) throw new Error('the routing lines this variant removes are no longer there');
  }
  writeFileSync(plan.files.config, cfg);
  writeFileSync(plan.files.models, modelsJson(plan));
  writeFileSync(plan.files.map, modelsMap(plan));
  writeFileSync(plan.files.aliasMap, aliasesMap(plan));
  writeFileSync(plan.files.unknown, unknownModelBody(plan));
  const [cmd, argv] = pin(1, [HAPROXY, '-db', '-f', plan.files.config]);
  const child = spawnKept(cmd, argv);
  await untilHealthy(port, 'haproxy', 200);
  return { port, stop: () => process.kill(-child.pid, 'SIGKILL') };
}

const body = JSON.stringify({ model: MODEL, prompt: 'Hello', max_tokens: 1, temperature: 0 });
const agent = new Agent({ connections: 1, pipelining: 1 });
async function once(port) {
  const t = performance.now();
  const r = await request(`http://127.0.0.1:${port}/v1/completions`, { method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher: agent });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`HTTP ${r.statusCode}: ${text.slice(0, 200)}`);
  return performance.now() - t;
}
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  const i = (s.length - 1) * p;
  const lo = Math.floor(i);
  return s[lo] + (s[Math.ceil(i)] - s[lo]) * (i - lo);
};
const r = (xs) => ({ p50: +pct(xs, 0.5).toFixed(3), p99: +pct(xs, 0.99).toFixed(3) });

async function latency(routed, plain) {
  const d = [];
  const g = [];
  const p = [];
  for (let i = 0; i < 200; i++) await once(sim.port), await once(routed), await once(plain);
  for (let done = 0; done < N; done += 50) {
    for (let i = 0; i < 50; i++) d.push(await once(sim.port));
    for (let i = 0; i < 50; i++) g.push(await once(routed));
    for (let i = 0; i < 50; i++) p.push(await once(plain));
  }
  const [D, G, P] = [r(d), r(g), r(p)];
  return {
    direct: D,
    gateway: G,
    gatewayWithoutRouting: P,
    addedByGatewayMs: { p50: +(G.p50 - D.p50).toFixed(3), p99: +(G.p99 - D.p99).toFixed(3) },
    jsonQueryAndMapMs: { p50: +(G.p50 - P.p50).toFixed(3), p99: +(G.p99 - P.p99).toFixed(3) },
  };
}

async function ceiling(port) {
  const res = await autocannon({ url: `http://127.0.0.1:${port}/v1/completions`, method: 'POST', headers: { 'content-type': 'application/json' }, body, connections, duration: seconds });
  return { reqPerSec: Math.round(res.requests.average), p50Ms: res.latency.p50, p99Ms: res.latency.p99, non2xx: res.non2xx, errors: res.errors };
}

const routed = await startGateway(true);
const plain = await startGateway(false);
const lat = await latency(routed.port, plain.port);
const direct = await ceiling(sim.port);
const viaGateway = await ceiling(routed.port);
const withoutRouting = await ceiling(plain.port);
routed.stop();
plain.stop();
sim.stop();
console.log(
  JSON.stringify(
    {
      pinned: hasTaskset ? 'simulator on core 0; HAProxy (1 thread) and the load on core 1' : 'no taskset: not pinned',
      latency: { requests: N, oneAtATime: true, ...lat },
      throughput: { seconds, connections, direct, gateway: viaGateway, gatewayWithoutRouting: withoutRouting },
    },
    null,
    2,
  ),
);
process.exit(0);
