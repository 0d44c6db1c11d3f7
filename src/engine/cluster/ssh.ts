// The ssh transport for multi-node: one shell command on one node, with a deadline on both ends.
// BatchMode (never a password prompt at 3 a.m.); a command with a remote deadline runs under
// coreutils `timeout` on the node, which puts it in its own process group and signals the whole
// group when the deadline passes: ending our ssh alone would leave e.g. a `ray start` that keeps
// trying to join, and joins minutes later.
import { shownEscaped } from '../../util/control.js';
import { execa } from 'execa';
import type { NodesFile, NodeEntry } from '../../profiles/schema.js';
import { shellQuote } from '../../output/format.js';
import { allNodes, fabricAddress } from './ray-plan.js';

export interface Remote {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  /** 'timeout' when the deadline passed (the remote group was ended), else how ssh failed */
  error?: string;
}

interface SshOptions {
  /** the whole call, ssh included */
  timeoutMs?: number;
  /** a deadline enforced on the node: the command's process group is ended when it passes */
  remoteTimeoutS?: number;
  input?: string;
  signal?: AbortSignal;
  /**
   * the output exactly as the node wrote it: a log's tail must keep its last newline, or its last complete line reads
   * as one still being written
   */
  keepFinalNewline?: boolean;
  /**
   * the most characters read of stdout (and of stderr): past it ssh is ended and the answer is 'too-large', never read
   * (default SSH_MAX_ANSWER)
   */
  maxBytes?: number;
}

/**
 * What a node may answer one command by default: a file listing of a large model is a few MiB; a node that sends more
 * is not answering.
 */
const SSH_MAX_ANSWER = 16 * 1024 * 1024;

export function sshArgv(nf: NodesFile, node: NodeEntry, command: string): string[] {
  const argv = [
    process.env.SPARKCTL_SSH ?? 'ssh',
    '-o',
    'BatchMode=yes',
    '-o',
    `ConnectTimeout=${nf.ssh.connectTimeoutSeconds}`,
    '-o',
    'StrictHostKeyChecking=accept-new',
    '-p',
    String(node.sshPort),
  ];
  if (nf.ssh.identityFile) argv.push('-i', nf.ssh.identityFile);
  for (const o of nf.ssh.options) argv.push('-o', o);
  argv.push(`${node.sshUser}@${node.address}`, command);
  return argv;
}

/** `timeout` exits 124 when it ended the command (137 when it had to KILL it). */
export function withRemoteDeadline(command: string, seconds: number): string {
  return `timeout -k 5 ${Math.max(1, Math.round(seconds))} sh -c ${shellQuote(command)}`;
}

export async function ssh(nf: NodesFile, node: NodeEntry, command: string, opts: SshOptions = {}): Promise<Remote> {
  const remote = opts.remoteTimeoutS ? withRemoteDeadline(command, opts.remoteTimeoutS) : command;
  // Locally a little longer than the node's own deadline, so the node ends its group first.
  const timeout = opts.remoteTimeoutS ? opts.remoteTimeoutS * 1000 + 15_000 : (opts.timeoutMs ?? 30_000);
  const argv = sshArgv(nf, node, remote);
  const maxBuffer = opts.maxBytes ?? SSH_MAX_ANSWER;
  const r = await execa(argv[0]!, argv.slice(1), {
    reject: false,
    timeout,
    maxBuffer,
    cancelSignal: opts.signal,
    input: opts.input,
    stdin: opts.input === undefined ? 'ignore' : undefined,
    stripFinalNewline: !opts.keepFinalNewline,
  });
  const stdout = String(r.stdout ?? '');
  const stderr = String(r.stderr ?? '');
  // a node that answers past the bound (a flood, an endless stream) is ended there: what it sent is not read
  if (r.isMaxBuffer)
    return {
      exitCode: null,
      stdout: '',
      stderr: '',
      error: `answered more than ${maxBuffer} characters (the bound for this step): not read`,
    };
  if (r.timedOut) return { exitCode: null, stdout, stderr, error: 'timeout' };
  if (r.isCanceled) return { exitCode: null, stdout, stderr, error: 'cancelled' };
  if (r.exitCode === undefined)
    return { exitCode: null, stdout: '', stderr, error: (r as { shortMessage?: string }).shortMessage ?? 'ssh failed' };
  if (opts.remoteTimeoutS && (r.exitCode === 124 || r.exitCode === 137))
    return { exitCode: null, stdout, stderr, error: 'timeout' };
  return { exitCode: r.exitCode, stdout, stderr };
}

/** The last lines of what a remote command said, for one-line messages. */
/**
 * A node's words as they may be printed: its control characters (an escape sequence rewrites a terminal) shown escaped,
 * its lines kept.
 */
export const printable = (s: string) => shownEscaped(s, { lines: true });

const WHY_LINE_MAX = 300;

export function remoteWhy(r: Remote, lines = 2): string {
  // the node's last words, bounded: the tail of what it said, each line cut (one line of a flood is no message)
  const text = printable((r.stderr || r.stdout || '').slice(-64 * 1024))
    .trim()
    .split('\n')
    .filter((l) => l.trim())
    .slice(-lines)
    .map((l) => (l.length > WHY_LINE_MAX ? `${l.slice(0, WHY_LINE_MAX)}... (${l.length} characters)` : l))
    .join(' | ');
  if (r.error === 'timeout') return `timed out${text ? `; last output: ${text}` : ''}`;
  return text || r.error || `exit ${r.exitCode}`;
}

/**
 * `one` on every node of the file at once, each reached at its fabric address where the nodes file
 * names one; `onNode` hears each result as it comes, and the results are in the file's order (head
 * first). `one` answers for its node: a node's failure is its result, not a throw.
 */
export async function onEveryNode<R>(
  nf: NodesFile,
  one: (via: NodeEntry) => Promise<R>,
  onNode?: (r: R) => void,
): Promise<R[]> {
  const nodes = allNodes(nf);
  const out: R[] = new Array(nodes.length);
  await Promise.all(
    nodes.map(async (n, i) => {
      const r = await one({ ...n, address: fabricAddress(n) });
      out[i] = r;
      onNode?.(r);
    }),
  );
  return out;
}
