// stop's servers over nodes: the clusters a stop acts on (each with the nodes file it is stopped
// over), stopped one after another by the executor each record names (engine/cluster/), and said.
// Both forms select here: stop NAME / --all read each record's own nodes file; stop --nodes FILE
// [NAME] acts on what the registry records on those nodes (nothing recorded: Ray's stop on each node).
import { resolve } from 'node:path';
import { loadNodesFile } from '../../profiles/load.js';
import type { NodesFile } from '../../profiles/schema.js';
import type { ClusterRecord } from '../../engine/registry.js';
import { stopCluster, recordsFor, nodesMissing, type StopClusterOutcome } from '../../engine/cluster/index.js';
import type { ExecutorKind } from '../../engine/plan.js';
import { withInterrupts as withCancel } from '../../util/interrupt.js';
import { stateDir } from '../../util/paths.js';
import { envelope } from '../../output/format.js';
import { say } from '../../output/log.js';
import { UsageError, ProblemsFound } from '../../errors.js';

/** One cluster's stop as said to the operator: a line per rank or node, and what went wrong, if anything. */
interface ClusterStopped {
  profile?: string;
  lines: string[];
  problem?: string;
  out: StopClusterOutcome & { executor: ExecutorKind };
}

/** What one stop acts on: a record over its nodes (rec undefined: nothing recorded there, Ray's stop on each node). */
interface ClusterTarget {
  nf: NodesFile;
  rec?: ClusterRecord;
  /** the name the stop was asked for (said in "nothing recorded for NAME") */
  name?: string;
}

/**
 * A record is stopped only over the nodes it names: a nodes file without them is bad input, before anything is
 * signalled.
 */
function checkNodes(rec: ClusterRecord, nf: NodesFile, file: string) {
  const missing = nodesMissing(rec, nf);
  if (missing.length)
    throw new UsageError(
      `${rec.profile} runs on ${missing.join(', ')}, which ${file} does not name (its record names ${rec.nodesFile})`,
      [`sparkctl stop ${rec.profile} --nodes ${rec.nodesFile}`],
    );
}

/**
 * The clusters a stop acts on, every input read and checked before anything is signalled. With
 * --nodes: what the registry records on these nodes (NAME: that profile's record), or, with none,
 * the nodes themselves. Without: the records NAME (or --all) names, each over the nodes file it
 * names; a record whose nodes file cannot be read is bad input naming it.
 */
export function clusterTargets(
  recorded: () => ClusterRecord[],
  name: string | undefined,
  opts: { all?: boolean; nodes?: string },
): ClusterTarget[] {
  if (opts.nodes) {
    // the nodes file first: bad input is said before the state folder is touched
    const nf = loadNodesFile(opts.nodes);
    const on = recordsFor(recorded(), { name, nodes: { file: resolve(opts.nodes), nf } });
    for (const rec of on) checkNodes(rec, nf, opts.nodes);
    return on.length ? on.map((rec) => ({ nf, rec, name: rec.profile })) : [{ nf, name }];
  }
  const records = recorded();
  return (opts.all ? records : recordsFor(records, { name })).map((rec) => {
    let nf: NodesFile;
    try {
      nf = loadNodesFile(rec.nodesFile);
    } catch (e) {
      throw new UsageError(
        `${rec.profile} is served over nodes, and the nodes file its record names cannot be read: ${(e as Error).message}`,
        [`sparkctl stop ${rec.profile} --nodes FILE (the nodes it runs on)`],
      );
    }
    checkNodes(rec, nf, rec.nodesFile);
    return { nf, rec, name: rec.profile };
  });
}

/** Each target stopped, one after another, and said. */
export async function stopClusters(targets: ClusterTarget[], timeoutS: number): Promise<ClusterStopped[]> {
  const done: ClusterStopped[] = [];
  for (const t of targets) done.push(await stopOne(t, timeoutS));
  return done;
}

async function stopOne({ nf, rec, name }: ClusterTarget, timeoutS: number): Promise<ClusterStopped> {
  const out = await withCancel((signal) => stopCluster(nf, stateDir(), rec, timeoutS, signal));
  const lines: string[] = [];
  const e = out.engine;
  const said = (st: string, detail: string | undefined, where: string) =>
    st === 'stopped'
      ? 'stopped (SIGTERM)'
      : st === 'killed'
        ? `killed after ${timeoutS} s`
        : st === 'unproven'
          ? `left alone: ${detail} (the record is kept; check ${where} by hand)`
          : `could not be signalled (${detail})`;
  if (e.state === 'not-recorded') lines.push(`vLLM: nothing recorded${name ? ` for ${name}` : ''}`);
  else if (out.executor === 'native')
    for (const x of out.ranks ?? []) lines.push(`vLLM rank ${x.rank} on ${x.node}: ${said(x.state, x.detail, x.node)}`);
  else lines.push(`vLLM on ${e.node}: ${said(e.state, e.detail, 'the head')}`);
  for (const x of out.ray) lines.push(`ray on ${x.node}: ${x.ok ? 'stopped' : `ray stop failed (${x.detail})`}`);
  const bad = (st: string) => st === 'failed' || st === 'unproven';
  const badRank = (out.ranks ?? []).find((x) => bad(x.state));
  const problem =
    out.ray.some((x) => !x.ok) || bad(e.state) || badRank
      ? e.state === 'unproven' || badRank?.state === 'unproven'
        ? `the recorded vLLM process on ${badRank?.node ?? 'the head'} is not provably ours: not signalled`
        : badRank
          ? `vLLM rank ${badRank.rank} on ${badRank.node} could not be stopped`
          : 'Ray did not stop on every node'
      : undefined;
  return { profile: rec?.profile, lines, problem, out };
}

/** The --json form of a cluster's stop (stop-nodes, and stop's clusters). */
export const clusterStopJson = (x: ClusterStopped) => ({
  profile: x.profile ?? null,
  executor: x.out.executor,
  engine: x.out.engine,
  ray: x.out.ray,
  ranks: x.out.ranks ?? [],
});

/** stop --nodes: the stop-nodes envelope (or a line per rank and node), exit 1 on what was left. */
export function sayNodesStop(done: ClusterStopped[], json?: boolean): void {
  const lines = done.flatMap((x) => x.lines);
  const first = done[0]!.out;
  if (json)
    say(
      envelope('stop-nodes', {
        steps: lines,
        executor: first.executor,
        engine: first.engine,
        ray: first.ray,
        ranks: first.ranks ?? [],
        stopped: done.filter((x) => x.profile).map(clusterStopJson),
      }),
    );
  else for (const l of lines) say(l);
  const problem = done.find((x) => x.problem)?.problem;
  if (problem) throw new ProblemsFound(problem);
}
