import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { execa } from 'execa';
import type { Host, CmdResult } from './host.js';
import { readSysinfo, type SysinfoPart, type SysinfoResult } from './sysinfo.js';

export class RealHost implements Host {
  readonly kind = 'real' as const;
  readonly name = hostname();
  constructor(readonly defaultTimeoutMs = 5000) {}

  async run(argv: string[], opts: { timeoutMs?: number } = {}): Promise<CmdResult> {
    const started = performance.now();
    const r = await execa(argv[0]!, argv.slice(1), {
      reject: false,
      timeout: opts.timeoutMs ?? this.defaultTimeoutMs,
      stdin: 'ignore',
      // LC_ALL=C: tools print the English, dot-decimal output the parsers read.
      env: { LC_ALL: 'C' },
      killSignal: 'SIGKILL',
      maxBuffer: 16 * 1024 * 1024,
    });
    const durationMs = Math.round(performance.now() - started);
    const base = { argv, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? ''), durationMs };
    if (r.timedOut) return { ...base, exitCode: null, error: 'timeout' };
    if ((r as { code?: string }).code === 'ENOENT' || /ENOENT/.test(String((r as { originalMessage?: string }).originalMessage ?? ''))) {
      return { ...base, exitCode: null, error: 'not-found' };
    }
    if (r.exitCode === undefined) return { ...base, exitCode: null, error: String((r as { shortMessage?: string }).shortMessage ?? 'failed to run') };
    return { ...base, exitCode: r.exitCode };
  }

  async readFile(path: string): Promise<string | null> {
    try {
      return await readFile(path, 'utf8');
    } catch {
      return null;
    }
  }

  env() {
    return process.env;
  }

  sysinfo<P extends SysinfoPart>(part: P, opts: { timeoutMs?: number } = {}): Promise<SysinfoResult<P>> {
    return readSysinfo(part, opts.timeoutMs ?? this.defaultTimeoutMs);
  }
}
