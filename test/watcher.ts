// `sparkctl watch --json` as a child of a test: its JSON lines parsed as they come (each stamped with
// when this process saw it), its stderr kept (the last 64 KiB), and a stop that ends it with SIGTERM
// as an operator's Ctrl-C would. One harness for the simulator suites and the real-vLLM one.
import { spawn, type ChildProcess } from 'node:child_process';
import { BIN } from './helpers.js';

export interface WatchEvent {
  event: string;
  target?: string;
  verdict?: string;
  action?: string;
  /** Date.now() when the line reached the test */
  seenAt: number;
  [k: string]: unknown;
}

export interface Watcher<E extends WatchEvent = WatchEvent> {
  proc: ChildProcess;
  events: E[];
  err: () => string;
  /** SIGTERM (unless it ended already); its exit code */
  stop: () => Promise<number | null>;
}

export function watcher<E extends WatchEvent = WatchEvent>(
  args: string[],
  o: { env: Record<string, string | undefined>; cwd?: string },
): Watcher<E> {
  const proc = spawn(process.execPath, [BIN, 'watch', '--json', ...args], {
    env: { ...process.env, ...o.env },
    cwd: o.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const events: E[] = [];
  let buf = '';
  let err = '';
  proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const lines = buf.split('\n');
    buf = lines.pop()!;
    for (const l of lines) if (l.trim()) events.push({ ...JSON.parse(l), seenAt: Date.now() });
  });
  proc.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-64 * 1024)));
  return {
    proc,
    events,
    err: () => err,
    stop: () =>
      new Promise<number | null>((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve(proc.exitCode);
        proc.once('exit', (code) => resolve(code));
        proc.kill('SIGTERM');
      }),
  };
}
