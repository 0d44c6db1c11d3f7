// Every side effect preflight has goes through a Host: run a command with a deadline, read a file,
// the environment. Real hosts run things; a replay host answers from a support bundle.
import type { SysinfoPart, SysinfoResult } from './sysinfo.js';
export interface CmdResult {
  argv: string[];
  stdout: string;
  stderr: string;
  /** null when the command could not run (not found, timed out) */
  exitCode: number | null;
  durationMs: number;
  /** 'not-found' | 'timeout' | 'not-collected' | other spawn error */
  error?: string;
}

export interface Host {
  readonly kind: 'real' | 'replay' | 'sim';
  readonly name: string;
  run(argv: string[], opts?: { timeoutMs?: number }): Promise<CmdResult>;
  /**
   * A regular file's text, at most `maxBytes` (a /proc file's bound by default); null where it is
   * missing or unreadable. A real host may throw FileRefused for a FIFO, a device or a file past the bound.
   */
  readFile(path: string, maxBytes?: number): Promise<string | null>;
  /** replay hosts only: whether the bundle holds this file (absent from the bundle != absent on the host) */
  hasFile?(path: string): boolean;
  env(): Record<string, string | undefined>;
  /** host inventory through systeminformation; a host without it (or a bundle without it) answers not-collected */
  sysinfo?<P extends SysinfoPart>(part: P, opts?: { timeoutMs?: number }): Promise<SysinfoResult<P>>;
}

export const key = (argv: string[]) => JSON.stringify(argv);

/** Wraps a host and keeps what it saw: `collect` writes it out as a bundle. */
export class RecordingHost implements Host {
  readonly kind;
  readonly name;
  commands: CmdResult[] = [];
  files = new Map<string, string | null>();
  sysinfoReadings = new Map<SysinfoPart, SysinfoResult>();
  constructor(readonly inner: Host) {
    this.kind = inner.kind;
    this.name = inner.name;
  }
  async run(argv: string[], opts?: { timeoutMs?: number }) {
    const r = await this.inner.run(argv, opts);
    this.commands.push(r);
    return r;
  }
  async readFile(path: string, maxBytes?: number) {
    const c = await this.inner.readFile(path, maxBytes);
    this.files.set(path, c);
    return c;
  }
  env() {
    return this.inner.env();
  }
  async sysinfo<P extends SysinfoPart>(part: P, opts?: { timeoutMs?: number }): Promise<SysinfoResult<P>> {
    const r = this.inner.sysinfo
      ? await this.inner.sysinfo(part, opts)
      : ({ ok: false, error: 'not-collected', durationMs: 0 } as const);
    this.sysinfoReadings.set(part, r);
    return r;
  }
}
