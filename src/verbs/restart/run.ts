// restart: the profile as it is now (an edited profile gives its new argv), with serve's own --set and
// flags kept from its launch record -> a plan, and what it changes said before anything stops -> either
// everything stopped and served again (as stop + serve), or --rolling: one replica at a time behind
// the router, the others serving.
import { interrupts } from '../../util/interrupt.js';
import { readSecrets } from '../../engine/plan.js';
import { relaunchPlan, type Relaunch } from '../../engine/relaunch-plan.js';
import { registeredServers } from '../registered.js';
import {
  recordOf,
  replicaChanges,
  changeLines,
  reusedFlags,
  type howStarted,
  type ServedAs,
} from '../../engine/relaunch.js';
import { Registry, type Entry } from '../../engine/registry.js';
import { stateDir } from '../common.js';
import { movedLine, pinLine } from '../../engine/pins.js';
import { envelope, c, formatDuration } from '../../output/format.js';
import { say, note, progress } from '../../output/log.js';
import { UsageError, ExitWith, exitCodeOf } from '../../errors.js';
import type { RollingEvent, RollingOutcome } from '../../router/rolling.js';
import type { RequestsOutcome } from '../../engine/stop.js';

interface RestartOptions {
  rolling?: boolean;
  /** with --rolling: only these replicas (sparkctl watch restarts one wedged replica) */
  replica?: string[];
  set: string[];
  profiles?: string;
  gpus?: number;
  prewarm: boolean;
  json?: boolean;
  /** ms */
  drainTimeout: number;
  /** s: SIGTERM, then SIGKILL (default: each server's drain + teardown) */
  grace?: number;
  /** ms */
  readyTimeout?: number;
  skipPreflight?: boolean;
  /** beyond loopback without a key (serve's, recorded, is kept) */
  allowUnauthenticated?: boolean;
}

/**
 * A server over nodes is a record of the same registry: restart says so, and how to relaunch it, instead of "nothing
 * registered".
 */
export async function run(profileName: string, opts: RestartOptions) {
  const reg = new Registry(stateDir());
  const { name, entries } = registeredServers(
    reg,
    profileName,
    opts,
    'restart',
    (n) => `sparkctl serve ${n} starts it`,
  );
  const router = entries.find((e) => e.inst.role === 'router');
  const replicas = entries.filter((e) => e.inst.role !== 'router');
  const only = replicasAsked(name, opts, router, replicas);
  // serve's own inputs (its --set, --profiles, ...) with restart's on top, resolved as serve resolves them
  const rec = recordOf(replicas);
  const { plan, as, started, prepared, vllmChange } = await relaunchPlan(profileName, entries, {
    set: opts.set,
    profiles: opts.profiles,
    gpus: opts.gpus,
    prewarm: opts.prewarm,
    readyTimeout: opts.readyTimeout,
    allowUnauthenticated: opts.allowUnauthenticated,
  });
  // the image as pinned: a tag that moved since is said, never followed
  const moved = prepared.imagePin && movedLine(prepared.imagePin, name);
  if (!opts.json && prepared.imagePin) note(c.dim(pinLine(prepared.imagePin)));
  if (!opts.json && moved && opts.rolling) note(`${c.yellow('warning')}: ${moved}`);
  if (!opts.json && prepared.imagePin?.finding) note(`${c.yellow('warning')}: ${prepared.imagePin.finding}`);
  judgeVllmChange(name, opts, vllmChange, started.vllmBin);
  const changes = replicaChanges(plan, replicas);
  if (!opts.json) for (const l of changeLines(name, changes, reusedFlags(rec))) note(l);

  if (!opts.rolling) return restartAll(profileName, opts, reg, entries, started, as);
  const secrets = readSecrets(plan.profile);
  const { rollingRestart } = await import('../../router/rolling.js');
  const ac = interrupts();
  let outcome: RollingOutcome;
  try {
    outcome = await rollingRestart({
      plan,
      router: router!.inst,
      entries: replicas,
      secrets,
      drainTimeoutMs: opts.drainTimeout,
      only,
      stopTimeoutMs: opts.grace === undefined ? undefined : opts.grace * 1000,
      signal: ac.signal,
      onEvent: opts.json ? undefined : rollingRenderer(),
    });
  } finally {
    ac.off();
  }
  sayRolling(name, opts, outcome);
  const code = exitCodeOf(outcome.status);
  if (code !== 0) throw new ExitWith(code);
}

/**
 * The replicas --replica names (undefined: every one), checked: --replica only with --rolling, each a replica of the
 * profile, and --rolling only with a router running in front of them.
 */
function replicasAsked(
  name: string,
  opts: RestartOptions,
  router: Entry | undefined,
  replicas: Entry[],
): string[] | undefined {
  const only = opts.replica?.length ? opts.replica : undefined;
  if (only && !opts.rolling)
    throw new UsageError('--replica needs --rolling (a replica restarts alone only behind its router)', [
      `sparkctl restart ${name} --rolling --replica ${only[0]}`,
    ]);
  for (const r of only ?? [])
    if (!replicas.some((e) => e.inst.name === r))
      throw new UsageError(`--replica: ${r} is not a replica of ${name}`, [
        `its replicas: ${replicas.map((e) => e.inst.name).join(', ') || 'none'}`,
      ]);
  if (opts.rolling && (!router?.alive || !router.inst.router))
    throw new UsageError(
      `restart --rolling needs the router in front of ${name}'s replicas, and ${router ? `${router.inst.name} is not running` : 'it has none'}`,
      [
        `sparkctl restart ${name} (without --rolling) restarts everything at once; serve with --router (or router: in the profile) for rolling restarts`,
      ],
    );
  return only;
}

/**
 * The stated rule for a host install that changed under the replicas: another vLLM (or none) is another server,
 * refused (an upgrade compares it first); other packages beside the same vLLM are said, and restarted on.
 */
function judgeVllmChange(
  name: string,
  opts: RestartOptions,
  vllmChange: Relaunch['vllmChange'],
  vllmBin: string,
): void {
  if (vllmChange && vllmChange.kind !== 'packages')
    throw new UsageError(
      `${name}: ${vllmChange.line} (${vllmBin}): a restart would start another server than the one running`,
      [
        `sparkctl upgrade ${name} --vllm-bin ${vllmBin} (a canary on it, compared with the running replicas, then rolled)`,
        `or take it without a comparison: sparkctl stop ${name}, then sparkctl serve ${name}`,
      ],
    );
  if (vllmChange && !opts.json)
    note(
      `${c.yellow('warning')}: ${name}: ${vllmChange.line}: restarting on it (the same vLLM version; sparkctl upgrade ${name} --vllm-bin ${vllmBin} --no-roll compares it first)`,
    );
}

/** The rolling restart's outcome said: the envelope, where it stopped and what keeps serving, or what it restarted. */
function sayRolling(name: string, opts: RestartOptions, outcome: RollingOutcome): void {
  if (opts.json) say(envelope('restart', { rolling: true, ...outcome, exitCode: exitCodeOf(outcome.status) }));
  else if (outcome.aborted) {
    note(`${c.red('rolling restart stopped')} at ${outcome.aborted.replica}: ${outcome.aborted.cause}`);
    const kept = outcome.replicas.filter((x) => x.name !== outcome.aborted!.replica).map((x) => x.name);
    note(
      `the other replicas keep serving through the router: ${kept.join(', ') || 'none'}; ${outcome.aborted.replica} is out of rotation (sparkctl logs ${outcome.aborted.replica})`,
    );
  } else
    say(
      `${c.green('restarted')} ${name}: ${outcome.replicas.filter((x) => x.restarted).length} replica(s), one at a time, in ${formatDuration(outcome.ms)}; the router served throughout`,
    );
}

/**
 * The rolling restart as it goes: one line per step, and while a replica starts or warms up a live
 * line (redrawn on a terminal; off one, a line per phase, not per percent) so no step is silent.
 */
function rollingRenderer(tty = Boolean(process.stderr.isTTY) && !process.env.CI): (e: RollingEvent) => void {
  const prog = progress();
  const kinds = new Map<string, string>();
  const line = (text: string, out: (l: string) => void = note) => {
    prog.done();
    out(text);
  };
  return (e) => {
    switch (e.type) {
      case 'drain':
        line(`${e.replica}: draining (HAProxy sends it no new requests)`);
        break;
      case 'drained':
        line(
          e.timedOut
            ? `${e.replica}: ${e.inFlight} request(s) still in flight after ${formatDuration(e.ms)}: stopping it anyway (its stop drains)`
            : `${e.replica}: drained in ${formatDuration(e.ms)}${e.atStart ? ` (${e.atStart} request${e.atStart === 1 ? '' : 's'} in flight when it began)` : ''}`,
        );
        break;
      case 'stopped':
        line(`${e.replica}: ${e.how} in ${formatDuration(e.ms)}; requests in flight: ${requestsLine(e.requests)}`);
        break;
      case 'started':
        line(
          `${e.replica}: started, pid ${e.pid} ${e.changes.length ? `(new argv: ${e.changes.join('; ')})` : '(argv unchanged)'}; waiting until it is ready`,
        );
        break;
      case 'phase': {
        if (tty) prog.update(`${e.replica}: ${e.phase}`);
        const kind = e.phase.replace(/\s*\d+(?:\.\d+)?%$/, '');
        if (!tty && kinds.get(e.replica) !== kind) prog.phase(`${e.replica}: ${e.phase}`);
        kinds.set(e.replica, kind);
        break;
      }
      case 'ready':
        line(`${e.replica}: ready in ${formatDuration(e.ms)}`);
        break;
      case 'prewarm-request': {
        const q = e.request;
        const what = `round ${q.round}, ${q.kind === 'prefill' ? `${q.promptTokens} prompt tokens` : 'decode'}: ${q.ms} ms`;
        if (tty) prog.update(`prewarm ${e.replica}: ${what}`);
        else if (kinds.get(e.replica) !== 'prewarm')
          line(`${e.replica}: prewarm: warming up (${what}; a cold first token can take seconds)`);
        kinds.set(e.replica, 'prewarm');
        break;
      }
      case 'prewarm':
        line(
          `${e.replica}: prewarm ${e.result.error ? c.yellow(e.result.error) : `warm after ${e.result.rounds} round(s)`}`,
        );
        break;
      case 'probe':
        line(
          `${e.replica}: probe ${e.result.state}${e.result.state === 'healthy' ? '; back in rotation once HAProxy sees it UP' : ''}`,
        );
        break;
      case 'back': {
        const s = e.spent;
        line(
          `${e.replica}: back in rotation (out of it for ${formatDuration(e.ms)}: stop ${formatDuration(s.stop)}, start ${formatDuration(s.start)}, prewarm ${formatDuration(s.prewarm)}, probe ${formatDuration(s.probe)}, HAProxy's checks ${formatDuration(s.rejoin)}; drained in ${formatDuration(s.drain)} before)`,
          say,
        );
        break;
      }
      case 'aborted':
        prog.done();
        break;
    }
  };
}

function requestsLine(r: RequestsOutcome): string {
  switch (r.kind) {
    case 'drained':
      return `${r.count} drained`;
    case 'aborted':
      return `${r.count} ABORTED by vLLM (no --shutdown-timeout)`;
    case 'cut-off':
      return `${r.count ?? 'some'} cut off by SIGKILL`;
    case 'unknown':
      return r.inFlight === undefined ? 'unknown' : `${r.inFlight} before the signal, outcome not logged`;
    case 'router-drained':
      return `${r.inFlight ?? 'all'} drained by HAProxy's soft stop`;
    case 'router-cut':
      return `${r.cut} CUT by HAProxy's hard stop at the drain deadline`;
    case 'router-unknown':
      return `${r.inFlight ?? 'unknown'} before the soft stop, outcome not known`;
    default:
      return 'none';
  }
}

/** Without --rolling: every server of the profile stops (the router first), then serve starts it again. */
async function restartAll(
  profileName: string,
  opts: RestartOptions,
  reg: Registry,
  entries: Entry[],
  started: ReturnType<typeof howStarted>,
  as: ServedAs,
) {
  const release = await reg.lock((opts.grace ?? 60) * 1000 + 10_000);
  try {
    const unproven = entries.filter((e) => e.proof.state === 'unproven');
    if (unproven.length)
      throw new UsageError(`cannot restart: ${unproven.map((e) => e.inst.name).join(', ')} cannot be proven ours`, [
        'sparkctl status says why; nothing was signalled',
      ]);
    const { stopInstance, heldText } = await import('../../engine/stop.js');
    const router = entries.some((e) => e.inst.role === 'router')
      ? (await import('../../router/stop.js')).stopRouterEntry
      : undefined;
    // The router first: no request is sent to a replica that is stopping.
    const order = [
      ...entries.filter((e) => e.inst.role === 'router'),
      ...entries.filter((e) => e.inst.role !== 'router'),
    ];
    for (const e of order) {
      const st = await stopInstance(reg, e, {
        graceMs: opts.grace === undefined ? undefined : opts.grace * 1000,
        router,
      });
      if (st.result === 'unproven')
        throw new UsageError(`${e.inst.name}: its identity could not be proven again: not signalled`);
      if (!st.removed)
        throw new UsageError(
          `${e.inst.name} did not release everything (${heldText(st) ?? 'its registry entry is kept'})`,
          [`sparkctl stop ${e.inst.name}, then serve again`],
        );
      if (!opts.json && st.result !== 'not-running')
        note(`${e.inst.name}: ${st.result}; requests in flight: ${requestsLine(st.requests)}`);
    }
  } finally {
    release();
  }
  const serve = await import('../serve/run.js');
  await serve.run(profileName, {
    set: as.set,
    profiles: as.profiles,
    gpus: as.gpus,
    platform: as.platform,
    runtime: as.runtime,
    engine: started.engine,
    vllmBin: started.vllmBin,
    simLoadSeconds: started.simLoadSeconds,
    prewarm: opts.prewarm,
    json: opts.json,
    readyTimeout: opts.readyTimeout,
    skipPreflight: opts.skipPreflight,
    router: as.router,
    allowUnauthenticated: as.allowUnauthenticated,
  });
}
