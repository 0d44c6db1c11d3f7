// Who holds a listening TCP socket: the proof that the server answering on a port is the process
// we started, not one that held the port first (our own then died with EADDRINUSE). Linux /proc.
import { readdirSync, readlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { readTextSync } from '../../util/read.js';

/** Inodes of the sockets listening on this port (IPv4 and IPv6), from /proc/net/tcp{,6}; undefined without /proc. */
export function listeningInodes(
  port: number,
  read: (f: string) => string | null = readOrNull,
): Set<string> | undefined {
  const texts = ['/proc/net/tcp', '/proc/net/tcp6'].map(read);
  if (texts.every((t) => t === null)) return undefined;
  const out = new Set<string>();
  for (const text of texts) {
    for (const line of (text ?? '').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      if (f.length < 10 || f[3] !== '0A') continue;
      const local = f[1]!;
      if (parseInt(local.slice(local.lastIndexOf(':') + 1), 16) === port) out.add(f[9]!);
    }
  }
  return out;
}

function readOrNull(f: string): string | null {
  try {
    return readTextSync(f, { maxBytes: 64 * 1024 * 1024 }); // /proc/net/tcp: 150 bytes a socket
  } catch {
    return null;
  }
}

/** Socket inodes among a process's open files ([] when gone or not ours to read). */
export const socketInodesOfPid = (pid: number): string[] => socketInodesOf(pid);
function socketInodesOf(pid: number): string[] {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) out.push(m[1]!);
    } catch {
      /* closed meanwhile */
    }
  }
  return out;
}

/**
 * What the socket-owner proof reads of a node's /proc: a file's text (null: unreadable), and a
 * process's socket inodes. This host reads them itself (LOCAL_PROC); a node over ssh sends them in one
 * read (engine/cluster/remote-socket.ts). The rule that judges them is one: holdsListener.
 */
export interface ProcReader {
  read(file: string): string | null;
  socketsOf(pid: number): string[];
}

const LOCAL_PROC: ProcReader = { read: readOrNull, socketsOf: socketInodesOf };

/**
 * true: one of these processes holds a socket listening on the port; false: someone else does (or
 * nobody); undefined: cannot tell (no /proc). One rule for this host and a node over ssh.
 */
export function holdsListener(
  port: number,
  pids: readonly number[],
  proc: ProcReader = LOCAL_PROC,
): boolean | undefined {
  const inodes = listeningInodes(port, proc.read);
  if (!inodes) return undefined;
  if (!inodes.size) return false;
  return pids.some((pid) => proc.socketsOf(pid).some((i) => inodes.has(i)));
}

/** This host: one of these processes holds the port's listening socket (holdsListener over this host's /proc). */
export const listenerIsOneOf = (port: number, pids: readonly number[]): boolean | undefined =>
  holdsListener(port, pids, LOCAL_PROC);

/**
 * The TCP sockets of a set of inodes, split by state: listening ports, and established connections by local and remote
 * port.
 */
export interface TcpView {
  listening: Set<number>;
  established: Array<{ localPort: number; remotePort: number }>;
}

/**
 * /proc/net/tcp{,6} texts -> the listening ports and established connections of these socket inodes. Pure; lines that
 * do not parse are skipped.
 */
export function parseTcp(texts: ReadonlyArray<string | null>, inodes: ReadonlySet<string>): TcpView {
  const port = (addr: string) => {
    const p = parseInt(addr.slice(addr.lastIndexOf(':') + 1), 16);
    return Number.isInteger(p) && p > 0 && p <= 65535 ? p : undefined;
  };
  const view: TcpView = { listening: new Set(), established: [] };
  for (const text of texts) {
    for (const line of (text ?? '').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // sl local_address rem_address st ... inode (field 9)
      if (f.length < 10 || !inodes.has(f[9]!)) continue;
      const local = port(f[1]!);
      if (local === undefined) continue;
      if (f[3] === '0A') view.listening.add(local);
      else if (f[3] === '01') {
        const remote = port(f[2]!);
        if (remote !== undefined) view.established.push({ localPort: local, remotePort: remote });
      }
    }
  }
  return view;
}

/** The TCP sockets these processes hold (undefined without /proc). */
export function tcpOf(pids: readonly number[], read: (f: string) => string | null = readOrNull): TcpView | undefined {
  const texts = ['/proc/net/tcp', '/proc/net/tcp6'].map(read);
  if (texts.every((t) => t === null)) return undefined;
  return parseTcp(texts, new Set(pids.flatMap((p) => socketInodesOf(p))));
}

/**
 * The processes that hold a socket listening on this port, with their command names (as the kernel
 * keeps them, at most 15 bytes; hostile text: the caller prints it escaped). Empty when nobody does
 * or when the holder's files cannot be read (another user's, without root). Bounded: one pass over
 * /proc, at most 4096 processes.
 */
function portHolders(port: number): Array<{ pid: number; comm: string }> {
  const inodes = listeningInodes(port);
  if (!inodes?.size) return [];
  let pids: number[];
  try {
    pids = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map(Number)
      .slice(0, 4096);
  } catch {
    return [];
  }
  const out: Array<{ pid: number; comm: string }> = [];
  for (const pid of pids) {
    if (!socketInodesOf(pid).some((i) => inodes.has(i))) continue;
    let comm = '?';
    try {
      comm = readTextSync(`/proc/${pid}/comm`, { maxBytes: 64 }).trim();
    } catch {
      /* gone meanwhile */
    }
    out.push({ pid, comm });
  }
  return out;
}

/**
 * Bind host:port for a moment, as the server about to start would: undefined when it is free, else
 * why not (the errno) and, for a port in use, the processes holding it where /proc shows them. The
 * one check before HAProxy binds (router and gateway): "haproxy exited with code 1" names nobody.
 */
export async function bindTrial(
  host: string,
  port: number,
): Promise<{ code: string; holders: Array<{ pid: number; comm: string }> } | undefined> {
  const err = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    const s = createServer();
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e));
    s.listen({ host, port, exclusive: true }, () => s.close(() => resolve(undefined)));
  });
  if (!err) return undefined;
  const code = err.code ?? err.message;
  return { code, holders: code === 'EADDRINUSE' ? portHolders(port) : [] };
}

/** The holders of a port in words: pid 12 ("python3"), or that they cannot be read here. */
export const holdersInWords = (holders: Array<{ pid: number; comm: string }>): string =>
  holders.length
    ? holders.map((h) => `pid ${h.pid} (${JSON.stringify(h.comm)})`).join(', ')
    : 'another process (its owner cannot be read here)';
