// Prometheus recording and alerting rules for one profile's served model, in the metric names of
// the target vLLM version, and for the probe's node_exporter textfile. Pure: a rule file as data.
import type { MonitoringSpec } from './spec.js';
import { str, leMatcher, num, dur, templateLiteral } from './promql.js';
import { BACKEND as ROUTER_BACKEND } from '../profiles/router.js';

export interface RecordingRule {
  record: string;
  expr: string;
  labels?: Record<string, string>;
}
export interface AlertingRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: { summary: string; description: string };
}
export interface RuleFile {
  groups: Array<{ name: string; rules: Array<RecordingRule | AlertingRule> }>;
}

/** The burn-rate windows (Google SRE workbook, multiwindow multi-burn-rate alerts): long, short, rate, for. */
const BURN = {
  fast: { long: '1h', short: '5m', factor: 14.4, for: '2m', severity: 'critical' },
  slow: { long: '6h', short: '30m', factor: 6, for: '15m', severity: 'warning' },
} as const;
const WINDOWS = ['5m', '30m', '1h', '6h'] as const;

/**
 * Version-independent names of what the rules record (an operator's own panels can read these across vLLM upgrades).
 */
const RECORDED = {
  running: 'sparkctl:vllm_requests_running:sum',
  waiting: 'sparkctl:vllm_requests_waiting:sum',
  kvCache: 'sparkctl:vllm_kv_cache_usage:max',
  generationRate: 'sparkctl:vllm_generation_tokens:rate5m',
  promptRate: 'sparkctl:vllm_prompt_tokens:rate5m',
  ttftP50: 'sparkctl:vllm_ttft_seconds:p50_5m',
  ttftP99: 'sparkctl:vllm_ttft_seconds:p99_5m',
  itlP50: 'sparkctl:vllm_itl_seconds:p50_5m',
  itlP99: 'sparkctl:vllm_itl_seconds:p99_5m',
  sloErrors: (kind: 'ttft' | 'itl', window: string) => `sparkctl:vllm_${kind}_slo_errors:ratio_rate${window}`,
};

type AlertOf = (
  name: string,
  expr: string,
  forDur: string,
  severity: 'critical' | 'warning',
  summary: string,
  description: string,
) => AlertingRule;

/**
 * sparkctl watch's own textfile: the watcher stopped ticking, gave up on a replica, or a replica stays dead or wedged.
 */
function watcherAlerts(s: MonitoringSpec, alert: AlertOf): AlertingRule[] {
  // the profile's replicas are PROFILE-N (a profile name is [a-z0-9._-]: a dot is the only regex character)
  const target = `target=~${str(`${s.profile.replace(/\./g, '\\.')}-[0-9]+`)}`;
  return [
    alert(
      'SparkctlWatcherStopped',
      'time() - sparkctl_watch_last_tick_timestamp_seconds > 3 * sparkctl_watch_interval_seconds + 60',
      '2m',
      'critical',
      'sparkctl watch on {{ $labels.instance }} stopped ticking',
      'The watcher has not read its servers for more than three intervals and a minute: nothing restarts a wedged or dead server on this host (systemctl status sparkctl-watch).',
    ),
    alert(
      'SparkctlWatchCircuitOpen',
      `sparkctl_watch_circuit_open{${target}} == 1`,
      '0s',
      'critical',
      `${templateLiteral(s.servedName)}: sparkctl watch gave up restarting {{ $labels.target }}`,
      'It was restarted watch.circuitRestarts times within watch.circuitWindowMinutes and is dead or wedged again: restarting does not fix it (sparkctl logs, sparkctl report).',
    ),
    alert(
      'SparkctlServerWedgedOrDead',
      `max by (instance, target) (sparkctl_watch_verdict{${target},verdict=~"wedged|dead"}) == 1`,
      '3m',
      'critical',
      `${templateLiteral(s.servedName)}: {{ $labels.target }} stays wedged or dead`,
      'sparkctl watch has judged it wedged or dead for 3 minutes: its restart did not bring it back, or watch.action is alert or none.',
    ),
  ];
}

/** The profile's own HAProxy: down, or holding fewer replicas in rotation than the profile runs. */
/**
 * A DGX Spark's unified memory under pressure (issue 48 item 10), from node_exporter's meminfo and
 * PSI collectors: MemAvailable under 5 % of MemTotal, or tasks stalled on memory more than 10 % of
 * the time. The page cache, the KV cache and the OS share one pool there; the OOM killer comes next.
 */
function memoryPressureAlerts(s: MonitoringSpec, alert: AlertOf): AlertingRule[] {
  if (!s.unifiedMemory) return [];
  return [
    alert(
      'SparkMemoryPressure',
      '(node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes < 0.05) or (rate(node_pressure_memory_stalled_seconds_total[5m]) > 0.1)',
      '5m',
      'warning',
      `${templateLiteral(s.servedName)}: memory pressure on the Spark {{ $labels.instance }}`,
      'Under 5 % of the unified memory is available, or tasks stall on memory over 10 % of the time: the page cache, the KV cache and the OS compete for one pool and the OOM killer is next. Free the page cache (sync; echo 3 | sudo tee /proc/sys/vm/drop_caches), lower engine.gpuMemoryUtilization, and check swap and an OOM daemon: sparkctl preflight --only host.memory-pressure.',
    ),
  ];
}

function routerAlerts(s: MonitoringSpec, alert: AlertOf): AlertingRule[] {
  if (!s.router) return [];
  const job = str(`${s.job}-router`);
  return [
    alert(
      'VllmRouterDown',
      `up{job=${job}} == 0`,
      '1m',
      'critical',
      `${templateLiteral(s.servedName)}: the router on {{ $labels.instance }} is down`,
      `Prometheus cannot scrape HAProxy's exporter (job ${s.job}-router): clients of port ${s.router.port} get no answer.`,
    ),
    alert(
      'VllmReplicasOutOfRotation',
      `haproxy_backend_active_servers{job=${job}, proxy=${str(ROUTER_BACKEND)}} < ${s.ports.length}`,
      '2m',
      'warning',
      `${templateLiteral(s.servedName)}: fewer than ${s.ports.length} replicas in the router's rotation`,
      "HAProxy's /health checks take a replica out when it fails them: sparkctl probe names it, sparkctl restart --rolling brings it back.",
    ),
  ];
}

export function renderRules(s: MonitoringSpec): RuleFile {
  const n = s.names;
  const model = `model_name=${str(s.servedName)}`;
  const probe = `target=~${str(s.probeTargets)}`;
  const by = 'model_name, instance';
  const quantile = (q: number, h: string) =>
    `histogram_quantile(${q}, sum by (model_name, le) (rate(${h}_bucket{${model}}[5m])))`;
  const errors = (h: string, bound: number, w: string) =>
    `1 - (sum by (model_name) (rate(${h}_bucket{${model}, ${leMatcher(bound)}}[${w}])) / sum by (model_name) (rate(${h}_count{${model}}[${w}])))`;

  const recording: RecordingRule[] = [
    { record: RECORDED.running, expr: `sum by (${by}) (${n.running}{${model}})` },
    { record: RECORDED.waiting, expr: `sum by (${by}) (${n.waiting}{${model}})` },
    { record: RECORDED.kvCache, expr: `max by (${by}) (${n.kvCache}{${model}})` },
    { record: RECORDED.generationRate, expr: `sum by (model_name) (rate(${n.generationTokens}{${model}}[5m]))` },
    { record: RECORDED.promptRate, expr: `sum by (model_name) (rate(${n.promptTokens}{${model}}[5m]))` },
    { record: RECORDED.ttftP50, expr: quantile(0.5, n.ttft) },
    { record: RECORDED.ttftP99, expr: quantile(0.99, n.ttft) },
    { record: RECORDED.itlP50, expr: quantile(0.5, n.itl) },
    { record: RECORDED.itlP99, expr: quantile(0.99, n.itl) },
    ...WINDOWS.flatMap((w) => [
      { record: RECORDED.sloErrors('ttft', w), expr: errors(n.ttft, s.slo.ttftSeconds, w) },
      { record: RECORDED.sloErrors('itl', w), expr: errors(n.itl, s.slo.itlSeconds, w) },
    ]),
  ];

  // rule labels and annotations are Go templates: a served name's {{ }} stays literal
  const base = { model_name: templateLiteral(s.servedName), profile: s.profile };
  const alert: AlertOf = (name, expr, forDur, severity, summary, description) => ({
    alert: name,
    expr,
    ...(forDur === '0s' ? {} : { for: forDur }),
    labels: { severity, ...base },
    annotations: { summary, description },
  });
  const budget = 1 - s.slo.objective;
  const burn = (kind: 'ttft' | 'itl', speed: keyof typeof BURN) => {
    const b = BURN[speed];
    const limit = num(b.factor * budget);
    const label =
      kind === 'ttft'
        ? `time to first token <= ${s.slo.ttftSeconds} s`
        : `inter-token latency <= ${s.slo.itlSeconds} s`;
    return alert(
      `Vllm${kind === 'ttft' ? 'Ttft' : 'Itl'}SloBurn${speed === 'fast' ? 'Fast' : 'Slow'}`,
      `${RECORDED.sloErrors(kind, b.long)}{${model}} > ${limit} and on (model_name) ${RECORDED.sloErrors(kind, b.short)}{${model}} > ${limit}`,
      b.for,
      b.severity,
      `${templateLiteral(s.servedName)}: the ${label} SLO burns its error budget ${b.factor}x too fast`,
      `More than ${num(b.factor * budget * 100)} % of requests missed ${label} over the last ${b.long} and ${b.short} (objective ${num(s.slo.objective * 100)} %): at this rate the 30-day budget lasts ${num(30 / b.factor)} days.`,
    );
  };
  // a server in vLLM's sleep mode (its gauge says awake 0) raises none of the alerts read from its own
  // metrics: a request sent to it straight waits in its queue until it is woken, as sleep mode means
  const awake = (expr: string) =>
    n.sleepState ? `${expr} unless on (${by}) (${n.sleepState}{${model}, sleep_state="awake"} == 0)` : expr;
  const textfile = `file=~${str(`(.*/)?${s.textfile.name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`)}`;
  const t = s.thresholds;

  const alerting: AlertingRule[] = [
    alert(
      'VllmServerDown',
      `up{job=${str(s.job)}} == 0`,
      '1m',
      'critical',
      `${templateLiteral(s.servedName)}: {{ $labels.instance }} is down`,
      `Prometheus cannot scrape /metrics of {{ $labels.instance }} (job ${s.job}): the server is not running or not reachable.`,
    ),
    ...routerAlerts(s, alert),
    ...memoryPressureAlerts(s, alert),
    alert(
      'VllmEngineDead',
      `sparkctl_probe_step_ok{${probe}, step=~"live|inference"} == 0 unless on (instance, job, target) sparkctl_probe_reachable{${probe}} == 0`,
      '1m',
      'critical',
      `${templateLiteral(s.servedName)}: the engine of {{ $labels.target }} is dead`,
      `The deep probe's {{ $labels.step }} step fails on {{ $labels.target }} while the server answers: /health 503 (EngineDeadError) or no token from a 1-token generation. Restart it: sparkctl stop, then sparkctl serve.`,
    ),
    alert(
      'VllmProbeUnreachable',
      `sparkctl_probe_reachable{${probe}} == 0`,
      '5m',
      'critical',
      `${templateLiteral(s.servedName)}: the probe cannot reach {{ $labels.target }}`,
      'sparkctl probe finds {{ $labels.target }} refusing or timing out (see sparkctl status and sparkctl logs).',
    ),
    alert(
      'VllmProbeUnhealthy',
      `sparkctl_probe_healthy{${probe}} == 0 unless on (instance, job, target) sparkctl_probe_reachable{${probe}} == 0`,
      '10m',
      'warning',
      `${templateLiteral(s.servedName)}: the deep probe of {{ $labels.target }} fails`,
      'A step of sparkctl probe fails on {{ $labels.target }} (identity, inference, GPUs or auth): run sparkctl probe for the detail.',
    ),
    alert(
      'VllmKvCacheNearFull',
      `max by (${by}) (${awake(`${n.kvCache}{${model}}`)}) > ${num(t.kvCacheUsageMax)}`,
      '5m',
      'warning',
      `${templateLiteral(s.servedName)}: KV cache above ${num(t.kvCacheUsageMax * 100)} % on {{ $labels.instance }}`,
      'New requests will wait or preempt running ones: lower load, max-num-seqs or max-model-len, or add a replica.',
    ),
    alert(
      'VllmRequestsWaiting',
      `sum by (${by}) (${awake(`${n.waiting}{${model}}`)}) > ${t.waitingMax}`,
      '5m',
      'warning',
      `${templateLiteral(s.servedName)}: more than ${t.waitingMax} requests waiting on {{ $labels.instance }}`,
      'Requests queue for a batch slot: the server is at capacity.',
    ),
    alert(
      'VllmPreemptionsRising',
      `sum by (${by}) (${awake(`increase(${n.preemptions}{${model}}[5m])`)}) > 0`,
      '5m',
      'warning',
      `${templateLiteral(s.servedName)}: requests preempted on {{ $labels.instance }}`,
      'vLLM preempts running requests when the KV cache runs out (recomputed later: slower). Lower concurrency or give the cache more memory.',
    ),
    burn('ttft', 'fast'),
    burn('ttft', 'slow'),
    burn('itl', 'fast'),
    burn('itl', 'slow'),
    alert(
      'GpuTemperatureHigh',
      `sparkctl_probe_gpu_temperature_celsius{${probe}} >= ${t.tempUnhealthyC} < ${t.tempCriticalC}`,
      '5m',
      'warning',
      'GPU {{ $labels.gpu }} of {{ $labels.target }} is hot',
      `GPU {{ $labels.gpu }} of {{ $labels.target }} has been at or above ${t.tempUnhealthyC} C for 5 minutes: check cooling and throttling (nvidia-smi -q -d PERFORMANCE).`,
    ),
    alert(
      'GpuTemperatureCritical',
      `sparkctl_probe_gpu_temperature_celsius{${probe}} >= ${t.tempCriticalC}`,
      '1m',
      'critical',
      'GPU {{ $labels.gpu }} of {{ $labels.target }} is critically hot',
      `GPU {{ $labels.gpu }} of {{ $labels.target }} is at or above ${t.tempCriticalC} C: thermal slowdown or shutdown is next.`,
    ),
    alert(
      'GpuEccUncorrected',
      `sparkctl_probe_gpu_ecc_uncorrected_errors{${probe}} > 0`,
      '0s',
      'critical',
      'GPU {{ $labels.gpu }} of {{ $labels.target }} has uncorrected ECC errors',
      'Uncorrected (volatile) ECC errors since the driver loaded: drain the GPU and reset it; remapping may follow.',
    ),
    alert(
      'GpuXid',
      `max_over_time(sparkctl_probe_gpu_xid_events{${probe}}[1h]) > 0`,
      '0s',
      'critical',
      'GPU {{ $labels.gpu }} of {{ $labels.target }} logged Xid errors',
      'The kernel log has NVIDIA Xid events for this GPU in the last hour: sparkctl probe names them (dmesg | grep Xid).',
    ),
    alert(
      'GpuUnhealthy',
      `sparkctl_probe_gpu_ok{${probe}} == 0`,
      '5m',
      'warning',
      'GPU {{ $labels.gpu }} of {{ $labels.target }} is unhealthy',
      'The deep probe finds an unhealthy condition on this GPU (temperature, ECC, row remapping, throttling or Xid): run sparkctl probe for the detail.',
    ),
    alert(
      'SparkctlTextfileStale',
      `time() - node_textfile_mtime_seconds{${textfile}} > ${s.textfile.maxAgeSeconds}`,
      '5m',
      'warning',
      "sparkctl's textfile on {{ $labels.instance }} is stale",
      `${s.textfile.name} has not been rewritten for more than ${dur(s.textfile.maxAgeSeconds)}: the probe's cron job or timer stopped, so the probe's alerts see old values.`,
    ),
    ...watcherAlerts(s, alert),
    alert(
      'SparkctlProbeMissing',
      `absent(sparkctl_probe_healthy{${probe}})`,
      '15m',
      'warning',
      `${templateLiteral(s.servedName)}: no probe results`,
      `No sparkctl_probe_healthy series for ${s.profile}: run sparkctl probe --prometheus FILE into node_exporter's textfile directory (cron, systemd timer).`,
    ),
  ];
  return {
    groups: [
      { name: `sparkctl-${s.profile}.rules`, rules: recording },
      { name: `sparkctl-${s.profile}.alerts`, rules: alerting },
    ],
  };
}
