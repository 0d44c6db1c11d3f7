// Prometheus scrape_configs for one profile: every replica's /metrics, the router's where there is
// one, and node_exporter (whose textfile collector serves the probe's gauges). Pure.
import type { MonitoringSpec } from './spec.js';

interface ScrapeOptions {
  /** the address Prometheus reaches the serving host at */
  host: string;
  /** node_exporter on the serving host, HOST:PORT */
  nodeExporter: string;
  /** the router's metrics endpoint, HOST:PORT (an operator's own HAProxy); the profile's own router by default */
  router?: string;
}

interface ScrapeConfig {
  job_name: string;
  metrics_path: string;
  static_configs: Array<{ targets: string[]; labels?: Record<string, string> }>;
}

export function renderScrape(s: MonitoringSpec, o: ScrapeOptions): { scrape_configs: ScrapeConfig[] } {
  const labels = { profile: s.profile };
  const host = o.host.includes(':') && !o.host.startsWith('[') ? `[${o.host}]` : o.host;
  const router = o.router ?? (s.router ? `${host}:${s.router.metricsPort}` : undefined);
  // replicas on Unix sockets: each through the router's stats listener at its own path (__metrics_path__), named by its
  // instance label (one address for all of them would merge their series) (the profile's own router's stats listener,
  // which serves those paths, even where --router-stats names another HAProxy)
  const own = s.router ? `${host}:${s.router.metricsPort}` : undefined;
  const replicas =
    s.viaRouter && own
      ? s.viaRouter.map((r) => ({ targets: [own], labels: { ...labels, instance: r.name, __metrics_path__: r.path } }))
      : [{ targets: s.ports.map((p) => `${host}:${p}`), labels }];
  const jobs: ScrapeConfig[] = [{ job_name: s.job, metrics_path: '/metrics', static_configs: replicas }];
  if (router)
    jobs.push({
      job_name: `${s.job}-router`,
      metrics_path: '/metrics',
      static_configs: [{ targets: [router], labels }],
    });
  // the job name the operator's own node_exporter job may already have; the rules do not depend on it
  jobs.push({ job_name: 'sparkctl-node', metrics_path: '/metrics', static_configs: [{ targets: [o.nodeExporter] }] });
  return { scrape_configs: jobs };
}
