import { Registry, type ClusterRecord, type Entry } from '../../engine/registry.js';
import { named, onHost, overNodes } from '../../engine/servers.js';
import { stateDir } from '../common.js';
import { stopInstances, graceMsOf, heldText, type StopOutcome, type RequestsOutcome } from '../../engine/stop.js';
import { envelope } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { shownEscaped as shown } from '../../util/control.js';
import { UsageError, ProblemsFound } from '../../errors.js';
import { stopGateway } from '../../gateway/control.js';
import { downText } from '../gateway-text.js';

const requestsWord = (n: number) => `${n} in-flight request${n === 1 ? '' : 's'}`;

/** What the evidence says happened to the requests; never more than it shows. */
export function requestsText(r: RequestsOutcome): string {
  switch (r.kind) {
    case 'drained':
      return `drained ${requestsWord(r.count)}`;
    case 'aborted':
      return `aborted ${requestsWord(r.count)}${r.count ? ' (vLLM aborts on SIGTERM unless started with --shutdown-timeout: set server.shutdownTimeoutSeconds)' : ''}`;
    case 'cut-off':
      return r.count !== undefined ? `SIGKILL cut off ${requestsWord(r.count)}` : 'SIGKILL cut off what was in flight';
    case 'unconfirmed':
      return `vLLM was draining but never logged that its requests completed${r.inFlight ? ` (${r.inFlight} in flight at the signal)` : ''}: they may have failed (see sparkctl logs)`;
    case 'unknown':
      // the gauges follow the engine's steps: a request the API server still holds is not counted
      if (r.inFlight === 0)
        return 'its gauges showed no running or waiting request at the signal; vLLM logged no shutdown mode';
      return r.inFlight !== undefined
        ? `${r.inFlight} request${r.inFlight === 1 ? ' was' : 's were'} in flight; vLLM logged no shutdown mode, so how ${r.inFlight === 1 ? 'it' : 'they'} ended is not known`
        : 'vLLM logged no shutdown mode: how its requests ended is not known';
    case 'router-drained': {
      const asked =
        r.inFlight !== undefined ? `; HAProxy had ${r.inFlight} request${r.inFlight === 1 ? '' : 's'} in flight` : '';
      const idle = r.idleClosed
        ? `; ${r.idleClosed} idle keep-alive connection${r.idleClosed === 1 ? '' : 's'} closed at the deadline`
        : '';
      if (r.connections === 0) return `drained: no client connection was open${asked}`;
      const which =
        r.connections === undefined
          ? 'every open client connection'
          : r.connections === 1
            ? 'the 1 open client connection'
            : `all ${r.connections} open client connections`;
      return `drained: ${which} finished${asked}${idle}`;
    }
    case 'router-cut':
      return `CUT ${r.cut} client connection${r.cut === 1 ? '' : 's'} with a request still running at the drain deadline${r.connections !== undefined ? ` (of ${r.connections} open at the soft stop)` : ''}: stop --grace longer, or router.drainTimeoutSeconds`;
    case 'router-unknown':
      return `HAProxy's connections could not be read (/proc/net/tcp) at the drain deadline: whether the hard stop cut a request is not known${r.inFlight !== undefined ? ` (HAProxy had ${r.inFlight} in flight at the soft stop)` : ''}`;
    case 'none':
      return '';
  }
}

const secs = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;

/** How the server ended: a router by its soft stop (HAProxy's words), any other by SIGTERM/SIGKILL. */
function howText(r: StopOutcome): string {
  if (r.result === 'not-running') return 'was not running';
  if (r.routerEnd === 'soft-stop') return `soft-stopped (SIGUSR1) in ${secs(r.ms)}`;
  if (r.routerEnd === 'hard-stop') return `soft stop did not end within ${secs(r.graceMs)}: hard stop (SIGTERM)`;
  if (r.routerEnd === 'SIGKILL')
    return `soft stop did not end within ${secs(r.graceMs)}, nor the hard stop: killed (SIGKILL)`;
  return r.result === 'killed'
    ? `did not stop within ${secs(r.graceMs)}: killed (SIGKILL)`
    : `stopped (SIGTERM) in ${secs(r.ms)}${r.degraded ? ' (its API server had died; the rest of its group is stopped)' : ''}`;
}

export function outcomeLine(r: StopOutcome): string {
  if (r.result === 'unproven')
    return `${r.name}: NOT SIGNALLED: ${r.unproven?.detail}; ${r.forgotten ? 'record dropped (--force-forget)' : 'left alone (sparkctl stop --force-forget drops the record)'}`;
  const req = requestsText(r.requests);
  const log = r.logDeleted ? '; its log was deleted while it ran (rotated away?): its shutdown lines are lost' : '';
  return `${r.name}: ${howText(r)}${req ? `: ${req}` : ''}; ${r.uds ? 'socket' : 'port'} ${r.portFree ? 'free' : 'STILL IN USE'}${r.groupLeft ? `; ${r.groupLeft} process(es) of its group left` : ''}${r.gpuHolders.length ? `; GPU still held by ${r.gpuHolders.join(',')}` : ''}${r.held ? `; ${r.held}` : ''}${log}`;
}

/**
 * The registry's servers over nodes this stop acts on (clusters.ts selects them: NAME, --all,
 * or --nodes FILE), stopped and said; the nodes code loads only when there is one to stop.
 */
async function stopClusters(
  recorded: () => ClusterRecord[],
  name: string | undefined,
  opts: { all?: boolean; nodes?: string },
  timeoutS: number,
) {
  if (!opts.nodes && !recorded().length) return [];
  const cl = await import('./clusters.js');
  const done = await cl.stopClusters(cl.clusterTargets(recorded, name, opts), timeoutS);
  return done.map((x) => ({ ...x, json: cl.clusterStopJson(x) }));
}

/** The servers on this host stopped (a router by its own soft stop), each signal said as it is sent. */
async function stopOnHost(
  reg: Registry,
  targets: Entry[],
  graceMs: number | undefined,
  forceForget: boolean | undefined,
): Promise<StopOutcome[]> {
  return stopInstances(reg, targets, {
    graceMs,
    forceForget,
    router: targets.some((e) => e.inst.role === 'router')
      ? (await import('../../router/stop.js')).stopRouterEntry
      : undefined,
    onEvent: (e) => {
      if (e.type === 'signalled' && e.signal === 'SIGUSR1')
        note(
          `${e.name}: soft stop (SIGUSR1): HAProxy stops listening and lets ${e.connections === undefined ? 'its open connections' : `${e.connections} open connection${e.connections === 1 ? '' : 's'}`} finish; hard stop after ${Math.round(e.graceMs / 1000)} s if it has not ended`,
        );
      else if (e.type === 'signalled' && e.signal === 'SIGTERM' && e.hardStop)
        note(`${e.name}: the drain deadline passed: hard stop (SIGTERM); SIGKILL after 3 s`);
      else if (e.type === 'signalled' && e.signal === 'SIGTERM')
        note(
          `${e.name}: SIGTERM${e.inFlight ? ` with ${requestsWord(e.inFlight)}` : ''}; SIGKILL after ${Math.round(e.graceMs / 1000)} s if it has not ended`,
        );
    },
  });
}

/**
 * The stop's verdict: a server that did not release everything, an entry not proven ours, or a gateway or cluster not
 * stopped is a problem (the registry entries kept).
 */
function judgeStop(results: StopOutcome[], gatewayBad: string, clusterBad: string): void {
  const unproven = results.filter((r) => r.result === 'unproven' && !r.forgotten);
  const bad = results.filter((r) => heldText(r) !== undefined);
  if (bad.length)
    note('some resources are still held; the registry entries are kept so `sparkctl stop` can be run again');
  if (bad.length || unproven.length || gatewayBad || clusterBad)
    throw new ProblemsFound(
      [
        gatewayBad,
        clusterBad,
        bad.length ? `${bad.length} server(s) did not release everything` : '',
        unproven.length
          ? `${unproven.length} entr${unproven.length === 1 ? 'y' : 'ies'} could not be proven ours and were not signalled`
          : '',
      ]
        .filter(Boolean)
        .join('; '),
    );
}

export async function run(
  name: string | undefined,
  opts: { all?: boolean; grace?: number; json?: boolean; nodes?: string; forceForget?: boolean },
) {
  const timeoutS = opts.grace ?? graceMsOf({}) / 1000;
  // stop --nodes FILE [NAME]: what runs on those nodes, said as the stop-nodes envelope (the same selection and stop as
  // below)
  if (opts.nodes) {
    let records: ClusterRecord[] | undefined;
    const recorded = () => (records ??= overNodes(new Registry(stateDir()).servers('nodes')));
    return (await import('./clusters.js')).sayNodesStop(await stopClusters(recorded, name, opts, timeoutS), opts.json);
  }
  if (!name && !opts.all) throw new UsageError('stop what? name an instance or a profile, or --all');
  const reg = new Registry(stateDir());
  const graceMs = opts.grace === undefined ? undefined : opts.grace * 1000;
  // another stop may hold the lock through a whole drain
  const release = await reg.lock((graceMs ?? 60_000) + 10_000);
  try {
    // the gateway first (it is in front of everything): its soft stop lets its streams finish before their servers stop
    const gateway = opts.all ? await stopGateway(reg.stateDir, graceMs, { forceForget: opts.forceForget }) : undefined;
    const gw = gateway ? { gateway } : {};
    if (gateway && gateway.how !== 'not-running' && !opts.json)
      (gateway.how === 'unmanaged' ? note : say)(downText(gateway));
    const gatewayBad =
      gateway && ((gateway.how === 'unproven' && !gateway.forgotten) || gateway.left)
        ? 'the gateway was not stopped'
        : '';
    // every registered server, on this host and over nodes, read once: stop NAME and --all stop each as it was recorded
    const servers = reg.servers();
    const targets = onHost(opts.all ? servers : named(servers, name!));
    for (const c of reg.corruptOf('host'))
      note(
        `unreadable registry entry ${c.file} (${c.reason}): kept as ${c.keptAs}; its processes, if any still run, are found by their marker`,
      );
    const clusters = await stopClusters(() => overNodes(servers), name, opts, timeoutS);
    // a record over nodes that cannot be read is not acted on (engine/registry.ts clusters()): said, left in place
    for (const c of reg.corruptOf('nodes'))
      note(
        `unreadable cluster record ${shown(c.file)} (${shown(c.reason)}): left in place, not stopped; mend it or move it aside, then sparkctl stop PROFILE --nodes FILE`,
      );
    const cl = clusters.length ? { clusters: clusters.map((x) => x.json) } : {};
    if (!opts.json) for (const l of clusters.flatMap((x) => x.lines)) say(l);
    const clusterBad = clusters.find((x) => x.problem)?.problem ?? '';
    if (!targets.length) {
      // Safe to run twice: nothing registered under that name is not an error.
      if (opts.json) say(envelope('stop', { stopped: [], ...cl, ...gw }));
      else if (!clusters.length && (!gateway || gateway.how === 'not-running' || gateway.how === 'unmanaged'))
        say(opts.all ? 'nothing to stop' : `nothing to stop: no server named "${name}" is registered`);
      if (gatewayBad || clusterBad) throw new ProblemsFound([gatewayBad, clusterBad].filter(Boolean).join('; '));
      return;
    }
    const results = await stopOnHost(reg, targets, graceMs, opts.forceForget);
    if (opts.json) say(envelope('stop', { stopped: results, ...cl, ...gw }));
    else for (const r of results) say(outcomeLine(r));
    judgeStop(results, gatewayBad, clusterBad);
  } finally {
    release();
  }
}
