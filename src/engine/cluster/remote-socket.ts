// The socket-owner proof on a node over ssh: the one rule of this host (holdsListener in
// engine/runtime/socket-owner.ts: the port's listening socket inode, from /proc/net/tcp{,6}, is among
// the open files of a process of the group sparkctl launched), over what one ssh call reads of the
// node's /proc. A server that answers on the head's port but is not held by the recorded group (a
// foreign server that held the port first; ours then died with EADDRINUSE) is never taken as ours.
import type { NodeEntry, NodesFile } from '../../profiles/schema.js';
import { holdsListener, type ProcReader } from '../runtime/socket-owner.js';
import { ssh } from './ssh.js';

/** /proc/net/tcp is ~150 bytes a socket: 4 MiB each is some 28,000 sockets; a larger file is cut there. */
const MAX_TCP_BYTES = 4 * 1024 * 1024;

/**
 * POSIX sh for the node: its /proc/net/tcp{,6} (each after a line `@file PATH`), and every socket
 * among the open files of the group led by `pgid` (`@sock PID socket:[INODE]`). Only the pid is
 * interpolated, and only an integer > 1.
 */
export function socketFactsScript(pgid: number): string {
  if (!Number.isInteger(pgid) || pgid <= 1) throw new Error(`socketFactsScript: not a process group: ${pgid}`);
  return [
    `for f in /proc/net/tcp /proc/net/tcp6; do [ -r "$f" ] && { echo "@file $f"; head -c ${MAX_TCP_BYTES} "$f"; echo; }; done`,
    `for p in $(ps -eo pid=,pgid= 2>/dev/null | awk -v g=${pgid} '$2 == g { print $1 }'); do`,
    `  for fd in /proc/$p/fd/*; do l=$(readlink "$fd" 2>/dev/null) || continue; case "$l" in socket:*) echo "@sock $p $l";; esac; done`,
    'done',
    'exit 0',
  ].join('\n');
}

/**
 * What the node sent, as the one rule reads a /proc (pure: every byte of it is hostile; what does not parse is left
 * out).
 */
export function procFromFacts(text: string): ProcReader {
  const files = new Map<string, string[]>();
  const socks = new Map<number, string[]>();
  let into: string[] | undefined;
  for (const line of text.split('\n')) {
    const f = /^@file (\/proc\/net\/tcp6?)$/.exec(line);
    if (f) {
      into = [];
      files.set(f[1]!, into);
      continue;
    }
    const s = /^@sock (\d+) socket:\[(\d+)\]$/.exec(line);
    if (s) {
      into = undefined;
      const pid = Number(s[1]);
      socks.set(pid, [...(socks.get(pid) ?? []), s[2]!]);
      continue;
    }
    if (line.startsWith('@')) into = undefined;
    else into?.push(line);
  }
  return { read: (file) => files.get(file)?.join('\n') ?? null, socketsOf: (pid) => socks.get(pid) ?? [] };
}

/** The pids of the group the facts name (the group's members that hold any socket). */
const groupPids = (text: string): number[] => [
  ...new Set([...text.matchAll(/^@sock (\d+) /gm)].map((m) => Number(m[1]))),
];

/**
 * The head's listening socket on `port` is held by the group sparkctl launched as `pgid` on that node.
 * true: ours; false: another process holds it (or nothing does yet); undefined: cannot tell (the node
 * did not answer, or has no /proc/net/tcp).
 */
export async function remoteListenerOurs(
  nf: NodesFile,
  node: NodeEntry,
  port: number,
  pgid: number,
  signal?: AbortSignal,
): Promise<boolean | undefined> {
  if (!Number.isInteger(pgid) || pgid <= 1) return undefined;
  const r = await ssh(nf, node, socketFactsScript(pgid), { timeoutMs: 15_000, signal });
  if (r.exitCode !== 0) return undefined;
  return holdsListener(port, groupPids(r.stdout), procFromFacts(r.stdout));
}
