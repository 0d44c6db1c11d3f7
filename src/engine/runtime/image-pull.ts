// The container runtime's own pull of an image (`podman pull REF`, `docker pull REF`), as upgrade asks
// for a candidate that is not here: one argv (never a shell), a deadline (the child is ended at it:
// SIGTERM, then SIGKILL), the runtime's progress lines passed on as they come (to stderr: stdout is the
// command's result), and a failure read into one of four kinds with the image and the fix. The
// runtime's words are hostile text: only bounded, escaped lines of them are kept or shown.
import { spawn } from 'node:child_process';
import { shownEscaped } from '../../util/control.js';
import { withCliArgs, type ContainerCli } from './container.js';

export interface PullRequest {
  cli: ContainerCli;
  cliArgs: readonly string[];
  ref: string;
  /** the whole pull; past it the runtime's pull is ended and the pull fails as unreachable (deadline) */
  timeoutMs: number;
  signal?: AbortSignal;
  /** each progress line of the runtime (escaped, at most 300 characters), as it comes */
  onLine?: (line: string) => void;
}

/**
 * not-found / denied: the reference or its credentials (bad input); unreachable: the registry (or the deadline);
 * failed: the pull ran and failed here.
 */
export type PullFailureKind = 'not-found' | 'denied' | 'unreachable' | 'failed';

export type PullResult =
  | { ok: true; ms: number }
  | { ok: false; kind: PullFailureKind; why: string; ms: number; interrupted?: boolean };

/** Generous but finite: an image of vLLM is 10-20 GB; 30 minutes is 10 MB/s for 18 GB. */
export const PULL_DEADLINE_MS = 30 * 60_000;

const LAST_LINES = 20;

// What the two CLIs say, in their own words (podman 4.x, containers/image; docker 20.10+): the first rule that matches
// wins.
const RULES: Array<[PullFailureKind, RegExp]> = [
  [
    'denied',
    /unauthorized|authentication required|denied: |requested access to the resource is denied|pull access denied|\b403\b|forbidden/i,
  ],
  [
    'not-found',
    /manifest unknown|name unknown|not found: manifest|manifest for \S+ not found|repository does not exist|no such image|invalid reference format|repository name must/i,
  ],
  [
    'unreachable',
    /connection refused|no such host|i\/o timeout|network is unreachable|no route to host|connection reset|tls handshake|x509:|server gave http response to https client|deadline exceeded|timeout awaiting|temporary failure in name resolution|eof$/im,
  ],
];

/** The kind of a failed pull, from the runtime's last lines (pure; table-tested over both CLIs' real texts). */
export function classifyPullFailure(text: string): PullFailureKind {
  for (const [kind, re] of RULES) if (re.test(text)) return kind;
  return 'failed';
}

/** The runtime's error line worth showing: its last "Error..." line, else its last line (escaped, bounded). */
export function pullWhy(lines: readonly string[], code: number | null): string {
  const err = [...lines].reverse().find((l) => /^(Error|error)\b|Error response from daemon/.test(l));
  const last = err ?? lines[lines.length - 1];
  return last ? last.slice(0, 400) : `exit ${code ?? 'signal'}`;
}

/** The pull, as the runtime does it; never throws (the caller turns a failure into its exit code). */
export function pullImage(r: PullRequest): Promise<PullResult> {
  const argv = withCliArgs([r.cli, 'pull', r.ref], r.cliArgs);
  const t0 = Date.now();
  const last: string[] = [];
  return new Promise((resolve) => {
    if (r.signal?.aborted)
      return resolve({ ok: false, kind: 'failed', why: 'interrupted before the pull', ms: 0, interrupted: true });
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let ended: 'deadline' | 'interrupted' | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    const end = (why: 'deadline' | 'interrupted') => {
      if (ended) return;
      ended = why;
      child.kill('SIGTERM');
      killTimer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    };
    const deadline = setTimeout(() => end('deadline'), r.timeoutMs);
    const onAbort = () => end('interrupted');
    r.signal?.addEventListener('abort', onAbort, { once: true });
    // docker writes its progress to stdout, podman to stderr: both are progress here
    const reader = () => {
      let part = '';
      return (b: Buffer) => {
        part = (part + b.toString('utf8')).slice(-64 * 1024);
        const lines = part.split(/\r?\n|\r/);
        part = lines.pop() ?? '';
        for (const raw of lines) {
          const line = shownEscaped(raw.trim()).slice(0, 300);
          if (!line) continue;
          last.push(line);
          if (last.length > LAST_LINES) last.shift();
          r.onLine?.(line);
        }
      };
    };
    child.stdout!.on('data', reader());
    child.stderr!.on('data', reader());
    const done = (code: number | null, spawnError?: Error) => {
      clearTimeout(deadline);
      if (killTimer) clearTimeout(killTimer);
      r.signal?.removeEventListener('abort', onAbort);
      const ms = Date.now() - t0;
      if (spawnError)
        return resolve({
          ok: false,
          kind: 'failed',
          why: `${r.cli} could not be run: ${spawnError.message.slice(0, 200)}`,
          ms,
        });
      if (ended === 'deadline')
        return resolve({
          ok: false,
          kind: 'unreachable',
          why: `no image after ${Math.round(r.timeoutMs / 1000)} s (the pull was ended at its deadline)`,
          ms,
        });
      if (ended === 'interrupted')
        return resolve({ ok: false, kind: 'failed', why: 'interrupted (the pull was ended)', ms, interrupted: true });
      if (code === 0) return resolve({ ok: true, ms });
      const text = last.join('\n');
      resolve({ ok: false, kind: classifyPullFailure(text), why: pullWhy(last, code), ms });
    };
    child.once('error', (e) => done(null, e));
    child.once('close', (code) => done(code));
  });
}
