// sparkctl bench end to end: the built CLI against the simulator on free ports.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import {
  cli,
  startSim,
  tempDir,
  rmrf,
  freePort,
  BIN,
  RUN_MARK,
  CHROMIUM,
  renderInChromium,
  type SimHandle,
} from '../helpers.js';

// A fixed time model: no cold start, prefill 2000 tok/s, decode 10 ms per token.
const FIXED = ['--sim-cold-ms', '0', '--sim-prefill-tps', '2000', '--sim-decode-ms', '10', '--max-model-len', '16384'];

describe('bench against the simulator', () => {
  let sim: SimHandle;
  let dir: string;
  beforeAll(async () => {
    sim = await startSim(FIXED);
    dir = tempDir('sparkctl-bench-');
  }, 60_000);
  afterAll(async () => {
    await sim?.stop();
    if (dir) rmrf(dir);
  });

  it('reports vLLM-comparable numbers as JSON and a --save-result file with vLLM keys; lengths exact via /tokenize', async () => {
    const save = join(dir, 'a.json');
    const r = await cli(
      [
        'bench',
        '--url',
        sim.url,
        '--requests',
        '12',
        '--concurrency',
        '3',
        '--input-len',
        '100',
        '--output-len',
        '8',
        '--warmup',
        '1',
        '--json',
        '--save-result',
        save,
        '--scrape-interval',
        '200',
      ],
      { timeout: 120_000 },
    );
    expect([0, 1]).toContain(r.exitCode); // 1 only when this loaded machine made the client invalid
    const j = JSON.parse(String(r.stdout));
    expect(j).toMatchObject({ version: 1, kind: 'bench', model: 'Qwen/Qwen3.5-9B' });
    const res = j.result;
    expect(res.completed).toBe(12);
    expect(res.failed).toBe(0);
    expect(res.total_input_tokens).toBe(12 * 100);
    expect(res.total_output_tokens).toBe(12 * 8);
    // prefill of 100 tokens at 2000 tok/s is 50 ms; decode steps are 10 ms each (plus batch slowdown). The simulator's
    // time model runs from each request's arrival, so load only makes a token late: a late first token compresses the
    // gaps after it (TPOT and ITL below 10 ms were seen on a loaded host, as a real server's burst would give), but the
    // last token is never due before prefill + 7 steps.
    expect(res.median_ttft_ms).toBeGreaterThanOrEqual(45);
    expect(res.mean_e2el_ms).toBeGreaterThanOrEqual(45 + 7 * 9);
    // TPOT as vLLM computes it, (e2el - ttft) / (output - 1), every request 8 tokens: exact from the means
    expect(res.mean_tpot_ms).toBeCloseTo((res.mean_e2el_ms - res.mean_ttft_ms) / 7, 6);
    // the ITL gaps add up to the time from the first token to the last, which ends before the stream does
    const tail = res.mean_e2el_ms - res.mean_ttft_ms - res.mean_itl_ms * 7;
    expect(tail).toBeGreaterThanOrEqual(-1e-6);
    expect(tail).toBeLessThan(50);
    expect(res.max_concurrency).toBe(3);
    expect(res.max_concurrent_requests).toBeLessThanOrEqual(3);
    expect(res.request_throughput).toBeCloseTo(12 / res.duration, 6);
    // per-token ITL (continuous_usage_stats) is there; the simulator sends one token per chunk
    expect(res.sparkctl.itl_per_token.mean).toBeCloseTo(res.mean_itl_ms, 3);
    expect(res.sparkctl.multi_token_chunks).toBe(0);
    expect(res.sparkctl.server.tokensAgree).toBe(true);
    expect(res.sparkctl.server.serverGenerationTokens).toBe(96);
    const saved = JSON.parse(readFileSync(save, 'utf8'));
    for (const k of [
      'duration',
      'completed',
      'failed',
      'total_input_tokens',
      'total_output_tokens',
      'request_throughput',
      'request_goodput',
      'output_throughput',
      'total_token_throughput',
      'mean_ttft_ms',
      'median_ttft_ms',
      'std_ttft_ms',
      'p99_ttft_ms',
      'mean_tpot_ms',
      'p99_itl_ms',
      'p99_e2el_ms',
      'max_concurrency',
      'max_concurrent_requests',
      'ttfts',
      'itls',
      'input_lens',
      'output_lens',
      'errors',
    ]) {
      expect(saved, k).toHaveProperty(k);
    }
    expect(saved.input_lens).toEqual(Array(12).fill(100));
    expect(saved.itls[0]).toHaveLength(7);
    expect(saved.p99_ttft_ms).toBeCloseTo(res.p99_ttft_ms, 9);
  }, 150_000);

  it('chat: TTFT waits for the first token (prefill), not the role chunk', async () => {
    const r = await cli(
      [
        'bench',
        '--url',
        sim.url,
        '--endpoint',
        'chat',
        '--requests',
        '4',
        '--concurrency',
        '1',
        '--input-len',
        '200',
        '--output-len',
        '4',
        '--warmup',
        '0',
        '--json',
      ],
      {
        timeout: 120_000,
      },
    );
    const res = JSON.parse(String(r.stdout)).result;
    expect(res.completed).toBe(4);
    expect(res.total_input_tokens).toBe(800); // the chat template's tokens included, as /tokenize counted them
    expect(res.min_ttft_ms ?? res.median_ttft_ms).toBeGreaterThanOrEqual(95); // 200 tokens at 2000 tok/s
  }, 150_000);

  it("the human table carries the document's numbers (mean/P99 TTFT, req/s), the same as the JSON", async () => {
    const save = join(dir, 't.json');
    const r = await cli(
      [
        'bench',
        '--url',
        sim.url,
        '--requests',
        '8',
        '--concurrency',
        '4',
        '--input-len',
        '64',
        '--output-len',
        '4',
        '--save-result',
        save,
      ],
      { timeout: 120_000 },
    );
    const out = String(r.stdout);
    const saved = JSON.parse(readFileSync(save, 'utf8'));
    expect(out).toContain(`Mean TTFT                ${saved.mean_ttft_ms.toFixed(1)} ms`);
    expect(out).toContain(`P99 TTFT                 ${saved.p99_ttft_ms.toFixed(1)} ms`);
    expect(out).toContain(`Request throughput       ${saved.request_throughput.toFixed(1)} req/s`);
  }, 150_000);

  it('goodput counts only requests inside every SLO', async () => {
    const r = await cli(
      [
        'bench',
        '--url',
        sim.url,
        '--requests',
        '6',
        '--concurrency',
        '2',
        '--input-len',
        '64',
        '--output-len',
        '4',
        '--goodput',
        'ttft:1',
        '--json',
      ],
      { timeout: 120_000 },
    );
    const res = JSON.parse(String(r.stdout)).result;
    expect(res.completed).toBe(6);
    expect(res.request_goodput).toBe(0); // nobody gets a first token within 1 ms of a 32 ms prefill
    const r2 = await cli(
      [
        'bench',
        '--url',
        sim.url,
        '--requests',
        '6',
        '--concurrency',
        '2',
        '--input-len',
        '64',
        '--output-len',
        '4',
        '--goodput',
        'ttft:60000',
        'e2el:60000',
        '--json',
      ],
      {
        timeout: 120_000,
      },
    );
    const res2 = JSON.parse(String(r2.stdout)).result;
    expect(res2.request_goodput).toBeCloseTo(res2.request_throughput, 9);
  }, 150_000);

  it('compare: verdicts per metric, exit 1 when B is worse', async () => {
    const a = join(dir, 'cmp-a.json');
    const b = join(dir, 'b-worse.json');
    await cli(
      [
        'bench',
        '--url',
        sim.url,
        '--requests',
        '4',
        '--concurrency',
        '2',
        '--input-len',
        '32',
        '--output-len',
        '4',
        '--save-result',
        a,
      ],
      { timeout: 120_000 },
    );
    const base = JSON.parse(readFileSync(a, 'utf8'));
    writeFileSync(
      b,
      JSON.stringify({
        ...base,
        mean_ttft_ms: base.mean_ttft_ms * 2,
        request_throughput: base.request_throughput * 0.5,
      }),
    );
    const same = await cli(['bench', 'compare', a, a, '--json']);
    expect(same.exitCode).toBe(0);
    expect(JSON.parse(String(same.stdout)).rows.every((x: { verdict: string }) => x.verdict === 'same')).toBe(true);
    const worse = await cli(['bench', 'compare', a, b, '--json']);
    expect(worse.exitCode).toBe(1);
    const rows = JSON.parse(String(worse.stdout)).rows as Array<{ metric: string; verdict: string }>;
    expect(rows.find((x) => x.metric === 'mean_ttft_ms')?.verdict).toBe('worse');
    expect(rows.find((x) => x.metric === 'request_throughput')?.verdict).toBe('worse');
    const better = await cli(['bench', 'compare', b, a]);
    expect(better.exitCode).toBe(0);
    expect(String(better.stdout)).toMatch(/mean_ttft_ms .* better/);
  }, 60_000);

  it('--sweep raises concurrency from 1, charts it, and names the highest level meeting --slo', async () => {
    const r = await cli(
      [
        'bench',
        '--url',
        sim.url,
        '--sweep',
        '--sweep-max',
        '4',
        '--requests',
        '8',
        '--input-len',
        '32',
        '--output-len',
        '4',
        '--slo',
        'ttft:60000',
        '--json',
      ],
      { timeout: 180_000 },
    );
    const j = JSON.parse(String(r.stdout));
    expect(j.sweep.points.map((p: { level: number }) => p.level)).toEqual([1, 2, 4].slice(0, j.sweep.points.length));
    expect(j.sweep.points.length).toBeGreaterThanOrEqual(2);
    // the highest level meeting the (loose) SLO; a level this loaded machine made client-bound never counts
    const eligible = j.sweep.points
      .filter((p: { valid: boolean; failed: number }) => p.valid && p.failed === 0)
      .map((p: { level: number }) => p.level);
    expect(j.sweep.best?.level ?? null).toBe(eligible.length ? Math.max(...eligible) : null);
    const human = await cli(
      [
        'bench',
        '--url',
        sim.url,
        '--sweep',
        '--sweep-max',
        '2',
        '--requests',
        '4',
        '--input-len',
        '32',
        '--output-len',
        '2',
        '--slo',
        'ttft:0.001',
      ],
      { timeout: 180_000 },
    );
    expect(human.exitCode).toBe(1);
    expect(String(human.stdout)).toContain('p99 TTFT (ms)');
    expect(String(human.stdout)).toContain('no level met the SLO');
  }, 240_000);

  it('Ctrl-C: sends nothing new, waits for requests in flight, reports the partial run', async () => {
    const save = join(dir, 'interrupted.json');
    const p = execa(
      process.execPath,
      [
        BIN,
        'bench',
        '--url',
        sim.url,
        '--requests',
        '200',
        '--concurrency',
        '2',
        '--input-len',
        '16',
        '--output-len',
        '40',
        '--warmup',
        '0',
        '--save-result',
        save,
      ],
      {
        reject: false,
        timeout: 120_000,
        env: { NO_COLOR: '1', SPARKCTL_TEST_RUN: RUN_MARK },
      },
    );
    let err = '';
    p.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    // the run has started once the progress says so (preparing prompts takes a while on a busy machine)
    for (let i = 0; i < 600 && !/benchmarking/.test(err); i++) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 2000));
    p.kill('SIGINT');
    const r = await p;
    expect(String(r.stdout)).toContain('interrupted: partial results');
    const res = JSON.parse(readFileSync(save, 'utf8'));
    expect(res.sparkctl.stopped_early).toBe(true);
    expect(res.completed).toBeGreaterThan(0);
    expect(res.completed).toBeLessThan(200);
    expect(res.failed).toBe(0); // the ones in flight were allowed to finish
  }, 150_000);

  it('bad input names the flag and exits 2; nothing listening exits 3', async () => {
    const bad = await cli(['bench', '--url', sim.url, '--rate', 'fast']);
    expect(bad.exitCode).toBe(2);
    expect(String(bad.stderr)).toMatch(/--rate: "fast"/);
    const slo = await cli(['bench', '--url', sim.url, '--goodput', 'ttft=3']);
    expect(slo.exitCode).toBe(2);
    expect(String(slo.stderr)).toMatch(/--goodput: "ttft=3" is not METRIC:MS/);
    const wd = await cli(['bench', '--url', sim.url, '--warmup-duration', 'soon']);
    expect(wd.exitCode).toBe(2);
    expect(String(wd.stderr)).toContain('--warmup-duration: "soon" is not a duration');
    expect(String(wd.stderr)).toContain('write it like 500ms, 30s'); // the fix, not only the fault
    const port = await freePort();
    const down = await cli(['bench', '--url', `http://127.0.0.1:${port}`, '--requests', '1']);
    expect(down.exitCode).toBe(3);
  }, 60_000);
});

describe('bench failure handling', () => {
  it('failed requests are counted and classified, never averaged in', async () => {
    const sim = await startSim([...FIXED, '--sim-error-rate', '0.5', '--sim-error-types', 'rate_limit,server_error']);
    try {
      const r = await cli(
        [
          'bench',
          '--url',
          sim.url,
          '--requests',
          '20',
          '--concurrency',
          '4',
          '--input-len',
          '32',
          '--output-len',
          '4',
          '--warmup',
          '0',
          '--json',
        ],
        { timeout: 120_000 },
      );
      const res = JSON.parse(String(r.stdout)).result;
      expect(res.failed).toBeGreaterThan(0);
      expect(res.completed + res.failed).toBe(20);
      const kinds = res.sparkctl.failures;
      expect((kinds.http_429 ?? 0) + (kinds.http_5xx ?? 0)).toBe(res.failed);
      expect(res.total_output_tokens).toBe(res.completed * 4);
    } finally {
      await sim.stop();
    }
  }, 150_000);

  it('a hung request ends at its own deadline', async () => {
    const sim = await startSim([...FIXED, '--sim-fault', 'zombie-after:2']);
    try {
      const r = await cli(
        [
          'bench',
          '--url',
          sim.url,
          '--requests',
          '3',
          '--concurrency',
          '3',
          '--input-len',
          '16',
          '--output-len',
          '2',
          '--warmup',
          '0',
          '--request-timeout',
          '1500ms',
          '--json',
        ],
        {
          timeout: 120_000,
        },
      );
      const res = JSON.parse(String(r.stdout)).result;
      expect(res.sparkctl.failures.timeout).toBeGreaterThanOrEqual(1);
      expect(res.completed + res.failed).toBe(3);
      expect(res.duration).toBeLessThan(30);
    } finally {
      await sim.stop();
    }
  }, 150_000);
});

describe.skipIf(!existsSync(CHROMIUM))('bench --html in real headless Chromium', () => {
  it('the page opens with no network and every chart draws (non-blank canvas pixels)', async () => {
    const sim = await startSim(FIXED);
    const dir = tempDir('sparkctl-bench-html-');
    try {
      const page = join(dir, 'bench.html');
      const r = await cli(
        [
          'bench',
          '--url',
          sim.url,
          '--requests',
          '10',
          '--concurrency',
          '2',
          '--input-len',
          '32',
          '--output-len',
          '6',
          '--scrape-interval',
          '100',
          '--html',
          page,
        ],
        {
          timeout: 120_000,
        },
      );
      expect(existsSync(page), String(r.stderr)).toBe(true);
      const html = readFileSync(page, 'utf8');
      expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=\s*"http/); // self-contained
      const { errors, inked, shotBytes } = await renderInChromium(page, join(dir, 'shot.png'));
      expect(errors).toEqual([]);
      expect(inked.length).toBeGreaterThanOrEqual(4); // curve, TTFT, ITL, server metrics (+ KV)
      for (const n of inked) expect(n).toBeGreaterThan(50);
      expect(shotBytes).toBeGreaterThan(10_000);
    } finally {
      await sim.stop();
      rmrf(dir);
    }
  }, 180_000);
});

describe('bench NAME: a server sparkctl serve started', () => {
  it('finds the instance in the registry (port, served name) and benches it', async () => {
    const state = tempDir('sparkctl-bench-state-');
    const env = { SPARKCTL_STATE_DIR: state, SPARKCTL_SIM_LOAD_SECONDS: '0.3', SPARKCTL_SIM_COLD_MS: '0' };
    const port = await freePort();
    try {
      const s = await cli(
        [
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
          '--no-prewarm',
          '--skip-preflight',
        ],
        { env, timeout: 120_000 },
      );
      expect(s.exitCode, String(s.stderr)).toBe(0);
      const r = await cli(
        [
          'bench',
          'qwen3.5-9b',
          '--requests',
          '6',
          '--concurrency',
          '3',
          '--input-len',
          '64',
          '--output-len',
          '4',
          '--json',
        ],
        { env, timeout: 120_000 },
      );
      const j = JSON.parse(String(r.stdout));
      expect(j.url).toBe(`http://127.0.0.1:${port}`);
      expect(j.model).toBe('Qwen/Qwen3.5-9B'); // the instance's served name (this profile serves its model id)
      expect(j.result.completed).toBe(6);
    } finally {
      await cli(['stop', '--all', '--grace', '5'], { env });
      rmrf(state);
    }
  }, 240_000);
});
