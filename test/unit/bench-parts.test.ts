import { describe, it, expect } from 'vitest';
import { exactText, fileDataset } from '../../src/bench/dataset.js';
import { rng } from '../../src/bench/arrivals.js';
import { compareResults } from '../../src/bench/compare.js';
import { saturated, bestUnderSlo, levels, parseSlo, type SweepPoint } from '../../src/bench/sweep.js';
import { renderPage } from '../../src/output/html.js';
import { histogram } from '../../src/bench/page.js';
import { scatter } from '../../src/bench/chart.js';
import { parseSample, serverCheck } from '../../src/bench/scrape.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../temp-dirs.js';

// Two tokenizers unlike each other: the simulator's (4 bytes a token) and a word-level one.
const bytes4 = async (t: string) => Math.ceil(Buffer.byteLength(t) / 4);
const wordsTok = async (t: string) => t.split(/\s+/).filter(Boolean).length + Math.floor(t.length / 50);

describe('exact prompt lengths through a tokenizer', () => {
  it.each([
    ['4-byte', bytes4, 1],
    ['4-byte', bytes4, 1024],
    ['word-level', wordsTok, 37],
    ['word-level', wordsTok, 4096],
  ] as const)('%s tokenizer, %i tokens', async (_n, count, n) => {
    const r = await exactText(n, rng(1), count);
    expect(r.exact).toBe(true);
    expect(await count(r.text)).toBe(n);
  });
  it('no tokenizer: approximate and says so', async () => {
    const r = await exactText(100, rng(1), async () => undefined);
    expect(r.exact).toBe(false);
  });
});

describe('JSONL / ShareGPT datasets', () => {
  const dir = tempDir('bench-ds-');
  const tok = {
    count: async (x: { prompt?: string; messages?: Array<{ content: string }> }) =>
      Math.ceil(Buffer.byteLength(x.prompt ?? x.messages!.map((m) => m.content).join('')) / 4),
  };
  it('reads prompt lines and ShareGPT conversations; output length from the record or the reply', async () => {
    const f = join(dir, 'a.jsonl');
    writeFileSync(
      f,
      [
        '{"prompt": "hello there friend", "output_len": 7}',
        '{"conversations": [{"from": "human", "value": "what is a GPU"}, {"from": "gpt", "value": "a graphics processing unit"}]}',
        '{"nothing": 1}',
        '',
      ].join('\n'),
    );
    const d = await fileDataset(f, { chat: false }, tok);
    expect(d.skipped).toBe(1);
    expect(d.requests).toEqual([
      { prompt: 'hello there friend', messages: undefined, promptLen: 5, outputLen: 7 },
      { prompt: 'what is a GPU', messages: undefined, promptLen: 4, outputLen: 7 },
    ]);
  });
  it('a broken line is bad input naming the line', async () => {
    const f = join(dir, 'b.jsonl');
    writeFileSync(f, '{"prompt": "a"}\n{oops\n');
    await expect(fileDataset(f, { chat: false }, tok)).rejects.toThrow(/line 2 is not JSON/);
  });
});

describe('compare', () => {
  const a = { request_throughput: 100, mean_ttft_ms: 200, p99_ttft_ms: 300, p99_itl_ms: 10, model_id: 'm', failed: 0 };
  it('direction per metric and a noise threshold', () => {
    const { rows } = compareResults(
      a,
      { ...a, request_throughput: 120, mean_ttft_ms: 203, p99_ttft_ms: 400, p99_itl_ms: 8 },
      5,
    );
    const v = Object.fromEntries(rows.map((r) => [r.metric, r.verdict]));
    expect(v).toEqual({
      request_throughput: 'better',
      mean_ttft_ms: 'same',
      p99_ttft_ms: 'worse',
      p99_itl_ms: 'better',
    });
  });
  it('warns about invalid runs, failures and different settings', () => {
    const { warnings } = compareResults(a, {
      ...a,
      failed: 2,
      model_id: 'other',
      sparkctl: { valid: false, invalid_reasons: ['send lag'] },
    });
    expect(warnings.join('\n')).toMatch(/B is marked invalid.*send lag/);
    expect(warnings.join('\n')).toMatch(/B had 2 failed/);
    expect(warnings.join('\n')).toMatch(/model_id differs/);
  });
});

const pt = (level: number, throughput: number, ttft: number, extra: Partial<SweepPoint> = {}): SweepPoint => ({
  level,
  throughput,
  ttftP99Ms: ttft,
  tpotP99Ms: 10,
  e2elP99Ms: ttft * 2,
  meanTtftMs: ttft,
  failed: 0,
  completed: 10,
  valid: true,
  ...extra,
});

describe('sweep', () => {
  it('saturated: no throughput gain while latency or the queue grows', () => {
    expect(saturated(pt(8, 100, 200), pt(16, 103, 400))).toBe(true);
    expect(saturated(pt(8, 100, 200), pt(16, 103, 205))).toBe(false);
    expect(saturated(pt(8, 100, 200), pt(16, 103, 205, { maxWaiting: 12 }))).toBe(true);
    expect(saturated(pt(8, 100, 200), pt(16, 180, 400))).toBe(false);
  });
  it('the highest level meeting every SLO; failing or invalid levels never count', () => {
    const pts = [pt(1, 10, 100), pt(2, 20, 150), pt(4, 35, 280), pt(8, 40, 600), pt(16, 41, 250, { failed: 3 })];
    expect(bestUnderSlo(pts, { ttft: 300 })?.level).toBe(4);
    expect(bestUnderSlo(pts, { ttft: 50 })).toBeUndefined();
    expect(bestUnderSlo([pt(1, 10, 100, { valid: false })], { ttft: 300 })).toBeUndefined();
  });
  it('levels double up to the maximum', () => {
    expect(levels(1, 20)).toEqual([1, 2, 4, 8, 16, 20]);
    expect(levels(1, 1)).toEqual([1]);
  });
  it('parses SLOs, rejects anything else naming it', () => {
    expect(parseSlo(['ttft:300 tpot:50', 'e2el:5000'], '--goodput')).toEqual({ ttft: 300, tpot: 50, e2el: 5000 });
    expect(() => parseSlo(['ttfb:3'], '--slo')).toThrow(/--slo: "ttfb:3"/);
  });
});

describe('the HTML page builder', () => {
  it('escapes text and data: nothing from a server can close the script or inject markup', () => {
    const html = renderPage({
      title: '<b>x</b>',
      sections: [
        {
          heading: 'h & <i>',
          text: '</script><script>alert(1)</script>',
          table: { header: ['a'], rows: [['<img src=x>']] },
          chart: {
            x: [1, 2],
            series: [{ label: '</script><script>alert(2)</script>', values: [1, 2] }],
            xLabel: 'x',
            yLabel: 'y',
          },
        },
      ],
    });
    expect(html).not.toContain('<script>alert');
    expect(html).not.toContain('<img src=x>');
    expect(html).toContain('&lt;b&gt;x&lt;/b&gt;');
    expect(html).not.toMatch(/<script[^>]+src=/);
    expect(html).toContain('uPlot');
  });
  it('histogram buckets count every value', () => {
    const h = histogram([1, 2, 3, 4, 100], 10);
    expect(h.y.reduce((a, b) => a + b, 0)).toBe(5);
    expect(h.x[0]).toBe(1);
  });
  it('terminal chart places and labels every point', () => {
    const s = scatter(
      [
        { x: 10, y: 100, label: 'c1' },
        { x: 20, y: 400, label: 'c2' },
      ],
      { xLabel: 'req/s', yLabel: 'ms' },
    );
    expect(s).toContain('1=c1');
    expect(s).toContain('2=c2');
    expect(s.split('\n').filter((l) => /\|.*2/.test(l))).toHaveLength(1);
  });
});

describe('/metrics during a run', () => {
  const text = (gen: number, prompt: number, waiting: number) => `# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m",engine="0"} ${waiting}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m",engine="0"} 3
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m",engine="0"} 0.25
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="m",engine="0"} ${gen}
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="m",engine="0"} ${prompt}
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{model_name="m",engine="0"} ${prompt}
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{model_name="m",engine="0"} ${prompt / 2}
`;
  it('counter deltas cross-checked against the client', () => {
    const s = [parseSample(text(100, 1000, 0), 0), parseSample(text(180, 1800, 5), 1)];
    const ok = serverCheck(s, 800, 80);
    expect(ok).toMatchObject({
      maxWaiting: 5,
      maxRunning: 3,
      maxKvUsage: 0.25,
      serverGenerationTokens: 80,
      serverPromptTokens: 800,
      tokensAgree: true,
      prefixHitRate: 0.5,
    });
    expect(serverCheck(s, 800, 40).tokensAgree).toBe(false);
  });
  it('garbage is empty fields, not a crash', () => {
    expect(parseSample('<html>nope', 0)).toMatchObject({ t: 0 });
  });
});
