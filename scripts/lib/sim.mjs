// What the benchmark scripts share: a free port, taskset pinning, a server started in its own group
// and killed with it when the script exits, the wait for its /health, and a simulator on a core.
import { spawn, execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';

export const BIN = new URL('../../bin/sparkctl.js', import.meta.url).pathname;

export const freePort = () =>
  new Promise((r) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => r(p));
    });
  });

export const hasTaskset = (() => {
  try {
    execFileSync('taskset', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** [command, args] running argv on one core (as is, without taskset). */
export const pin = (core, argv) =>
  hasTaskset && core !== undefined ? ['taskset', ['-c', String(core), ...argv]] : [argv[0], argv.slice(1)];

const children = [];
/** spawn(cmd, argv) in its own process group; the group is SIGKILLed when the script exits. */
export function spawnKept(cmd, argv, opts = {}) {
  const child = spawn(cmd, argv, { stdio: 'ignore', ...opts, detached: true });
  children.push(child);
  return child;
}
process.on('exit', () => {
  for (const c of children) killIfRunning(c);
});

/**
 * SIGKILL a child's process group while its leader still runs (as Node sees it): once the leader has
 * ended its group's number may be free, and this host reuses numbers within minutes, so `kill(-pid)`
 * then could reach another program's group.
 */
export function killIfRunning(c) {
  if (c.exitCode !== null || c.signalCode !== null) return;
  try {
    process.kill(-c.pid, 'SIGKILL');
  } catch {}
}
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130)); // the exit handler kills the simulators

/**
 * Until http://127.0.0.1:PORT/health answers 200, polled every 50 ms, at most `tries` times; then it throws "WHAT did
 * not start".
 */
export async function untilHealthy(port, what, tries) {
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) return;
    } catch {}
    if (i > tries) throw new Error(`${what} did not start`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * `sparkctl sim serve Qwen/Qwen3.5-9B` on a free port (load time 0), extra flags appended, pinned to
 * `core`; resolves when /health answers. stop(): SIGKILL to its group; end(): SIGTERM and wait for
 * it to exit (what it writes at exit, a trace, is then complete).
 */
export async function startSim(args = [], { core = 0, env = {} } = {}) {
  const port = await freePort();
  const [cmd, argv] = pin(core, [
    process.execPath,
    BIN,
    'sim',
    'serve',
    'Qwen/Qwen3.5-9B',
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--sim-load-seconds',
    '0',
    ...args,
  ]);
  const child = spawnKept(cmd, argv, { env: { ...process.env, ...env } });
  await untilHealthy(port, 'simulator', 400);
  return {
    port,
    pid: child.pid,
    url: `http://127.0.0.1:${port}`,
    end: () =>
      new Promise((r) => {
        child.once('exit', r);
        try {
          process.kill(child.pid, 'SIGTERM');
        } catch {
          r();
        }
        setTimeout(() => {
          killIfRunning(child);
          r();
        }, 15_000).unref();
      }),
    stop: () => killIfRunning(child),
  };
}

/** CPU seconds (user + system) a process has used so far, from /proc (Linux); undefined elsewhere. */
export function cpuSeconds(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return undefined;
  }
}
