// What the benchmark scripts share: a free port, taskset pinning, and a simulator started on a
// core and waited for (its /health), killed with its whole group when the script exits.
import { spawn, execFileSync } from 'node:child_process';
import { createServer } from 'node:net';

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
export const pin = (core, argv) => (hasTaskset && core !== undefined ? ['taskset', ['-c', String(core), ...argv]] : [argv[0], argv.slice(1)]);

const children = [];
process.on('exit', () => {
  for (const c of children)
    try {
      process.kill(-c.pid, 'SIGKILL');
    } catch {}
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130)); // the exit handler kills the simulators

/**
 * `sparkctl sim serve Qwen/Qwen3.5-9B` on a free port (load time 0), extra flags appended, pinned to
 * `core`; resolves when /health answers. stop(): SIGKILL to its group; end(): SIGTERM and wait for
 * it to exit (what it writes at exit, a trace, is then complete).
 */
export async function startSim(args = [], { core = 0, env = {} } = {}) {
  const port = await freePort();
  const [cmd, argv] = pin(core, [process.execPath, BIN, 'sim', 'serve', 'Qwen/Qwen3.5-9B', '--host', '127.0.0.1', '--port', String(port), '--sim-load-seconds', '0', ...args]);
  const child = spawn(cmd, argv, { stdio: 'ignore', detached: true, env: { ...process.env, ...env } });
  children.push(child);
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) break;
    } catch {}
    if (i > 400) throw new Error('simulator did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
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
          try {
            process.kill(-child.pid, 'SIGKILL');
          } catch {}
          r();
        }, 15_000).unref();
      }),
    stop: () => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
    },
  };
}
