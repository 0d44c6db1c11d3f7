// The router as a supervised child: its folder (0700, ours), its config (checked by `haproxy -c`
// before it is used), the process in its own group with the instance marker like a replica, and the
// wait until it listens and its runtime API answers. It never gets a secret: not in its config, its
// argv or its environment (HAProxy's health checks use /health, which vLLM serves without a key).
import { spawn, execFile } from 'node:child_process';
import { accessSync, closeSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { writeFileAtomic } from '../util/atomic.js';
import { LaunchError, UsageError } from '../errors.js';
import { groupMembers, INSTANCE_ENV } from '../engine/runtime/proc.js';
import { listenerIsOneOf } from '../engine/runtime/socket-owner.js';
import { childRecord, openLaunchLog } from '../engine/runtime/child.js';
import type { RouterLaunched } from '../engine/router-driver.js';
import { renderConfig, type RouterPlan } from '../profiles/router.js';
import { HAPROXY_MALLOC_ENV } from '../profiles/haproxy.js';
import { showStat, type ServerStat } from './api.js';
import { pollUntil } from '../util/poll.js';
import { ensurePrivateDir } from '../util/dirs.js';

export const INSTALL_FIX =
  'install HAProxy: apt-get install haproxy (Debian/Ubuntu) or dnf install haproxy; or set router.bin to its path';

/**
 * The haproxy executable: router.bin as a path, or found on PATH, then in the sbin folders (not always on a user's
 * PATH).
 */
export function findHaproxy(bin = 'haproxy', env: NodeJS.ProcessEnv = process.env): string | undefined {
  const runnable = (p: string) => {
    try {
      accessSync(p, constants.X_OK);
      return statSync(p).isFile();
    } catch {
      return false;
    }
  };
  if (bin.includes('/')) return runnable(bin) ? bin : undefined;
  const dirs = [...(env.PATH ?? '').split(delimiter).filter(Boolean), '/usr/sbin', '/usr/local/sbin', '/sbin'];
  for (const d of dirs) if (runnable(join(d, bin))) return join(d, bin);
  return undefined;
}

export function requireHaproxy(bin?: string): string {
  const found = findHaproxy(bin);
  if (!found)
    throw new UsageError(
      `the router needs HAProxy, and ${bin && bin.includes('/') ? bin : `"${bin ?? 'haproxy'}"`} is not installed here`,
      [INSTALL_FIX, 'or serve without router: (each replica on its own port)'],
    );
  return found;
}

/** `haproxy -c -f FILE`: HAProxy's own verdict on a config. */
function checkConfig(haproxy: string, file: string, timeoutMs = 15_000): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) => {
    execFile(
      haproxy,
      ['-c', '-f', file],
      { timeout: timeoutMs, env: { PATH: process.env.PATH ?? '' } },
      (err, stdout, stderr) => {
        resolve({ ok: !err, output: `${stdout}${stderr}`.trim() });
      },
    );
  });
}

/**
 * The router's folder: created 0700, and refused if it is a link or someone else's (the runtime
 * API socket in it has admin level: whoever can connect can take every replica out).
 */
function ensureRouterDir(dir: string): void {
  ensurePrivateDir(dir, 'router folder');
}

/** HAProxy's own lines that say why (its ALERTs), else the last few: never its whole banner. */
export function haproxyWhy(output: string, last = 6): string[] {
  const lines = output.split('\n').filter((x) => x.trim());
  const alerts = lines.filter((x) => x.includes('[ALERT]'));
  return (alerts.length ? alerts : lines.slice(-last)).map((x) => x.replace(/^\[ALERT\]\s*\(\d+\)\s*:\s*/, ''));
}

/**
 * Write the config and have HAProxy check it: a refusal is a launch failure (exit 4) with HAProxy's reasons and the
 * fix.
 */
export async function checkRouterConfig(plan: RouterPlan, haproxy: string): Promise<void> {
  ensureRouterDir(plan.dir);
  writeFileAtomic(plan.configFile, renderConfig(plan, { socket: plan.socket, logStdout: true }), { mode: 0o600 });
  const checked = await checkConfig(haproxy, plan.configFile);
  if (!checked.ok)
    throw new LaunchError(`${haproxy} -c refused the router's config (${plan.configFile})`, [
      ...haproxyWhy(checked.output),
      'HAProxy 2.6 or later is needed (haproxy -v); sparkctl router config <profile> prints the config it would run',
    ]);
}

/** Write the config, have HAProxy check it, then start it (its own group, the marker, no secret). */
export async function launchRouter(plan: RouterPlan, haproxy: string): Promise<RouterLaunched> {
  await checkRouterConfig(plan, haproxy);
  const argv = [haproxy, '-db', '-f', plan.configFile];
  const { fd, tail } = openLaunchLog(plan.logFile, 'router log', argv);
  const marker = randomUUID();
  // A bare environment: HAProxy needs none of ours, and so never holds the API key's variable; glibc's
  // malloc told to keep its 256 KiB buffers (HAPROXY_MALLOC_ENV), as the gateway's HAProxy is.
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    ...HAPROXY_MALLOC_ENV,
    [INSTANCE_ENV]: marker,
  };
  if (process.env.SPARKCTL_TEST_RUN) env.SPARKCTL_TEST_RUN = process.env.SPARKCTL_TEST_RUN;
  if (process.env.SPARKCTL_TEST_CASE) env.SPARKCTL_TEST_CASE = process.env.SPARKCTL_TEST_CASE;
  const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ['ignore', fd, fd], env });
  closeSync(fd);
  return childRecord({ plan, argv }, child, marker, tail, (e) => e.message);
}

/** Until HAProxy holds its public port (our own process group) and its runtime API answers. */
export async function waitRouterReady(
  l: RouterLaunched,
  deadlineMs = 10_000,
): Promise<{ ok: true; servers: ServerStat[] } | { ok: false; detail: string }> {
  type Reading = { ok: true; servers: ServerStat[] } | { ok: false; exited?: true; detail: string };
  const read = async (): Promise<Reading> => {
    if (l.exit) {
      l.tail.poll();
      // its ALERT lines say why (a bind, a config line); the rest of the tail is its banner
      return {
        ok: false,
        exited: true,
        detail: `haproxy exited with ${l.exit.error ?? l.exit.signal ?? `code ${l.exit.code}`}: ${haproxyWhy(l.tail.text(), 8).join(' | ')}`,
      };
    }
    if (!listenerIsOneOf(l.plan.bind.port, [l.pid, ...groupMembers(l.pid)]))
      return { ok: false, detail: `port ${l.plan.bind.port} is not held by haproxy (pid ${l.pid}) yet` };
    try {
      return { ok: true, servers: await showStat(l.plan.socket, 1000) };
    } catch (e) {
      return { ok: false, detail: (e as Error).message };
    }
  };
  const r = await pollUntil(read, (v) => v.ok || !!v.exited, { deadlineMs, intervalMs: 50 });
  if (r.value.ok) return r.value;
  return {
    ok: false,
    detail: r.value.exited ? r.value.detail : `not ready within ${deadlineMs} ms: ${r.value.detail}`,
  };
}
