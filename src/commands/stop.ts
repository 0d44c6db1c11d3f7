import { Registry } from '../engine/registry.js';
import { stateDir } from './common.js';
import { stopInstances, graceMsOf, type StopOutcome, type RequestsOutcome } from '../engine/stop.js';
import { envelope } from '../output/format.js';
import { say, note } from '../output/log.js';
import { UsageError, ProblemsFound } from '../errors.js';

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
      if (r.inFlight === 0) return 'its gauges showed no running or waiting request at the signal; vLLM logged no shutdown mode';
      return r.inFlight !== undefined
        ? `${r.inFlight} request${r.inFlight === 1 ? ' was' : 's were'} in flight; vLLM logged no shutdown mode, so how ${r.inFlight === 1 ? 'it' : 'they'} ended is not known`
        : 'vLLM logged no shutdown mode: how its requests ended is not known';
    case 'none':
      return '';
  }
}

export function outcomeLine(r: StopOutcome): string {
  if (r.result === 'unproven')
    return `${r.name}: NOT SIGNALLED: ${r.unproven?.detail}; ${r.forgotten ? 'record dropped (--force-forget)' : 'left alone (sparkctl stop --force-forget drops the record)'}`;
  const secs = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  const how =
    r.result === 'killed'
      ? `did not stop within ${secs(r.graceMs)}: killed (SIGKILL)`
      : r.result === 'stopped'
        ? `stopped (SIGTERM) in ${secs(r.ms)}${r.degraded ? ' (its API server had died; the rest of its group is stopped)' : ''}`
        : 'was not running';
  const req = requestsText(r.requests);
  return `${r.name}: ${how}${req ? `: ${req}` : ''}; port ${r.portFree ? 'free' : 'STILL IN USE'}${r.groupLeft ? `; ${r.groupLeft} process(es) of its group left` : ''}${r.gpuHolders.length ? `; GPU still held by ${r.gpuHolders.join(',')}` : ''}`;
}

export async function run(name: string | undefined, opts: { all?: boolean; grace?: number; json?: boolean; nodes?: string; forceForget?: boolean }) {
  if (opts.nodes) {
    const { stopNodes } = await import('./nodes.js');
    return stopNodes(name, { ...opts, timeout: opts.grace ?? graceMsOf({}) / 1000 });
  }
  if (!name && !opts.all) throw new UsageError('stop what? name an instance or a profile, or --all');
  const reg = new Registry(stateDir());
  const graceMs = opts.grace === undefined ? undefined : opts.grace * 1000;
  // another stop may hold the lock through a whole drain
  const release = await reg.lock((graceMs ?? 60_000) + 10_000);
  try {
    const targets = opts.all ? reg.list() : reg.find(name!);
    for (const c of reg.corrupt) note(`unreadable registry entry ${c.file} (${c.reason}): kept as ${c.keptAs}; its processes, if any still run, are found by their marker`);
    if (!targets.length) {
      // Safe to run twice: nothing registered under that name is not an error.
      if (opts.json) say(envelope('stop', { stopped: [] }));
      else say(opts.all ? 'nothing to stop' : `nothing to stop: no server named "${name}" is registered`);
      return;
    }
    const results = await stopInstances(reg, targets, {
      graceMs,
      forceForget: opts.forceForget,
      onEvent: (e) => {
        if (e.type === 'signalled' && e.signal === 'SIGTERM')
          note(`${e.name}: SIGTERM${e.inFlight ? ` with ${requestsWord(e.inFlight)}` : ''}; SIGKILL after ${Math.round(e.graceMs / 1000)} s if it has not ended`);
      },
    });
    if (opts.json) say(envelope('stop', { stopped: results }));
    else for (const r of results) say(outcomeLine(r));
    const unproven = results.filter((r) => r.result === 'unproven' && !r.forgotten);
    const bad = results.filter((r) => r.result !== 'unproven' && (!r.portFree || r.groupLeft || r.gpuHolders.length));
    if (bad.length) note('some resources are still held; the registry entries are kept so `sparkctl stop` can be run again');
    if (bad.length || unproven.length)
      throw new ProblemsFound(
        [
          bad.length ? `${bad.length} server(s) did not release everything` : '',
          unproven.length ? `${unproven.length} entr${unproven.length === 1 ? 'y' : 'ies'} could not be proven ours and were not signalled` : '',
        ]
          .filter(Boolean)
          .join('; '),
      );
  } finally {
    release();
  }
}
