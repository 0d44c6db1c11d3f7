// A check's verdict, as every checker reports it (preflight's host checks, the cluster's node and
// fabric checks) and every report renders it: what it saw, what it expected, the fix. Pure data.

export type Status = 'pass' | 'warn' | 'fail' | 'skip';

export interface CheckResult {
  status: Status;
  observed: string;
  expected: string;
  fix?: string;
}

/** A check's result with its identity and timing, as a report lists it. */
export interface CheckOutcome extends CheckResult {
  id: string;
  area: string;
  title: string;
  durationMs: number;
  blocking: boolean;
  /** preflight --nodes: the node it was checked on (none: this host's check, or one across the nodes) */
  node?: string;
}

/**
 * What every preflight report holds, one host's or the nodes': its checks (a node's with its node), their count, its
 * time.
 */
export interface ChecksReport {
  checks: CheckOutcome[];
  summary: Record<Status, number>;
  wallMs: number;
}
