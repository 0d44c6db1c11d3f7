import { readTextOrNull, READ_LIMITS } from '../util/read.js';
import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import type { Host, CmdResult } from './host.js';
import type { SysinfoPart, SysinfoResult } from './sysinfo.js';

const MAX_OUTPUT = 16 * 1024 * 1024;

export class RealHost implements Host {
  readonly kind = 'real' as const;
  readonly name = hostname();
  constructor(readonly defaultTimeoutMs = 5000) {}

  private envCopy?: NodeJS.ProcessEnv;
  /**
   * The probes' environment, copied once: copying process.env for each of preflight's ~17 spawns
   * took 5 ms of its start on the H200 host. LC_ALL=C: tools print the English, dot-decimal output
   * the parsers read.
   */
  private childEnv(): NodeJS.ProcessEnv {
    return (this.envCopy ??= { ...process.env, LC_ALL: 'C' });
  }

  /**
   * Plain child_process rather than execa: preflight spawns ~30 short probes and is timed against
   * the same commands run with execFile; loading execa (~250 KB) before the first spawn was a
   * measurable share of `sparkctl preflight`'s start (scripts/bench-preflight.mjs).
   */
  run(argv: string[], opts: { timeoutMs?: number } = {}): Promise<CmdResult> {
    const started = performance.now();
    const timeoutMs = opts.timeoutMs ?? this.defaultTimeoutMs;
    return new Promise<CmdResult>((resolve) => {
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let size = 0;
      let timedOut = false;
      let overflow = false;
      let spawnError: NodeJS.ErrnoException | undefined;
      let done = false;
      const finish = (exitCode: number | null) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        const base = {
          argv,
          stdout: Buffer.concat(out).toString('utf8'),
          stderr: Buffer.concat(err).toString('utf8'),
          durationMs: Math.round(performance.now() - started),
        };
        if (spawnError)
          return resolve({
            ...base,
            exitCode: null,
            error: spawnError.code === 'ENOENT' ? 'not-found' : (spawnError.message ?? 'failed to run'),
          });
        if (timedOut) return resolve({ ...base, exitCode: null, error: 'timeout' });
        if (overflow) return resolve({ ...base, exitCode: null, error: `output over ${MAX_OUTPUT} bytes` });
        if (exitCode === null) return resolve({ ...base, exitCode: null, error: 'killed by a signal' });
        resolve({ ...base, exitCode });
      };
      const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env: this.childEnv() });
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
        // Answer now: a grandchild that kept the pipes open must not stretch the deadline.
        finish(null);
      }, timeoutMs);
      const take = (into: Buffer[]) => (b: Buffer) => {
        size += b.length;
        if (size > MAX_OUTPUT) {
          overflow = true;
          child.kill('SIGKILL');
          return;
        }
        into.push(b);
      };
      child.stdout.on('data', take(out));
      child.stderr.on('data', take(err));
      child.on('error', (e) => {
        spawnError = e;
        finish(null);
      });
      child.on('close', (code) => finish(code));
    });
  }

  /** A FIFO or device planted where a fact file should be is, to preflight, a file it could not read. */
  async readFile(path: string, maxBytes: number = READ_LIMITS.proc): Promise<string | null> {
    try {
      return await readTextOrNull(path, { maxBytes });
    } catch {
      return null;
    }
  }

  env() {
    return process.env;
  }

  async sysinfo<P extends SysinfoPart>(part: P, opts: { timeoutMs?: number } = {}): Promise<SysinfoResult<P>> {
    const { readSysinfo } = await import('./sysinfo.js');
    return readSysinfo(part, opts.timeoutMs ?? this.defaultTimeoutMs);
  }
}
