// A Grafana dashboard (JSON model, schemaVersion 39: Grafana 10.4 and later import it) for one
// profile's served model, in the metric names of the target vLLM version. Its data source is the
// import input DS_PROMETHEUS, so Grafana asks for a Prometheus when it is imported. Pure.
import type { MonitoringSpec } from './spec.js';
import { str, num } from './promql.js';

export const SCHEMA_VERSION = 39;
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's import input, replaced when the dashboard is imported
const DS = { type: 'prometheus', uid: '${DS_PROMETHEUS}' };

interface Target {
  refId: string;
  expr: string;
  legendFormat: string;
  datasource: typeof DS;
}
interface Panel {
  id: number;
  type: 'timeseries' | 'stat';
  title: string;
  description: string;
  datasource: typeof DS;
  gridPos: { h: number; w: number; x: number; y: number };
  fieldConfig: { defaults: Record<string, unknown>; overrides: unknown[] };
  options: Record<string, unknown>;
  targets: Target[];
}

/** A USD price per GPU-hour when the profile has none: $1200 per GPU-month / 730 h, a common list price. */
const DEFAULT_GPU_HOUR_PRICE = 1.64;

/** The dashboard's add(...): each call appends one panel to `panels`, numbered and laid out on the 24-column grid. */
function panelAdder(panels: Panel[]) {
  const at = { x: 0, y: 0, h: 0 };
  return (
    type: Panel['type'],
    title: string,
    description: string,
    unit: string,
    w: number,
    targets: Array<[string, string]>,
    extra: Partial<Panel> = {},
  ) => {
    const h = type === 'stat' ? 4 : 8;
    // left to right, a new row when the 24 columns are full
    if (at.x + w > 24) {
      at.x = 0;
      at.y += at.h;
    }
    const gridPos = { h, w, x: at.x, y: at.y };
    at.x += w;
    at.h = h;
    panels.push({
      id: panels.length + 1,
      type,
      title,
      description,
      datasource: DS,
      gridPos,
      fieldConfig: {
        defaults: {
          unit,
          ...(type === 'timeseries'
            ? { custom: { drawStyle: 'line', lineWidth: 1, fillOpacity: 10, showPoints: 'never' } }
            : {}),
        },
        overrides: [],
      },
      options:
        type === 'stat'
          ? {
              reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
              colorMode: 'value',
              graphMode: 'area',
              textMode: 'auto',
            }
          : {
              legend: { displayMode: 'list', placement: 'bottom', showLegend: true },
              tooltip: { mode: 'multi', sort: 'none' },
            },
      targets: targets.map(([expr, legendFormat], i) => ({
        refId: String.fromCharCode(65 + i),
        expr,
        legendFormat,
        datasource: DS,
      })),
      ...extra,
    });
  };
}

export function renderDashboard(s: MonitoringSpec) {
  const n = s.names;
  const sel = 'model_name=~"$model_name", instance=~"$instance"';
  const probe = `target=~${str(s.probeTargets)}`;
  const q = (qq: number, h: string) =>
    `histogram_quantile(${qq}, sum by (le) (rate(${h}_bucket{${sel}}[$__rate_interval])))`;
  const panels: Panel[] = [];
  const add = panelAdder(panels);
  const tokens = `(sum(rate(${n.promptTokens}{${sel}}[1h])) + sum(rate(${n.generationTokens}{${sel}}[1h])))`;
  add('stat', 'Replicas up', `Replicas Prometheus scrapes (job ${s.job}) that answer.`, 'short', 6, [
    [`sum(up{job=${str(s.job)}})`, 'up'],
  ]);
  add('stat', 'Probe healthy', 'Targets whose last sparkctl deep probe passed (textfile).', 'short', 6, [
    [`sum(sparkctl_probe_healthy{${probe}})`, 'healthy'],
  ]);
  add('stat', 'Generated tokens/s', 'Output tokens per second, all replicas.', 'short', 6, [
    [`sum(rate(${n.generationTokens}{${sel}}[$__rate_interval]))`, 'tokens/s'],
  ]);
  add(
    'stat',
    'Cost per 1K tokens',
    "sparkctl's 24 h cost gauge where the probe writes one (probe --gpu-hour-price); otherwise $gpu_hour_price x the replicas' GPUs over the last hour's tokens.",
    'currencyUSD',
    6,
    [
      [
        `max(sparkctl_cost_usd_per_1k_tokens_24h{${probe}, basis="allocation"}) or on () (($gpu_hour_price * ${s.gpusPerReplica} * count(${n.running}{${sel}}) * 1000) / (3600 * ${tokens}))`,
        'USD / 1K tokens',
      ],
    ],
    { fieldConfig: { defaults: { unit: 'currencyUSD', decimals: 4 }, overrides: [] } },
  );
  add(
    'timeseries',
    'Requests running / waiting',
    'Requests in the running batch and queued for one, per replica.',
    'short',
    12,
    [
      [`sum by (instance) (${n.running}{${sel}})`, 'running {{instance}}'],
      [`sum by (instance) (${n.waiting}{${sel}})`, 'waiting {{instance}}'],
    ],
  );
  add(
    'timeseries',
    'KV cache usage',
    `KV cache in use (${n.kvCache}); the rules warn above ${num(s.thresholds.kvCacheUsageMax * 100)} %.`,
    'percentunit',
    12,
    [[`max by (instance) (${n.kvCache}{${sel}})`, '{{instance}}']],
  );
  add(
    'timeseries',
    'Time to first token',
    `Quantiles of ${n.ttft}; SLO ${s.slo.ttftSeconds} s for ${num(s.slo.objective * 100)} % of requests.`,
    's',
    12,
    [0.5, 0.9, 0.99].map((x) => [q(x, n.ttft), `p${num(x * 100)}`]),
  );
  add(
    'timeseries',
    'Inter-token latency',
    `Quantiles of ${n.itl}; SLO ${s.slo.itlSeconds} s for ${num(s.slo.objective * 100)} % of tokens.`,
    's',
    12,
    [0.5, 0.9, 0.99].map((x) => [q(x, n.itl), `p${num(x * 100)}`]),
  );
  add(
    'timeseries',
    'Tokens per second',
    'Prompt (prefill) and generated tokens per second, all replicas.',
    'short',
    12,
    [
      [`sum(rate(${n.promptTokens}{${sel}}[$__rate_interval]))`, 'prompt'],
      [`sum(rate(${n.generationTokens}{${sel}}[$__rate_interval]))`, 'generation'],
    ],
  );
  add('timeseries', 'Preemptions', 'Requests preempted per second (KV cache exhausted), per replica.', 'short', 12, [
    [`sum by (instance) (rate(${n.preemptions}{${sel}}[$__rate_interval]))`, '{{instance}}'],
  ]);
  add(
    'timeseries',
    'GPU temperature',
    `At each sparkctl probe (textfile); the rules warn at ${s.thresholds.tempUnhealthyC} C, critical at ${s.thresholds.tempCriticalC} C.`,
    'celsius',
    12,
    [[`sparkctl_probe_gpu_temperature_celsius{${probe}}`, '{{target}} GPU {{gpu}}']],
  );
  add(
    'timeseries',
    'End-to-end request latency',
    `Quantiles of ${n.e2e}.`,
    's',
    12,
    [0.5, 0.99].map((x) => [q(x, n.e2e), `p${num(x * 100)}`]),
  );

  const price = s.gpuHourPriceUsd ?? DEFAULT_GPU_HOUR_PRICE;
  return {
    __inputs: [
      {
        name: 'DS_PROMETHEUS',
        label: 'Prometheus',
        description: 'The Prometheus that scrapes the replicas and node_exporter',
        type: 'datasource',
        pluginId: 'prometheus',
        pluginName: 'Prometheus',
      },
    ],
    __requires: [
      { type: 'grafana', id: 'grafana', name: 'Grafana', version: '10.4.0' },
      { type: 'datasource', id: 'prometheus', name: 'Prometheus', version: '1.0.0' },
      { type: 'panel', id: 'stat', name: 'Stat', version: '' },
      { type: 'panel', id: 'timeseries', name: 'Time series', version: '' },
    ],
    annotations: {
      list: [
        {
          builtIn: 1,
          datasource: { type: 'grafana', uid: '-- Grafana --' },
          enable: true,
          hide: true,
          iconColor: 'rgba(0, 211, 255, 1)',
          name: 'Annotations & Alerts',
          type: 'dashboard',
        },
      ],
    },
    description: `vLLM ${s.vllmVersion} metric names; generated by sparkctl monitoring dashboard ${s.profile}`,
    editable: true,
    fiscalYearStartMonth: 0,
    graphTooltip: 1,
    id: null,
    links: [],
    panels,
    refresh: '30s',
    schemaVersion: SCHEMA_VERSION,
    tags: ['sparkctl', 'vllm'],
    templating: {
      list: [
        {
          name: 'model_name',
          label: 'Model',
          type: 'query',
          datasource: DS,
          query: { query: `label_values(${n.running}, model_name)`, refId: 'model_name' },
          definition: `label_values(${n.running}, model_name)`,
          current: { selected: true, text: s.servedName, value: s.servedName },
          refresh: 2,
          includeAll: false,
          multi: false,
          sort: 1,
          hide: 0,
        },
        {
          name: 'instance',
          label: 'Replica',
          type: 'query',
          datasource: DS,
          query: { query: `label_values(${n.running}{model_name=~"$model_name"}, instance)`, refId: 'instance' },
          definition: `label_values(${n.running}{model_name=~"$model_name"}, instance)`,
          current: { selected: true, text: 'All', value: '$__all' },
          refresh: 2,
          includeAll: true,
          allValue: '.*',
          multi: true,
          sort: 1,
          hide: 0,
        },
        {
          name: 'gpu_hour_price',
          label: 'USD per GPU-hour',
          description: 'Used for the cost panel when the probe writes no cost gauge',
          type: 'textbox',
          query: String(price),
          current: { selected: false, text: String(price), value: String(price) },
          hide: 0,
        },
      ],
    },
    time: { from: 'now-1h', to: 'now' },
    timepicker: {},
    timezone: 'browser',
    title: `vLLM ${s.servedName} (${s.profile})`,
    uid: `sparkctl-${s.profile}`.slice(0, 40),
    version: 1,
    weekStart: '',
  };
}

export type Dashboard = ReturnType<typeof renderDashboard>;
