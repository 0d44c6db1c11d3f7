// The error taxonomy and the one exit-code table (README documents it).
export const ExitCode = {
  ok: 0,
  problems: 1,
  badInput: 2,
  unreachable: 3,
  launchFailed: 4,
  internal: 70,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export class SparkError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode,
    readonly details: string[] = [],
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** Bad input: unknown profile, invalid field or flag, impossible plan. */
export class UsageError extends SparkError {
  constructor(message: string, details: string[] = []) {
    super(message, ExitCode.badInput, details);
  }
}

/** The command ran and found problems (failed check, unhealthy server). Output already printed. */
export class ProblemsFound extends SparkError {
  constructor(message: string, details: string[] = []) {
    super(message, ExitCode.problems, details);
  }
}

export class UnreachableError extends SparkError {
  constructor(message: string, details: string[] = []) {
    super(message, ExitCode.unreachable, details);
  }
}

export class LaunchError extends SparkError {
  constructor(message: string, details: string[] = []) {
    super(message, ExitCode.launchFailed, details);
  }
}

/** A command that already printed its verdict and only needs to set the exit code. */
export class ExitWith extends SparkError {
  constructor(code: ExitCode) {
    super('', code);
  }
}

/**
 * What a command that acts (serve) ended with: the one place such an outcome becomes an exit code.
 * A child's own exit status never escapes this table.
 */
const OUTCOME_EXIT = {
  healthy: ExitCode.ok,
  /** --foreground: the servers were stopped on request (SIGTERM/SIGINT), or ended cleanly */
  stopped: ExitCode.ok,
  unhealthy: ExitCode.problems,
  'preflight-failed': ExitCode.problems,
  'launch-failed': ExitCode.launchFailed,
  interrupted: ExitCode.launchFailed,
  /** --foreground: a server ended on its own with a failure (systemd restarts on non-zero) */
  'server-exited': ExitCode.launchFailed,
} as const satisfies Record<string, ExitCode>;
export type Outcome = keyof typeof OUTCOME_EXIT;

export function exitCodeOf(outcome: Outcome): ExitCode {
  return OUTCOME_EXIT[outcome];
}
