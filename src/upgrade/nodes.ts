// An upgrade of a server over nodes, decided: pure, table-tested (test/unit/upgrade-nodes.test.ts).
// A multi-node server is ONE server on every node it has; there is no spare node to start a canary
// cluster on, so the upgrade is IN PLACE: the running cluster is measured (the comparison's current
// side) and kept, stopped, the candidate served over every node together (pinned to its image ID,
// the same on every node, checked before anything stops), measured with the same requests and judged
// with the same thresholds; a failure stops the candidate and serves the previous pin again over
// every node. Between the stop and the candidate's (or the previous pin's) readiness nothing serves:
// the plan says so before anything starts. The verb (verbs/upgrade/nodes.ts) acts; this says what
// comes next and what the end was, never prints.
import type { UpgradeStatus } from './upgrade.js';
import { UsageError } from '../errors.js';
import type { Measured, Thresholds } from './judge.js';
import { flagsPlanLines, type FlagsRead } from './flag-defaults.js';

/** What serving over the nodes came to (serve --nodes' outcome, or its refusal/throw). */
export type NodesServed = 'healthy' | 'unhealthy' | 'launch-failed' | 'refused' | 'interrupted';

/** What serves over the nodes when the upgrade ends. */
export type NodesServing = 'candidate' | 'previous' | 'previous-unhealthy' | 'candidate-unhealthy' | 'none' | 'unknown';

/** Every step the in-place upgrade took, as it went (the verb fills it; `nodesEnd` reads it). */
export interface NodesRun {
  /** the running cluster's stop: undefined = not reached; a string = what was left (named) */
  stopCurrent?: { left?: string };
  candidate?: NodesServed;
  /** the comparison's verdict (undefined: not compared: the candidate never served healthy) */
  pass?: boolean;
  noRoll: boolean;
  /** going back: the candidate's stop (what it left, if anything), then the previous pin served */
  stopCandidate?: { left?: string };
  previous?: NodesServed;
  interrupted?: boolean;
  /**
   * --canary-nodes: the candidate served on the spare nodes beside the running server, compared, then stopped (before
   * anything of the server is touched)
   */
  canary?: CanaryRun;
}

/** The canary on spare nodes (--canary-nodes): how it served, its verdict, its stop. */
export interface CanaryRun {
  served?: NodesServed;
  /** the comparison's verdict (undefined: not compared: the canary never served healthy) */
  pass?: boolean;
  /** its stop: undefined = not reached; a string = what was left (named) */
  stop?: { left?: string };
  /** the canary's profile name and nodes file (for the commands a loud end names) */
  name: string;
  nodesFile: string;
}

/**
 * After the canary on spare nodes: upgrade the running server in place, or stop there (nothing of the server touched).
 */
export function afterCanary(c: CanaryRun, noRoll: boolean): 'in-place' | 'stop' {
  if (c.served !== 'healthy' || c.pass !== true) return 'stop';
  if (c.stop?.left !== undefined) return 'stop';
  return noRoll ? 'stop' : 'in-place';
}

/**
 * The canary's serve on the spare nodes refused as bad input (serve --nodes' own refusal, raised when
 * it is served, before anything starts there): the upgrade is refused as every other --canary-nodes
 * refusal is (exit 2), the running server untouched. undefined where the canary's end decides as
 * usual (canaryEnd): not refused, interrupted, or its stop not reached or not whole (said loudly there).
 */
export function canaryRefusal(
  c: CanaryRun,
  refusal: { message: string; details: string[] } | undefined,
  interrupted: boolean,
  profile: string,
  nodes: string[],
): UsageError | undefined {
  if (c.served !== 'refused' || !refusal || interrupted || !c.stop || c.stop.left !== undefined) return undefined;
  return new UsageError(
    `--canary-nodes ${c.nodesFile}: the candidate was refused on the spare nodes: ${refusal.message}`,
    [...refusal.details, `${profile} serves as before over ${nodes.join(', ')} (nothing of it was touched)`],
  );
}

/** After the candidate was served (and compared, where it served healthy): keep it, or go back to the previous pin. */
export function afterCandidate(served: NodesServed, pass: boolean | undefined, noRoll: boolean): 'keep' | 'back' {
  if (served !== 'healthy') return 'back';
  if (pass !== true) return 'back';
  return noRoll ? 'back' : 'keep';
}

export interface NodesEnd {
  status: UpgradeStatus;
  serving: NodesServing;
  /** said in red on every failure that leaves the profile without its healthy server: never silent */
  loud?: string;
}

/**
 * A side's record is not found when its stop looks (undefined: nothing of it can run, nothing left).
 * Served healthy or unhealthy, serve --nodes left it running with its record; a record file that is
 * there but unreadable (`corrupt`: the registry's reason) may be a running cluster's. Either way the
 * side may still run: said as what was left, never as "stopped". Pure.
 */
export function recordMissingLeft(
  name: string,
  served: NodesServed | undefined,
  corrupt: string | undefined,
): string | undefined {
  if (corrupt !== undefined) return `the record of ${name} cannot be read (${corrupt}): it may still run`;
  if (served === 'healthy' || served === 'unhealthy')
    return `${name} served ${served} but no record of it is found: it may still run`;
  return undefined;
}

/**
 * The nodes whose tag the candidate's copy replaced (each held another build under the reference),
 * said wherever the upgrade ends after the copy without the candidate serving there (a refusal, an
 * unchanged end): which node held what, and the command that puts the tag back on it. Pure.
 */
export function tagsReplacedLines(
  copied: Array<{ node: string; had?: string }> | undefined,
  cli: string,
  ref: string,
): string[] {
  const over = (copied ?? []).filter((x): x is { node: string; had: string } => typeof x.had === 'string');
  if (!over.length) return [];
  return [
    `the candidate was already copied over ${ref} on ${over.map((x) => `${x.node} (it held ${x.had.slice(0, 12)})`).join(', ')}: a plain serve there now runs the candidate`,
    ...over.map((x) => `to put ${x.node}'s tag back, on ${x.node}: ${cli} tag ${x.had} ${ref}`),
  ];
}

/**
 * The end of an in-place upgrade over nodes, from what each step came to. The rule: the candidate is
 * kept only when it served healthy and passed every comparison (and --no-roll was not given);
 * otherwise the previous pin is served again. Whatever the end, it names what serves now; where
 * nothing (or nothing proven) does, `loud` says so and what to run.
 */
export function nodesEnd(r: NodesRun, profile: string, nodesFile: string): NodesEnd {
  const serveBack = `sparkctl serve ${profile} --nodes ${nodesFile} (the pin in the state folder is the previous one: it serves that)`;
  if (r.canary && afterCanary(r.canary, r.noRoll) === 'stop') return canaryEnd(r.canary, r, profile);
  if (!r.stopCurrent) return { status: r.interrupted ? 'interrupted' : 'canary-failed', serving: 'previous' };
  if (r.stopCurrent.left !== undefined)
    return {
      status: 'roll-failed',
      serving: 'unknown',
      loud: `the running cluster did not stop whole (${r.stopCurrent.left}): nothing was started on the nodes; its record is kept (sparkctl status ${profile}; sparkctl stop ${profile} --nodes ${nodesFile}, then ${serveBack})`,
    };
  const cand = r.candidate;
  if (cand === undefined)
    return {
      status: r.interrupted ? 'interrupted' : 'roll-failed',
      serving: 'none',
      loud: `NOTHING SERVES ${profile}: the running cluster was stopped and the candidate was not started; ${serveBack}`,
    };
  if (afterCandidate(cand, r.pass, r.noRoll) === 'keep') return { status: 'rolled', serving: 'candidate' };
  // going back
  if (r.stopCandidate?.left !== undefined)
    return {
      status: 'roll-failed',
      serving: cand === 'healthy' ? 'candidate' : 'unknown',
      loud: `the candidate did not stop whole (${r.stopCandidate.left}), so the previous pin was not served again: sparkctl stop ${profile} --nodes ${nodesFile}, then ${serveBack}`,
    };
  const prev = r.previous;
  if (prev === 'healthy') {
    const status: UpgradeStatus = r.interrupted
      ? 'interrupted'
      : cand === 'healthy' && r.pass === true && r.noRoll
        ? 'compared'
        : 'canary-failed';
    return { status, serving: 'previous' };
  }
  if (prev === 'unhealthy')
    return {
      status: 'roll-failed',
      serving: 'previous-unhealthy',
      loud: `the previous pin serves again over the nodes but its deep probe fails: sparkctl probe ${profile}; sparkctl logs ${profile}`,
    };
  return {
    status: r.interrupted || prev === 'interrupted' ? 'interrupted' : 'roll-failed',
    serving: 'none',
    loud: `NOTHING SERVES ${profile}: the candidate ${cand === 'healthy' ? 'was stopped' : `did not serve (${cand})`} and the previous pin ${prev === undefined ? 'was not started' : `did not serve again (${prev})`}: ${serveBack}`,
  };
}

/**
 * The end where the canary on spare nodes decided it: the running server was never touched (it
 * serves as before). A canary that did not stop whole is said loudly, with the stop to run.
 */
function canaryEnd(c: CanaryRun, r: NodesRun, profile: string): NodesEnd {
  const status: UpgradeStatus =
    r.interrupted || c.served === 'interrupted'
      ? 'interrupted'
      : c.served === 'healthy' && c.pass === true && r.noRoll
        ? 'compared'
        : 'canary-failed';
  if (c.stop === undefined && c.served !== undefined && c.served !== 'refused')
    return {
      status,
      serving: 'previous',
      loud: `the canary ${c.name} was not stopped: sparkctl stop ${c.name} --nodes ${c.nodesFile} (${profile} serves as before)`,
    };
  if (c.stop?.left !== undefined)
    return {
      // passed (kept or --no-roll's compared): not an ok end while the canary may run
      status: c.served === 'healthy' && c.pass === true ? 'roll-failed' : status,
      serving: 'previous',
      loud: `the canary ${c.name} did not stop whole (${c.stop.left}): sparkctl stop ${c.name} --nodes ${c.nodesFile}; ${profile} serves as before, not upgraded`,
    };
  return { status, serving: 'previous' };
}

/**
 * Why a spare set of nodes cannot hold the canary (--canary-nodes), or undefined: it must share no
 * node with the server (by name or address: one host cannot be both), and hold the server's shape,
 * TP x PP ranks over as many nodes as the server (the ranks per node the same, each node with the GPUs
 * for them): a canary of another shape is not the server the comparison speaks for. Pure.
 */
export function canaryNodesProblem(
  server: Array<{ name: string; address: string }>,
  canary: Array<{ name: string; address: string; gpus: number }>,
  shape: { tensor: number; pipeline: number },
  canaryFile: string,
): { message: string; fix: string } | undefined {
  const same = canary.filter((c) => server.some((s) => s.name === c.name || s.address === c.address));
  if (same.length)
    return {
      message: `--canary-nodes ${canaryFile}: ${same.map((c) => `${c.name} (${c.address})`).join(', ')} ${same.length === 1 ? 'is' : 'are'} also one of the server's nodes (${server.map((s) => s.name).join(', ')})`,
      fix: "a canary runs beside the running server: a nodes file of spare nodes only (no name or address of the server's)",
    };
  const world = shape.tensor * shape.pipeline;
  const perNode = world / server.length;
  if (canary.length !== server.length)
    return {
      message: `--canary-nodes ${canaryFile}: ${canary.length} node(s); the server runs TP ${shape.tensor} x PP ${shape.pipeline} = ${world} GPUs over ${server.length} nodes (${perNode} a node)`,
      fix: `a nodes file of ${server.length} spare nodes with ${perNode} GPUs or more each (the canary is the server's shape)`,
    };
  const short = canary.filter((c) => c.gpus < perNode);
  if (short.length)
    return {
      message: `--canary-nodes ${canaryFile}: ${short.map((c) => `${c.name} has ${c.gpus} GPU(s)`).join(', ')}; each node runs ${perNode} of TP ${shape.tensor} x PP ${shape.pipeline} = ${world}`,
      fix: `spare nodes with ${perNode} GPUs or more each`,
    };
  return undefined;
}

/** The plan of an in-place upgrade over nodes, as shown before anything starts (and by --dry-run). */
export function nodesPlanLines(x: {
  profile: string;
  nodesFile: string;
  nodes: string[];
  from: string;
  to: string;
  rollback: boolean;
  /** the candidate image: the reference given and the image ID every node holds */
  image?: { ref?: string; id: string };
  /** where the candidate image comes from before anything starts (a pull here, a copy to nodes): one line each */
  imageSteps?: string[];
  previousImage?: string;
  sets: string[];
  thresholds: Thresholds;
  sameVersion: boolean;
  /** --canary-nodes: the canary's profile name and its spare nodes */
  canary?: { name: string; nodes: string[]; nodesFile: string };
  /**
   * both sides' own vLLM tables (serve --help=all): what changes, or why they were not read (the one-host plan's lines)
   */
  flags?: FlagsRead;
}): string[] {
  const t = x.thresholds;
  const n = x.nodes.length;
  const golden = x.sameVersion
    ? t.goldenSameVersion >= 1
      ? 'identical'
      : `similarity >= ${t.goldenSameVersion}`
    : `similarity >= ${t.goldenOtherVersion} (another vLLM version)`;
  const passes = `passes when: probe healthy; TTFT p50 <= ${t.ttftRatio}x, TPOT p50 <= ${t.tpotRatio}x, output tokens/s >= ${t.throughputRatio}x the running cluster's; golden prompts and the chat template ${golden}`;
  const prev = `the previous ${x.previousImage ? `pin ${x.previousImage.slice(0, 12)}` : 'pin'}`;
  const head = [
    `${x.profile}: ${x.rollback ? 'rollback' : 'upgrade'} plan over ${n} nodes (${x.nodes.join(', ')}; ${x.nodesFile})`,
    ...(x.image
      ? [
          `  image: ${x.image.ref ? `${x.image.ref} -> ` : ''}${x.image.id} (the same image ID on every node, checked before anything stops; pinned: every node runs it, never a tag)`,
        ]
      : []),
    ...(x.imageSteps ?? []).map((l) => `  ${l}`),
    `  vLLM: ${x.from} -> ${x.to === 'auto' ? "auto (the image's own: read from the candidate once it serves)" : x.to}${x.sets.length ? ` (candidate: --set ${x.sets.join(' --set ')})` : ''}`,
    ...(x.flags ? flagsPlanLines(x.flags, x.from, x.to).map((l) => `  ${l}`) : []),
  ];
  if (x.canary) {
    const k = x.canary.nodes.length;
    return [
      ...head,
      `  CANARY on ${k} spare nodes (${x.canary.nodes.join(', ')}; ${x.canary.nodesFile}) as ${x.canary.name}, beside the running server (it serves throughout the check)`,
      `  1. serve the candidate over the ${k} spare nodes, prewarmed, probed`,
      `  2. measure the running cluster and the canary with the same requests (deep probe, golden prompts, chat template, short bench); ${passes}`,
      `  3. stop the canary; fail: nothing else changes (exit 1, saying why)`,
      `  4. pass: the running server upgraded IN PLACE, all ${n} nodes together: NO SERVICE from its stop until the candidate (or, on a failure, ${prev}) is ready again; the candidate measured again against the same running measure; fail there: stopped and ${prev} served again (exit 1)`,
      `  5. pass: the candidate stays, pinned, recorded`,
    ];
  }
  return [
    ...head,
    `  IN PLACE: no spare nodes given (--canary-nodes FILE): NO SERVICE from the stop of the running cluster until the candidate (or, on a failure, ${prev}) is ready again`,
    `  1. measure the running cluster (deep probe, golden prompts, chat template, short bench) and keep it`,
    `  2. stop it on all ${n} nodes`,
    `  3. serve the candidate over all ${n} nodes together`,
    `  4. measure the candidate with the same requests; ${passes}`,
    `  5. pass: the candidate stays, pinned, recorded; fail: the candidate is stopped and ${prev} served again over all ${n} nodes (exit 1, saying why)`,
  ];
}

/**
 * vLLM's `GET /version` answer ({"version": "0.17.1"}), read as hostile: a version-shaped string of at
 * most 96 characters, else undefined (the profile's stated version is then all that is known).
 */
export function versionAnswer(json: unknown): string | undefined {
  if (!json || typeof json !== 'object' || Array.isArray(json)) return undefined;
  const v = (json as { version?: unknown }).version;
  return typeof v === 'string' && /^[0-9][0-9A-Za-z.+_-]{0,95}$/.test(v) ? v : undefined;
}

/**
 * The version a side runs, as judged: the one its server says it runs where the profile leaves it to the install
 * (auto), else the stated one.
 */
export function sideVersion(stated: string, answered: string | undefined): string {
  return stated === 'auto' ? (answered ?? 'auto') : stated;
}

/**
 * The running cluster's own measurement, before it is stopped: a current that is not healthy, or whose
 * golden prompts, chat template or bench could not be measured, leaves nothing to compare against
 * (every candidate would fail), so nothing is stopped. Undefined: fit to compare against.
 */
export function currentUnfit(
  m: Pick<Measured, 'probe' | 'bench' | 'benchError' | 'golden' | 'chatTemplate'>,
): string | undefined {
  if (m.probe.state !== 'healthy')
    return `its deep probe is ${m.probe.state}${m.probe.failed.length ? ` (${m.probe.failed.join(', ')})` : ''}`;
  const g = m.golden.find((x) => x.text === undefined);
  if (g) return `golden prompt "${g.name}" was not answered (${g.error ?? 'no answer'})`;
  const t = (m.chatTemplate ?? []).find((x) => !x.tokens);
  if (t) return `the chat template (${t.name}) was not rendered (${t.error ?? 'no answer'})`;
  if (!m.bench || m.bench.failed > 0)
    return `the short bench ${m.bench ? `had ${m.bench.failed} failed request(s)` : `did not run (${m.benchError ?? 'no result'})`}`;
  return undefined;
}

/**
 * The window without service of an in-place upgrade, ms: from the running cluster's stop to the
 * candidate's readiness, plus, where it went back, from the candidate's stop to the previous pin's
 * readiness (a candidate that never served: one window, stop to the previous pin's readiness).
 * Undefined where the nodes were left without a healthy server (then there is no end to measure).
 */
export function noService(t: {
  stoppedAt?: number;
  candReadyAt?: number;
  stopCandAt?: number;
  prevReadyAt?: number;
}): number | undefined {
  if (t.stoppedAt === undefined) return 0;
  if (t.stopCandAt === undefined) return t.candReadyAt === undefined ? undefined : t.candReadyAt - t.stoppedAt;
  if (t.prevReadyAt === undefined) return undefined;
  return t.candReadyAt === undefined
    ? t.prevReadyAt - t.stoppedAt
    : t.candReadyAt - t.stoppedAt + (t.prevReadyAt - t.stopCandAt);
}
