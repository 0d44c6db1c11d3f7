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
}
