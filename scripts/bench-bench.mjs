#!/usr/bin/env node
// Speed and accuracy of `sparkctl bench`, against the simulator whose time model is
// deterministic, so the truth is known:
//   1. accuracy: TTFT and ITL fixed by the time model (prefill 100 tokens at 2000 tok/s + 10 ms,
//      decode 0 ms + 10 ms a token via the slow:10 fault, which no batch size changes); measured
//      p50/p99 against the truth at 200 req/s;
//   2. client capacity: non-streamed 1-token completions, the simulator pinned to core 0, the
//      client on core 1: bench's req/s against autocannon's on the same endpoint and connections;
//   3. open-loop arrival lag (actual - scheduled send) p99 at 1000 req/s;
//   4. `bench qwen3.5-9b` on `serve qwen3.5-9b --engine sim`: the document's table and the JSON.
// Usage: node scripts/bench-bench.mjs [part...]   (parts: accuracy capacity lag profile; default all)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN as bin, freePort, hasTaskset, pin, startSim } from './lib/sim.mjs';
// numpy's linear-interpolation percentile and median: bench's own (npm run build makes dist/)
import { percentile as pct, median } from '../dist/bench/stats.js';

const parts = process.argv.slice(2).length ? process.argv.slice(2) : ['accuracy', 'capacity', 'lag', 'profile'];
const sim = (args, core = 0, env = {}) =>
  startSim(['--max-model-len', '16384', '--max-num-seqs', '1024', ...args], { core, env });

function bench(args, core = 1, env = {}) {
  const [cmd, argv] = pin(core, [process.execPath, bin, 'bench', ...args]);
  return new Promise((resolve) => {
    const c = spawn(cmd, argv, { env: { ...process.env, NO_COLOR: '1', ...env } });
    let out = '';
    let err = '';
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (err += d));
    c.on('close', (code) => resolve({ code, out, err }));
  });
}
const r2 = (x) => Math.round(x * 100) / 100;
const report = {};

if (parts.includes('accuracy')) {
  // The simulator also writes what it really sent when (SPARKCTL_SIM_TRACE): its timers run a
  // little late, so the error against the model is the simulator's lateness plus the client's
  // own; against the trace it is the client's own (request and answer transit, parsing, timing).
  const traceDir = mkdtempSync(join(tmpdir(), 'sparkctl-benchbench-'));
  const tracePath = join(traceDir, 'sim-trace.jsonl');
  const s = await sim(
    ['--sim-cold-ms', '0', '--sim-prefill-tps', '2000', '--sim-decode-ms', '0', '--sim-fault', 'slow:10'],
    0,
    { SPARKCTL_SIM_TRACE: tracePath },
  );
  const r = await bench([
    '--url',
    s.url,
    '--rate',
    '200',
    '--requests',
    '2000',
    '--input-len',
    '100',
    '--output-len',
    '8',
    '--warmup',
    '20',
    '--percentiles',
    '50,99',
    '--scrape-interval',
    '0',
    '--json',
  ]);
  await s.end();
  const j = JSON.parse(r.out).result;
  const truth = { ttft: 60, itl: 10 };
  const trace = readFileSync(tracePath, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  rmSync(traceDir, { recursive: true, force: true });
  // The warm-up's requests all finish before the measured run starts, so they are the first
  // lines: left out, as bench leaves them out (the simulator is still cold while they run).
  const measured = trace.slice(Math.max(0, trace.length - j.completed));
  const served = { ttft: measured.map((t) => t.ttftMs), itl: measured.flatMap((t) => t.itlMs) };
  report.accuracy = {
    rate: 200,
    requests: j.completed,
    failed: j.failed,
    valid: j.sparkctl.valid,
    invalid_reasons: j.sparkctl.invalid_reasons,
    truth_ms: truth,
    ttft_ms: {
      p50: r2(j.p50_ttft_ms),
      p99: r2(j.p99_ttft_ms),
      err_p50: r2(j.p50_ttft_ms - truth.ttft),
      err_p99: r2(j.p99_ttft_ms - truth.ttft),
    },
    itl_ms: {
      p50: r2(j.p50_itl_ms),
      p99: r2(j.p99_itl_ms),
      err_p50: r2(j.p50_itl_ms - truth.itl),
      err_p99: r2(j.p99_itl_ms - truth.itl),
    },
    targets: 'within 2 ms at p50, 5 ms at p99',
    met:
      Math.abs(j.p50_ttft_ms - truth.ttft) <= 2 &&
      Math.abs(j.p50_itl_ms - truth.itl) <= 2 &&
      Math.abs(j.p99_ttft_ms - truth.ttft) <= 5 &&
      Math.abs(j.p99_itl_ms - truth.itl) <= 5,
    client: { sendLagP99Ms: r2(j.sparkctl.client.sendLagP99Ms), loopDelayP99Ms: r2(j.sparkctl.client.loopDelayP99Ms) },
    // what the simulator really did for the measured requests, and bench's own share of the error
    simulator_ms: {
      requests: measured.length,
      warmup_requests_left_out: trace.length - measured.length,
      ttft: { p50: r2(pct(served.ttft, 50)), p99: r2(pct(served.ttft, 99)) },
      itl: { p50: r2(pct(served.itl, 50)), p99: r2(pct(served.itl, 99)) },
    },
    client_own_error_ms: {
      ttft: { p50: r2(j.p50_ttft_ms - pct(served.ttft, 50)), p99: r2(j.p99_ttft_ms - pct(served.ttft, 99)) },
      itl: { p50: r2(j.p50_itl_ms - pct(served.itl, 50)), p99: r2(j.p99_itl_ms - pct(served.itl, 99)) },
    },
  };
  console.error(JSON.stringify({ accuracy: report.accuracy }, null, 2));
}

if (parts.includes('capacity')) {
  // The simulator on core 0 is the limit of both tools, and its own speed drifts by 2x between
  // runs (seen: autocannon 4,850-11,572 req/s in one-shot runs). So one simulator, warmed first,
  // then autocannon and bench in turn, three rounds each: the ratio of their medians.
  const connections = 64;
  const seconds = 6;
  const rounds = 3;
  const s = await sim(['--sim-time-factor', '0']);
  // autocannon in a child pinned to core 1, as bench is
  const autocannonRun = (secs) =>
    new Promise((resolve) => {
      const code = `import('autocannon').then(async ({default: a}) => { const r = await a({ url: ${JSON.stringify(s.url + '/v1/completions')}, method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify({model: 'Qwen/Qwen3.5-9B', prompt: 'Hello there my friend', max_tokens: 1}), connections: ${connections}, duration: ${secs} }); console.log(JSON.stringify({rps: r.requests.average, non2xx: r.non2xx, errors: r.errors})) })`;
      const [cmd, argv] = pin(1, [process.execPath, '--input-type=module', '-e', code]);
      const c = spawn(cmd, argv, { cwd: new URL('..', import.meta.url).pathname });
      let out = '';
      c.stdout.on('data', (d) => (out += d));
      c.on('close', () => resolve(JSON.parse(out)));
    });
  const benchRun = async () => {
    const r = await bench([
      '--url',
      s.url,
      '--no-stream',
      '--concurrency',
      String(connections),
      '--duration',
      `${seconds}s`,
      '--input-len',
      '5',
      '--output-len',
      '1',
      '--warmup',
      '64',
      // a second of warm-up at the cap, as for the lag: bench's compiled code, not the server, is
      // what a one-shot run would otherwise measure in its first second
      '--warmup-duration',
      '1s',
      '--scrape-interval',
      '0',
      '--json',
    ]);
    return JSON.parse(r.out).result;
  };
  await autocannonRun(3); // the simulator's own warm-up
  const ac = [];
  const bn = [];
  let failed = 0;
  let non2xx = 0;
  for (let i = 0; i < rounds; i++) {
    const a = await autocannonRun(seconds);
    ac.push(a.rps);
    non2xx += a.non2xx;
    const j = await benchRun();
    bn.push(j.request_throughput);
    failed += j.failed;
  }
  s.stop();
  report.capacity = {
    pinned: hasTaskset,
    connections,
    seconds_each: seconds,
    autocannon_rps: ac.map(r2),
    bench_rps: bn.map(r2),
    ratio_of_medians: r2(median(bn) / median(ac)),
    target: '>= 0.8',
    failed,
    autocannon_non2xx: non2xx,
  };
  console.error(JSON.stringify({ capacity: report.capacity }, null, 2));
}

if (parts.includes('lag')) {
  const s = await sim(['--sim-time-factor', '0']);
  const r = await bench([
    '--url',
    s.url,
    '--rate',
    '1000',
    '--requests',
    '3000',
    '--input-len',
    '5',
    '--output-len',
    '1',
    '--warmup',
    '50',
    '--scrape-interval',
    '0',
    '--json',
  ]);
  s.stop();
  const j = JSON.parse(r.out).result;
  report.lag = {
    rate: 1000,
    requests: j.completed,
    failed: j.failed,
    send_lag_p50_ms: r2(j.sparkctl.client.sendLagP50Ms),
    send_lag_p99_ms: r2(j.sparkctl.client.sendLagP99Ms),
    achieved_rate: r2(j.sparkctl.client.achievedRate),
    loop_delay_p99_ms: r2(j.sparkctl.client.loopDelayP99Ms),
    valid: j.sparkctl.valid,
    target: 'p99 <= 5 ms',
  };
  console.error(JSON.stringify({ lag: report.lag }, null, 2));
}

if (parts.includes('profile')) {
  const state = mkdtempSync(join(tmpdir(), 'sparkctl-benchbench-'));
  const port = await freePort();
  const env = { SPARKCTL_STATE_DIR: state, SPARKCTL_SIM_LOAD_SECONDS: '0.5' };
  const serve = await new Promise((resolve) => {
    const c = spawn(
      process.execPath,
      [
        bin,
        'serve',
        'qwen3.5-9b',
        '--engine',
        'sim',
        '--set',
        `server.port=${port}`,
        '--set',
        'server.host=127.0.0.1',
        '--set',
        'parallel.replicas=1',
        '--skip-preflight',
      ],
      { env: { ...process.env, ...env, NO_COLOR: '1' } },
    );
    let err = '';
    c.stderr.on('data', (d) => (err += d));
    c.stdout.on('data', (d) => (err += d));
    c.on('close', (code) => resolve({ code, err }));
  });
  if (serve.code !== 0) console.error(serve.err);
  const args = ['qwen3.5-9b', '--concurrency', '64', '--requests', '500', '--input-len', '1024', '--output-len', '128'];
  const human = await bench(args, 1, env);
  const json = await bench([...args, '--json'], 1, env);
  await new Promise((r) =>
    spawn(process.execPath, [bin, 'stop', '--all', '--grace', '5'], {
      env: { ...process.env, ...env },
      stdio: 'ignore',
    }).on('close', r),
  );
  rmSync(state, { recursive: true, force: true });
  console.log(`$ sparkctl bench ${args.join(' ')}`);
  console.log(human.out);
  const j = JSON.parse(json.out).result;
  report.profile = {
    command: `sparkctl bench ${args.join(' ')}`,
    mean_ttft_ms: r2(j.mean_ttft_ms),
    p99_ttft_ms: r2(j.p99_ttft_ms),
    request_throughput: r2(j.request_throughput),
    valid: j.sparkctl.valid,
    exit: human.code,
    document: { mean_ttft_ms: 187, p99_ttft_ms: 243, request_throughput: 142 },
  };
}

console.log(JSON.stringify(report, null, 2));
