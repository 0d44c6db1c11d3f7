// What the engine reports while it serves (events) and what it returns (the outcome). Library code
// never prints: the command renders these (text, a TTY progress line, --json) and maps the outcome
// to an exit code through the one table in src/errors.ts. One union and one outcome for every
// placement: a server on this host and one over nodes report the same events (an event that happened
// on a node names it: `node`) and return the same outcome (`nodes` says what only nodes have).
import type { PrewarmRequest, PrewarmResult } from '../health/prewarm.js';
import type { ProbeResult } from '../health/probe.js';
import type { Diagnosis } from './diagnose.js';
import type { Outcome } from '../errors.js';
import type { StartReport } from './phases.js';

/** `node`: where it happened, for a server over nodes (absent: this host). */
export type ServeEvent =
  /** a server's process started (over nodes: a rank, or Ray's vLLM on the head) */
  | {
      type: 'launched';
      replica: string;
      pid: number;
      port: number;
      uds?: string;
      gpus: number[];
      logFile: string;
      node?: string;
      rank?: number;
    }
  | { type: 'phase'; replica: string; phase: string; node?: string }
  /** over nodes, `cluster` is what served: the nodes and GPUs the ranks or Ray joined */
  | {
      type: 'ready';
      replica: string;
      url: string;
      ms: number;
      node?: string;
      cluster?: { nodes: number; gpus: number };
    }
  /** where the start's time went (phases.ts), once the first token came back (or the start failed) */
  /**
   * over nodes: one per rank (native) or per node whose lines Ray forwarded (Ray), `rank` and `node` naming it; rank 0
   * is the server's
   */
  | { type: 'start'; replica: string; report: StartReport; rank?: number; node?: string }
  /** what was done to make the start fast: caches, read-ahead, the loader (each a sentence) */
  | { type: 'cold-start'; notes: string[] }
  | { type: 'stopping'; why: 'failed' | 'interrupted' | 'forced' | 'signal'; replicas: number }
  | { type: 'prewarm-request'; replica: string; request: PrewarmRequest }
  | { type: 'prewarm'; replica: string; result: PrewarmResult; node?: string }
  | { type: 'probe'; replica: string; result: ProbeResult; node?: string }
  | { type: 'exited'; replica: string; code: number | null; signal: string | null }
  | { type: 'router'; router: RouterOutcome }
  /** a replica placed on a GPU another server uses: the co-location rule's sum said they fit */
  | { type: 'colocated'; replica: string; gpu: number; with: string[]; summary: string }
  // over nodes: the steps before and around the server's start
  | { type: 'ray-head'; node: string }
  | { type: 'ray-workers'; nodes: string[] }
  | { type: 'ray-cluster'; nodes: number; gpus: number }
  | { type: 'ranks-joined'; nodes: number; gpus: number }
  /** vLLM on the head waits for Ray's placement group (its log's line) */
  | { type: 'placement-wait'; node: string; line: string }
  /** what a failed start stopped on a node */
  | { type: 'cleanup'; node: string; what: string };

export type EventSink = (e: ServeEvent) => void;

export interface ReplicaOutcome {
  name: string;
  url: string;
  port: number;
  gpus: number[];
  pid: number;
  logFile: string;
  /** ms from launch to ready; absent when it never became ready */
  readyMs?: number;
  /** the start phase by phase (phases.ts) */
  start?: StartReport;
  /** why it never became ready: the reason, the classified cause with its evidence, the log's tail */
  failure?: Diagnosis;
  prewarm?: PrewarmResult;
  probe?: ProbeResult;
  /** --foreground: how the server ended */
  exit?: { code: number | null; signal: string | null };
  /** over nodes: the head's node, where the endpoint and its log are */
  node?: string;
}

/**
 * healthy / unhealthy: every replica became ready; the deep probe's verdict.
 * launch-failed: a replica exited or never became ready (every replica was stopped).
 * interrupted: cancelled before ready (every replica was stopped).
 * stopped: --foreground, ended by a signal (the servers were stopped on request).
 * server-exited: --foreground, a server ended on its own with a failure.
 */
type ServeStatus = Exclude<Outcome, 'preflight-failed'>;

export interface ServeOutcome {
  status: ServeStatus;
  profile: string;
  engine: 'vllm' | 'sim';
  replicas: ReplicaOutcome[];
  /** true when every replica started was stopped again (a failure or an interrupt) */
  stoppedAll: boolean;
  /** HAProxy in front of the replicas, when the plan has one */
  router?: RouterOutcome;
  /** served over nodes: the replica is the head's endpoint (once one was recorded); these are the rest */
  nodes?: NodesOutcome;
}

/** What only a serve over nodes has. */
interface NodesOutcome {
  /** the nodes file, its whole path */
  file: string;
  executor: 'ray' | 'native';
  /** what served: the nodes and GPUs that joined (once they did) */
  cluster?: { nodes: number; gpus: number };
  /** what failed, naming the node where it happened: the same shape as a replica's failure (diagnose.ts) */
  failure?: Diagnosis;
  /** each rank's start, phase by phase (cluster/rank-start.ts); rank 0's is also the replica's `start` */
  ranks?: Array<{ rank: number; node: string; start: StartReport }>;
}

export interface RouterOutcome {
  name: string;
  /** the one endpoint clients use */
  url: string;
  pid: number;
  /** HAProxy's stats page and Prometheus exporter (loopback) */
  statsUrl: string;
  metricsUrl: string;
  /** how HAProxy picks a replica: "prefix-hash (1024 B, factor 150 %)" or "leastconn" */
  balance: string;
  configFile: string;
  logFile: string;
  /** each replica as HAProxy sees it once it started */
  servers: Array<{ name: string; port: number; state: string }>;
  /**
   * how HAProxy reaches the replicas: Unix sockets in a 0700 folder, or loopback ports and why (profiles/router.ts
   * hopInWords)
   */
  hop?: string;
  /** why it did not start */
  failure?: string;
}
