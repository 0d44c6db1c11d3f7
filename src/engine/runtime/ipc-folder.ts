// vLLM's IPC sockets, in a folder of the replica's own. vLLM binds its ZMQ sockets (the engine's input
// and output, the handshake, the shared-memory broadcast) at ipc://$VLLM_RPC_BASE_PATH/<uuid4>
// (vllm/utils/network_utils.py get_open_zmq_ipc_path; envs.py: default the temp folder). A process
// that is killed, or an EngineCore that its API server's exit ended, leaves its socket files behind:
// 1,624 of them sat in this machine's /tmp after the project's runs, each a nameless UUID nobody could
// trace to a server. On this host sparkctl points the variable at <state>/ipc/<replica> (0700, made
// at launch), and removes the folder with the replica's record: what vLLM left there goes with it.
// vLLM keeps the variable out of its compile cache's key (envs.py compile_factors' ignored list), so a
// restart's cache is not touched by it. A container has a temp folder of its own (gone with the
// container); a node's rank keeps vLLM's default. A profile that sets the variable keeps its own.
import { lstatSync, readdirSync, rmdirSync, unlinkSync, type Stats } from 'node:fs';
import { join, resolve } from 'node:path';
import { ensurePrivateDir } from '../../util/dirs.js';
import type { ReplicaRun } from './runtime.js';
import { netUnix, unixListeners } from './replica-socket.js';

export const IPC_VAR = 'VLLM_RPC_BASE_PATH';

/** A Unix socket's path holds at most 107 bytes (sun_path, 108 with its NUL); vLLM adds '/' and a 36-character UUID. */
const SUN_PATH_MAX = 107;
const UUID_LEN = 36;

/** The replica's folder, or undefined where a socket's path under it would not fit (vLLM's default is kept). */
export function ipcFolderOf(stateDir: string, name: string): string | undefined {
  const dir = join(resolve(stateDir), 'ipc', name);
  return Buffer.byteLength(dir) + 1 + UUID_LEN <= SUN_PATH_MAX ? dir : undefined;
}

/** The variable for this replica's environment: none where the profile sets it itself or the path is too long. */
export function ipcEnv(x: Pick<ReplicaRun, 'stateDir' | 'replica'>): Record<string, string> {
  if (x.replica.env[IPC_VAR] !== undefined || x.replica.envFrom[IPC_VAR] !== undefined) return {};
  const dir = ipcFolderOf(x.stateDir, x.replica.name);
  return dir ? { [IPC_VAR]: dir } : {};
}

/** A plain folder (not a link) of this user's. */
function plainOurs(st: Stats): boolean {
  return (
    !st.isSymbolicLink() && st.isDirectory() && (typeof process.getuid !== 'function' || st.uid === process.getuid())
  );
}

/**
 * Before a launch: <state>/ipc and the replica's folder made 0700 where missing, each checked a plain
 * folder of ours before anything goes in it (never made through a link), and the sockets a gone
 * replica of the same name left removed.
 */
export function prepareIpcFolder(dir: string): void {
  ensurePrivateDir(dir, 'IPC folder', { parents: 1, allPrivate: true });
  clearSockets(dir);
}

/**
 * Unlink the sockets in the folder that nothing listens on (/proc/net/unix, read once; unreadable:
 * none is removed); never anything else: a file or a link someone put there stays.
 */
function clearSockets(dir: string): void {
  const names = readdirSync(dir);
  if (!names.length) return;
  const table = netUnix();
  if (table === null) return;
  for (const name of names) {
    const p = join(dir, name);
    try {
      if (lstatSync(p).isSocket() && unixListeners(table, p).size === 0) unlinkSync(p);
    } catch {
      /* gone meanwhile: nothing to remove */
    }
  }
}

/**
 * With the replica's record: its sockets and the folder go. A folder that is not ours, or that holds
 * anything but sockets, is left as it is. Never throws: the record's removal does not depend on it.
 */
export function removeIpcFolder(stateDir: string, name: string): void {
  const dir = ipcFolderOf(stateDir, name);
  if (!dir) return;
  try {
    if (!plainOurs(lstatSync(dir))) return;
    clearSockets(dir);
    // whatever the pass met (a name gone meanwhile, an unreadable entry), an empty folder goes
    if (readdirSync(dir).length === 0) rmdirSync(dir);
  } catch {
    /* no folder (a replica from before this, a profile with its own), or it went meanwhile */
  }
}
