// For the monitoring tests: promtool unit tests generated for a rendered rule file (synthetic series
// that fire, then clear, each alert), and the real Prometheus and node_exporter as child processes
// on free ports, killed at the end.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import yaml from 'js-yaml';
import type { RuleFile, AlertingRule } from '../src/monitoring/rules.js';
import type { MonitoringSpec } from '../src/monitoring/spec.js';
import { freePort, sleep, RUN_MARK } from './helpers.js';

export const PROMETHEUS = '/usr/bin/prometheus';
export const PROMTOOL = '/usr/bin/promtool';
export const NODE_EXPORTER = '/usr/bin/prometheus-node-exporter';
/** Why the Prometheus tests cannot run here (Debian's packages, installed by .ci/run), or undefined. */
export function prometheusUnavailable(need = [PROMETHEUS, PROMTOOL, NODE_EXPORTER]): string | undefined {
  const missing = need.filter((p) => !existsSync(p));
  return missing.length
    ? `${missing.join(', ')} not installed (apt-get install prometheus prometheus-node-exporter; .ci/run does it as root)`
    : undefined;
}

type Labels = Record<string, string>;
interface Case {
  series: Array<{ series: string; values: string }>;
  /** alert name -> [eval minute where it fires with these labels (beyond the rule's own)] */
  fire: { at: number; labels: Labels[] };
  clear: number;
  /** alerts that must NOT fire at `fire.at` in this case */
  silent?: string[];
}

const sel = (name: string, l: Labels) =>
  `${name}{${Object.entries(l)
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(', ')}}`;

/** The synthetic series and the expectations of each alert, from the spec the rules were rendered from. */
export function scenarios(s: MonitoringSpec): Record<string, Case> {
  const n = s.names;
  const v = { model_name: s.servedName, engine: '0', instance: `gpu-host:${s.ports[0]}`, job: s.job };
  const vOut = { model_name: s.servedName, instance: v.instance };
  const node = { instance: 'gpu-host:9100', job: 'sparkctl-node' };
  const t0 = { target: `${s.profile}-0`, ...node };
  const t1 = { target: `${s.profile}-1`, ...node };
  const gpu = { ...t0, gpu: '0' };
  const le = (bound: number) => (Number.isInteger(bound) ? `${bound}.0` : String(bound));
  const t = s.thresholds;
  const burn = (h: string, bound: number, errorShare: number, minutes: number): Case['series'] => {
    const good = 10 * (1 - errorShare);
    // requests 10 a minute; a share missing the target for `minutes`, then none
    return [
      { series: sel(`${h}_count`, v), values: `0+10x${2 * minutes}` },
      {
        series: sel(`${h}_bucket`, { ...v, le: le(bound) }),
        values: `0+${good}x${minutes} ${good * minutes + 10}+10x${minutes - 1}`,
      },
    ];
  };
  // a second server of the model, asleep (vLLM's gauge: awake 0) with the same values: where the version has the gauge
  // it raises none of its metrics' alerts
  const asleep = { ...v, instance: 'gpu-host:8009' };
  const sleeping = (name: string, values: string): Case['series'] =>
    n.sleepState
      ? [
          { series: sel(name, asleep), values },
          { series: sel(n.sleepState, { ...asleep, sleep_state: 'awake' }), values: '0x40' },
          { series: sel(n.sleepState, { ...asleep, sleep_state: 'weights_offloaded' }), values: '1x40' },
          { series: sel(n.sleepState, { ...v, sleep_state: 'awake' }), values: '1x40' },
        ]
      : [];
  return {
    // unified memory (a Spark profile): MemAvailable 2 of 100 GB for 10 minutes, then 40
    SparkMemoryPressure: {
      series: [
        { series: sel('node_memory_MemAvailable_bytes', node), values: '40e9x3 2e9x10 40e9x10' },
        { series: sel('node_memory_MemTotal_bytes', node), values: '100e9x25' },
      ],
      fire: { at: 12, labels: [node] },
      clear: 20,
    },
    VllmServerDown: {
      series: [{ series: sel('up', { instance: v.instance, job: s.job }), values: '1x5 0x10 1x10' }],
      fire: { at: 10, labels: [{ instance: v.instance, job: s.job }] },
      clear: 20,
    },
    VllmEngineDead: {
      series: [
        { series: sel('sparkctl_probe_step_ok', { ...t0, step: 'live' }), values: '1x5 0x10 1x10' },
        { series: sel('sparkctl_probe_reachable', { ...t0, url: 'http://gpu-host:8000' }), values: '1x30' },
        // unreachable: the probe's live step fails too, but that is VllmProbeUnreachable
        { series: sel('sparkctl_probe_step_ok', { ...t1, step: 'live' }), values: '0x30' },
        { series: sel('sparkctl_probe_reachable', { ...t1, url: 'http://gpu-host:8001' }), values: '0x30' },
        // another profile's server
        { series: sel('sparkctl_probe_step_ok', { ...node, target: 'other-0', step: 'inference' }), values: '0x30' },
      ],
      fire: { at: 10, labels: [{ ...t0, step: 'live' }] },
      clear: 20,
    },
    VllmProbeUnreachable: {
      series: [
        { series: sel('sparkctl_probe_reachable', { ...t1, url: 'http://gpu-host:8001' }), values: '1x5 0x10 1x10' },
      ],
      fire: { at: 14, labels: [{ ...t1, url: 'http://gpu-host:8001' }] },
      clear: 20,
    },
    VllmProbeUnhealthy: {
      series: [
        { series: sel('sparkctl_probe_healthy', { ...t0, url: 'http://gpu-host:8000' }), values: '1x5 0x15 1x10' },
        { series: sel('sparkctl_probe_reachable', { ...t0, url: 'http://gpu-host:8000' }), values: '1x30' },
      ],
      fire: { at: 19, labels: [{ ...t0, url: 'http://gpu-host:8000' }] },
      clear: 30,
    },
    VllmKvCacheNearFull: {
      series: [
        { series: sel(n.kvCache, v), values: `0.5x5 ${Math.min(1, t.kvCacheUsageMax + 0.1)}x10 0.5x10` },
        ...sleeping(n.kvCache, `0.5x5 ${Math.min(1, t.kvCacheUsageMax + 0.1)}x10 0.5x10`),
      ],
      fire: { at: 13, labels: [vOut] },
      clear: 20,
    },
    VllmRequestsWaiting: {
      series: [
        { series: sel(n.waiting, v), values: `0x5 ${t.waitingMax + 10}x10 0x10` },
        ...sleeping(n.waiting, `0x5 ${t.waitingMax + 10}x10 0x10`),
      ],
      fire: { at: 13, labels: [vOut] },
      clear: 20,
    },
    VllmPreemptionsRising: {
      series: [
        { series: sel(n.preemptions, v), values: '0x5 0+3x10 30x20' },
        ...sleeping(n.preemptions, '0x5 0+3x10 30x20'),
      ],
      fire: { at: 13, labels: [vOut] },
      clear: 30,
    },
    VllmTtftSloBurnFast: {
      series: burn(n.ttft, s.slo.ttftSeconds, 0.5, 30),
      fire: { at: 20, labels: [{ model_name: s.servedName }] },
      clear: 45,
    },
    VllmTtftSloBurnSlow: {
      series: burn(n.ttft, s.slo.ttftSeconds, 0.1, 60),
      fire: { at: 40, labels: [{ model_name: s.servedName }] },
      clear: 100,
      silent: ['VllmTtftSloBurnFast'],
    },
    VllmItlSloBurnFast: {
      series: burn(n.itl, s.slo.itlSeconds, 0.5, 30),
      fire: { at: 20, labels: [{ model_name: s.servedName }] },
      clear: 45,
    },
    VllmItlSloBurnSlow: {
      series: burn(n.itl, s.slo.itlSeconds, 0.1, 60),
      fire: { at: 40, labels: [{ model_name: s.servedName }] },
      clear: 100,
      silent: ['VllmItlSloBurnFast'],
    },
    GpuTemperatureHigh: {
      series: [
        { series: sel('sparkctl_probe_gpu_temperature_celsius', gpu), values: `70x5 ${t.tempUnhealthyC + 1}x10 70x10` },
      ],
      fire: { at: 13, labels: [gpu] },
      clear: 20,
    },
    GpuTemperatureCritical: {
      series: [
        { series: sel('sparkctl_probe_gpu_temperature_celsius', gpu), values: `70x5 ${t.tempCriticalC + 2}x10 70x10` },
      ],
      fire: { at: 13, labels: [gpu] },
      clear: 20,
      silent: ['GpuTemperatureHigh'],
    },
    GpuEccUncorrected: {
      series: [{ series: sel('sparkctl_probe_gpu_ecc_uncorrected_errors', gpu), values: '0x5 2x10 0x10' }],
      fire: { at: 8, labels: [gpu] },
      clear: 20,
    },
    GpuXid: {
      series: [{ series: sel('sparkctl_probe_gpu_xid_events', gpu), values: '0x5 1 0x100' }],
      fire: { at: 10, labels: [gpu] },
      clear: 70,
    },
    GpuUnhealthy: {
      series: [{ series: sel('sparkctl_probe_gpu_ok', gpu), values: '1x5 0x10 1x10' }],
      fire: { at: 13, labels: [gpu] },
      clear: 20,
    },
    VllmRouterDown: {
      series: [{ series: sel('up', { instance: 'gpu-host:8405', job: `${s.job}-router` }), values: '1x5 0x10 1x10' }],
      fire: { at: 10, labels: [{ instance: 'gpu-host:8405', job: `${s.job}-router` }] },
      clear: 20,
    },
    VllmReplicasOutOfRotation: {
      series: [
        {
          series: sel('haproxy_backend_active_servers', {
            instance: 'gpu-host:8405',
            job: `${s.job}-router`,
            proxy: 'replicas',
          }),
          values: `${s.ports.length}x5 ${s.ports.length - 1}x10 ${s.ports.length}x10`,
        },
      ],
      fire: { at: 13, labels: [{ instance: 'gpu-host:8405', job: `${s.job}-router`, proxy: 'replicas' }] },
      clear: 20,
    },
    SparkctlTextfileStale: {
      // rewritten every minute, then not for 31 minutes, then again
      series: [
        {
          series: sel('node_textfile_mtime_seconds', { ...node, file: s.textfile.name }),
          values: '0+60x10 600x30 2520+60x10',
        },
      ],
      fire: { at: 35, labels: [{ ...node, file: s.textfile.name }] },
      clear: 45,
    },
    // sparkctl watch's textfile: it ticks every minute, then stops for 20 minutes, then again
    SparkctlWatcherStopped: {
      series: [
        { series: sel('sparkctl_watch_last_tick_timestamp_seconds', node), values: '0+60x10 600x20 1860+60x10' },
        { series: sel('sparkctl_watch_interval_seconds', node), values: '5x40' },
      ],
      fire: { at: 15, labels: [node] },
      clear: 33,
    },
    SparkctlWatchCircuitOpen: {
      series: [{ series: sel('sparkctl_watch_circuit_open', t0), values: '0x5 1x10 0x10' }],
      fire: { at: 7, labels: [t0] },
      clear: 20,
    },
    SparkctlServerWedgedOrDead: {
      series: [
        { series: sel('sparkctl_watch_verdict', { ...t0, verdict: 'wedged' }), values: '0x5 1x10 0x10' },
        { series: sel('sparkctl_watch_verdict', { ...t0, verdict: 'healthy' }), values: '1x5 0x10 1x10' },
      ],
      fire: { at: 11, labels: [{ instance: node.instance, target: t0.target }] },
      clear: 20,
    },
    SparkctlProbeMissing: {
      series: [
        { series: sel('sparkctl_probe_healthy', { ...t0, url: 'http://gpu-host:8000' }), values: '1x5 _x30 1x20' },
      ],
      fire: { at: 30, labels: [{}] },
      clear: 50,
    },
  };
}

/** What Prometheus prints for a rule's label or annotation: {{ $labels.x }} filled, {{ "{{" }} a literal {{. */
const literal = (text: string) => text.replace(/\{\{ "(\{\{|\}\})" \}\}/g, '$1');
const fill = (text: string, labels: Labels) =>
  literal(text.replace(/\{\{ \$labels\.(\w+) \}\}/g, (_, k: string) => labels[k] ?? ''));

/** A promtool test file for `rulesFile`: every alert fires with exactly its labels and annotations, then clears. */
export function promtoolTests(rules: RuleFile, s: MonitoringSpec, rulesFile: string, only?: string[]): string {
  const alerts = rules.groups
    .flatMap((g) => g.rules)
    .filter((r): r is AlertingRule => 'alert' in r && (!only || only.includes(r.alert)));
  const cases = scenarios(s);
  const missing = alerts.filter((a) => !cases[a.alert]).map((a) => a.alert);
  if (missing.length) throw new Error(`no promtool scenario for ${missing.join(', ')}`);
  const tests = alerts.map((a) => {
    const c = cases[a.alert]!;
    const exp = c.fire.labels.map((l) => {
      const ruleLabels = Object.fromEntries(Object.entries(a.labels).map(([k, v]) => [k, literal(v)]));
      const labels = { ...l, ...ruleLabels };
      return {
        exp_labels: labels,
        exp_annotations: {
          summary: fill(a.annotations.summary, labels),
          description: fill(a.annotations.description, labels),
        },
      };
    });
    return {
      name: a.alert,
      interval: '1m',
      input_series: c.series,
      alert_rule_test: [
        { eval_time: `${c.fire.at}m`, alertname: a.alert, exp_alerts: exp },
        ...(c.silent ?? []).map((x) => ({ eval_time: `${c.fire.at}m`, alertname: x, exp_alerts: [] })),
        { eval_time: `${c.clear}m`, alertname: a.alert, exp_alerts: [] },
      ],
    };
  });
  return yaml.dump({ rule_files: [rulesFile], evaluation_interval: '1m', tests }, { lineWidth: -1, noRefs: true });
}

export interface Proc {
  port: number;
  url: string;
  proc: ResultPromise;
  output: () => string;
  stop: () => Promise<void>;
}

async function spawnServer(bin: string, args: (port: number) => string[], ready: string, what: string): Promise<Proc> {
  const port = await freePort();
  let buf = '';
  const proc = execa(bin, args(port), { reject: false, all: true, env: { SPARKCTL_TEST_RUN: RUN_MARK } });
  proc.all?.on('data', (d: Buffer) => (buf = (buf + d.toString()).slice(-20_000)));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (proc.exitCode === null && proc.pid) proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await proc;
    clearTimeout(timer);
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`${what} exited (${proc.exitCode}):\n${buf}`);
    try {
      if ((await fetch(`${url}${ready}`, { signal: AbortSignal.timeout(1000) })).status === 200) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${what} not ready in 20 s:\n${buf}`);
    }
    await sleep(100);
  }
  return { port, url, proc, output: () => buf, stop };
}

/** node_exporter with only its textfile collector, reading `dir`. */
export function startNodeExporter(dir: string): Promise<Proc> {
  return spawnServer(
    NODE_EXPORTER,
    (port) => [
      `--web.listen-address=127.0.0.1:${port}`,
      '--collector.disable-defaults',
      '--collector.textfile',
      `--collector.textfile.directory=${dir}`,
    ],
    '/metrics',
    'node_exporter',
  );
}

/** Prometheus scraping and evaluating every second, from `dir` (config written there, storage under it). */
export function startPrometheus(dir: string, scrapeConfigs: unknown[], ruleFiles: string[]): Promise<Proc> {
  const config = {
    global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
    rule_files: ruleFiles,
    scrape_configs: scrapeConfigs,
  };
  writeFileSync(join(dir, 'prometheus.yml'), yaml.dump(config));
  return spawnServer(
    PROMETHEUS,
    (port) => [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    '/-/ready',
    'prometheus',
  );
}

export interface Series {
  metric: Labels;
  value: [number, string];
}
/** An instant query through Prometheus's HTTP API; the answer's shape is checked. */
export async function query(prom: string, expr: string): Promise<Series[]> {
  const r = await fetch(`${prom}/api/v1/query?query=${encodeURIComponent(expr)}`, {
    signal: AbortSignal.timeout(15_000),
  });
  const j = (await r.json()) as { status: string; error?: string; data?: { resultType: string; result: Series[] } };
  if (j.status !== 'success' || !j.data) throw new Error(`query ${expr}: ${j.error ?? r.status}`);
  if (j.data.resultType === 'scalar') return [{ metric: {}, value: j.data.result as unknown as [number, string] }];
  return j.data.result;
}

export interface Alert {
  labels: Labels;
  annotations: Labels;
  state: 'pending' | 'firing';
  activeAt: string;
}
export async function alerts(prom: string): Promise<Alert[]> {
  const j = (await (await fetch(`${prom}/api/v1/alerts`, { signal: AbortSignal.timeout(15_000) })).json()) as {
    status: string;
    data?: { alerts: Alert[] };
  };
  if (j.status !== 'success' || !Array.isArray(j.data?.alerts))
    throw new Error(`/api/v1/alerts: ${JSON.stringify(j).slice(0, 200)}`);
  return j.data.alerts;
}

/** A dashboard query as Grafana would send it: its template variables replaced. */
export function expandVariables(expr: string, vars: Record<string, string>): string {
  return expr.replace(/\$(__rate_interval|[a-z_]+)\b/g, (m, k: string) => vars[k] ?? m);
}
