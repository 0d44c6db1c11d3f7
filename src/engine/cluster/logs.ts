// A multi-node server's log, read where it is: the head's (rank 0's) log on its node, over ssh, through
// what the registry's record names (a file's tail, or the container's logs by the ID its run got
// back, proven first). `sparkctl logs NAME` reads a server over nodes as it reads one on this host.
import type { NodesFile, NodeEntry } from '../../profiles/schema.js';
import type { ClusterRank, ClusterRecord } from '../registry.js';
import { nodeNamed } from './ray-plan.js';
import { onRank } from './node-runtime.js';
import { RemoteView } from './remote-view.js';
import { remoteWhy, ssh } from './ssh.js';

/** At most the last 16 MiB of the log is read, as on this host. */
const MAX_BYTES = 16 * 1024 * 1024;

/**
 * The head's node and the shell that prints the last n lines of its log there (undefined: the nodes file does not name
 * the head).
 */
export function headLog(
  record: ClusterRecord,
  nf: NodesFile,
): { node: NodeEntry; tail: (n: number) => string } | undefined {
  const head: Pick<ClusterRank, 'node' | 'logFile' | 'containerId' | 'cli'> = record.ranks?.find(
    (r) => r.rank === 0,
  ) ?? { node: record.head, logFile: record.logFile };
  const node = nodeNamed(nf, head.node);
  if (!node) return undefined;
  // as its runtime keeps it (a file the launch wrote with `> "$LOG"`, $HOME expanding on the node; or the container's
  // logs), and as the watch reads it
  return { node, tail: (n) => onRank(head).rank.tailLine(head, n) };
}

/** The head log's last lines (at most 16 MiB of them); a node that does not answer, or a log it cannot read, is why. */
export async function readHeadLog(
  record: ClusterRecord,
  nf: NodesFile,
  lines: number,
  signal?: AbortSignal,
): Promise<{ lines: string[] } | { why: string }> {
  const h = headLog(record, nf);
  if (!h) return { why: `the nodes file ${record.nodesFile} does not name the head ${record.head}` };
  const x = await ssh(nf, h.node, `${h.tail(Math.max(1, lines))} | tail -c ${MAX_BYTES}`, {
    timeoutMs: 30_000,
    signal,
  });
  if (x.exitCode !== 0) return { why: `${h.node.name} (${h.node.address}): ${remoteWhy(x)}` };
  const out = x.stdout.split('\n');
  if (out.at(-1) === '') out.pop();
  return { lines: lines > 0 ? out.slice(-lines) : [] };
}

/** The head's log as it grows (the one after-launch watch's remote view: a read every 1.5 s, new lines by overlap). */
export function followHeadLog(record: ClusterRecord, nf: NodesFile): RemoteView | undefined {
  const h = headLog(record, nf);
  return h && new RemoteView(nf, h.node, h.tail, async () => undefined);
}
