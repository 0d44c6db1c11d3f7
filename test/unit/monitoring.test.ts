// sparkctl monitoring, the pure part: metric names per vLLM version (every name in the rules and
// the dashboard checked against that version's table), the rules' shape, the dashboard's schema and
// layout, the scrape config, and the verb's bad input.
import { describe, it, expect } from 'vitest';
import yaml from 'js-yaml';
import { VLLM_FACTS } from '../../src/profiles/vllm-facts.js';
import { FACT_VERSIONS, metricsOf } from '../../src/profiles/vllm-flags.js';
import { loadProfile } from '../../src/profiles/load.js';
import { vllmNames } from '../../src/monitoring/names.js';
import { specFromProfile } from '../../src/monitoring/spec.js';
import { renderRules, type AlertingRule, type RecordingRule } from '../../src/monitoring/rules.js';
import { renderDashboard, SCHEMA_VERSION } from '../../src/monitoring/dashboard.js';
import { renderScrape } from '../../src/monitoring/scrape.js';
import { str, leMatcher, vllmFamiliesIn, templateLiteral } from '../../src/monitoring/promql.js';
import { createMetrics } from '../../src/sim/engine.js';
import { writeFileSync, chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, rmrf } from '../helpers.js';

const profile = (sets: string[] = []) => loadProfile('qwen-dev', { sets }).profile;
const spec = (version: string, sets: string[] = [], replicas = 1) =>
  specFromProfile(profile(sets), { vllmVersion: version, replicas });
const exprsOf = (version: string) => {
  const s = spec(version);
  const rules = renderRules(s).groups.flatMap((g) => g.rules.map((r) => r.expr));
  const d = renderDashboard(s);
  const dash = [
    ...d.panels.flatMap((p) => p.targets.map((t) => t.expr)),
    ...d.templating.list.map((v) => v.definition ?? ''),
  ];
  return { rules, dash };
};

describe('metric names per vLLM version', () => {
  it.each([
    // version, KV cache gauge, inter-token histogram
    ['0.9.0', 'vllm:gpu_cache_usage_perc', 'vllm:time_per_output_token_seconds'],
    ['0.9.1', 'vllm:gpu_cache_usage_perc', 'vllm:time_per_output_token_seconds'],
    ['0.9.2', 'vllm:kv_cache_usage_perc', 'vllm:time_per_output_token_seconds'],
    ['0.10.0', 'vllm:kv_cache_usage_perc', 'vllm:time_per_output_token_seconds'],
    ['0.10.2', 'vllm:kv_cache_usage_perc', 'vllm:time_per_output_token_seconds'],
    ['0.11.0', 'vllm:kv_cache_usage_perc', 'vllm:inter_token_latency_seconds'],
    ['0.12.0', 'vllm:kv_cache_usage_perc', 'vllm:inter_token_latency_seconds'],
    ['0.13.0', 'vllm:kv_cache_usage_perc', 'vllm:inter_token_latency_seconds'],
    ['0.17.0', 'vllm:kv_cache_usage_perc', 'vllm:inter_token_latency_seconds'],
    ['0.27.2', 'vllm:kv_cache_usage_perc', 'vllm:inter_token_latency_seconds'],
    ['0.30.0', 'vllm:kv_cache_usage_perc', 'vllm:inter_token_latency_seconds'],
    ['0.8.5', 'vllm:gpu_cache_usage_perc', 'vllm:time_per_output_token_seconds'],
  ])('vLLM %s: %s, %s', (v, kv, itl) => {
    expect(vllmNames(v)).toMatchObject({
      kvCache: kv,
      itl,
      preemptions: 'vllm:num_preemptions_total',
      ttft: 'vllm:time_to_first_token_seconds',
    });
  });

  it.each([
    ['0.11.0', undefined],
    ['0.12.0', 'vllm:engine_sleep_state'],
    ['0.27.2', 'vllm:engine_sleep_state'],
  ])('vLLM %s: the sleep gauge is %s', (v, name) => {
    expect(vllmNames(v).sleepState).toBe(name);
    const waiting = renderRules(spec(v)).groups[1]!.rules.find(
      (r) => 'alert' in r && r.alert === 'VllmRequestsWaiting',
    )!.expr;
    if (name)
      expect(waiting).toMatch(
        /^sum by \(model_name, instance\) \(vllm:num_requests_waiting\{model_name="qwen-dev"\} unless on \(model_name, instance\) \(vllm:engine_sleep_state\{model_name="qwen-dev", sleep_state="awake"\} == 0\)\) > \d+$/,
      );
    else expect(waiting).not.toContain('unless');
  });

  it.each(FACT_VERSIONS)(
    'vLLM %s: every vllm: name in the rules and the dashboard is a family of its table, none deprecated there',
    (v) => {
      const table = metricsOf(v);
      const { rules, dash } = exprsOf(v);
      const used = new Set([...rules, ...dash].flatMap(vllmFamiliesIn));
      expect(used.size).toBeGreaterThanOrEqual(8);
      for (const name of used) {
        expect(table[name], `${name} in vLLM ${v}`).toBeDefined();
        expect(table[name]![2], `${name} deprecated in vLLM ${v}`).not.toBe('deprecated');
      }
      // a histogram is read through its series, a counter and a gauge by name
      for (const e of [...rules, ...dash])
        for (const m of e.matchAll(/(vllm:[a-z0-9_:]+?)(_bucket|_count|_sum)?[{[)]/g)) {
          const kind = table[m[1]!]?.[0];
          if (m[2]) expect(kind, `${m[0]} in ${e}`).toBe('histogram');
          else expect(kind, `${m[0]} in ${e}`).not.toBe('histogram');
        }
    },
  );

  it('the rename comes out right on both sides: gpu_cache_usage_perc only before 0.9.2, kv_cache_usage_perc from there', () => {
    for (const t of VLLM_FACTS) {
      const text = JSON.stringify(exprsOf(t.version));
      const old = t.version === '0.9.0';
      expect(text.includes('vllm:gpu_cache_usage_perc'), t.version).toBe(old);
      expect(text.includes('vllm:kv_cache_usage_perc'), t.version).toBe(!old);
    }
  });
});

describe('rules', () => {
  const file = renderRules(spec('0.17.0'));
  const alerts = file.groups.flatMap((g) => g.rules).filter((r): r is AlertingRule => 'alert' in r);
  const records = file.groups.flatMap((g) => g.rules).filter((r): r is RecordingRule => 'record' in r);

  it('alerts for what the issue lists, each with severity, model_name and an annotation', () => {
    expect(alerts.map((a) => a.alert)).toEqual(
      expect.arrayContaining([
        'VllmServerDown',
        'VllmEngineDead',
        'VllmKvCacheNearFull',
        'VllmRequestsWaiting',
        'VllmPreemptionsRising',
        'VllmTtftSloBurnFast',
        'VllmTtftSloBurnSlow',
        'VllmItlSloBurnFast',
        'VllmItlSloBurnSlow',
        'GpuTemperatureHigh',
        'GpuTemperatureCritical',
        'GpuEccUncorrected',
        'GpuXid',
        'SparkctlTextfileStale',
      ]),
    );
    expect(new Set(alerts.map((a) => a.alert)).size).toBe(alerts.length);
    for (const a of alerts) {
      expect(a.labels, a.alert).toMatchObject({
        severity: expect.stringMatching(/^(critical|warning)$/),
        model_name: 'qwen-dev',
        profile: 'qwen-dev',
      });
      expect(a.annotations.summary.length, a.alert).toBeGreaterThan(10);
      // labels only: a promtool test can state the annotation exactly
      expect(a.annotations.description).not.toMatch(/\$value/);
    }
    expect(new Set(records.map((r) => r.record)).size).toBe(records.length);
  });

  it('thresholds come from the profile', () => {
    const s = renderRules(
      spec('0.17.0', [
        'probe.kvCacheUsageMax=0.7',
        'probe.waitingMax=5',
        'probe.tempUnhealthyC=80',
        'probe.tempCriticalC=90',
      ]),
    );
    const by = (n: string) => s.groups.flatMap((g) => g.rules).find((r) => 'alert' in r && r.alert === n)!.expr;
    expect(by('VllmKvCacheNearFull')).toMatch(/\) > 0\.7$/);
    expect(by('VllmRequestsWaiting')).toMatch(/\) > 5$/);
    expect(by('GpuTemperatureHigh')).toMatch(/>= 80 < 90$/);
    expect(by('GpuTemperatureCritical')).toMatch(/>= 90$/);
  });

  it('SLO burn: the profile objective and targets, multiwindow, the bound as both exporters write it', () => {
    const s = renderRules(spec('0.17.0', ['slo.objective=0.999', 'slo.ttftSeconds=1', 'slo.itlSeconds=0.05']));
    const all = s.groups.flatMap((g) => g.rules);
    const fast = all.find((r) => 'alert' in r && r.alert === 'VllmTtftSloBurnFast')!;
    expect(fast.expr).toBe(
      'sparkctl:vllm_ttft_slo_errors:ratio_rate1h{model_name="qwen-dev"} > 0.0144 and on (model_name) sparkctl:vllm_ttft_slo_errors:ratio_rate5m{model_name="qwen-dev"} > 0.0144',
    );
    const slow = all.find((r) => 'alert' in r && r.alert === 'VllmItlSloBurnSlow')!;
    expect(slow.expr).toContain(
      'ratio_rate6h{model_name="qwen-dev"} > 0.006 and on (model_name) sparkctl:vllm_itl_slo_errors:ratio_rate30m',
    );
    const ttft1h = all.find((r) => 'record' in r && r.record === 'sparkctl:vllm_ttft_slo_errors:ratio_rate1h')!;
    expect(ttft1h.expr).toContain(
      'vllm:time_to_first_token_seconds_bucket{model_name="qwen-dev", le=~"1|1\\\\.0"}[1h]',
    );
    const itl = all.find((r) => 'record' in r && r.record === 'sparkctl:vllm_itl_slo_errors:ratio_rate5m')!;
    expect(itl.expr).toContain('vllm:inter_token_latency_seconds_bucket{model_name="qwen-dev", le="0.05"}[5m]');
  });

  it.each([
    ['1', 'le=~"1|1\\\\.0"'],
    ['2.5', 'le="2.5"'],
    ['80', 'le=~"80|80\\\\.0"'],
  ])('le matcher for %s s: %s', (b, want) => {
    expect(leMatcher(Number(b))).toBe(want);
  });

  it("a served name's template braces stay literal in the alerts' labels and annotations (Go templates)", () => {
    expect(templateLiteral('a{{ .x }}b')).toBe('a{{ "{{" }} .x {{ "}}" }}b');
    expect(templateLiteral('plain/name')).toBe('plain/name');
    const s = renderRules(spec('0.17.0', ['model.servedName=m{{x}}']));
    const kv = s.groups[1]!.rules.find((r) => 'alert' in r && r.alert === 'VllmKvCacheNearFull') as AlertingRule;
    expect(kv.labels.model_name).toBe('m{{ "{{" }}x{{ "}}" }}');
    expect(kv.annotations.summary.startsWith('m{{ "{{" }}x{{ "}}" }}: KV cache')).toBe(true);
    expect(kv.expr).toContain('{model_name="m{{x}}"}');
  });

  it('a served name with quotes and backslashes stays one PromQL string', () => {
    expect(str('a"b\\c\nd')).toBe('"a\\"b\\\\c\\nd"');
    const s = renderRules(spec('0.17.0', ['model.servedName=we"ird\\name']));
    const kv = s.groups[1]!.rules.find((r) => 'alert' in r && r.alert === 'VllmKvCacheNearFull')!;
    expect(kv.expr).toContain('{model_name="we\\"ird\\\\name"}');
  });

  it("the probe's targets: instances PROFILE-i, the multi-node PROFILE, a --url probe of a replica port; not another profile", () => {
    const s = spec('0.17.0', ['server.port=8002'], 2);
    const re = new RegExp(`^(?:${s.probeTargets})$`);
    for (const yes of [
      'qwen-dev',
      'qwen-dev-0',
      'qwen-dev-1',
      'http://127.0.0.1:8002',
      'http://gpu-7:8003/',
      'https://h:8002',
    ])
      expect(re.test(yes), yes).toBe(true);
    for (const no of ['qwen-prod-0', 'qwen-devx', 'qwen-dev-a', 'http://127.0.0.1:8004', 'http://h:80020', 'qwenXdev'])
      expect(re.test(no), no).toBe(false);
  });
});

describe('dashboard', () => {
  const d = renderDashboard(spec('0.17.0', [], 2));

  it('imports into a current Grafana: schemaVersion, a DS_PROMETHEUS input every panel and query uses', () => {
    expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(39);
    expect(SCHEMA_VERSION).toBeLessThanOrEqual(41);
    expect(d.schemaVersion).toBe(SCHEMA_VERSION);
    expect(d.__inputs).toEqual([
      expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource', pluginId: 'prometheus' }),
    ]);
    expect(d.id).toBeNull();
    expect(d.uid.length).toBeLessThanOrEqual(40);
    for (const p of d.panels) {
      expect(p.datasource).toEqual({ type: 'prometheus', uid: '${DS_PROMETHEUS}' });
      expect(p.targets.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets) expect(t.datasource.uid).toBe('${DS_PROMETHEUS}');
    }
    expect(new Set(d.panels.map((p) => p.id)).size).toBe(d.panels.length);
  });

  it('has the panels an operator looks at first, with the queries they need', () => {
    const q = (title: string) => {
      const p = d.panels.find((x) => x.title === title);
      expect(p, title).toBeDefined();
      return p!.targets.map((t) => t.expr).join('\n');
    };
    expect(q('Requests running / waiting')).toMatch(/vllm:num_requests_running[\s\S]*vllm:num_requests_waiting/);
    expect(q('KV cache usage')).toContain('vllm:kv_cache_usage_perc');
    expect(q('Time to first token')).toMatch(
      /histogram_quantile\(0\.99, sum by \(le\) \(rate\(vllm:time_to_first_token_seconds_bucket\{.*\}\[\$__rate_interval\]\)\)\)/,
    );
    expect(q('Inter-token latency')).toContain('rate(vllm:inter_token_latency_seconds_bucket');
    expect(q('Tokens per second')).toMatch(/rate\(vllm:prompt_tokens_total[\s\S]*rate\(vllm:generation_tokens_total/);
    expect(q('Preemptions')).toContain('vllm:num_preemptions_total');
    expect(q('GPU temperature')).toContain('sparkctl_probe_gpu_temperature_celsius');
    // the probe's cost gauge first, else the price variable over the tokens
    expect(q('Cost per 1K tokens')).toMatch(
      /^max\(sparkctl_cost_usd_per_1k_tokens_24h\{.*\}\) or on \(\) \(\(\$gpu_hour_price \* 2 \* count/,
    );
  });

  it('panels tile the 24-column grid without overlapping', () => {
    const cells = new Set<string>();
    for (const p of d.panels) {
      const g = p.gridPos;
      expect(g.x + g.w, p.title).toBeLessThanOrEqual(24);
      for (let x = g.x; x < g.x + g.w; x++)
        for (let y = g.y; y < g.y + g.h; y++) {
          expect(cells.has(`${x},${y}`), `${p.title} overlaps at ${x},${y}`).toBe(false);
          cells.add(`${x},${y}`);
        }
    }
  });

  it("the price variable: the profile's gpuHourPriceUsd, else the documented default", () => {
    const price = (sets: string[]) =>
      renderDashboard(spec('0.17.0', sets)).templating.list.find((v) => v.name === 'gpu_hour_price')!.query;
    expect(price(['probe.gpuHourPriceUsd=3.5'])).toBe('3.5');
    expect(price([])).toBe('1.64');
  });
});

describe('scrape config', () => {
  it('every replica port, the router when given, node_exporter', () => {
    const s = spec('0.17.0', ['server.port=8000'], 4);
    const c = renderScrape(s, { host: '10.0.0.5', nodeExporter: '10.0.0.5:9100', router: '10.0.0.5:8404' });
    expect(c.scrape_configs.map((j) => j.job_name)).toEqual([
      'sparkctl-qwen-dev',
      'sparkctl-qwen-dev-router',
      'sparkctl-node',
    ]);
    expect(c.scrape_configs[0]!.static_configs[0]!.targets).toEqual([
      '10.0.0.5:8000',
      '10.0.0.5:8001',
      '10.0.0.5:8002',
      '10.0.0.5:8003',
    ]);
    expect(c.scrape_configs[1]!.static_configs[0]!.targets).toEqual(['10.0.0.5:8404']);
    expect(renderScrape(s, { host: 'h', nodeExporter: 'h:9100' }).scrape_configs.map((j) => j.job_name)).toEqual([
      'sparkctl-qwen-dev',
      'sparkctl-node',
    ]);
    expect(
      renderScrape(s, { host: 'fd00::5', nodeExporter: 'h:9100' }).scrape_configs[0]!.static_configs[0]!.targets[0],
    ).toBe('[fd00::5]:8000');
  });

  it("a profile with its own router: the replicas' loopback ports and HAProxy's exporter; the probe's router target", async () => {
    // replicas on loopback ports (router.replicaSocket false; a vLLM before 0.11): scraped at their ports
    const s = spec('0.17.0', ['server.port=8000', 'router.enabled=true', 'router.replicaSocket=false'], 4);
    expect(s.ports).toEqual([8001, 8002, 8003, 8004]);
    const c = renderScrape(s, { host: 'localhost', nodeExporter: 'localhost:9100' });
    expect(c.scrape_configs.map((j) => [j.job_name, j.static_configs[0]!.targets])).toEqual([
      ['sparkctl-qwen-dev', ['localhost:8001', 'localhost:8002', 'localhost:8003', 'localhost:8004']],
      ['sparkctl-qwen-dev-router', ['localhost:8005']],
      ['sparkctl-node', ['localhost:9100']],
    ]);
    // an operator's own HAProxy instead
    expect(
      renderScrape(s, { host: 'localhost', nodeExporter: 'localhost:9100', router: 'lb:8404' }).scrape_configs[1]!
        .static_configs[0]!.targets,
    ).toEqual(['lb:8404']);
    const re = new RegExp(`^(?:${s.probeTargets})$`);
    for (const yes of ['qwen-dev-router', 'http://127.0.0.1:8000', 'http://127.0.0.1:8004'])
      expect(re.test(yes), yes).toBe(true);
    expect(re.test('qwen-dev-routerx')).toBe(false);
    const r = await cli([
      'monitoring',
      'scrape',
      'qwen-dev',
      '--set',
      'router.enabled=true',
      '--set',
      'router.replicaSocket=false',
      '--set',
      'router.statsPort=9901',
    ]);
    expect(String(r.stdout)).toContain('listen on 127.0.0.1');
    expect(
      (yaml.load(String(r.stdout)) as ReturnType<typeof renderScrape>).scrape_configs[1]!.static_configs[0]!.targets,
    ).toEqual(['localhost:9901']);
  });

  // issue 42: replicas on vLLM's --uds (0.11 on, the default behind a router) cannot be scraped by
  // Prometheus (no Unix sockets): each through the router's stats listener at its own path, its own instance
  it.each([
    ['0.17.0', true],
    ['0.11.0', true],
    ['0.10.0', false],
    ['0.9.0', false],
  ])(
    'vLLM %s behind the router: replicas scraped through the router (%s), else at their ports',
    async (version, viaRouter) => {
      const s = spec(version, ['server.port=8000', 'router.enabled=true'], 2);
      const c = renderScrape(s, { host: 'localhost', nodeExporter: 'localhost:9100', router: 'lb:8404' });
      const replicas = c.scrape_configs[0]!;
      if (viaRouter)
        expect(replicas.static_configs).toEqual([
          {
            targets: ['localhost:8003'],
            labels: { profile: 'qwen-dev', instance: 'qwen-dev-0', __metrics_path__: '/replica/qwen-dev-0/metrics' },
          },
          {
            targets: ['localhost:8003'],
            labels: { profile: 'qwen-dev', instance: 'qwen-dev-1', __metrics_path__: '/replica/qwen-dev-1/metrics' },
          },
        ]);
      else
        expect(replicas.static_configs).toEqual([
          { targets: ['localhost:8001', 'localhost:8002'], labels: { profile: 'qwen-dev' } },
        ]);
      // the operator's own HAProxy still gets the router job; the replicas stay with the profile's own router
      expect(c.scrape_configs[1]!.static_configs[0]!.targets).toEqual(['lb:8404']);
    },
  );

  it('the job whose up the VllmServerDown rule reads', () => {
    const s = spec('0.17.0');
    const down = renderRules(s).groups[1]!.rules.find((r) => 'alert' in r && r.alert === 'VllmServerDown')!;
    expect(down.expr).toBe(
      `up{job="${renderScrape(s, { host: 'h', nodeExporter: 'h:9100' }).scrape_configs[0]!.job_name}"} == 0`,
    );
  });
});

describe('sparkctl monitoring (the built CLI)', () => {
  it('YAML for rules and scrape, JSON for the dashboard; --vllm-version picks the names; replicas from the profile', async () => {
    const rules = await cli(['monitoring', 'rules', 'qwen-dev', '--vllm-version', '0.9.0']);
    expect(rules.exitCode, String(rules.stderr)).toBe(0);
    const y = yaml.load(String(rules.stdout)) as { groups: unknown[] };
    expect(y.groups).toHaveLength(2);
    expect(String(rules.stdout)).toContain('vllm:gpu_cache_usage_perc');
    const dash = await cli(['monitoring', 'dashboard', 'qwen-dev']);
    expect(JSON.parse(String(dash.stdout)).schemaVersion).toBe(SCHEMA_VERSION);
    const scrape = await cli([
      'monitoring',
      'scrape',
      'qwen-dev',
      '--set',
      'parallel.replicas=2',
      '--router',
      'localhost:8404',
    ]);
    const sc = yaml.load(String(scrape.stdout)) as ReturnType<typeof renderScrape>;
    expect(sc.scrape_configs[0]!.static_configs[0]!.targets).toEqual(['localhost:8002', 'localhost:8003']);
    expect(sc.scrape_configs[1]!.static_configs[0]!.targets).toEqual(['localhost:8404']);
  });

  it('engine.vllmVersion auto: the names of the vLLM --vllm-bin runs; the newest table, said on stderr, when none is read', async () => {
    const d = tempDir();
    try {
      // A venv as pip leaves it: the console script's interpreter has vllm-0.9.1.dist-info beside it.
      const venv = join(d, 'venv');
      mkdirSync(join(venv, 'bin'), { recursive: true });
      mkdirSync(join(venv, 'lib', 'python3.11', 'site-packages', 'vllm-0.9.1.dist-info'), { recursive: true });
      writeFileSync(
        join(venv, 'lib', 'python3.11', 'site-packages', 'vllm-0.9.1.dist-info', 'METADATA'),
        'Metadata-Version: 2.1\nName: vllm\nVersion: 0.9.1\n',
      );
      const bin = join(venv, 'bin', 'vllm');
      writeFileSync(bin, `#!${join(venv, 'bin', 'python')}\nimport sys\n`);
      chmodSync(bin, 0o755);
      const auto = ['monitoring', 'rules', 'qwen-dev', '--set', 'engine.vllmVersion=auto'];
      const old = await cli([...auto, '--vllm-bin', bin], { stateDir: d });
      expect(old.exitCode, String(old.stderr)).toBe(0);
      expect(String(old.stdout)).toContain('# sparkctl monitoring rules qwen-dev: vLLM 0.9.1 metric names');
      expect(String(old.stdout)).toContain('vllm:gpu_cache_usage_perc');
      expect(String(old.stderr)).toContain('metric names of the installed vLLM, 0.9.1');
      // none read, off the DGX baselines: the newest table; on one, its NGC image's vLLM (the guess every verb makes)
      const none = await cli([...auto, '--set', 'platform=hopper-cuda13', '--vllm-bin', join(d, 'missing')], {
        stateDir: d,
      });
      expect(none.exitCode).toBe(0);
      expect(String(none.stdout)).toContain(`vLLM ${FACT_VERSIONS.at(-1)} metric names`);
      expect(String(none.stderr)).toMatch(/not read .*metric names of the newest table, [\d.]+ \(a guess\)/);
      const dgx = await cli([...auto, '--vllm-bin', join(d, 'missing')], { stateDir: d });
      expect(String(dgx.stdout)).toContain('vLLM 0.17.1 metric names');
      expect(String(dgx.stderr)).toMatch(
        /not read .*metric names of the vLLM of nvcr\.io\/nvidia\/vllm:26\.03-py3 by NVIDIA's release notes for NGC 26\.03, 0\.17\.1 \(a guess\)/,
      );
      // a pin wins over what is installed
      const pinned = await cli(
        ['monitoring', 'rules', 'qwen-dev', '--set', 'engine.vllmVersion=0.17.0', '--vllm-bin', bin],
        { stateDir: d },
      );
      expect(String(pinned.stdout)).toContain('vLLM 0.17.0 metric names');
    } finally {
      rmrf(d);
    }
  });

  it('never prints the API key, even when its variable is set', async () => {
    const env = { QWEN_KEY: 'sk-secret-value-42' };
    for (const what of ['rules', 'dashboard', 'scrape']) {
      const r = await cli(['monitoring', what, 'qwen-dev', '--set', 'server.apiKeyEnv=QWEN_KEY'], { env });
      expect(r.exitCode).toBe(0);
      expect(String(r.stdout) + String(r.stderr)).not.toContain('sk-secret-value-42');
    }
  });

  it.each([
    [['monitoring', 'alerts', 'qwen-dev'], /monitoring alerts: expected rules, dashboard or scrape/],
    [['monitoring', 'rules', 'no-such-profile'], /no-such-profile/],
    [['monitoring', 'rules', 'qwen-dev', '--vllm-version', 'latest'], /--vllm-version: "latest" is not a vLLM version/],
    [['monitoring', 'scrape', 'qwen-dev', '--router', 'localhost'], /--router: "localhost" is not HOST:PORT/],
    [['monitoring', 'scrape', 'qwen-dev', '--node-exporter', 'h:99999'], /--node-exporter: "h:99999" is not HOST:PORT/],
    [['monitoring', 'rules', 'qwen-dev', '--textfile', '../x.prom'], /--textfile: "\.\.\/x\.prom" is not a file name/],
    [['monitoring', 'rules', 'qwen-dev', '--set', 'slo.ttftSeconds=1.3'], /slo\.ttftSeconds[\s\S]*bucket bound/],
    [['monitoring', 'rules', 'qwen-dev', '--set', 'slo.objective=1'], /slo\.objective/],
  ])('%j: exit 2, says what and how', async (args, msg) => {
    const r = await cli(args as string[]);
    expect(r.exitCode, String(r.stdout)).toBe(2);
    expect(String(r.stderr)).toMatch(msg);
  });
});

it('the simulator exposes one series per histogram label set, moved by a request (Prometheus kept an empty twin)', async () => {
  const m = await createMetrics('m');
  m.ttft.observe(0.2);
  const text = await m.registry.metrics();
  const counts = text.split('\n').filter((l) => l.startsWith('vllm:time_to_first_token_seconds_count'));
  expect(counts).toEqual(['vllm:time_to_first_token_seconds_count{model_name="m",engine="0"} 1']);
});
