// The router's plan: HAProxy in front of the replicas, what it listens on, which servers it balances, and its
// configuration text. Pure: a profile (and where sparkctl keeps state) in, a plan and a config out.
//
// Choices, and why:
// - prefix (router.balance, the default): a bounded-load consistent hash of the prompt's first
//   router.prefixBytes (src/profiles/haproxy.ts, balanceLines): requests that share a system prompt,
//   a document or a conversation meet the replica whose prefix cache holds it, unless that replica
//   already carries router.hashBalanceFactor % of the average load. Measured by
//   scripts/bench-prefix.mjs against leastconn on real vLLM CPU replicas (docs/router-and-gateway.md).
// - leastconn (router.balance: leastconn, and what the prefix hash spills by): a generation holds its connection for
//   seconds to minutes and requests differ wildly in length, so round robin piles long ones onto one replica; the
//   fewest open requests is the best cheap proxy for the least loaded vLLM.
// - keep-alive on both sides (HAProxy's default mode, said here) with http-reuse safe: an idle
//   connection to a replica is reused for the next request instead of a new connect per request.
//   Measured by scripts/bench-router.mjs on this 2-core host (one run, shared and loaded): keep-alive
//   adds 0.6 ms p50 / 1.8 ms p99 per request over a direct connection, option http-server-close (a
//   new loopback connection to the replica per request) 2.7 / 6.4 ms, and caps 2 simulators at 1168
//   req/s against 1469. A drain does not need server-close: HAProxy's scur counts streams, not idle pooled
//   connections, a drained or maintenance server is never picked (so its idle connections are not
//   reused), and a reused connection that the replica closed at that moment is retried (below).
// - streaming: HAProxy forwards a chunked SSE response as it arrives (no response buffering in
//   HTTP mode, no compression configured); only the request is buffered (http-buffer-request),
//   bounded by tune.bufsize, so that a request that failed to connect can be retried elsewhere.
// - timeouts: the server timeout is an inactivity timeout and a non-streamed generation sends
//   nothing until it is done, so it is long (30 min by default); the client timeout only bites a
//   client that stops reading (5 min); a request waits in the queue at most queueTimeoutSeconds.
// - health: active GET /health (not under /v1, so it needs no API key and none is ever written
//   here); a replica is down after 2 failed checks and up again after 2 good ones.
// - retries: a connection refused or an empty response before any byte of the answer (a replica
//   that just died or is stopping) is retried once on another replica (redispatch).
import { join } from 'node:path';
import type { Profile } from './schema.js';
import { RouterBlock } from './schema.js';
import { replicaAddress, routed, instanceName, replicaHop, replicaSocketPath, type ReplicaHop } from './render.js';
import { UsageError } from '../errors.js';
import { haproxyAddr, configValue, globalSection, defaultsSection, statsSection, balanceLines } from './haproxy.js';
import { controlsReplaced } from '../util/control.js';

type RouterSettings = ReturnType<typeof RouterBlock.parse>;

interface RouterServer {
  /** HAProxy's server name = the replica's instance name */
  name: string;
  host: string;
  /** the loopback port; on a socket (uds) the port it would have had, not listened on */
  port: number;
  /** the replica's Unix socket (vLLM --uds): HAProxy reaches it as unix@PATH */
  uds?: string;
}

export interface RouterPlan {
  /** registry name of the router instance */
  name: string;
  profile: string;
  /** HAProxy backend that holds the replicas */
  backend: string;
  bind: { host: string; port: number };
  servers: RouterServer[];
  /** stats page and Prometheus exporter, loopback only */
  stats: { host: '127.0.0.1'; port: number };
  /** a folder sparkctl creates (0700) for the runtime API socket, the config and the pid */
  dir: string;
  socket: string;
  configFile: string;
  logFile: string;
  settings: RouterSettings;
  /** stop: the soft stop's drain before the hard stop, seconds */
  drainSeconds: number;
  /** how HAProxy reaches the replicas: a Unix socket each in `dir`, or loopback ports and why (render.ts replicaHop) */
  hop: ReplicaHop;
}

/** The router's hop to its replicas in words, for serve, the dry-run and router config. */
export function hopInWords(r: Pick<RouterPlan, 'hop' | 'dir'>): string {
  return r.hop.uds
    ? `replicas on Unix sockets in ${r.dir} (0700, sparkctl's user only; vLLM --uds): no TCP port reaches a replica past the router`
    : r.hop.why;
}

/**
 * The router's drain on stop: router.drainTimeoutSeconds, else the replicas' own drain (server.shutdownTimeoutSeconds),
 * else 30 s.
 */
export function routerDrainSeconds(p: Pick<Profile, 'server' | 'router'>): number {
  const own = p.router?.drainTimeoutSeconds;
  if (own) return own;
  const replicas = p.server.shutdownTimeoutSeconds;
  return replicas > 0 ? replicas : 30;
}

const routerName = (profile: string) => `${profile}-router`;

/** One port a serve of the profile takes: whose it is, the field it comes from, and the --set that moves it. */
export interface PortRole {
  port: number;
  /**
   * "qwen-prod-0's: with the router qwen-prod-router on 8001, the replicas move to router.replicaPort (default
   * server.port + 1)"
   */
  what: string;
  fix: string;
}

/**
 * Every port a serve of the profile takes, each with its role. Behind a router the replicas move:
 * the router takes server.port and replica i router.replicaPort + i (default server.port + 1 + i), so a
 * collision there is the router's doing and says so.
 */
export function portRoles(p: Profile, replicas: number): PortRole[] {
  const names = Array.from({ length: replicas }, (_, i) => instanceName(p, i));
  if (!routed(p))
    return names.map((name, i) => ({
      port: replicaAddress(p, i).port,
      what: `${name}'s (server.port${i ? ` + ${i}` : ''})`,
      fix: '--set server.port=N',
    }));
  const own = p.router?.replicaPort !== undefined;
  const out: PortRole[] = [
    {
      port: p.server.port,
      what: `the router ${routerName(p.name)}'s (HAProxy, on the profile's server.port)`,
      fix: '--set server.port=N',
    },
  ];
  names.forEach((name, i) =>
    out.push({
      port: replicaAddress(p, i).port,
      what: `${name}'s: with the router ${routerName(p.name)} on ${p.server.port}, the replicas move to router.replicaPort${own ? '' : ' (default server.port + 1)'}${i ? ` + ${i}` : ''}`,
      fix: "--set router.replicaPort=N (the first of the replicas' loopback ports behind the router)",
    }),
  );
  const last = out.at(-1)!.port;
  const statsPort = p.router?.statsPort ?? last + 1;
  out.push({
    port: statsPort,
    what: `the router's stats and Prometheus exporter's (router.statsPort${p.router?.statsPort === undefined ? ', default after the last replica' : ''})`,
    fix: '--set router.statsPort=N',
  });
  return out;
}
export const BACKEND = 'replicas';

/**
 * The router of a profile, or undefined when it has none. `replicas`: how many the plan runs; `runtime`:
 * how they run (a container on the host network keeps ports: replicaHop).
 */
export function planRouter(
  p: Profile,
  replicas: number,
  stateDir: string,
  runtime?: 'host' | 'container',
): RouterPlan | undefined {
  if (!routed(p)) return undefined;
  const settings = RouterBlock.parse(p.router);
  const hop = replicaHop(p, stateDir, replicas, runtime);
  const servers: RouterServer[] = Array.from({ length: replicas }, (_, i) => ({
    name: instanceName(p, i),
    ...replicaAddress(p, i),
    ...(hop.uds ? { uds: replicaSocketPath(stateDir, p, i) } : {}),
  }));
  const last = servers.at(-1)?.port ?? p.server.port;
  const dir = join(stateDir, 'router', p.name);
  const statsPort = settings.statsPort ?? last + 1;
  const problems: string[] = [];
  for (const sv of servers) {
    if (sv.port === p.server.port)
      problems.push(
        `router.replicaPort: replica ${sv.name} would listen on ${sv.port}, the router's public port (server.port)`,
      );
    if (sv.port === statsPort) problems.push(`router.statsPort: ${statsPort} is replica ${sv.name}'s port`);
    if (sv.port > 65535) problems.push(`router.replicaPort: replica ${sv.name} would need port ${sv.port}`);
  }
  if (statsPort === p.server.port)
    problems.push(`router.statsPort: ${statsPort} is the router's public port (server.port)`);
  if (statsPort > 65535) problems.push(`router.statsPort: ${statsPort} is not a port`);
  if (problems.length)
    throw new UsageError(`profile ${p.name}: the router's ports collide`, [
      ...problems,
      'set router.replicaPort and router.statsPort to free ports (--set router.replicaPort=N)',
    ]);
  return {
    name: routerName(p.name),
    profile: p.name,
    backend: BACKEND,
    bind: { host: p.server.host, port: p.server.port },
    servers,
    stats: { host: '127.0.0.1', port: statsPort },
    dir,
    socket: join(dir, 'api.sock'),
    configFile: join(dir, 'haproxy.cfg'),
    logFile: join(stateDir, 'logs', `${routerName(p.name)}.log`),
    settings,
    drainSeconds: routerDrainSeconds(p),
    hop,
  };
}

/** Every port the router itself takes (public and stats): a serve must not collide with them. */
export function routerPorts(r: RouterPlan): number[] {
  return [r.bind.port, r.stats.port];
}

const serverAddr = (sv: RouterServer) => (sv.uds ? `unix@${sv.uds}` : bindAddr(sv.host, sv.port));
const metricsBackend = (name: string) => `metrics_${name}`;

/** Where the router's stats listener serves a socket replica's /metrics (Prometheus cannot scrape a Unix socket). */
export function replicaMetricsPath(name: string): string {
  return `/replica/${name}/metrics`;
}

/** Where a monitoring scrape finds the router's own metrics (HAProxy's Prometheus exporter). */
export function routerMetricsEndpoint(r: Pick<RouterPlan, 'stats'>): {
  url: string;
  host: string;
  port: number;
  path: '/metrics';
} {
  return {
    url: `http://${r.stats.host}:${r.stats.port}/metrics`,
    host: r.stats.host,
    port: r.stats.port,
    path: '/metrics',
  };
}

const bindAddr = haproxyAddr;
/** Config lines are written from validated fields only; a newline or a quote could add a directive. */
const safe = (v: string, what: string) =>
  configValue(v, what, 'router config', 'use a plain address (server.host), profile name and state folder path');

interface RenderOptions {
  /** runtime API socket; omitted: no `stats socket` line (an operator's own HAProxy has its own) */
  socket?: string;
  /** log to stdout (HAProxy run by sparkctl in the foreground); omitted: the operator's syslog */
  logStdout?: boolean;
}

/** The HAProxy configuration text. Never holds a secret: health checks use /health, which needs no key. */
export function renderConfig(r: RouterPlan, o: RenderOptions = {}): string {
  const s = r.settings;
  const inter = s.checkIntervalMs;
  const L: string[] = [];
  L.push(
    `# HAProxy in front of the ${r.servers.length} replica(s) of ${safe(r.profile, 'profile')}: written by sparkctl`,
  );
  // how it reaches them, and why on ports where they are (a comment: one line, no control characters)
  L.push(`# ${controlsReplaced(hopInWords(r), ' ')}`);
  L.push(...globalSection({ logStdout: o.logStdout, socket: o.socket && safe(o.socket, 'socket') }));
  L.push(...defaultsSection(s, inter));
  L.push('frontend public');
  L.push(`    bind ${safe(bindAddr(r.bind.host, r.bind.port), 'bind address')}`);
  L.push('    option http-buffer-request');
  L.push(`    default_backend ${r.backend}`);
  L.push('');
  L.push(`backend ${r.backend}`);
  L.push(...balanceLines(s));
  L.push('    option httpchk GET /health');
  L.push('    http-check expect status 200');
  const maxconn = s.maxConnPerReplica ? ` maxconn ${s.maxConnPerReplica}` : '';
  L.push(
    `    default-server check inter ${inter}ms fastinter ${Math.max(250, Math.round(inter / 4))}ms downinter ${inter}ms fall 2 rise 2${maxconn}`,
  );
  // unix@PATH: a replica on vLLM's --uds (the same check and options as a port)
  for (const sv of r.servers)
    L.push(`    server ${safe(sv.name, 'server name')} ${safe(serverAddr(sv), 'server address')}`);
  L.push('');
  L.push(...statsSection(r.stats));
  // Prometheus cannot scrape a Unix socket: each socket replica's /metrics (and nothing else of it) is
  // served on the stats listener (127.0.0.1 only) at /replica/NAME/metrics. vLLM asks no key for
  // /metrics, so this exposes what a replica's loopback port exposed to local users, and no more.
  const onSocket = r.servers.filter((sv) => sv.uds);
  if (onSocket.length) {
    L.pop(); // statsSection ends with an empty line: the metrics routes belong to its frontend
    for (const sv of onSocket)
      L.push(
        `    use_backend ${metricsBackend(sv.name)} if { path ${safe(replicaMetricsPath(sv.name), 'metrics path')} }`,
      );
    L.push('');
    for (const sv of onSocket) {
      L.push(`backend ${metricsBackend(sv.name)}`);
      L.push('    http-request set-path /metrics');
      L.push(`    server ${safe(sv.name, 'server name')} ${safe(serverAddr(sv), 'server address')}`);
      L.push('');
    }
  }
  return L.join('\n');
}
