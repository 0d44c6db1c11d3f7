// A start over nodes, per rank: where each node's time went, as the one-host start report says it
// (phases.ts), one StartClock per rank started at that rank's launch by sparkctl's clock.
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
import type { NodesFile, NodeEntry } from '../../profiles/schema.js';
import { StartClock, type StartReport } from '../phases.js';
import type { ServeEvent } from '../events.js';
import { RemoteView, REMOTE_READ_MS } from './remote-view.js';
import { allNodes, fabricAddress } from './ray-plan.js';

/** One rank's (native) or node's (Ray) start: rank is the node's --node-rank (native) or its place in the nodes file (Ray; 0 the head). */
export interface RankStart {
  rank: number;
  node: string;
  start: StartReport;
}

/** The prefix Ray puts on a worker actor's forwarded line; the address is there only for another node than the driver's. */
const RAY_ACTOR = /^(?:\s*\((?:[A-Za-z_]\w*)(?: rank=\d+)? pid=\d+(?:, ip=[\d.]+|, ip=[0-9a-f:]+)?\))+/;
/** The address of the last actor prefix that names one (EngineCore's own prefix comes first, without one). */
const actorIp = (line: string) => {
  const p = RAY_ACTOR.exec(line)?.[0];
  return p ? [...p.matchAll(/ip=([\d.]+|[0-9a-f:]+)\)/g)].pop()?.[1] : undefined;
};

export class ClusterStart {
  private readonly clocks = new Map<number, { node: string; clock: StartClock; view?: RemoteView }>();
  private following?: Promise<void>;
  private stopped = false;

  /** The rank's clock, started now (its launch command is about to go out). */
  launched(rank: number, node: string): StartClock {
    const clock = new StartClock();
    this.clocks.set(rank, { node, clock });
    return clock;
  }

  /** The head's clock (rank 0): fed by the after-launch watch, its API's readiness and the first token. */
  get head(): StartClock | undefined {
    return this.clocks.get(0)?.clock;
  }

  /** Native: a worker rank's log, read on its node while the head starts (`tail(n)`: the shell that prints its last n lines). */
  follow(rank: number, nf: NodesFile, node: NodeEntry, tail: (n: number) => string): void {
    const c = this.clocks.get(rank);
    if (c) c.view = new RemoteView(nf, node, tail, async () => undefined);
  }

  private wake?: () => void;

  /** Until stop(): every followed rank's log read every 1.5 s, concurrently; each new line timed on its rank's clock. */
  start(): void {
    if (this.following) return;
    const loop = async () => {
      while (!this.stopped) {
        await this.readAll();
        await new Promise<void>((r) => {
          this.wake = r;
          setTimeout(r, REMOTE_READ_MS + 50);
        });
      }
    };
    this.following = loop();
  }

  private async readAll(now = false): Promise<void> {
    await Promise.all(
      [...this.clocks.values()].map(async (c) => {
        if (!c.view) return;
        for (const line of await c.view.poll(now)) c.clock.line(line);
      }),
    );
  }

  /** Stop following; one last read of every rank's log, now (bounded like every read), so what it logged before now counts. */
  async stop(): Promise<void> {
    this.stopped = true;
    // the loop ends at once if it waits, or after the read it is in (never two reads of one log at a time)
    this.wake?.();
    await this.following;
    await this.readAll(true);
  }

  /**
   * Ray: a line of the head's log. A worker actor's line that names another node's address goes to
   * that node's clock (created at the engine's launch, the head's t0: Ray's workers start with it).
   */
  rayLine(nf: NodesFile, line: string): void {
    const ip = actorIp(line);
    if (!ip) return;
    const nodes = allNodes(nf);
    const i = nodes.findIndex((n) => fabricAddress(n) === ip || n.address === ip);
    if (i <= 0) return;
    let c = this.clocks.get(i);
    if (!c) {
      c = { node: nodes[i]!.name, clock: new StartClock(this.head?.t0) };
      this.clocks.set(i, c);
    }
    c.clock.line(line);
  }

  /** The first token on the head's clock: prewarm's first answered request, or the probe's generation. */
  observe(e: ServeEvent): void {
    if (e.type === 'prewarm-request' && e.request.ok) this.head?.firstToken();
    if (e.type === 'probe' && e.result.inferenceMs !== undefined) this.head?.firstToken();
  }

  /** Every rank's report, in rank order. */
  reports(): RankStart[] {
    return [...this.clocks].sort(([a], [b]) => a - b).map(([rank, c]) => ({ rank, node: c.node, start: c.clock.report() }));
  }
}
