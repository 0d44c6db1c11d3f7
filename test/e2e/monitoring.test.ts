// sparkctl monitoring against the real tools: promtool checks and unit-tests the generated rules
// (every alert fires and clears on synthetic series, for every vLLM version's names), and a real
// Prometheus scrapes two simulator replicas and node_exporter's textfile collector fed by the real
// probe: the engine-dead fault raises VllmEngineDead, and every dashboard query returns a series.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { writeFileSync, mkdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import yaml from 'js-yaml';
import { cli, isolated, tempDir, rmrf, startSim, freePortRange, sleep, waitFor, type SimHandle } from '../helpers.js';
import {
  prometheusUnavailable,
  promtoolTests,
  PROMTOOL,
  startNodeExporter,
  startPrometheus,
  query,
  alerts,
  expandVariables,
  type Proc,
} from '../monitoring.js';
import { FACT_VERSIONS } from '../../src/profiles/vllm-flags.js';
import { loadProfile } from '../../src/profiles/load.js';
import { specFromProfile } from '../../src/monitoring/spec.js';
import type { RuleFile } from '../../src/monitoring/rules.js';
import type { Dashboard } from '../../src/monitoring/dashboard.js';

const why = prometheusUnavailable();
if (why) console.warn(`monitoring suite skipped: ${why}`);

let dir: string;
beforeAll(() => {
  dir = tempDir('sparkctl-monitoring-');
});
afterAll(() => rmrf(dir));

const render = async (what: string, args: string[] = []) => {
  const r = await cli(['monitoring', what, 'qwen-dev', ...args]);
  expect(r.exitCode, String(r.stderr)).toBe(0);
  return String(r.stdout);
};

describe.skipIf(Boolean(why))('monitoring rules with promtool', () => {
  it('promtool check rules passes on the rules of every vLLM version sparkctl knows', async () => {
    const files: string[] = [];
    for (const v of FACT_VERSIONS) {
      const f = join(dir, `check-${v}.yml`);
      writeFileSync(f, await render('rules', ['--vllm-version', v]));
      files.push(f);
    }
    const r = await execa(PROMTOOL, ['check', 'rules', ...files], { reject: false });
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
    expect(r.stdout.match(/SUCCESS: \d+ rules found/g)).toHaveLength(files.length);
  });

  it('promtool test rules: each alert fires with its labels and annotations, then clears (old and new metric names)', async () => {
    // 0.9.0: gpu_cache_usage_perc and time_per_output_token_seconds; 0.17.0: kv_cache_usage_perc and
    // inter_token_latency_seconds, 4 replicas behind the profile's router (its alerts too)
    const cases: Array<[string, string[], number]> = [
      ['0.9.0', [], 1],
      ['0.17.0', ['router.enabled=true', 'parallel.replicas=4'], 4],
    ];
    await Promise.all(
      cases.map(async ([v, sets, replicas]) => {
        const rulesFile = join(dir, `unit-${v}.rules.yml`);
        const text = await render('rules', ['--vllm-version', v, ...sets.flatMap((x) => ['--set', x])]);
        writeFileSync(rulesFile, text);
        const rules = yaml.load(text) as RuleFile;
        if (sets.length)
          expect(rules.groups[1]!.rules.map((r) => ('alert' in r ? r.alert : ''))).toContain(
            'VllmReplicasOutOfRotation',
          );
        const spec = specFromProfile(loadProfile('qwen-dev', { sets }).profile, { vllmVersion: v, replicas });
        const testFile = join(dir, `unit-${v}.test.yml`);
        writeFileSync(testFile, promtoolTests(rules, spec, rulesFile));
        const r = await execa(PROMTOOL, ['test', 'rules', testFile], { reject: false });
        expect(r.exitCode, `${v}:\n${r.stdout}\n${r.stderr}`).toBe(0);
        expect(r.stdout).toContain('SUCCESS');
      }),
    );
  }, 60_000);

  it('a Spark profile: SparkMemoryPressure (unified memory) is rendered, promtool-checked, fires and clears; a data-centre profile has none', async () => {
    const r = await cli(['monitoring', 'rules', 'qwen3.5-9b-spark', '--vllm-version', '0.17.0']);
    expect(r.exitCode, String(r.stderr)).toBe(0);
    const rulesFile = join(dir, 'spark.rules.yml');
    writeFileSync(rulesFile, String(r.stdout));
    const check = await execa(PROMTOOL, ['check', 'rules', rulesFile], { reject: false });
    expect(check.exitCode, check.stdout + check.stderr).toBe(0);
    const spec = specFromProfile(loadProfile('qwen3.5-9b-spark').profile, { vllmVersion: '0.17.0', replicas: 1 });
    expect(spec.unifiedMemory).toBe(true);
    writeFileSync(
      join(dir, 'spark.test.yml'),
      promtoolTests(yaml.load(String(r.stdout)) as RuleFile, spec, rulesFile, ['SparkMemoryPressure']),
    );
    const t = await execa(PROMTOOL, ['test', 'rules', join(dir, 'spark.test.yml')], { reject: false });
    expect(t.exitCode, t.stdout + t.stderr).toBe(0);
    expect(await render('rules', ['--vllm-version', '0.17.0'])).not.toContain('SparkMemoryPressure');
  });

  it('a served name with quotes and template braces: the rules load, the alert carries the name as written', async () => {
    const sets = ['model.servedName=we"ird{{ .x }}\\name'];
    const text = await render('rules', ['--vllm-version', '0.17.0', ...sets.flatMap((x) => ['--set', x])]);
    const rulesFile = join(dir, 'hostile.rules.yml');
    writeFileSync(rulesFile, text);
    const spec = specFromProfile(loadProfile('qwen-dev', { sets }).profile, { vllmVersion: '0.17.0', replicas: 1 });
    expect(spec.servedName).toBe('we"ird{{ .x }}\\name');
    writeFileSync(
      join(dir, 'hostile.test.yml'),
      promtoolTests(yaml.load(text) as RuleFile, spec, rulesFile, ['VllmKvCacheNearFull', 'VllmEngineDead']),
    );
    const check = await execa(PROMTOOL, ['check', 'rules', rulesFile], { reject: false });
    expect(check.exitCode, check.stdout + check.stderr).toBe(0);
    const r = await execa(PROMTOOL, ['test', 'rules', join(dir, 'hostile.test.yml')], { reject: false });
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
  });

  it('a test that expects an alert which does not fire fails (the unit tests can fail)', async () => {
    const profile = loadProfile('qwen-dev').profile;
    const text = await render('rules');
    // the KV threshold moved above what the synthetic series reaches
    const rules = yaml.load(text) as RuleFile;
    const spec = specFromProfile(profile, { vllmVersion: '0.17.0', replicas: 1 });
    const broken = text.replace(/(vllm:kv_cache_usage_perc\{model_name="qwen-dev"\}[^\n]*\)) > 0\.85/, '$1 > 0.99');
    expect(broken).not.toBe(text);
    const rulesFile = join(dir, 'broken.rules.yml');
    writeFileSync(rulesFile, broken);
    writeFileSync(
      join(dir, 'broken.test.yml'),
      promtoolTests(rules, spec, rulesFile, ['VllmKvCacheNearFull', 'VllmRequestsWaiting']),
    );
    const r = await execa(PROMTOOL, ['test', 'rules', join(dir, 'broken.test.yml')], { reject: false });
    expect(r.exitCode).not.toBe(0);
    // the one alert whose rule changed fails, the other still passes
    expect(r.stdout + r.stderr).toMatch(/alertname: VllmKvCacheNearFull/);
    expect(r.stdout + r.stderr).not.toMatch(/alertname: VllmRequestsWaiting/);
  });
});

/**
 * Prometheus cannot run faster than its clock: the live test shortens every `for:` to 1/20 (1m -> 3s); the expressions
 * are the CLI's own.
 */
function scaleFor(text: string, by = 20): RuleFile {
  const rules = yaml.load(text) as RuleFile;
  const unit = { s: 1, m: 60, h: 3600 } as Record<string, number>;
  for (const g of rules.groups)
    for (const r of g.rules)
      if ('alert' in r && r.for) {
        const m = /^(\d+)([smh])$/.exec(r.for)!;
        r.for = `${Math.max(1, Math.round((Number(m[1]) * unit[m[2]!]!) / by))}s`;
      }
  return rules;
}

const SECRET = 'sk-monitoring-test-0f9e8d';
const FOR_ENGINE_DEAD_S = 3;

describe.skipIf(Boolean(why)).sequential('a real Prometheus scraping simulator replicas and the probe textfile', () => {
  let base: number;
  let sims: SimHandle[] = [];
  let nodeExp: Proc | undefined;
  let prom: Proc | undefined;
  let textDir: string;
  let state: string;
  const sets = () => ['--set', `server.port=${base}`, '--set', 'parallel.replicas=2'];
  const urls = () => sims.map((s) => s.url);
  const probe = async () => {
    const r = await cli(
      [
        'probe',
        ...urls().flatMap((u) => ['--url', u]),
        '--model',
        'qwen-dev',
        '--prometheus',
        join(textDir, 'sparkctl.prom'),
        '--gpu-from',
        join(import.meta.dirname, '..', 'fixtures', 'bundles', 'h200x2-serving-hot'),
        '--gpu-hour-price',
        '2',
      ],
      { stateDir: state, env: { VLLM_API_KEY: SECRET } },
    );
    expect(r.exitCode, String(r.stdout) + String(r.stderr)).not.toBe(70);
    return r;
  };
  const complete = (url: string, maxTokens = 8) =>
    fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRET}` },
      body: JSON.stringify({ model: 'qwen-dev', prompt: 'hello '.repeat(40), max_tokens: maxTokens }),
      signal: AbortSignal.timeout(10_000),
    }).then((r) => r.status);
  const until = async <T>(what: string, f: () => Promise<T | undefined>, ms: number): Promise<T> => {
    const end = Date.now() + ms;
    for (;;) {
      // one slow answer of Prometheus's API on a loaded host is a "not yet", not a failure
      const v = await f().catch((e: Error) => {
        if (e.name === 'TimeoutError') return undefined;
        throw e;
      });
      if (v !== undefined) return v;
      if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms\n${prom?.output() ?? ''}`);
      await sleep(200);
    }
  };

  beforeAll(async () => {
    base = await freePortRange(2);
    textDir = join(dir, 'textfile');
    state = join(dir, 'state');
    mkdirSync(textDir, { recursive: true });
    const env = { VLLM_API_KEY: SECRET };
    sims = await Promise.all([
      startSim(['--served-model-name', 'qwen-dev'], { port: base, env }),
      // replica 1 dies on its 4th request: /health answers 503 (EngineDeadError), /metrics stays up
      startSim(['--served-model-name', 'qwen-dev', '--sim-fault', 'engine-dead-after:3'], { port: base + 1, env }),
    ]);
    nodeExp = await startNodeExporter(textDir);
    const rulesFile = join(dir, 'live.rules.yml');
    writeFileSync(rulesFile, yaml.dump(scaleFor(await render('rules', sets()))));
    const scrape = yaml.load(
      await render('scrape', [...sets(), '--host', '127.0.0.1', '--node-exporter', `127.0.0.1:${nodeExp.port}`]),
    ) as { scrape_configs: unknown[] };
    prom = await startPrometheus(dir, scrape.scrape_configs, [rulesFile]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([...sims.map((s) => s.stop()), nodeExp?.stop(), prom?.stop()]);
  });

  it('scrapes every replica and the textfile; every dashboard query returns a series with a value', async () => {
    for (let i = 0; i < 6; i++) expect(await complete(sims[0]!.url)).toBe(200);
    expect(await complete(sims[1]!.url)).toBe(200);
    await probe();
    await probe(); // two samples of history: the cost gauges
    const textfile = readFileSync(join(textDir, 'sparkctl.prom'), 'utf8');
    // the bundle's GPUs, per target: ECC from nvidia-smi, Xid from its kernel log
    expect(textfile).toMatch(
      new RegExp(`^sparkctl_probe_gpu_ecc_uncorrected_errors\\{target="${sims[0]!.url}",gpu="0"\\} \\d+$`, 'm'),
    );
    expect(textfile).toMatch(/^# TYPE sparkctl_probe_gpu_xid_events gauge$/m);
    const up = await until(
      'both replicas up and the textfile scraped',
      async () => {
        const u = await query(prom!.url, 'up{job="sparkctl-qwen-dev"} == 1');
        const t = await query(prom!.url, 'sparkctl_probe_healthy');
        return u.length === 2 && t.length === 2 ? u : undefined;
      },
      15_000,
    );
    expect(up.map((s) => s.metric.instance).sort()).toEqual([`127.0.0.1:${base}`, `127.0.0.1:${base + 1}`]);
    // traffic while the panels are read, so the rates and quantiles have samples in their window
    let busy = true;
    const traffic = (async () => {
      while (busy) await complete(sims[0]!.url, 4).catch(() => 0);
    })();
    await sleep(4000);
    const dash = JSON.parse(await render('dashboard', sets())) as Dashboard;
    const vars = { model_name: 'qwen-dev', instance: '.*', gpu_hour_price: '2', __rate_interval: '10s' };
    const answers: Record<string, number> = {};
    try {
      for (const p of dash.panels)
        for (const t of p.targets) {
          const res = await query(prom!.url, expandVariables(t.expr, vars));
          expect(res.length, `${p.title}: ${t.expr}`).toBeGreaterThan(0);
          expect(
            res.some((s) => Number.isFinite(Number(s.value[1]))),
            `${p.title}: ${t.expr} -> ${JSON.stringify(res)}`,
          ).toBe(true);
          answers[`${p.title} ${t.legendFormat}`] = Number(res[0]!.value[1]);
        }
    } finally {
      busy = false;
      await traffic;
    }
    expect(answers['Replicas up up']).toBe(2);
    expect(answers['GPU temperature {{target}} GPU {{gpu}}']).toBeGreaterThan(20);
    expect(answers['Cost per 1K tokens USD / 1K tokens']).toBeGreaterThan(0);
    // nothing Prometheus stored carries the API key
    const series = await (
      await fetch(`${prom!.url}/api/v1/series?match[]=${encodeURIComponent('{__name__=~".+"}')}`)
    ).text();
    expect(series).toContain('sparkctl_probe_gpu_temperature_celsius');
    expect(series).not.toContain(SECRET);
  }, 60_000);

  it('the engine-dead fault raises VllmEngineDead for that replica within its for: window, and nothing else dies', async () => {
    expect((await alerts(prom!.url)).filter((a) => a.labels.alertname === 'VllmEngineDead')).toEqual([]);
    // the fault: requests past the 3rd kill replica 1's engine
    for (let i = 0; i < 4; i++) await complete(sims[1]!.url).catch(() => 0);
    expect((await fetch(`${sims[1]!.url}/health`)).status).toBe(503);
    await probe();
    const written = Date.now();
    const fired = await until(
      'VllmEngineDead firing',
      async () =>
        (await alerts(prom!.url)).find((a) => a.labels.alertname === 'VllmEngineDead' && a.state === 'firing'),
      45_000,
    );
    const tookS = (Date.now() - written) / 1000;
    // textfile scrape (1 s) + evaluation (1 s) + for: + one more evaluation, and Prometheus's own
    // lag on a loaded 2-core CI host (its API once took over 5 s to answer there): never before for:
    expect(tookS).toBeLessThan(FOR_ENGINE_DEAD_S + 40);
    expect(tookS).toBeGreaterThanOrEqual(FOR_ENGINE_DEAD_S - 1);
    expect(fired.labels).toMatchObject({
      severity: 'critical',
      model_name: 'qwen-dev',
      profile: 'qwen-dev',
      step: 'live',
      target: sims[1]!.url,
    });
    expect(fired.annotations.summary).toBe(`qwen-dev: the engine of ${sims[1]!.url} is dead`);
    const all = await alerts(prom!.url);
    expect(all.filter((a) => a.labels.alertname === 'VllmEngineDead').map((a) => a.labels.target)).toEqual([
      sims[1]!.url,
    ]);
    expect(JSON.stringify(all)).not.toContain(SECRET);
  }, 90_000);

  it('a replica that stops raises VllmServerDown for its instance', async () => {
    await sims[0]!.stop();
    const down = await until(
      'VllmServerDown firing',
      async () =>
        (await alerts(prom!.url)).find((a) => a.labels.alertname === 'VllmServerDown' && a.state === 'firing'),
      45_000,
    );
    expect(down.labels).toMatchObject({
      instance: `127.0.0.1:${base}`,
      job: 'sparkctl-qwen-dev',
      model_name: 'qwen-dev',
    });
  }, 90_000);
});

describe.skipIf(Boolean(why) || !existsSync('/usr/sbin/haproxy'))(
  'behind the profile router: a real HAProxy exporter scraped, a replica out of rotation alerted',
  () => {
    const t = isolated({
      prefix: 'sparkctl-monitoring-router-',
      env: { SPARKCTL_SIM_LOAD_SECONDS: '0.3', SPARKCTL_SIM_COLD_MS: '50' },
      per: 'suite',
    });
    const env = t.env;
    let prom: Proc | undefined;
    let sets: string[] = [];

    beforeAll(async () => {
      const base = await freePortRange(6);
      sets = [
        '--set',
        `server.port=${base}`,
        '--set',
        'server.host=127.0.0.1',
        '--set',
        'parallel.replicas=2',
        '--set',
        'router.enabled=true',
        '--set',
        'router.checkIntervalMs=500',
      ];
      const served = await cli(['serve', 'qwen-dev', '--engine', 'sim', ...sets, '--set', 'prewarm.maxRounds=2'], {
        env: env(),
        timeout: 120_000,
      });
      expect(served.exitCode, String(served.stdout) + String(served.stderr)).toBe(0);
      const rulesFile = join(t.state, 'router.rules.yml');
      writeFileSync(rulesFile, yaml.dump(scaleFor(await render('rules', sets))));
      const scrape = yaml.load(await render('scrape', [...sets, '--host', '127.0.0.1'])) as {
        scrape_configs: Array<{ job_name: string }>;
      };
      prom = await startPrometheus(
        t.state,
        scrape.scrape_configs.filter((j) => j.job_name !== 'sparkctl-node'),
        [rulesFile],
      );
    }, 150_000);
    // Before the hooks of isolated() (after-hooks run last-registered first): Prometheus writes under the state folder.
    afterAll(async () => {
      await prom?.stop();
    }, 30_000);

    it("HAProxy's exporter holds both replicas; one killed -9 leaves the rotation and VllmReplicasOutOfRotation fires", async () => {
      const active = async () =>
        (await query(prom!.url, 'haproxy_backend_active_servers{job="sparkctl-qwen-dev-router", proxy="replicas"}'))[0]
          ?.value[1];
      expect(
        await waitFor(async () => (await active()) === '2', 15_000, 200),
        `active servers: ${await active()}`,
      ).toBe(true);
      // issue 42: the replicas are on Unix sockets (vLLM --uds, the simulator playing 0.17), which Prometheus
      // cannot scrape: each is scraped through the router's stats listener, named by its own instance label
      const up = async () =>
        (await query(prom!.url, 'up{job="sparkctl-qwen-dev"}'))
          .map((r) => `${r.metric.instance}=${r.value[1]}`)
          .sort()
          .join(' ');
      expect(
        await waitFor(async () => (await up()) === 'qwen-dev-0=1 qwen-dev-1=1', 15_000, 200),
        `up: ${await up()}`,
      ).toBe(true);
      expect(
        (await query(prom!.url, 'vllm:num_requests_running{job="sparkctl-qwen-dev", instance="qwen-dev-1"}')).length,
      ).toBeGreaterThan(0);
      const st = JSON.parse(String((await cli(['status', '--json'], { env: env() })).stdout)) as {
        instances: Array<{ name: string; pid: number }>;
      };
      const victim = st.instances.find((i) => i.name === 'qwen-dev-1')!;
      expect(victim.pid).toBeGreaterThan(1);
      process.kill(victim.pid, 'SIGKILL');
      const fired = await (async () => {
        const end = Date.now() + 30_000;
        while (Date.now() < end) {
          const a = (await alerts(prom!.url)).find(
            (x) => x.labels.alertname === 'VllmReplicasOutOfRotation' && x.state === 'firing',
          );
          if (a) return a;
          await sleep(250);
        }
        throw new Error(`VllmReplicasOutOfRotation did not fire; active servers ${await active()}`);
      })();
      expect(fired.labels).toMatchObject({
        job: 'sparkctl-qwen-dev-router',
        proxy: 'replicas',
        model_name: 'qwen-dev',
        severity: 'warning',
      });
      expect(await active()).toBe('1');
      expect((await alerts(prom!.url)).filter((a) => a.labels.alertname === 'VllmRouterDown')).toEqual([]);
    }, 60_000);
  },
);
