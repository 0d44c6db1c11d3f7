// A router's replica on vLLM's --uds: its Unix socket lives in the router's folder
// (<state>/router/<profile>, profiles/render.ts replicaHop), which sparkctl makes 0700 and checks
// before each start: a plain folder (not a link), this user's. Only this user (root on a shared host)
// can then connect to a replica, where a loopback port can be reached by any local user past the
// router's key and admission, and bound by one when a replica dies and frees it.
//
// Who holds a socket is proven as for a port (socket-owner.ts): the inode listening at the path in
// /proc/net/unix, among the open files of our process group. A path where something else listens, or
// that is not a socket, is never removed: the start is refused with the path and the fix.
import { lstatSync, unlinkSync } from 'node:fs';
import { dirname } from 'node:path';
import { UsageError } from '../../errors.js';
import { readTextOrNullSync } from '../../util/read.js';
import { lstatIfAny } from '../../util/atomic.js';
import { socketInodesOfPid } from './socket-owner.js';
import { ensurePrivateDir } from '../../util/dirs.js';

/**
 * The folder of replica sockets (and its parent, <state>/router): made 0700 where missing; refused when a link or not
 * this user's.
 */
export function ensureSocketDir(dir: string): void {
  // the replicas' own folder: nobody else may even look up a socket's name in it
  ensurePrivateDir(dir, 'router folder', { parents: 1 });
}

/**
 * /proc/net/unix text -> the inodes of the sockets LISTENING at `path` (flag __SO_ACCEPTCON, 0x10000).
 * Pure; a line that does not parse is skipped. A path is the rest of its line (it may hold spaces).
 */
export function unixListeners(text: string, path: string): Set<string> {
  const out = new Set<string>();
  for (const line of text.split('\n').slice(1)) {
    // Num RefCount Protocol Flags Type St Inode Path
    const m =
      /^\s*[0-9a-fA-F]+:\s+[0-9a-fA-F]+\s+[0-9a-fA-F]+\s+([0-9a-fA-F]+)\s+[0-9a-fA-F]+\s+[0-9a-fA-F]+\s+(\d+)\s+(.+)$/.exec(
        line,
      );
    if (!m || m[3] !== path) continue;
    if ((parseInt(m[1]!, 16) & 0x10000) === 0) continue;
    out.add(m[2]!);
  }
  return out;
}

/**
 * /proc/net/unix text -> how many of these socket inodes are connected stream sockets with no path of
 * their own: a client's end, as HAProxy's connections to replicas on Unix sockets are (the ends it
 * accepted on its own named sockets carry their path). Pure; a line that does not parse is skipped.
 */
export function unixClientEnds(text: string, inodes: ReadonlySet<string>): number {
  let n = 0;
  for (const line of text.split('\n').slice(1)) {
    const m =
      /^\s*[0-9a-fA-F]+:\s+[0-9a-fA-F]+\s+[0-9a-fA-F]+\s+[0-9a-fA-F]+\s+([0-9a-fA-F]+)\s+([0-9a-fA-F]+)\s+(\d+)\s*(.*)$/.exec(
        line,
      );
    if (!m || m[1] !== '0001' || m[2] !== '03' || m[4] || !inodes.has(m[3]!)) continue;
    n++;
  }
  return n;
}

/** This host: the connected client ends over Unix sockets of these processes (undefined without /proc). */
export function unixClientEndsOf(pids: readonly number[], read: () => string | null = netUnix): number | undefined {
  const text = read();
  if (text === null) return undefined;
  return unixClientEnds(text, new Set(pids.flatMap((p) => socketInodesOfPid(p))));
}

/** /proc/net/unix, size-bounded; null without /proc. */
export const netUnix = () => readTextOrNullSync('/proc/net/unix', { maxBytes: 64 * 1024 * 1024 }); // ~100 bytes a socket

/**
 * true: one of these processes listens at the socket's path; false: someone else does, or nobody; undefined: no /proc.
 */
export function unixListenerIsOneOf(
  path: string,
  pids: readonly number[],
  read: () => string | null = netUnix,
  socketsOf: (pid: number) => string[] = socketInodesOfPid,
): boolean | undefined {
  const text = read();
  if (text === null) return undefined;
  const inodes = unixListeners(text, path);
  if (!inodes.size) return false;
  return pids.some((pid) => socketsOf(pid).some((i) => inodes.has(i)));
}

/** Whether any process listens at the socket's path (undefined: no /proc to tell). */
export function unixListening(path: string, read: () => string | null = netUnix): boolean | undefined {
  const text = read();
  return text === null ? undefined : unixListeners(text, path).size > 0;
}

/**
 * Before a replica binds its socket (vLLM's --uds refuses a path that exists, Errno 98): the folder
 * made and checked, and a socket left at the path by a replica that is gone removed. Refused, with the
 * path and the fix: a path that is not a socket, or not this user's, or where a process listens.
 */
export function prepareReplicaSocket(path: string): void {
  ensureSocketDir(dirname(path));
  const st = lstatIfAny(path);
  if (!st) return;
  if (!st.isSocket())
    throw new UsageError(`replica socket ${path}: something that is not a socket is there`, [
      `remove ${path}; sparkctl's replica binds a socket there`,
    ]);
  if (typeof process.getuid === 'function' && st.uid !== process.getuid())
    throw new UsageError(`replica socket ${path}: belongs to uid ${st.uid}, not to this user`, [`remove ${path}`]);
  if (unixListening(path) !== false)
    throw new UsageError(`replica socket ${path}: a process listens on it (another start of this replica?)`, [
      `sparkctl status; sparkctl stop <profile>, or remove ${path} once nothing serves it`,
    ]);
  unlinkSync(path);
}

/**
 * After a replica stopped: its socket removed when nothing listens on it any more (a leftover would only make the next
 * start remove it).
 */
export function removeStaleSocket(path: string): void {
  try {
    const st = lstatSync(path);
    if (!st.isSocket() || unixListening(path) !== false) return;
    if (typeof process.getuid === 'function' && st.uid !== process.getuid()) return;
    unlinkSync(path);
  } catch {
    /* gone already */
  }
}
