// Why a launch did not become ready, in one screen instead of 300 lines of traceback: the reason
// the supervisor saw, the cause classified from what THIS launch wrote to its log (with the line
// that told), and the fix. One function for one node and for the head of a Ray cluster.
import { classifyLog, classifyStall } from './classify.js';
import type { NotReady, NotReadyReason } from '../client/ready.js';

export type { NotReady, NotReadyReason };

export interface Diagnosis extends NotReady {
  /** a stable id: a classified log cause (cuda-oom, port-in-use, ...), or the reason itself */
  causeId: string;
  cause?: string;
  fix?: string;
  /** the log line the cause was read from */
  evidence?: string;
  /** the last lines of this launch's log (never an earlier run's) */
  lastLines: string[];
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
export function diagnose(result: NotReady, log: string, keepLines = 20): Diagnosis {
  const lastLines = log
    .split('\n')
    .filter((x) => x.trim())
    .slice(-keepLines);
  // A log cause explains an exit; a stall or a timeout is explained by itself unless the log says more.
  // A stall or a timeout: where the log stopped may name the hang (Ray placement group, P2P/NCCL).
  const c = result.reason === 'interrupted' ? undefined : result.reason === 'stalled' || result.reason === 'timeout' ? classifyStall(log) : classifyLog(log);
  if (c) return { ...result, causeId: c.id, cause: c.cause, fix: c.fix, evidence: c.evidence, lastLines };
  const e = EXPLAIN[result.reason];
  return { ...result, causeId: result.reason, cause: e?.cause, fix: e?.fix, lastLines };
}
