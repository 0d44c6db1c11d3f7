// Starting the router for a serve: launched, registered at once (with its identity, like a
// replica), then ready when it holds its port and its runtime API answers. A router that does not
// come up is a failed launch (the command stops everything it started).
import type { ServePlan } from '../engine/plan.js';
import type { Registry, Instance } from '../engine/registry.js';
import type { RouterOutcome } from '../engine/events.js';
import { stopGroup } from '../engine/runtime/proc.js';
import { routerMetricsEndpoint, hopInWords, type RouterPlan } from '../profiles/router.js';
import { balanceWords } from '../profiles/haproxy.js';
import type { RouterLaunched } from '../engine/router-driver.js';
import { launchRouter, waitRouterReady, requireHaproxy, checkRouterConfig } from './process.js';
import { LaunchError } from '../errors.js';
import { serverState } from './api.js';
import { bindTrial, holdersInWords } from '../engine/runtime/socket-owner.js';
import { haproxyAddr } from '../profiles/haproxy.js';

function routerInstance(
  plan: ServePlan,
  r: RouterPlan,
  l: Pick<RouterLaunched, 'pid' | 'startTime' | 'marker' | 'argv'>,
): Instance {
  const prof = plan.profile;
  return {
    version: 1,
    name: r.name,
    profile: prof.name,
    replica: 0,
    role: 'router',
    pid: l.pid,
    pgid: l.pid,
    startTime: l.startTime,
    marker: l.marker,
    host: r.bind.host,
    port: r.bind.port,
    url: routerUrl(r),
    servedName: plan.servedName,
    gpus: [],
    logFile: r.logFile,
    engine: plan.engine,
    argv: l.argv,
    apiKeyEnv: prof.server.apiKeyEnv,
    startedAt: new Date().toISOString(),
    readyTimeoutSeconds: 10,
    // for a router: the drain after its soft stop
    shutdownTimeoutSeconds: r.drainSeconds,
    probe: { ...prof.probe, gpuMemoryUtilization: prof.engine.gpuMemoryUtilization },
    maxModelLen: prof.engine.maxModelLen ?? prof.model.maxContext,
    router: {
      socket: r.socket,
      configFile: r.configFile,
      backend: r.backend,
      statsPort: r.stats.port,
      servers: r.servers,
    },
  };
}

const routerUrl = (r: Pick<RouterPlan, 'bind'>) =>
  `http://${r.bind.host === '0.0.0.0' || r.bind.host === '::' ? '127.0.0.1' : r.bind.host}:${r.bind.port}`;

function outcomeOf(r: RouterPlan, pid: number): RouterOutcome {
  return {
    name: r.name,
    url: routerUrl(r),
    pid,
    statsUrl: `http://${r.stats.host}:${r.stats.port}/stats`,
    metricsUrl: routerMetricsEndpoint(r).url,
    balance: balanceWords(r.settings),
    configFile: r.configFile,
    logFile: r.logFile,
    servers: r.servers.map((s) => ({ name: s.name, port: s.port, state: 'unknown' })),
    hop: hopInWords(r),
  };
}

/**
 * Each port HAProxy is about to bind, tried first: one held by another process is a failure naming
 * the port, its holder and the fix (HAProxy itself only exits 1 with an ALERT line in its log).
 */
async function routerPortsTaken(
  r: Pick<RouterPlan, 'bind' | 'stats'>,
): Promise<{ message: string; fixes: string[] } | undefined> {
  const binds = [
    {
      host: r.bind.host,
      port: r.bind.port,
      what: "the router's port (the profile's server.port)",
      fix: '--set server.port=N (the replicas take the ports after it)',
    },
    { host: r.stats.host, port: r.stats.port, what: "the router's stats port", fix: '--set router.statsPort=N' },
  ];
  for (const b of binds) {
    const taken = await bindTrial(b.host, b.port);
    if (!taken) continue;
    const at = haproxyAddr(b.host, b.port);
    if (taken.code === 'EADDRINUSE')
      return {
        message: `${b.what} ${at} is taken by ${holdersInWords(taken.holders)}`,
        fixes: [
          `choose a free port: ${b.fix}`,
          ...(taken.holders.length ? [`or stop what holds it (ss -ltnp 'sport = :${b.port}' shows it)`] : []),
        ],
      };
    return {
      message: `${b.what} ${at} cannot be bound (${taken.code})`,
      fixes: [
        taken.code === 'EACCES'
          ? `a port below 1024 needs root, or ${b.fix}`
          : taken.code === 'EADDRNOTAVAIL'
            ? `${b.host} is not an address of this host: --set server.host=127.0.0.1`
            : b.fix,
      ],
    };
  }
  return undefined;
}

/**
 * Before any replica is launched: a config HAProxy refuses or a router port another process holds
 * is the router's failure (serve: launch-failed, exit 4) that costs no model load; undefined when
 * it can start. startRouter tries both again at its turn (the port can be taken while replicas load).
 */
export async function precheckRouter(r: RouterPlan): Promise<RouterOutcome | undefined> {
  const failed = (message: string, fixes: string[]) => ({
    ...outcomeOf(r, -1),
    failure: `${message}; fix: ${fixes.join('; ')}`,
  });
  try {
    await checkRouterConfig(r, requireHaproxy(r.settings.bin));
  } catch (e) {
    if (e instanceof LaunchError) return failed(e.message, e.details);
    throw e;
  }
  const taken = await routerPortsTaken(r);
  return taken ? failed(taken.message, taken.fixes) : undefined;
}

/** Start the plan's router; registered the moment it is spawned. Never throws for a router that fails: it says why. */
export async function startRouter(
  plan: ServePlan,
  registry: Registry,
): Promise<{ launched?: RouterLaunched; outcome: RouterOutcome }> {
  const r = plan.router!;
  // tried again here: the port can be taken while the replicas load
  const taken = await routerPortsTaken(r);
  if (taken) return { outcome: { ...outcomeOf(r, -1), failure: `${taken.message}; fix: ${taken.fixes.join('; ')}` } };
  let l: RouterLaunched;
  try {
    l = await launchRouter(r, requireHaproxy(r.settings.bin));
  } catch (e) {
    const x = e as Error & { details?: string[] };
    return {
      outcome: {
        ...outcomeOf(r, -1),
        failure: x.details?.length ? `${x.message}: ${x.details.join('; ')}` : x.message,
      },
    };
  }
  if (l.pid > 0) registry.write('host', routerInstance(plan, r, l));
  const ready = await waitRouterReady(l);
  const outcome = outcomeOf(r, l.pid);
  if (!ready.ok) {
    await stopGroup(l, 2000);
    registry.remove('host', r.name);
    return { outcome: { ...outcome, failure: ready.detail } };
  }
  outcome.servers = outcome.servers.map((s) => {
    const st = ready.servers.find((x) => x.backend === r.backend && x.server === s.name);
    return { ...s, state: st ? serverState(st) : 'missing' };
  });
  return { launched: l, outcome };
}
