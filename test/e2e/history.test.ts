// Issue 12 end to end through the built CLI: the probe's history and GPU verdict, cost and report,
// against the simulator on free ports.
import { describe, it, expect } from 'vitest';
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { cli, startSim, webhookReceiver, waitFor, FIXTURES, CHROMIUM, renderInChromium, tempDirs } from '../helpers.js';

const state = tempDirs('sparkctl-hist-');
const fast = ['--sim-time-factor', '1', '--sim-cold-ms', '0', '--sim-decode-ms', '1', '--sim-prefill-tps', '10000000'];
const HOT = join(FIXTURES, 'bundles', 'h200x2-serving-hot');
const lines = (d: string) =>
  readdirSync(join(d, 'history')).flatMap((f) =>
    readFileSync(join(d, 'history', f), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l)),
  );

describe('probe GPU health while serving (edited real capture)', () => {
  it('hot GPUs, ECC and Xid: unhealthy naming each GPU; Xid only once (since the last probe); alert on the change', {
    timeout: 240_000,
  }, async () => {
    const d = state();
    const hook = await webhookReceiver();
    const posts = hook.posts;
    const sim = await startSim(fast);
    try {
      const env = { env: { SPARKCTL_STATE_DIR: d } };
      const prom = join(d, 'sparkctl.prom');
      const ok = await cli(
        [
          'probe',
          '--url',
          sim.url,
          '--gpu-from',
          join(FIXTURES, 'bundles', 'h200x2-device-collect'),
          '--alert-webhook',
          `${hook.url}/`,
        ],
        env,
      );
      expect(ok.exitCode, ok.stdout + ok.stderr).toBe(0);
      const first = await cli(
        [
          'probe',
          '--url',
          sim.url,
          '--gpu-from',
          HOT,
          '--json',
          '--prometheus',
          prom,
          '--alert-webhook',
          `${hook.url}/`,
        ],
        env,
      );
      expect(first.exitCode).toBe(1);
      const r = JSON.parse(first.stdout).results[0];
      const step = r.steps.find((s: { step: string }) => s.step === 'gpu');
      expect(step.status).toBe('fail');
      expect(step.detail).toContain('CRITICAL GPU1: 90 C >= 88 C');
      expect(step.detail).toContain('GPU0: 84 C >= 82 C');
      expect(step.detail).toContain('GPU1: 2 uncorrected volatile ECC error(s)');
      expect(step.detail).toContain('GPU1: Xid 48 (double-bit ECC error) x1');
      expect(r.gpu.findings.every((f: { gpu?: number }) => f.gpu === 0 || f.gpu === 1)).toBe(true);
      expect(posts).toHaveLength(1);
      expect(posts[0].changes[0]).toMatchObject({ from: 'healthy', to: 'unhealthy', failing: [{ step: 'gpu' }] });
      const text = readFileSync(prom, 'utf8');
      expect(text).toMatch(/sparkctl_probe_gpu_temperature_celsius\{target="[^"]+",gpu="1"\} 90/);
      expect(text).toMatch(/sparkctl_probe_gpu_ok\{target="[^"]+",gpu="1"\} 0/);

      const second = await cli(
        ['probe', '--url', sim.url, '--gpu-from', HOT, '--json', '--alert-webhook', `${hook.url}/`],
        env,
      );
      const step2 = JSON.parse(second.stdout).results[0].steps.find((s: { step: string }) => s.step === 'gpu');
      expect(step2.detail).not.toContain('Xid'); // already reported by the previous probe
      expect(step2.detail).toContain('CRITICAL GPU1');
      expect(posts).toHaveLength(1); // still unhealthy: no new alert

      const h = lines(d);
      expect(h.map((s) => s.verdict)).toEqual(['healthy', 'unhealthy', 'unhealthy']);
      expect(h[1].gpu.map((g: { i: number; temp: number; xid: number }) => [g.i, g.temp, g.xid])).toEqual([
        [0, 84, 0],
        [1, 90, 2],
      ]);
      expect(h[2].gpu.map((g: { xid: number }) => g.xid)).toEqual([0, 0]);
      expect(h[1].xidT).toBe(8812.40299);
      expect(h[1].why.some((w: string) => w.startsWith('gpu fail: '))).toBe(true);
    } finally {
      await sim.stop();
      hook.close();
    }
  });

  it('--deadline ends a run whose server hangs, recording it as unreachable', { timeout: 200_000 }, async () => {
    const d = state();
    const sim = await startSim([...fast, '--sim-fault', 'zombie-after:0']);
    try {
      const t0 = Date.now();
      const r = await cli(['probe', '--url', sim.url, '--step-timeout', '150s', '--deadline', '1500ms', '--json'], {
        env: { SPARKCTL_STATE_DIR: d },
      });
      expect(r.exitCode).toBe(3);
      // the hung 1-token request is cancelled at the deadline, not left to its 150 s step deadline
      // (a wide margin: a loaded CI machine takes seconds just to start node)
      expect(Date.now() - t0).toBeLessThan(90_000);
      expect(JSON.parse(r.stdout).results[0].steps[0].detail).toBe(
        'the probe did not finish within --deadline (1500 ms)',
      );
      expect(lines(d)[0].verdict).toBe('unreachable');
    } finally {
      await sim.stop();
    }
  });
});

async function traffic(url: string, n: number, maxTokens: number) {
  let prompt = 0;
  let generation = 0;
  for (let k = 0; k < n; k++) {
    const r = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'Qwen/Qwen3.5-9B',
        prompt: `request ${k}: ${'tell me about GPUs '.repeat(5 + k)}`,
        max_tokens: maxTokens,
        ignore_eos: true,
      }),
    });
    const j = (await r.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    prompt += j.usage.prompt_tokens;
    generation += j.usage.completion_tokens;
  }
  return { prompt, generation };
}

describe('cost from the history of real probes (simulator, known traffic, a restart)', () => {
  it('token deltas across a restart, GPU-hours and dollars match the hand computation', {
    timeout: 240_000,
  }, async () => {
    const d = state();
    const env = { env: { SPARKCTL_STATE_DIR: d } };
    let sim = await startSim(fast);
    const port = sim.port;
    try {
      const none = await cli(['cost', sim.url, '--gpu-hour-price', '2'], env);
      expect(none.exitCode).toBe(1);
      expect(none.stderr).toContain('*/5 * * * * sparkctl probe --all');

      expect((await cli(['probe', '--url', sim.url], env)).exitCode).toBe(0);
      const own = lines(d)[0].c; // what one probe's own 1-token request counts
      const a = await traffic(sim.url, 3, 20);
      expect((await cli(['probe', '--url', sim.url], env)).exitCode).toBe(0);
      await sim.stop();
      // the server restarts on the same port (a later --port wins): counters start from zero
      sim = await startSim([...fast, '--port', String(port)], { waitReady: false });
      const url = `http://127.0.0.1:${port}`;
      expect(
        await waitFor(async () => (await fetch(`${url}/health`).catch(() => undefined))?.status === 200, 20_000),
      ).toBe(true);
      sim = { ...sim, url };
      const b = await traffic(sim.url, 2, 7);
      expect(
        (await cli(['probe', '--url', sim.url, '--prometheus', join(d, 'cost.prom'), '--gpu-hour-price', '2'], env))
          .exitCode,
      ).toBe(0);

      const h = lines(d);
      expect(h).toHaveLength(3);
      expect(h[2].c.prompt).toBeLessThan(h[1].c.prompt); // the reset is really there
      const wantPrompt = a.prompt + own.prompt + b.prompt + own.prompt;
      const wantGen = a.generation + own.generation + b.generation + own.generation;
      expect(a.generation).toBe(60);
      expect(b.generation).toBe(14);

      const noGpus = await cli(['cost', sim.url, '--gpu-hour-price', '2'], env);
      expect(noGpus.exitCode).toBe(2);
      expect(noGpus.stderr).toContain('--gpus-held N'); // --gpus is the host's GPU count in every other verb

      const r = await cli(
        ['cost', sim.url, '--gpu-hour-price', '2', '--gpus', '2', '--utilization', '0.5', '--json'],
        env,
      );
      expect(r.exitCode, r.stderr).toBe(0);
      const j = JSON.parse(r.stdout);
      expect(j).toMatchObject({ version: 1, kind: 'cost', restarts: 1, samples: 3, gpus: 2 });
      expect(j.tokens).toEqual({ prompt: wantPrompt, generation: wantGen, total: wantPrompt + wantGen });
      const hours = (Date.parse(h[2].t) - Date.parse(h[0].t)) / 3_600_000;
      expect(j.allocation.gpuHours).toBeCloseTo(2 * hours, 9);
      expect(j.allocation.dollars).toBeCloseTo(2 * 2 * hours, 9);
      expect(j.usage.gpuHours).toBeCloseTo(2 * hours * 0.5, 9);
      expect(j.usage.per1K).toBeCloseTo(((2 * 2 * hours * 0.5) / (wantPrompt + wantGen)) * 1000, 9);
      expect(j.split.by).toBe('ratio');

      const text = await cli(['cost', sim.url, '--gpu-month-price', '1460', '--gpus', '2'], env);
      expect(text.stdout).toContain(
        '$1460 per GPU-month / 730 h = $2.0000 per GPU-hour (converted from --gpu-month-price)',
      );
      expect(text.stdout).toContain('1 restart(s)');
      expect(text.stdout).toMatch(
        /vs \$0\.0200 per 1K \(a reference API price; --compare-price sets another\): allocation [\d.]+x/,
      );

      const prom = readFileSync(join(d, 'cost.prom'), 'utf8');
      expect(prom).toContain(`sparkctl_cost_tokens_24h{target="${sim.url}",kind="prompt"} ${wantPrompt}`);
    } finally {
      await sim.stop();
    }
  });

  it('the document example through the CLI: $0.0192 per 1K on usage, the monthly price converted and said so', {
    timeout: 120_000,
  }, async () => {
    const d = state();
    const { mkdirSync, copyFileSync } = await import('node:fs');
    mkdirSync(join(d, 'history'));
    copyFileSync(
      join(FIXTURES, 'history', 'document-example.jsonl'),
      join(d, 'history', 'doc-example-0.0a0b0c0d.jsonl'),
    );
    const r = await cli(['cost', 'doc-example', '--since', '2026-10-01T00:00:00Z', '--gpu-month-price', '1200'], {
      env: { SPARKCTL_STATE_DIR: d },
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain('8 GPU(s) x 24.00 h = 192.00 held; utilisation 78.0 % (measured) -> 149.76 used');
    expect(r.stdout).toContain('12,843,210 (prompt 9,000,000, generation 3,843,210)');
    expect(r.stdout).toMatch(/\$ per 1K tokens\s+\$0\.0246\s+\$0\.0192/);
    expect(r.stdout).toContain('$1200 per GPU-month / 730 h = $1.6438 per GPU-hour');
  });
});

describe('report', () => {
  const seed = async () => {
    const d = state();
    const { mkdirSync, writeFileSync } = await import('node:fs');
    // @ts-expect-error a plain .mjs fixture generator
    const { day } = await import('../fixtures/history/make-day.mjs');
    mkdirSync(join(d, 'history'));
    writeFileSync(
      join(d, 'history', 'qwen-0.0a0b0c0d.jsonl'),
      day()
        .map((s: unknown) => JSON.stringify(s))
        .join('\n') + '\n',
    );
    return d;
  };

  it('terminal summary: uptime, the incident with its cause, latency, tokens, cost, sparklines', {
    timeout: 120_000,
  }, async () => {
    const d = await seed();
    const r = await cli(['report', 'qwen', '--since', '2026-11-28T00:00:00Z', '--gpu-hour-price', '2'], {
      env: { SPARKCTL_STATE_DIR: d },
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain('93.62 % healthy (time-weighted); verdicts: healthy 45, unhealthy 3, unreachable 0');
    expect(r.stdout).toContain(
      '2026-11-29 10:00Z -> 2026-11-29 11:30Z  qwen-0 unhealthy: inference fail: no token within 5000 ms',
    );
    expect(r.stdout).toContain('TTFT         p50 92 ms, p90 250 ms, p99 475 ms');
    expect(r.stdout).toContain('prompt 440,000, generation 88,000 (1 restart(s))');
    expect(r.stdout).toContain('$94.00 held, $0.1780 per 1K tokens; usage basis $0.1068 per 1K');
    expect(r.stdout).toMatch(/GPU temp\s+▁[▁-█]+█\s+51 C \.\. 75 C/);
    const none = await cli(['report', 'nobody'], { env: { SPARKCTL_STATE_DIR: d } });
    expect(none.exitCode).toBe(1);
    expect(none.stderr).toContain('sparkctl probe --all');
  });

  it.skipIf(!existsSync(CHROMIUM))(
    '--html: a self-contained page whose charts draw in real headless Chromium',
    { timeout: 240_000 },
    async () => {
      const d = await seed();
      const page = join(d, 'report.html');
      const r = await cli(
        ['report', 'qwen', '--since', '2026-11-28T00:00:00Z', '--gpu-hour-price', '2', '--html', page],
        { env: { SPARKCTL_STATE_DIR: d } },
      );
      expect(r.exitCode, r.stderr).toBe(0);
      const html = readFileSync(page, 'utf8');
      expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=\s*"http/);
      expect(html).toContain('the engine is hung');
      const { errors, inked, shotBytes } = await renderInChromium(page, join(d, 'shot.png'));
      expect(errors).toEqual([]);
      expect(inked).toHaveLength(6); // healthy, tokens/s, TTFT, KV cache, GPU temperature, GPU memory
      for (const n of inked) expect(n).toBeGreaterThan(50);
      expect(shotBytes).toBeGreaterThan(10_000);
    },
  );
});
