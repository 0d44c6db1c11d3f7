// The /metrics names sparkctl reads and the simulator exposes, checked against the Prometheus
// families each vLLM version registers (read from vLLM's source: src/profiles/vllm-facts.ts).
import { describe, it, expect } from 'vitest';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { VLLM_FACTS } from '../../src/profiles/vllm-facts.js';
import { metricsOf } from '../../src/profiles/vllm-flags.js';
import { READ_METRICS, parseVllmMetrics } from '../../src/client/metrics.js';
import { createMetrics } from '../../src/sim/engine.js';

const versionsWith = (name: string) => VLLM_FACTS.filter((t) => t.metrics[name]).map((t) => t.version);
/** a histogram's series (_sum, _count, _bucket) belong to its family */
const family = (name: string) => {
  for (const suf of ['_sum', '_count', '_bucket'])
    if (name.endsWith(suf) && versionsWith(name.slice(0, -suf.length)).length) return name.slice(0, -suf.length);
  return name;
};

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') && !p.endsWith('vllm-facts.ts') ? [p] : [];
  });
}

describe('vLLM metric names', () => {
  it('the counter is vllm:num_preemptions_total in every version; vllm:num_preemptions in none', () => {
    expect(versionsWith('vllm:num_preemptions_total')).toEqual(VLLM_FACTS.map((t) => t.version));
    expect(versionsWith('vllm:num_preemptions')).toEqual([]);
  });

  it('gpu_cache_usage_perc: beside kv_cache_usage_perc until 0.11, gone from 0.12 (a fallback only)', () => {
    expect(versionsWith('vllm:gpu_cache_usage_perc')).toEqual(['0.9.0', '0.10.0', '0.11.0']);
    expect(versionsWith('vllm:kv_cache_usage_perc')[0]).toBe('0.10.0');
    for (const n of READ_METRICS) expect(versionsWith(n), n).not.toEqual([]);
  });

  it('every vllm: name in the source is a family some vLLM version registers', () => {
    const bad: string[] = [];
    for (const f of sources(join(import.meta.dirname, '..', '..', 'src'))) {
      for (const m of readFileSync(f, 'utf8').matchAll(/'(vllm:[a-z_:]+)'/g))
        if (!versionsWith(family(m[1]!)).length) bad.push(`${f.split('/src/')[1]}: ${m[1]}`);
    }
    expect(bad).toEqual([]);
  });

  it('the simulator exposes families of its default version (0.17.0) with their kinds and labels', async () => {
    const m = await createMetrics('m');
    const table = metricsOf('0.17.0');
    const got = m.registry.getMetricsAsArray() as unknown as Array<{
      name: string;
      labelNames: string[];
      constructor: { name: string };
    }>;
    expect(got.length).toBeGreaterThan(5);
    for (const x of got) {
      expect(table[x.name], x.name).toBeDefined();
      expect(x.constructor.name.toLowerCase(), x.name).toBe(table[x.name]![0]);
      expect([...x.labelNames].sort(), x.name).toEqual([...table[x.name]![1]].sort());
    }
  });

  it('reads the preemption counter the way prometheus_client exposes it', () => {
    const text = [
      '# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.',
      '# TYPE vllm:num_preemptions_total counter',
      'vllm:num_preemptions_total{engine="0",model_name="m"} 3.0',
      '# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.',
      '# TYPE vllm:gpu_cache_usage_perc gauge',
      'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25',
    ].join('\n');
    expect(parseVllmMetrics(`${text}\n`)).toMatchObject({ preemptions: 3, kvCacheUsage: 0.25 });
    // cut before its sample: no reading rather than -Infinity
    expect(parseVllmMetrics(text).kvCacheUsage).toBeUndefined();
  });
  it.each([
    [
      'a label value holding } and spaces, and a timestamp',
      'vllm:num_requests_running{model_name="a } b",engine="0"} 2 1700000000000\n',
      { running: 2 },
    ],
    [
      'samples of one name summed across label sets',
      'vllm:num_requests_waiting{engine="0"} 2\nvllm:num_requests_waiting{engine="1"} 3\n',
      { waiting: 5 },
    ],
  ])('reads %s', (_n, text, want) => {
    expect(parseVllmMetrics(text)).toMatchObject(want);
  });
  it.each([
    ['an HTML page', '<html>oops</html>\n'],
    ['a sample without a value', 'vllm:num_requests_running\n'],
    ['an unclosed label set', 'vllm:num_requests_running{a="1" 2\n'],
  ])('%s does not parse (the probe warns), never a reading', (_n, text) => {
    expect(() => parseVllmMetrics(text)).toThrow(/line 1 is not a metric sample/);
  });
});
