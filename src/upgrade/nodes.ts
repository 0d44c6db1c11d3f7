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
import type { Measured, Thresholds } from './judge.js';

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
 * The end of an in-place upgrade over nodes, from what each step came to. The rule: the candidate is
 * kept only when it served healthy and passed every comparison (and --no-roll was not given);
 * otherwise the previous pin is served again. Whatever the end, it names what serves now; where
 * nothing (or nothing proven) does, `loud` says so and what to run.
 */
export function nodesEnd(r: NodesRun, profile: string, nodesFile: string): NodesEnd {
  const serveBack = `sparkctl serve ${profile} --nodes ${nodesFile} (the pin in the state folder is the previous one: it serves that)`;
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
    const status: UpgradeStatus = r.interrupted ? 'interrupted' : cand === 'healthy' && r.pass === true && r.noRoll ? 'compared' : 'canary-failed';
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
  previousImage?: string;
  sets: string[];
  thresholds: Thresholds;
  sameVersion: boolean;
}): string[] {
  const t = x.thresholds;
  const n = x.nodes.length;
  const golden = x.sameVersion ? (t.goldenSameVersion >= 1 ? 'identical' : `similarity >= ${t.goldenSameVersion}`) : `similarity >= ${t.goldenOtherVersion} (another vLLM version)`;
  return [
    `${x.profile}: ${x.rollback ? 'rollback' : 'upgrade'} plan over ${n} nodes (${x.nodes.join(', ')}; ${x.nodesFile})`,
    ...(x.image ? [`  image: ${x.image.ref ? `${x.image.ref} -> ` : ''}${x.image.id} (the same image ID on every node, checked before anything stops; pinned: every node runs it, never a tag)`] : []),
    `  vLLM: ${x.from} -> ${x.to === 'auto' ? "auto (the image's own: read from the candidate once it serves)" : x.to}${x.sets.length ? ` (candidate: --set ${x.sets.join(' --set ')})` : ''}`,
    `  IN PLACE: a multi-node server has no spare nodes for a canary cluster: NO SERVICE from the stop of the running cluster until the candidate (or, on a failure, the previous ${x.previousImage ? `pin ${x.previousImage.slice(0, 12)}` : 'pin'}) is ready again`,
    `  1. measure the running cluster (deep probe, golden prompts, chat template, short bench) and keep it`,
    `  2. stop it on all ${n} nodes`,
    `  3. serve the candidate over all ${n} nodes together`,
    `  4. measure the candidate with the same requests; passes when: probe healthy; TTFT p50 <= ${t.ttftRatio}x, TPOT p50 <= ${t.tpotRatio}x, output tokens/s >= ${t.throughputRatio}x the running cluster's; golden prompts and the chat template ${golden}`,
    `  5. pass: the candidate stays, pinned, recorded; fail: the candidate is stopped and the previous pin served again over all ${n} nodes (exit 1, saying why)`,
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

/** The version a side runs, as judged: the one its server says it runs where the profile leaves it to the install (auto), else the stated one. */
export function sideVersion(stated: string, answered: string | undefined): string {
  return stated === 'auto' ? (answered ?? 'auto') : stated;
}

/**
 * The running cluster's own measurement, before it is stopped: a current that is not healthy, or whose
 * golden prompts, chat template or bench could not be measured, leaves nothing to compare against
 * (every candidate would fail), so nothing is stopped. Undefined: fit to compare against.
 */
export function currentUnfit(m: Pick<Measured, 'probe' | 'bench' | 'benchError' | 'golden' | 'chatTemplate'>): string | undefined {
  if (m.probe.state !== 'healthy') return `its deep probe is ${m.probe.state}${m.probe.failed.length ? ` (${m.probe.failed.join(', ')})` : ''}`;
  const g = m.golden.find((x) => x.text === undefined);
  if (g) return `golden prompt "${g.name}" was not answered (${g.error ?? 'no answer'})`;
  const t = (m.chatTemplate ?? []).find((x) => !x.tokens);
  if (t) return `the chat template (${t.name}) was not rendered (${t.error ?? 'no answer'})`;
  if (!m.bench || m.bench.failed > 0) return `the short bench ${m.bench ? `had ${m.bench.failed} failed request(s)` : `did not run (${m.benchError ?? 'no result'})`}`;
  return undefined;
}

/**
 * The window without service of an in-place upgrade, ms: from the running cluster's stop to the
 * candidate's readiness, plus, where it went back, from the candidate's stop to the previous pin's
 * readiness (a candidate that never served: one window, stop to the previous pin's readiness).
 * Undefined where the nodes were left without a healthy server (then there is no end to measure).
 */
export function noService(t: { stoppedAt?: number; candReadyAt?: number; stopCandAt?: number; prevReadyAt?: number }): number | undefined {
  if (t.stoppedAt === undefined) return 0;
  if (t.stopCandAt === undefined) return t.candReadyAt === undefined ? undefined : t.candReadyAt - t.stoppedAt;
  if (t.prevReadyAt === undefined) return undefined;
  return t.candReadyAt === undefined ? t.prevReadyAt - t.stoppedAt : t.candReadyAt - t.stoppedAt + (t.prevReadyAt - t.stopCandAt);
}
