// Rendering serve: its events as they come (a self-rewriting line on a TTY, one line per phase
// elsewhere, nothing under --json) and its outcome (text on stdout/stderr, or one JSON envelope).
// One renderer for every placement: an event that names a node, and an outcome with `nodes`, are a
// server over nodes (said as the multi-node serve always said it; its own envelope fields).
import { startLine } from '../../engine/phases.js';
import type { ServeEvent, ServeOutcome, ReplicaOutcome } from '../../engine/events.js';
import type { ServePreflight } from './preflight.js';
import type { Diagnosis } from '../../engine/diagnose.js';
import { progress, say, note } from '../../output/log.js';
import { c, envelope, formatDuration, statusMark, table } from '../../output/format.js';

interface ServeRenderer {
  preflight(pf: ServePreflight, simulated: boolean): void;
  event(e: ServeEvent): void;
  outcome(o: ServeOutcome): void;
  preflightFailed(pf: ServePreflight, profile: string): void;
}

/** A map's entries in replica order (name-0, name-1, ... name-10), whatever order their events came in. */
const byReplica = <T>(m: Map<string, T>): [string, T][] =>
  [...m].sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }));

function prewarmLine(r: ReplicaOutcome): string | undefined {
  const w = r.prewarm;
  if (!w) return undefined;
  const lens = Object.keys(w.cold).map(Number);
  const detail = lens.map((n) => `${n} tok ${w.cold[n]} -> ${w.warm[n]} ms`).join(', ');
  return `prewarm ${w.target}: ${w.error ? c.yellow(w.error) : `warm after ${w.rounds} round(s)`}; first token cold -> warm: ${detail}`;
}

function failureLines(r: ReplicaOutcome, d: Diagnosis): string[] {
  const out = [`${c.red('launch failed')}: ${r.name} (port ${r.port}, GPUs ${r.gpus.join(',')}): ${d.detail}`];
  if (d.cause) out.push(`  cause: ${d.cause}`);
  if (d.fix) out.push(`  fix:   ${d.fix}`);
  if (d.lastLines.length) {
    out.push(c.dim(`  last ${d.lastLines.length} log lines (${r.logFile}):`));
    for (const x of d.lastLines) out.push(c.dim(`  | ${x}`));
  }
  return out;
}

/**
 * serve's renderer context: the profile, and for a serve over nodes the nodes file as the operator named it (the stop
 * line repeats it).
 */
interface RenderCtx {
  profile: string;
  simulated: boolean;
  nodes?: string;
}

/**
 * Over nodes: a phase line per node, sparse as off a terminal (a phase's first line and its 100 %, not every percent
 * between).
 */
function nodePhases() {
  const kinds = new Map<string, string>();
  return (node: string, phase: string) => {
    const kind = phase.replace(/\s*\d+(?:\.\d+)?%$/, '');
    if (kinds.get(node) === kind && !/\b100%$/.test(phase)) return;
    kinds.set(node, kind);
    note(c.dim(`${node}: ${phase}`));
  };
}

/**
 * An event over nodes, said as it happens (a server on a node is one endpoint: its launch, ready, prewarm and probe
 * each a line).
 */
function nodeEvent(e: ServeEvent, profile: string, phase: (node: string, phase: string) => void): boolean {
  switch (e.type) {
    case 'phase':
      if (e.node === undefined) return false;
      phase(e.node, e.phase);
      return true;
    case 'launched':
      if (e.node === undefined) return false;
      note(
        `vLLM ${e.rank === undefined ? '' : `rank ${e.rank} `}started on ${e.node} (pid ${e.pid}, log ${e.logFile})`,
      );
      return true;
    case 'ready':
      if (!e.cluster) return false;
      say(
        `${c.green('ready')}: ${profile} over ${e.cluster.nodes} nodes (${e.cluster.gpus} GPUs) in ${formatDuration(e.ms)}: ${e.url}/v1`,
      );
      return true;
    case 'prewarm': {
      if (e.node === undefined) return false;
      const w = e.result;
      say(
        `prewarm: ${w.error ?? `warm after ${w.rounds} round(s)`}; ${Object.keys(w.cold)
          .map((n) => `${n} tok ${w.cold[Number(n)]} -> ${w.warm[Number(n)]} ms`)
          .join(', ')}`,
      );
      return true;
    }
    case 'probe':
      if (e.node === undefined) return false;
      say(
        `probe: ${e.result.state === 'healthy' ? c.green('healthy') : c.red(e.result.state)} (${e.result.steps.map((s) => `${s.step} ${s.status}`).join(', ')})`,
      );
      return true;
    case 'ray-head':
      note(`ray head started on ${e.node}`);
      return true;
    case 'ray-workers':
      note(`ray workers joined: ${e.nodes.join(', ') || '(none)'}`);
      return true;
    case 'ray-cluster':
      note(`ray cluster: ${e.nodes} nodes, ${e.gpus} GPUs`);
      return true;
    case 'ranks-joined':
      note(`all ${e.nodes} ranks joined (${e.gpus} GPUs)`);
      return true;
    case 'placement-wait':
      note(`${c.yellow('vLLM waits for Ray')}: ${e.line}`);
      return true;
    case 'cleanup':
      note(c.dim(`cleanup: ${e.node}: ${e.what}`));
      return true;
    default:
      return false;
  }
}

/** The outcome over nodes: the failure naming its node, or how to stop it (the nodes file as the operator named it). */
function nodesOutcomeText(o: ServeOutcome, named: string | undefined) {
  const f = o.nodes?.failure;
  if (!f) return say(`stop with: sparkctl stop ${o.profile} --nodes ${named}`);
  note(`${c.red(f.reason === 'refused' ? 'refused' : 'launch failed')}: ${f.detail}`);
  if (f.fix) note(`fix: ${f.fix}`);
  for (const x of f.lastLines) note(c.dim(`  | ${x}`));
}

/** Every replica ready: the line with the slowest one's time, then a row per replica (its address, GPUs, pid, time). */
function sayReady(
  profile: string,
  launched: Array<Extract<ServeEvent, { type: 'launched' }>>,
  ready: Map<string, number>,
  sim: boolean,
): void {
  const slowest = Math.max(...ready.values());
  say(
    `${c.green('ready')}: ${profile}, ${launched.length} replica(s) in ${formatDuration(slowest)}${sim ? ' (simulated engine)' : ''}`,
  );
  say(
    table(
      launched.map((l) => [
        l.replica,
        l.uds ? `unix:${l.uds}` : `http://127.0.0.1:${l.port}/v1`,
        `GPUs ${l.gpus.join(',')}`,
        `pid ${l.pid}`,
        formatDuration(ready.get(l.replica) ?? 0),
      ]),
    ),
  );
}

export function textRenderer(ctx: RenderCtx): ServeRenderer {
  const prog = progress();
  const tty = Boolean(process.stderr.isTTY) && !process.env.CI;
  const phases = new Map<string, string>();
  const launched: Array<Extract<ServeEvent, { type: 'launched' }>> = [];
  const ready = new Map<string, number>();
  // Off a terminal, one line per replica and phase, and the 100 % that ends a phase counted in
  // percent (not every percent: four replicas printed 36 "loading weights N%" lines); prewarm says
  // when it starts, since its cold rounds take seconds.
  const phaseKind = new Map<string, string>();
  const warming = new Map<string, string>();
  const started = Date.now();
  let readyAt: number | undefined;
  const { profile, simulated: sim } = ctx;
  const nodePhase = nodePhases();
  return {
    preflight(pf, simulated) {
      const rep = pf.report;
      note(
        `preflight (${simulated ? 'simulated host' : `${rep.host}, platform ${rep.platform}`}): ${rep.checks.map((x) => `${x.id} ${x.status}`).join(', ')} in ${rep.wallMs} ms`,
      );
    },
    preflightFailed(pf, name) {
      for (const f of pf.report.checks.filter((x) => x.status === 'fail'))
        note(`  ${statusMark('fail')} ${f.id}: ${f.observed}${f.fix ? `\n        fix: ${f.fix}` : ''}`);
      note(
        `preflight failed: not launching ${name} (sparkctl preflight --profile ${name} shows every check; --skip-preflight launches anyway)`,
      );
    },
    event(e) {
      if (nodeEvent(e, profile, nodePhase)) return;
      switch (e.type) {
        case 'launched':
          launched.push(e);
          break;
        case 'phase':
          phases.set(e.replica, e.phase);
          if (tty) prog.rows(byReplica(phases).map(([n, p]) => `${n}: ${p}`));
          else {
            const kind = e.phase.replace(/\s*\d+(?:\.\d+)?%$/, '');
            // sparse off a terminal: a phase's first line, and its 100 % (its end), not every percent between
            if (phaseKind.get(e.replica) !== kind || /\b100%$/.test(e.phase)) prog.phase(`${e.replica}: ${e.phase}`);
            phaseKind.set(e.replica, kind);
          }
          break;
        case 'ready':
          ready.set(e.replica, e.ms);
          if (ready.size < launched.length) break;
          prog.done();
          readyAt = Date.now();
          sayReady(profile, launched, ready, sim);
          break;
        case 'stopping':
          prog.done();
          if (e.why === 'signal') note(`stopping ${e.replicas} replica(s)`);
          if (e.why === 'forced')
            note(`second interrupt: killing ${e.replicas} replica(s) now (SIGKILL), not waiting for a drain`);
          break;
        case 'prewarm-request': {
          const q = e.request;
          const what = `round ${q.round}, ${q.kind === 'prefill' ? `${q.promptTokens} prompt tokens` : 'decode'}: ${q.ms} ms`;
          if (!warming.has(e.replica) && !tty)
            note(`prewarm ${e.replica}: warming up (${what}; a cold first token can take seconds)`);
          warming.set(e.replica, what);
          if (tty) prog.rows(byReplica(warming).map(([n, w]) => `prewarm ${n}: ${w}`));
          break;
        }
        case 'exited':
          note(`${e.replica} exited (${e.signal ?? `code ${e.code}`})`);
          break;
        case 'colocated':
          note(`${e.replica}: shares GPU ${e.gpu} with ${e.with.join(', ')}: ${e.summary}`);
          break;
        case 'cold-start':
          for (const n of e.notes) note(c.dim(n));
          break;
        case 'start':
          prog.done();
          note(
            `start ${e.replica}${e.rank !== undefined ? ` rank ${e.rank} on ${e.node}` : ''}: ${startLine(e.report)}`,
          );
          break;
        case 'router': {
          const r = e.router;
          prog.done();
          if (r.failure) note(`${c.red('router failed')}: ${r.failure}`);
          else
            say(
              `${c.green('router')}: ${r.url}/v1 (HAProxy pid ${r.pid}, ${r.balance} over ${r.servers.length} replica(s): ${r.servers.map((x) => `${x.name} ${x.state}`).join(', ')}; stats ${r.statsUrl}, Prometheus ${r.metricsUrl})`,
            );
          if (!r.failure && r.hop) say(c.dim(`  ${r.hop}`));
          break;
        }
        default:
          break;
      }
    },
    outcome(o) {
      prog.done();
      if (o.nodes) return nodesOutcomeText(o, ctx.nodes);
      switch (o.status) {
        case 'interrupted':
          note(`interrupted: stopped ${o.replicas.length} replica(s) of ${o.profile}; nothing is left running`);
          return;
        case 'launch-failed':
          for (const r of o.replicas) if (r.failure) for (const l of failureLines(r, r.failure)) note(l);
          if (o.router?.failure) note(`${c.red('launch failed')}: router ${o.router.name}: ${o.router.failure}`);
          note(
            o.replicas.length
              ? `stopped every replica of ${o.profile}; nothing is left holding a port or a GPU`
              : `nothing of ${o.profile} was launched`,
          );
          return;
        case 'stopped':
        case 'server-exited':
          note(`server(s) of ${o.profile} ${o.status === 'stopped' ? 'stopped' : 'exited'}; nothing is left running`);
          return;
        default:
          for (const r of o.replicas) {
            const pw = prewarmLine(r);
            if (pw) say(pw);
          }
          for (const r of o.replicas) {
            const p = r.probe;
            if (p)
              say(
                `probe ${p.target}: ${p.state === 'healthy' ? c.green('healthy') : c.red(p.state)} (${p.steps.map((s) => `${s.step} ${s.status}`).join(', ')}) in ${p.ms} ms`,
              );
          }
          // A step that warned or failed says why (and how to fix it) once, not just "auth warn".
          for (const line of stepDetails(o.replicas.map((r) => r.probe))) say(line);
          if (o.router)
            say(
              `clients use ${o.router.url}/v1 (the router); replicas as HAProxy sees them: ${o.router.servers.map((x) => `${x.name} ${x.state}`).join(', ')}`,
            );
          prog.done();
          if (readyAt !== undefined)
            note(
              c.dim(
                `serve took ${formatDuration(Date.now() - started)}: ${formatDuration(readyAt - started)} until every replica was ready, ${formatDuration(Date.now() - readyAt)} of prewarm and probe`,
              ),
            );
          say(
            `stop with: sparkctl stop ${o.profile}   (status: sparkctl status, logs: sparkctl logs ${o.replicas[0]?.name ?? o.profile})`,
          );
      }
    },
  };
}

/** One line per distinct warning or failure among the replicas' probe steps, with how many replicas had it. */
function stepDetails(
  probes: Array<{ steps: Array<{ step: string; status: string; detail: string }> } | undefined>,
): string[] {
  const seen = new Map<string, number>();
  for (const p of probes)
    for (const s of p?.steps ?? [])
      if (s.status === 'warn' || s.status === 'fail')
        seen.set(`${s.step} ${s.status}: ${s.detail}`, (seen.get(`${s.step} ${s.status}: ${s.detail}`) ?? 0) + 1);
  return [...seen].map(([line, n]) => `  ${line}${probes.length > 1 ? ` (${n} of ${probes.length} replicas)` : ''}`);
}

/** The first failure's cause, for scripts: id, the evidence line, the fix. */
function headlineFailure(o: ServeOutcome) {
  const r =
    o.replicas.find((x) => x.failure && x.failure.reason !== 'interrupted') ?? o.replicas.find((x) => x.failure);
  if (!r?.failure) return null;
  const d = r.failure;
  return {
    replica: r.name,
    reason: d.reason,
    cause: d.causeId,
    text: d.cause ?? d.detail,
    evidence: d.evidence ?? null,
    fix: d.fix ?? null,
  };
}

function serveEnvelope(o: ServeOutcome, exitCode: number): string {
  return envelope('serve', {
    status: o.status,
    exitCode,
    profile: o.profile,
    engine: o.engine,
    failure: headlineFailure(o),
    replicas: o.replicas.map((r) => ({
      name: r.name,
      url: r.url,
      port: r.port,
      gpus: r.gpus,
      pid: r.pid,
      logFile: r.logFile,
      readyMs: r.readyMs ?? null,
      start: r.start ?? null,
      failure: r.failure
        ? {
            reason: r.failure.reason,
            detail: r.failure.detail,
            cause: r.failure.causeId,
            text: r.failure.cause ?? null,
            evidence: r.failure.evidence ?? null,
            fix: r.failure.fix ?? null,
            lastLines: r.failure.lastLines,
          }
        : null,
      prewarm: r.prewarm ?? null,
      probe: r.probe ?? null,
      exit: r.exit ?? null,
    })),
    router: o.router ?? null,
  });
}

/**
 * serve --nodes --json: the outcome as one envelope (kind serve, like one node's: its head, the cluster, the stop
 * command).
 */
export function nodesEnvelope(o: ServeOutcome, exitCode: number, named: string | undefined): string {
  const f = o.nodes?.failure;
  const head = o.replicas[0];
  return envelope('serve', {
    status: f?.reason === 'refused' ? 'refused' : o.status,
    exitCode,
    profile: o.profile,
    engine: o.engine,
    nodesFile: named,
    // the keys serve --nodes always wrote (`evidence`: the lines that show it), then what the one diagnosis adds
    // (diagnose.ts, as one host's replica failure says it): the node, the reason, the cause id and the log line it was
    // read from
    failure: f
      ? {
          message: f.detail,
          fix: f.fix ?? null,
          evidence: f.lastLines,
          node: f.node ?? null,
          reason: f.reason,
          cause: f.causeId,
          line: f.evidence ?? null,
        }
      : null,
    url: head?.url ?? null,
    head: head ? { node: head.node, pid: head.pid, logFile: head.logFile } : null,
    cluster: o.nodes?.cluster ?? null,
    readyMs: head?.readyMs ?? null,
    // the server's start phase by phase (rank 0's), and every rank's (native) or node's (Ray) own
    start: head?.start ?? null,
    ranks: o.nodes?.ranks ?? null,
    prewarm: head?.prewarm ?? null,
    probe: head?.probe ?? null,
    stop: f ? null : `sparkctl stop ${o.profile} --nodes ${named}`,
  });
}

/**
 * --json: nothing while it runs; one envelope at the end (a failure envelope names cause, evidence, fix). `nodes`: the
 * nodes file as named, for a serve over nodes.
 */
export function jsonRenderer(exitCodeOf: (o: ServeOutcome) => number, nodes?: string): ServeRenderer {
  return {
    preflight() {},
    event() {},
    preflightFailed(pf, profile) {
      say(
        envelope('serve', {
          status: 'preflight-failed',
          exitCode: 1,
          profile,
          failure: {
            cause: 'preflight',
            checks: pf.report.checks
              .filter((x) => x.status === 'fail')
              .map((x) => ({ id: x.id, observed: x.observed, fix: x.fix ?? null })),
          },
          replicas: [],
        }),
      );
    },
    outcome(o) {
      say(o.nodes ? nodesEnvelope(o, exitCodeOf(o), nodes) : serveEnvelope(o, exitCodeOf(o)));
    },
  };
}
