// What the rules, the dashboard and the scrape config are rendered from: one profile's served model,
// its replicas' ports, its thresholds and SLO, and the vLLM version whose metric names apply. Pure.
import type { Profile } from '../profiles/schema.js';
import { servedName, replicaAddress, routed } from '../profiles/render.js';
import { planRouter, routerMetricsEndpoint, replicaMetricsPath } from '../profiles/router.js';
import { vllmNames, type VllmNames } from './names.js';
import { SHIPPED_PLATFORMS } from '../profiles/shipped-platforms.js';

export interface MonitoringSpec {
  profile: string;
  /** model_name on vLLM's series */
  servedName: string;
  vllmVersion: string;
  names: VllmNames;
  /** replica ports on the serving host */
  ports: number[];
  /**
   * the profile's own router (HAProxy): its public port and its Prometheus exporter; replicas and exporter on loopback
   */
  router?: { port: number; metricsPort: number };
  /**
   * Replicas on Unix sockets (vLLM --uds behind the router): Prometheus cannot scrape a socket, so each
   * replica's /metrics is scraped through the router's stats listener at this path (profiles/router.ts
   * replicaMetricsPath), one target per replica, its instance label the replica's name.
   */
  viaRouter?: Array<{ name: string; path: string }>;
  /** Prometheus job of the replicas (the scrape config's; `up` is read from it) */
  job: string;
  /** names the probe writes in the textfile's target label for this profile's servers */
  probeTargets: string;
  thresholds: { kvCacheUsageMax: number; waitingMax: number; tempUnhealthyC: number; tempCriticalC: number };
  slo: { objective: number; ttftSeconds: number; itlSeconds: number };
  /** the probe's textfile: its file name, and the age after which it is stale */
  textfile: { name: string; maxAgeSeconds: number };
  gpusPerReplica: number;
  gpuHourPriceUsd?: number;
  /**
   * the profile's platform shares one memory between CPU and GPU (DGX Spark): the rules watch the host's memory
   * pressure
   */
  unifiedMemory?: boolean;
}

interface SpecOptions {
  vllmVersion: string;
  replicas: number;
  textfileName?: string;
  textfileMaxAgeSeconds?: number;
}

/** A regular expression matching `s` literally (RE2, as Prometheus reads it). */
const reEscape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function specFromProfile(p: Profile, o: SpecOptions): MonitoringSpec {
  const ports = Array.from({ length: o.replicas }, (_, i) => replicaAddress(p, i).port);
  // the version scraped decides whether the replicas are on sockets (vLLM --uds from 0.11) or ports
  const plan = routed(p)
    ? planRouter({ ...p, engine: { ...p.engine, vllmVersion: o.vllmVersion } }, o.replicas, '/')
    : undefined;
  const router = plan && { port: plan.bind.port, metricsPort: routerMetricsEndpoint(plan).port };
  const name = reEscape(p.name);
  // instances are PROFILE-i and PROFILE-router, a multi-node server is PROFILE, a --url probe is its URL
  const urls = `https?://[^/]+:(${[...(router ? [router.port] : []), ...ports].join('|')})/?`;
  return {
    profile: p.name,
    servedName: servedName(p),
    vllmVersion: o.vllmVersion,
    names: vllmNames(o.vllmVersion),
    ports,
    ...(plan?.hop.uds
      ? { viaRouter: plan.servers.map((sv) => ({ name: sv.name, path: replicaMetricsPath(sv.name) })) }
      : {}),
    job: `sparkctl-${p.name}`,
    probeTargets: `${name}(-[0-9]+|-router)?|${urls}`,
    router,
    thresholds: {
      kvCacheUsageMax: p.probe.kvCacheUsageMax,
      waitingMax: p.probe.waitingMax,
      tempUnhealthyC: p.probe.tempUnhealthyC,
      tempCriticalC: p.probe.tempCriticalC,
    },
    slo: p.slo,
    textfile: { name: o.textfileName ?? 'sparkctl.prom', maxAgeSeconds: o.textfileMaxAgeSeconds ?? 900 },
    gpusPerReplica: p.parallel.tensor * p.parallel.pipeline,
    gpuHourPriceUsd: p.probe.gpuHourPriceUsd,
    unifiedMemory: SHIPPED_PLATFORMS.find((x) => x.name === p.platform)?.gpu.unifiedMemory ?? false,
  };
}
