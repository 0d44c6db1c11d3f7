// A start over nodes, per rank: where each node's time went, as the one-host start report says it
// (phases.ts), in serve's one start record (engine/start.ts StartRecord: one StartClock per group,
// here a rank, started at that rank's launch by sparkctl's clock). What is only the nodes' lives here:
// which node a Ray-forwarded line is of, and the record's shape of the reports.
//  - native (vLLM's --nnodes): every rank is a vLLM of its own with a log on its node. The head's
//    log feeds the head's clock through the one after-launch watch; each worker rank's log is
//    followed over the node's transport (RemoteView: the last 200 lines, at most 64 KiB, an ssh
//    deadline of 15 s, every 1.5 s at most) while the head starts, and read once more when the
//    serve is over. A rank's lines are timed when sparkctl read them (to 1.5 s).
//  - Ray: one vLLM on the head; Ray forwards each worker actor's output into the head's log with a
//    prefix naming the actor and, for another node, its address: "(RayWorkerWrapper pid=2149832,
//    ip=10.124.70.174) INFO ... Model loading took ..." (seen in vllm-project/vllm#11208). Those
//    lines feed the clock of the node with that address (fabric or ssh address); a line with no
//    address is the head's. Ray folds lines repeated on several nodes into one ("[repeated 4x
//    across cluster]"), so a node's report has what Ray let through: said in docs/cold-start.md.
import type { NodesFile } from '../../profiles/schema.js';
import type { StartReport } from '../phases.js';
import type { GroupStart } from '../start.js';
import { allNodes, fabricAddress } from './ray-plan.js';

/**
 * One rank's (native) or node's (Ray) start: rank is the node's --node-rank (native) or its place in the nodes file
 * (Ray; 0 the head).
 */
export interface RankStart {
  rank: number;
  node: string;
  start: StartReport;
}

/**
 * The prefix Ray puts on a worker actor's forwarded line; the address is there only for another node than the driver's.
 */
const RAY_ACTOR = /^(?:\s*\((?:[A-Za-z_]\w*)(?: rank=\d+)? pid=\d+(?:, ip=[\d.]+|, ip=[0-9a-f:]+)?\))+/;
/** The address of the last actor prefix that names one (EngineCore's own prefix comes first, without one). */
const actorIp = (line: string) => {
  const p = RAY_ACTOR.exec(line)?.[0];
  return p ? [...p.matchAll(/ip=([\d.]+|[0-9a-f:]+)\)/g)].pop()?.[1] : undefined;
};

/**
 * Ray: which node a line of the head's log is of. A worker actor's line that names another node's
 * address (fabric or ssh) is that node's, by its place in the nodes file; a line with no address, or
 * the head's, is the head's own (undefined).
 */
export function rayLineNode(nf: NodesFile, line: string): { index: number; node: string } | undefined {
  const ip = actorIp(line);
  if (!ip) return undefined;
  const nodes = allNodes(nf);
  const i = nodes.findIndex((n) => fabricAddress(n) === ip || n.address === ip);
  return i <= 0 ? undefined : { index: i, node: nodes[i]!.name };
}

/** The reports of a start over nodes as the cluster's record and outcome keep them: by rank, in rank order. */
export const rankStarts = (reports: GroupStart[]): RankStart[] =>
  reports.map((r) => ({ rank: r.group, node: r.node ?? '', start: r.start }));
