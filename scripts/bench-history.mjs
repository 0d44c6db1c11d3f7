#!/usr/bin/env node
// How big and how fast the probe history is: 30 days of a 5-minute cron probe of one 8-GPU server
// (8,640 samples), appended through the real store, then read back and reported on.
//   node scripts/bench-history.mjs
import { mkdtempSync, rmSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { appendSample, readHistory, historyDir } from '../dist/history/store.js';
import { buildSample } from '../dist/history/sample.js';
import { buildReport } from '../dist/history/report.js';
import { computeCost } from '../dist/history/cost.js';

const dir = mkdtempSync(join(tmpdir(), 'sparkctl-bench-history-'));
const le = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, Infinity];
const t0 = Date.UTC(2026, 10, 1);
const N = 8640;
let bytes = 0;
const a = performance.now();
for (let k = 0; k < N; k++) {
  const h = { le, n: le.map((_, i) => k * (i + 1)), sum: k * 3, count: k * le.length };
  const s = buildSample({
    at: new Date(t0 + k * 300_000),
    target: 'qwen-prod-0',
    url: 'http://127.0.0.1:8000',
    profile: 'qwen-prod',
    verdict: 'healthy',
    ms: 120,
    steps: ['live', 'identity', 'inference', 'metrics', 'gpu', 'auth'].map((step) => ({
      step,
      status: 'pass',
      detail: '',
      ms: 10,
    })),
    ngpu: 8,
    vllm: {
      counters: {
        prompt: k * 5000,
        generation: k * 1200,
        finished: { stop: k * 9, length: k, abort: 0 },
        preemptions: 0,
        prefixHits: k * 100,
        prefixQueries: k * 400,
      },
      gauges: { running: 12, waiting: 0, kv: 0.4 },
      ttft: h,
      itl: h,
      start: 1,
    },
    gpus: Array.from({ length: 8 }, (_, i) => ({
      i,
      util: 78,
      mem: 132000,
      memTotal: 143771,
      temp: 66,
      power: 610,
      ecc: 0,
      xid: 0,
    })),
  });
  appendSample(dir, s, undefined, t0 + k * 300_000);
}
const appendMs = performance.now() - a;
for (const f of readdirSync(historyDir(dir))) bytes += statSync(join(historyDir(dir), f)).size;
const b = performance.now();
const r = readHistory(dir);
const readMs = performance.now() - b;
const c = performance.now();
buildReport(r.samples.slice(-2016));
computeCost({ samples: r.samples.slice(-288), pricePerGpuHour: 1.64 });
const reportMs = performance.now() - c;
console.log(
  JSON.stringify({
    samples: N,
    kept: r.samples.length,
    files: readdirSync(historyDir(dir)).length,
    bytesPerSample: Math.round(bytes / r.samples.length),
    totalMiB: +(bytes / 2 ** 20).toFixed(1),
    appendMsEach: +(appendMs / N).toFixed(3),
    readAllMs: Math.round(readMs),
    report7dPlusCost24hMs: Math.round(reportMs),
  }),
);
rmSync(dir, { recursive: true, force: true });
