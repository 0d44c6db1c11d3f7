// Why a serve failed, in one screen instead of 300 lines of traceback: the reason the watch saw,
// the cause classified from what THIS launch wrote to its log (with the line that told), and the
// fix. One shape for every placement: a replica on this host (ReplicaOutcome.failure) and a server
// over nodes (ServeOutcome.nodes.failure, naming the node); one function (diagnose) reads a log for
// both, and `failedBefore` says a failure that has no log to read (a refusal, a node's start).
import { classifyLog, classifyStall } from './classify.js';
import type { NotReady, NotReadyReason } from '../client/ready.js';

export type { NotReady, NotReadyReason };

/**
 * Why: the readiness watch's reason (client/ready.ts), or, before the watch, `refused` (nothing was
 * started: a server already on those nodes, another image) or `not-started` (a step before ready
 * failed: a node's Ray, a launch over ssh, the cluster's wait).
 */
type FailureReason = NotReadyReason | 'refused' | 'not-started';

export interface Diagnosis {
  reason: FailureReason;
  /**
   * What happened, in one line: on this host the watch's own words (the replica is named by the
   * outcome around it); over nodes the sentence naming the node, and its cause where one is known
   * (as serve --nodes says it).
   */
  detail: string;
  /** ms from the launch to the end of the wait (absent: a failure before the watch) */
  ms?: number;
  /** a stable id: a classified log cause (cuda-oom, port-in-use, ...), or the reason itself */
  causeId: string;
  cause?: string;
  fix?: string;
  /** the log line the cause was read from */
  evidence?: string;
  /**
   * the lines that show it: the last lines of this launch's log (never an earlier run's); over nodes each may name its
   * node, or be `ray status`
   */
  lastLines: string[];
  /** over nodes: the node it happened on (absent: this host, or no one node) */
  node?: string;
}

const EXPLAIN: Partial<Record<NotReadyReason, { cause: string; fix: string }>> = {
  stalled: {
    cause: 'the server stopped logging while loading',
    fix: 'check the model storage (NFS?) and the GPUs (sparkctl preflight); raise server.stallTimeoutSeconds if loads are legitimately quiet',
  },
  timeout: {
    cause: 'the load took longer than the ready timeout',
    fix: '--ready-timeout 30m (or server.readyTimeoutSeconds) for large models; check the log for progress',
  },
  'not-ours': {
    cause: 'another process answers on the port: the server that answered is not the one sparkctl started',
    fix: 'sparkctl status (one of ours?), ss -ltnp to see who holds it, or --set server.port=N',
  },
  'wrong-model': {
    cause: 'the server on the port serves another model',
    fix: 'sparkctl status (one of ours?), ss -ltnp to see who holds it, or --set server.port=N',
  },
};

/** `log` is only what this launch wrote (read from the log's size at launch). */
export function diagnose(result: NotReady, log: string, keepLines = 20): Diagnosis & NotReady {
  const lastLines = log
    .split('\n')
    .filter((x) => x.trim())
    .slice(-keepLines);
  // A log cause explains an exit; a stall or a timeout is explained by itself unless the log says more.
  // A stall or a timeout: where the log stopped may name the hang (Ray placement group, P2P/NCCL).
  const c =
    result.reason === 'interrupted'
      ? undefined
      : result.reason === 'stalled' || result.reason === 'timeout'
        ? classifyStall(log)
        : classifyLog(log);
  if (c) return { ...result, causeId: c.id, cause: c.cause, fix: c.fix, evidence: c.evidence, lastLines };
  const e = EXPLAIN[result.reason];
  return { ...result, causeId: result.reason, cause: e?.cause, fix: e?.fix, lastLines };
}

/**
 * A failure with no launch log to classify (over nodes: a refusal, a node's start, a launch over
 * ssh, the cluster's wait): its reason is its cause id, as diagnose does for an unexplained reason.
 */
export function failedBefore(
  reason: 'refused' | 'not-started' | 'interrupted',
  detail: string,
  lastLines: string[],
  more: { fix?: string; node?: string } = {},
): Diagnosis {
  return {
    reason,
    detail,
    causeId: reason,
    ...(more.fix === undefined ? {} : { fix: more.fix }),
    lastLines,
    ...(more.node === undefined ? {} : { node: more.node }),
  };
}
