#!/usr/bin/env node
// Where the gateway's usage filter (src/gateway/usage.ts, HAProxy's `filter lua.sparkctl_usage`)
// spends its time. One HAProxy per variant, each on the config the gateway writes (renderGatewayConfig)
// in front of the same origin: a second HAProxy that answers every request at once with the real vLLM
// 0.27.2 answer captured in test/fixtures/captures (no simulator, no Node server: the origin adds the
// least noise there is). The variants differ only in the filter, each adding one thing to the last:
//   none       no filter, no lua-load (the gateway on an HAProxy without Lua)
//   frame      the filter declared, its class with no callback (and the prefix key's set-var)
//   data       + the data filter: start_analyze (called twice), an empty http_payload, an empty http_end
//   log        + the log line;  headers: + an http_headers callback (twice);  body: + msg:body()
//   shipped    the filter as main had it before this script (scripts/lib/usage-filter-shipped.lua)
//   current    USAGE_LUA as built now (dist/gateway/usage.js)
//   data-pause400, data-pause1000: `data` with Lua's collector started less often
// Each variant is measured in two ways, interleaved in rounds of 50 requests so a busy host's drift
// hits them alike:
//   - latency: one request at a time on one keep-alive connection (as a client sees it), p50/p90/p99;
//   - HAProxy's own CPU per request: the run time the kernel counted for its threads
//     (/proc/PID/task/*/schedstat, ns) over the round, divided by the requests: the figure a loaded
//     host's scheduling cannot move, which is where a latency difference below the noise shows.
// The filter's log lines go to a pipe this script drains (as the keeper does over fd 3), and are
// counted: a variant that logs must log one line per request, or the figures are not of a working filter.
// The deterministic figure is --callgrind VARIANT: that HAProxy under valgrind, instructions per
// request (callgrind_annotate, or any reader of the callgrind format, on callgrind-VARIANT.out.1).
// Usage: node scripts/profile-usage-filter.mjs [--requests N=2000] [--answer completion|stream]
//        [--threads N|default] [--variants none,frame,...] [--bufsize BYTES] [--malloc-trim BYTES] [--retry-on 'conn-failure']
//        [--perf VARIANT (perf record of that variant's HAProxy)] [--callgrind VARIANT]
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request, Agent } from 'undici';
import { freePort, killIfRunning, pin, untilHealthy } from './lib/sim.mjs';
import { pct } from './lib/proxy-bench.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const N = Number(arg('requests', 2000));
const ANSWER = arg('answer', 'completion');
const THREADS = arg('threads', '1');
const PERF = arg('perf', undefined);
const BUFSIZE = arg('bufsize', undefined);
// the gateway's `retry-on` (conn-failure empty-response) replaced: `empty-response` is an L7 retry, for which
// HAProxy 2.6 keeps a copy of each request's buffer (tune.bufsize); `conn-failure` alone is not
const RETRY_ON = arg('retry-on', undefined);
// a variant's HAProxy under valgrind's callgrind, counting only the measured requests: instructions per
// request, a figure no other load on the host can move, and where they go (callgrind_annotate)
const CALLGRIND = arg('callgrind', undefined);
// glibc's malloc told to keep freed memory at the heap's top (MALLOC_TRIM_THRESHOLD_, bytes; and buffers
// under 4 MiB from the heap, MALLOC_MMAP_THRESHOLD_: setting one turns off glibc's own tuning of both) for every
// gateway HAProxy: whether giving it back each request (brk down, then page faults on the way up) costs
const TRIM = arg('malloc-trim', undefined);
const HAPROXY = process.env.HAPROXY ?? '/usr/sbin/haproxy';
const { GatewaySettings, planGateway } = await import('../dist/gateway/plan.js');
const { renderGatewayConfig, modelsJson, modelsMap, aliasesMap, unknownModelBody } = await import(
  '../dist/gateway/config.js'
);
const { USAGE_LUA } = await import('../dist/gateway/usage.js');

const CAPTURES = new URL('../test/fixtures/captures/vllm-0.27.2/', import.meta.url).pathname;
const answerFile = ANSWER === 'stream' ? join(CAPTURES, 'chat-stream.sse') : join(CAPTURES, 'completion.json');
const answerType = ANSWER === 'stream' ? 'text/event-stream' : 'application/json';
const MODEL = 'tiny/qwen3-code';
// a request with a prompt long enough that the prefix hash has its 1 KiB to read, as a chat client's would
const body = JSON.stringify({
  model: MODEL,
  prompt: `${'You are a careful assistant. '.repeat(60)}Hello`,
  max_tokens: 3,
  temperature: 0,
});

/** The filter as main shipped it before this script (commit 4ea0b88), for the before/after. */
const SHIPPED_LUA = readFileSync(new URL('./lib/usage-filter-shipped.lua', import.meta.url), 'utf8');
const FRAME_LUA = `SparkctlUsage = {}
SparkctlUsage.id = "sparkctl_usage"
SparkctlUsage.flags = filter.FLT_CFG_FL_HTX
SparkctlUsage.__index = SparkctlUsage
function SparkctlUsage:new() return setmetatable({}, SparkctlUsage) end
core.register_filter("sparkctl_usage", SparkctlUsage, function(f, args) return f end)
`;
/**
 * A filter of the given callbacks' bodies (Lua), the data filter registered on the answer (http_end is
 * called only for data filters; a data filter with no http_payload never forwards the answer: HAProxy
 * 2.6.12 then spins at 100 % CPU, found here, so every variant has one).
 */
const partial = (headers, payload, end) => `SparkctlUsage = {}
SparkctlUsage.id = "sparkctl_usage"
SparkctlUsage.flags = filter.FLT_CFG_FL_HTX
SparkctlUsage.__index = SparkctlUsage
function SparkctlUsage:new() return setmetatable({}, SparkctlUsage) end
function SparkctlUsage:start_analyze(txn, chn)
  if chn:is_resp() then filter.register_data_filter(self, chn) end
end
${headers ? `function SparkctlUsage:http_headers(txn, msg)\n  ${headers}\nend` : ''}
function SparkctlUsage:http_payload(txn, msg)
  ${payload ?? ''}
end
function SparkctlUsage:http_end(txn, msg)
  if not msg:is_resp() then return filter.CONTINUE end
  ${end}
  return filter.CONTINUE
end
core.register_filter("sparkctl_usage", SparkctlUsage, function(f, args) return f end)
`;
const LOG = 'txn:log(core.info, "sparkctl-usage 1 b s 200 - - - 0 0 -")';
// the frame plus the data filter and http_end, nothing in it; then the log line; then headers; then reading the body
const DATA_LUA = partial(undefined, undefined, '');
const LOG_LUA = partial(undefined, undefined, LOG);
const HEADERS_LUA = partial('if msg:is_resp() then self.status = txn.f:status() end', undefined, LOG);
const BODY_LUA = partial('if msg:is_resp() then self.status = txn.f:status() end', 'local b = msg:body()', LOG);
// the same, Lua's collector told to start a cycle only when the heap is N/100 times what the last one left
const withPause = (lua, n) => `collectgarbage("setpause", ${n})\n${lua}`;
const LUA = {
  'data-pause400': withPause(DATA_LUA, 400),
  'data-pause1000': withPause(DATA_LUA, 1000),
  frame: FRAME_LUA,
  data: DATA_LUA,
  log: LOG_LUA,
  headers: HEADERS_LUA,
  body: BODY_LUA,
  shipped: SHIPPED_LUA,
  current: USAGE_LUA,
};
const variants = arg('variants', 'none,frame,data,log,headers,body,shipped,current').split(',');
for (const v of variants)
  if (v !== 'none' && !LUA[v]) throw new Error(`--variants: ${v} is not one of none, ${Object.keys(LUA).join(', ')}`);

const dir = mkdtempSync(join(tmpdir(), 'profile-usage-filter-'));
const children = [];
const stopAll = () => {
  for (const c of children) killIfRunning(c);
  rmSync(dir, { recursive: true, force: true });
};
process.on('exit', stopAll);

/** The origin: HAProxy answering every POST with the captured answer, on core 0. */
async function startOrigin() {
  const port = await freePort();
  const cfg = `global\n    nbthread 1\n    tune.bufsize 262144\ndefaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n    timeout http-keep-alive 5s\nfrontend origin\n    bind 127.0.0.1:${port}\n    option http-keep-alive\n    http-request return status 200 content-type text/plain string ok if { path /health }\n    http-request return status 200 content-type ${answerType} file ${answerFile}\n`;
  const file = join(dir, 'origin.cfg');
  writeFileSync(file, cfg);
  const [cmd, argv] = pin(0, [HAPROXY, '-db', '-f', file]);
  const c = spawn(cmd, argv, { stdio: 'ignore', detached: true });
  children.push(c);
  await untilHealthy(port, 'origin', 200);
  return port;
}

/** A gateway HAProxy with variant `v`'s filter; its log lines (fd 3) read and counted. */
async function startGateway(v, origin) {
  const port = await freePort();
  const s = GatewaySettings.parse({ port, statsPort: await freePort(), wakerPort: await freePort() });
  const plan = planGateway(
    s,
    [{ name: 'bench-0', profile: 'bench', servedName: MODEL, host: '127.0.0.1', port: origin, argv: [] }],
    join(dir, v),
  );
  mkdirSync(plan.dir, { recursive: true });
  let usage;
  if (v !== 'none') {
    usage = { lua: join(plan.dir, 'usage.lua'), logFd: 3 };
    writeFileSync(usage.lua, LUA[v]);
  }
  let cfg = renderGatewayConfig(plan, usage ? { usage } : { logStdout: true });
  // keeper_return's route filter (no request here takes that door) is registered by USAGE_LUA alone
  if (v !== 'current') cfg = cfg.replace('    filter lua.sparkctl_route\n', '');
  // HAProxy's own refusals' action (a refused request only; none is refused here) is registered by USAGE_LUA alone
  if (v !== 'current') cfg = cfg.replace(/^ {4}http-request lua\.sparkctl_own .*\n/gm, '');
  if (RETRY_ON) cfg = cfg.replace(/retry-on .*/, `retry-on ${RETRY_ON}`);
  if (THREADS !== 'default') cfg = cfg.replace('global\n', `global\n    nbthread ${Number(THREADS)}\n`);
  if (BUFSIZE) cfg = cfg.replace(/tune\.bufsize \d+/, `tune.bufsize ${Number(BUFSIZE)}`);
  writeFileSync(plan.files.config, cfg);
  writeFileSync(plan.files.models, modelsJson(plan));
  writeFileSync(plan.files.map, modelsMap(plan));
  writeFileSync(plan.files.aliasMap, aliasesMap(plan));
  writeFileSync(plan.files.unknown, unknownModelBody(plan));
  const hap = [HAPROXY, '-db', '-q', '-f', plan.files.config];
  const [cmd, argv] =
    CALLGRIND === v
      ? [
          'valgrind',
          [
            '--tool=callgrind',
            '--compress-strings=no',
            `--callgrind-out-file=${join(process.cwd(), `callgrind-${v}.out`)}`,
            ...hap,
          ],
        ]
      : pin(1, hap);
  const c = spawn(cmd, argv, {
    stdio: ['ignore', 'ignore', 'ignore', 'pipe'],
    detached: true,
    env: {
      ...process.env,
      ...(TRIM ? { MALLOC_TRIM_THRESHOLD_: String(Number(TRIM)), MALLOC_MMAP_THRESHOLD_: String(4 << 20) } : {}),
    },
  });
  children.push(c);
  const g = { v, port, pid: c.pid, lines: 0, cpuNs: 0, faults: 0, ms: [] };
  let tail = '';
  c.stdio[3].on('data', (d) => {
    const parts = (tail + d.toString()).split('\n');
    tail = parts.pop();
    for (const l of parts) if (l.includes('sparkctl-usage 1 ')) g.lines++;
  });
  await untilHealthy(port, `gateway (${v})`, CALLGRIND === v ? 1200 : 200);
  return g;
}

/** The run time the kernel counted for all of a process's threads, ns. */
/** Minor page faults of a process so far (/proc/PID/stat field 10): a count no other load on the host moves. */
const minflt = (pid) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[7]);
const runNs = (pid) =>
  readdirSync(`/proc/${pid}/task`).reduce(
    (n, t) => n + Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]),
    0,
  );

// a variant that never answers must stop the script, never leave HAProxy spinning on a shared host
const agent = new Agent({ connections: 1, pipelining: 1, headersTimeout: 5000, bodyTimeout: 5000 });
async function once(port) {
  const t = performance.now();
  const r = await request(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json' },
    dispatcher: agent,
  });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`HTTP ${r.statusCode}: ${text.slice(0, 200)}`);
  return performance.now() - t;
}

const origin = await startOrigin();
const gws = [];
for (const v of variants) gws.push(await startGateway(v, origin));
for (let i = 0; i < 200; i++) for (const g of gws) await once(g.port);
let perf;
if (PERF) {
  const g = gws.find((x) => x.v === PERF);
  if (!g) throw new Error(`--perf ${PERF}: not among the variants`);
  perf = spawn(
    'perf',
    [
      'record',
      '-F',
      '2000',
      '--call-graph',
      'dwarf,16384',
      '-p',
      String(g.pid),
      '-o',
      join(process.cwd(), `perf-${PERF}.data`),
    ],
    { stdio: 'ignore' },
  );
}
for (const g of gws) g.lines = 0;
const cg = gws.find((x) => x.v === CALLGRIND);
if (CALLGRIND && !cg) throw new Error(`--callgrind ${CALLGRIND}: not among the variants`);
if (cg) execFileSync('callgrind_control', ['-z', String(cg.pid)], { stdio: 'ignore' }); // the warm-up not counted
for (let done = 0; done < N; done += 50) {
  for (const g of gws) {
    const before = runNs(g.pid);
    const f0 = minflt(g.pid);
    for (let i = 0; i < 50; i++) g.ms.push(await once(g.port));
    g.cpuNs += runNs(g.pid) - before;
    g.faults += minflt(g.pid) - f0;
  }
}
if (perf) {
  perf.kill('SIGINT');
  await new Promise((r) => perf.once('exit', r));
}
if (cg) {
  execFileSync('callgrind_control', ['-d', 'measured', String(cg.pid)], { stdio: 'ignore' }); // the measured requests, in callgrind-VARIANT.out.1
}
await new Promise((r) => setTimeout(r, 300)); // the last log lines through the pipe
const base = gws.find((g) => g.v === 'none');
const row = (g) => {
  const p = (q) => +pct(g.ms, q).toFixed(3);
  const r = {
    p50: p(0.5),
    p90: p(0.9),
    p99: p(0.99),
    mean: +(g.ms.reduce((a, b) => a + b, 0) / g.ms.length).toFixed(3),
    haproxyCpuUsPerRequest: +(g.cpuNs / g.ms.length / 1000).toFixed(1),
    pageFaultsPerRequest: +(g.faults / g.ms.length).toFixed(2),
    logLines: g.lines,
  };
  if (base && g !== base) {
    const b = row(base);
    r.overNone = {
      p50: +(r.p50 - b.p50).toFixed(3),
      p99: +(r.p99 - b.p99).toFixed(3),
      haproxyCpuUs: +(r.haproxyCpuUsPerRequest - b.haproxyCpuUsPerRequest).toFixed(1),
    };
  }
  return r;
};
const out = {
  requestsPerVariant: N,
  answer: ANSWER,
  threads: THREADS,
  mallocTrimThreshold: TRIM ?? 'glibc default',
  retryOn: RETRY_ON ?? 'as the gateway writes it',
  load: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
  variants: Object.fromEntries(gws.map((g) => [g.v, row(g)])),
};
for (const g of gws)
  if (!['none', 'frame', 'data'].includes(g.v) && g.lines !== N)
    out.variants[g.v].warning = `logged ${g.lines} lines for ${N} requests`;
console.log(JSON.stringify(out, null, 2));
process.exit(0);
