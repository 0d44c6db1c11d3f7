#!/usr/bin/env node
// (0) A warm deep probe, whole process (`probe --url` against a warm simulator), against `node -e 0`:
//     the runs alternate, so both see the same machine; medians, min and max of the wall time, and
//     the CPU time (user + sys) each child used, which a loaded host inflates far less than the wall.
// (1) What a healthy deep probe costs beyond its 1-token generation (a simulator with no model time).
// (2) N simulated servers probed together by one `sparkctl probe`.
//
// Runs from the built package alone (bin/, dist/bundle/, profiles/, scripts/; no node_modules): the
// simulators are `sparkctl sim serve` processes (about 60 MB each; N of them for (2)).
// Usage: node scripts/bench-probe.mjs [servers=10] [runs=15]
import { execFile, spawn } from 'node:child_process';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const n = Number(process.argv[2] ?? 10);
const runs = Number(process.argv[3] ?? 15);
const bin = new URL('../bin/sparkctl.js', import.meta.url).pathname;
const state = mkdtempSync(join(tmpdir(), 'sparkctl-bench-probe-'));
const env = { ...process.env, SPARKCTL_STATE_DIR: state, NO_COLOR: '1' };
delete env.SPARKCTL_API_KEY;
delete env.VLLM_API_KEY;

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

// A simulator with no model time: no load, no cold start, generation at once.
const sims = [];
async function startSim() {
  const port = await freePort();
  const args = [
    bin,
    'sim',
    'serve',
    'm',
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--sim-load-seconds',
    '0',
    '--sim-cold-ms',
    '0',
    '--sim-time-factor',
    '0',
    '--sim-no-engine-process',
  ];
  const p = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'inherit'] });
  sims.push(p);
  await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`simulator on ${port} not ready in 60 s`)), 60_000);
    p.stdout.on('data', (d) => {
      out += d;
      if (out.includes('Application startup complete')) {
        clearTimeout(timer);
        p.stdout.resume();
        resolve();
      }
    });
    p.once('exit', (code) => reject(new Error(`simulator on ${port} exited (${code})`)));
  });
  return `http://127.0.0.1:${port}`;
}

// CPU time of the children this process has reaped: fields 16 and 17 of /proc/self/stat (cutime,
// cstime, in clock ticks of 10 ms; a median over many runs is still meaningful).
const childTicks = () => {
  const f = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  return Number(f[13]) + Number(f[14]);
};
const once = (args) =>
  new Promise((resolve) => {
    const t0 = childTicks();
    const s = performance.now();
    execFile(process.execPath, args, { env, encoding: 'utf8', maxBuffer: 64 << 20 }, (_e, stdout) =>
      resolve({ ms: performance.now() - s, cpuMs: (childTicks() - t0) * 10, stdout }),
    );
  });
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return +(s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2).toFixed(1);
};
const spread = (xs) => ({ min: +Math.min(...xs).toFixed(1), median: median(xs), max: +Math.max(...xs).toFixed(1) });

try {
  const urls = [];
  for (let i = 0; i < Math.max(1, n); i++) urls.push(await startSim());
  const probeArgs = (targets) => [bin, 'probe', ...targets.flatMap((u) => ['--url', u]), '--json'];

  // (0) alternating, after two warm-up rounds (page cache, the simulator's first answers)
  const node = { ms: [], cpu: [] };
  const probe = { ms: [], cpu: [] };
  const steps = [];
  const overhead = [];
  for (let i = 0; i < runs + 2; i++) {
    const a = await once(['-e', '0']);
    const b = await once(probeArgs([urls[0]]));
    if (i < 2) continue;
    node.ms.push(a.ms);
    node.cpu.push(a.cpuMs);
    probe.ms.push(b.ms);
    probe.cpu.push(b.cpuMs);
    const r = JSON.parse(b.stdout).results[0];
    if (r.state !== 'healthy') throw new Error(`the simulator is not healthy: ${JSON.stringify(r.steps)}`);
    steps.push(r.ms);
    // (1) the probe's own steps beyond the generation
    overhead.push(r.ms - r.inferenceMs);
  }
  // (2) all of them at once
  const all = [];
  for (let i = 0; i < 3; i++) all.push(await once(probeArgs(urls)));
  const results = JSON.parse(all[0].stdout).results;
  console.log(
    JSON.stringify(
      {
        runs,
        warmProbeWholeProcessMs: {
          'node -e 0': spread(node.ms),
          'probe --url --json': spread(probe.ms),
          ratioToNode: +(median(probe.ms) / median(node.ms)).toFixed(2),
          target: 2,
          probeStepsMs: median(steps),
        },
        cpuMs: {
          'node -e 0': median(node.cpu),
          'probe --url --json': median(probe.cpu),
          ratioToNode: +(median(probe.cpu) / median(node.cpu)).toFixed(2),
        },
        probeOverheadBeyondGenerationMs: spread(overhead),
        [`${urls.length}ServersTogether`]: {
          processWallMs: all.map((x) => +x.ms.toFixed(0)),
          healthy: results.filter((r) => r.state === 'healthy').length,
        },
      },
      null,
      2,
    ),
  );
} finally {
  for (const p of sims) p.kill('SIGTERM');
  rmSync(state, { recursive: true, force: true });
}
