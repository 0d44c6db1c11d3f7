import { createCommand, deprecatedAlias, lazy } from '../define.js';
import { PROFILE_OPTIONS, hostPortArg } from '../args.js';

export default createCommand({
  name: 'monitoring',
  args: [
    [
      '<what>',
      'rules (Prometheus alerting and recording rules), dashboard (Grafana JSON) or scrape (Prometheus scrape_configs)',
    ],
    ['<profile>', 'profile name or YAML file'],
  ],
  options: [
    [
      '--vllm-version <version>',
      "the vLLM whose metric names to use (default: the profile's engine.vllmVersion, or the installed one's)",
    ],
    ['--vllm-bin <path>', 'the vllm whose version names the metrics when engine.vllmVersion is auto', 'vllm'],
    ['--host <host>', 'scrape: the address Prometheus reaches the replicas at', 'localhost'],
    ['--node-exporter <host:port>', "scrape: node_exporter serving the probe's textfile", 'localhost:9100'],
    [
      '--router-stats <host:port>',
      "scrape: your own HAProxy's Prometheus exporter (a profile with router: has its own, router.statsPort)",
      hostPortArg('--router-stats'),
    ],
    deprecatedAlias('--router <host:port>', '--router-stats', hostPortArg('--router')),
    ['--textfile <name>', 'rules: the file name probe --prometheus writes (staleness alert)', 'sparkctl.prom'],
    ...PROFILE_OPTIONS,
  ],
  description:
    "Prometheus rules, a Grafana dashboard and a scrape config for a profile, in its vLLM version's metric names",
  help: `
Examples:
  sparkctl monitoring rules qwen-prod > /etc/prometheus/rules/sparkctl-qwen-prod.yml && promtool check rules /etc/prometheus/rules/sparkctl-qwen-prod.yml
  sparkctl monitoring dashboard qwen-prod > qwen-prod.json     Grafana: Dashboards > New > Import
  sparkctl monitoring scrape qwen-prod --host 10.0.0.5 --node-exporter 10.0.0.5:9100
  sparkctl monitoring rules qwen-prod --vllm-version 0.11.0     names of another vLLM`,
  handler: lazy(() => import('./run.js')),
});
