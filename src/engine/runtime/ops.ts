// The container runtime's side effects: run, inspect, stop and remove, each bounded by a deadline.
// Nothing is stopped or removed that proveContainer has not just proven ours: the id sparkctl itself
// recorded (what `run` printed, or the cid file `run --cidfile` wrote into the state folder) AND the
// marker label it chose. Never an id read off a label: `docker commit`/`podman commit` bakes every
// label into the image, so a container started from a snapshot of ours carries our labels, marker
// and state folder included. A name proves nothing either.
import { spawnSync, execFile } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../../util/atomic.js';
import { ensureDir } from '../../util/dirs.js';
import {
  inspectArgv,
  proveContainer,
  removeArgv,
  stopArgv,
  withCliArgs,
  MARKER_LABEL,
  type ContainerCli,
  type ContainerProof,
} from './container.js';
import { readTextSync, READ_LIMITS } from '../../util/read.js';
import { cliArgsProblem, cliWordProblem } from './cli-words.js';
import { pollUntil } from '../../util/poll.js';
import { own } from '../../util/own.js';

/** What a registry entry keeps about its container. */
export interface ContainerRecord {
  cli: ContainerCli;
  cliArgs: string[];
  name: string;
  image: string;
  /** absent until `run` printed it (a kill -9 of sparkctl in between leaves the cid file) */
  id?: string;
  /** where `run --cidfile` wrote the id: sparkctl's own record of it when `run` never returned */
  cidFile?: string;
  /**
   * its `logs -f` follower, as launched (pid, start time; it carries the launch's marker): ended by
   * the stop if it outlives the container (podman's can miss the container's end under load)
   */
  follower?: { pid: number; startTime: number };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** the CLI could not be run at all (not installed), or ran past its deadline */
  error?: string;
}

/**
 * The words for a CLI that could not be run (not installed) or did not answer in time: one wording wherever a CLI is
 * run.
 */
export function cliError(
  argv: readonly string[],
  kind: 'not-found' | 'timeout' | 'too-large',
  timeoutMs: number,
): string {
  if (kind === 'too-large')
    return `${argv.slice(0, 3).join(' ')} wrote more than ${CLI_MAX_BYTES / 1024 / 1024} MiB: cut off, not read`;
  return kind === 'not-found'
    ? `${argv[0]} is not installed (not on PATH)`
    : `${argv.slice(0, 3).join(' ')} did not answer within ${Math.round(timeoutMs / 1000)} s`;
}

/** What is read of a CLI's output (each of stdout and stderr). */
const CLI_MAX_BYTES = 4 * 1024 * 1024;
const SPAWN_ERRORS: Record<string, 'not-found' | 'timeout' | 'too-large' | undefined> = {
  ENOENT: 'not-found',
  ETIMEDOUT: 'timeout',
  ENOBUFS: 'too-large',
};

/** Run the CLI (argv[0] is the CLI), bounded; the environment carries what argv only names. */
export function cliRun(argv: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): CliResult {
  const r = spawnSync(argv[0]!, argv.slice(1), {
    encoding: 'utf8',
    env: opts.env ?? process.env,
    timeout: opts.timeoutMs ?? 30_000,
    maxBuffer: CLI_MAX_BYTES,
  });
  const err = r.error as NodeJS.ErrnoException | undefined;
  const kind = err?.code ? own(SPAWN_ERRORS, err.code) : undefined;
  return {
    code: r.status,
    stdout: r.stdout ?? '',
    stderr: r.stderr ?? '',
    error: err
      ? kind
        ? cliError(argv, kind, kind === 'timeout' ? (opts.timeoutMs ?? 30_000) : 0)
        : err.message
      : undefined,
  };
}

/** cliRun without blocking the event loop (a stop waits the whole grace). */
export function cliRunAsync(
  argv: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      argv[0]!,
      argv.slice(1),
      { encoding: 'utf8', env: opts.env ?? process.env, timeout: opts.timeoutMs ?? 30_000, maxBuffer: CLI_MAX_BYTES },
      (err, stdout, stderr) => {
        const e = err as (NodeJS.ErrnoException & { killed?: boolean }) | null;
        const code = e ? (typeof e.code === 'number' ? e.code : null) : 0;
        // killed at the deadline is a timeout even when the CLI then exits with a code of its own
        // (podman run, sent SIGTERM, exits 126): read as that exit status it hid the deadline.
        // Killed for writing past the bound is that, not a timeout.
        const error = !e
          ? undefined
          : e.code === 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER'
            ? cliError(argv, 'too-large', 0)
            : e.killed
              ? cliError(argv, 'timeout', opts.timeoutMs ?? 30_000)
              : typeof e.code === 'number'
                ? undefined
                : e.code === 'ENOENT'
                  ? cliError(argv, 'not-found', 0)
                  : e.message;
        resolve({ code, stdout: stdout ?? '', stderr: stderr ?? '', error });
      },
    );
  });
}

const IMAGE_ID = /^(?:sha256:)?([a-f0-9]{64})$/;

/**
 * The one rule for an image ID a container CLI answers (`inspect --format {{.Image}}`, here or on a node): 64 hex, bare
 * or sha256:, or undefined.
 */
export function imageIdOf(answer: string): string | undefined {
  return IMAGE_ID.exec(answer.trim())?.[1];
}

/**
 * The line of a CLI's stderr that says why it failed: the last one that is not the usage hint docker
 * prints after its error ("Run 'docker run --help' for more information"; 20.10: "See 'docker run --help'.").
 */
export function failureLine(stderr: string): string | undefined {
  return stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/^(Run '[^']*--help' for more information|See '[^']*--help'\.)$/.test(l))
    .pop();
}

const NOT_FOUND = /no such (object|container)|no container with name or id|not found/i;

/** The ids of containers carrying label=value (running or not). */
function idsByLabel(cli: ContainerCli, cliArgs: readonly string[], label: string, value: string): string[] | undefined {
  const r = cliRun(withCliArgs([cli, 'ps', '-a', '-q', '--no-trunc', '--filter', `label=${label}=${value}`], cliArgs), {
    timeoutMs: 15_000,
  });
  if (r.error || r.code !== 0) return undefined;
  return r.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => /^[a-f0-9]{12,64}$/.test(l));
}

/** The id `run --cidfile` wrote (a regular file in the state folder, read bounded), if it is one. */
export function readCidFile(file: string | undefined): string | undefined {
  if (!file) return undefined;
  try {
    const v = readTextSync(file, { maxBytes: 256, noFollow: true }).trim();
    return /^[a-f0-9]{64}$/.test(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Prove a recorded container ours now: by the id sparkctl recorded (the entry's, else its cid
 * file's) and the marker label. With no id of our own there is no proof: a container that carries
 * the marker label may be a copy (commit) of ours; it is reported, never adopted.
 */
export function proveRecord(rec: ContainerRecord, marker: string | undefined): ContainerProof & { id?: string } {
  // a record's CLI and options are run only when they are what sparkctl writes (engine/runtime/cli-words.ts)
  const bad = cliWordProblem(rec.cli) ?? cliArgsProblem(rec.cliArgs);
  if (bad) return { state: 'unproven', code: 'unreadable', reason: `the record's container CLI: ${bad}` };
  const id = rec.id ?? readCidFile(rec.cidFile);
  if (!id) {
    if (!marker)
      return { state: 'unproven', code: 'unreadable', reason: 'the entry records neither a container id nor a marker' };
    const ids = idsByLabel(rec.cli, rec.cliArgs, MARKER_LABEL, marker);
    if (ids === undefined) return { state: 'unproven', code: 'unreadable', reason: `${rec.cli} ps did not answer` };
    // nothing carries the marker: the run never made a container
    if (!ids.length) return { state: 'gone' };
    return {
      state: 'unproven',
      code: 'no-id',
      reason: `no container id was recorded for this entry; ${ids.length} container(s) carry its marker label (${ids.map((i) => i.slice(0, 12)).join(', ')}), which any copy of the image (docker/podman commit) carries too`,
    };
  }
  const argv = withCliArgs(inspectArgv(rec.cli, id), rec.cliArgs);
  let r = cliRun(argv, { timeoutMs: 15_000 });
  // a runtime busy with another client (podman's storage lock held by a build or an rm on a loaded
  // host: seen past 15 s) is asked once more, longer, before the container is called unproven
  if (r.error && !/not installed/.test(r.error)) r = cliRun(argv, { timeoutMs: 60_000 });
  if (r.error) return { state: 'unproven', code: 'unreadable', reason: r.error };
  const notFound = r.code !== 0 && NOT_FOUND.test(r.stderr);
  if (r.code !== 0 && !notFound)
    return {
      state: 'unproven',
      code: 'unreadable',
      reason: `${rec.cli} inspect failed: ${r.stderr.trim().slice(0, 200)}`,
    };
  return { ...proveContainer({ containerId: id, marker }, { stdout: r.stdout, notFound }), id };
}

type ContainerStopHow = 'gone' | 'terminated' | 'killed' | 'unproven';

/**
 * `stop --time` then `rm`, for a container proven ours right before each. The runtime sends
 * SIGTERM (vLLM drains) and SIGKILL after the grace; its exit code tells which ended it. onStop:
 * called when a running container is about to be stopped.
 */
export async function stopContainer(
  rec: ContainerRecord,
  marker: string | undefined,
  graceS: number,
  onStop?: () => void,
): Promise<{ how: ContainerStopHow; removed: boolean; id?: string; detail?: string; exitCode?: number }> {
  const p = proveRecord(rec, marker);
  if (p.state === 'gone') return { how: 'gone', removed: true };
  if (p.state === 'unproven') return { how: 'unproven', removed: false, detail: p.reason };
  const id = p.id;
  let how: ContainerStopHow = 'terminated';
  if (p.state === 'alive') onStop?.();
  if (p.state === 'alive' && graceS <= 0) {
    // at once: kill, not stop --time 0 (podman holds the container's lock while an earlier stop waits out its grace)
    const k = await cliRunAsync(withCliArgs([rec.cli, 'kill', '--signal', 'KILL', id], rec.cliArgs), {
      timeoutMs: 30_000,
    });
    if (k.error || k.code !== 0)
      return { how: 'unproven', removed: false, id, detail: k.error ?? k.stderr.trim().slice(0, 200) };
    await pollUntil(
      () => proveRecord({ ...rec, id }, marker).state,
      (state) => state !== 'alive',
      { deadlineMs: 10_000, intervalMs: 100 },
    );
    how = 'killed';
  } else if (p.state === 'alive') {
    // the CLI's own deadline is the grace; ours is that plus the CLI's start-up and the kill
    const s = await cliRunAsync(withCliArgs(stopArgv(rec.cli, id, graceS), rec.cliArgs), {
      timeoutMs: (graceS + 30) * 1000,
    });
    if (s.error || s.code !== 0)
      return { how: 'unproven', removed: false, id, detail: s.error ?? s.stderr.trim().slice(0, 200) };
  }
  // what the server exited with (137: the runtime's SIGKILL after the grace), read before rm
  const ec = cliRun(
    withCliArgs([rec.cli, 'inspect', '--type', 'container', '--format', '{{.State.ExitCode}}', id], rec.cliArgs),
    { timeoutMs: 15_000 },
  ).stdout.trim();
  const exitCode = /^\d{1,3}$/.test(ec) ? Number(ec) : undefined;
  if (p.state === 'alive' && exitCode === 137) how = 'killed';
  const again = proveRecord({ ...rec, id }, marker);
  if (again.state !== 'alive' && again.state !== 'exited')
    return { how, removed: again.state === 'gone', id, exitCode };
  const rm = await cliRunAsync(withCliArgs(removeArgv(rec.cli, id), rec.cliArgs), { timeoutMs: 30_000 });
  return {
    how,
    removed: rm.code === 0,
    id,
    exitCode,
    detail: rm.code === 0 ? undefined : rm.stderr.trim().slice(0, 200),
  };
}

/**
 * SIGKILL now, by the full id this process launched and proved ours (its id and marker label, at
 * readiness). A second Ctrl-C during a drain cannot prove it again: podman holds the container's lock
 * while the first `stop --time` waits, and inspect waits with it; an id is never reused.
 */
export async function killContainer(rec: ContainerRecord): Promise<boolean> {
  if (!rec.id || !/^[a-f0-9]{64}$/.test(rec.id)) return false;
  if (cliWordProblem(rec.cli) ?? cliArgsProblem(rec.cliArgs)) return false;
  const k = await cliRunAsync(withCliArgs([rec.cli, 'kill', '--signal', 'KILL', rec.id], rec.cliArgs), {
    timeoutMs: 30_000,
  });
  return !k.error && k.code === 0;
}

/** The CLIs a state folder has launched containers with (so status looks for orphans there, and only there). */
function knownClis(stateDir: string): Array<{ cli: ContainerCli; cliArgs: string[] }> {
  const f = join(stateDir, 'containers.json');
  if (!existsSync(f)) return [];
  try {
    const v = JSON.parse(readTextSync(f, { maxBytes: READ_LIMITS.record, noFollow: true })) as unknown;
    if (!Array.isArray(v)) return [];
    return v.filter(
      (x): x is { cli: ContainerCli; cliArgs: string[] } =>
        typeof x === 'object' && x !== null && !cliWordProblem(x.cli) && !cliArgsProblem(x.cliArgs),
    );
  } catch {
    return [];
  }
}

export function rememberCli(stateDir: string, cli: ContainerCli, cliArgs: string[]) {
  const known = knownClis(stateDir);
  if (known.some((k) => k.cli === cli && JSON.stringify(k.cliArgs) === JSON.stringify(cliArgs))) return;
  writeFileAtomic(join(stateDir, 'containers.json'), JSON.stringify([...known, { cli, cliArgs }], null, 2) + '\n');
}

/**
 * The launch ledger: one record per container sparkctl runs, written to the state folder BEFORE
 * `run` (the marker it chose, the CLI, the name, where --cidfile puts the id), so that a container
 * whose registry entry is gone (a kill -9 of sparkctl mid-launch, a deleted entry) is still found
 * from sparkctl's own record, never from the labels a container carries.
 */
interface LedgerRecord {
  marker: string;
  cli: ContainerCli;
  cliArgs: string[];
  name: string;
  instance: string;
  profile: string;
  launchedAt: string;
  cidFile: string;
  logFile: string;
}

const ledgerDir = (stateDir: string) => join(stateDir, 'containers');
const MARKER = /^[0-9a-f-]{36}$/;

/** The ledger record's file and the cid file of one launch (the marker is sparkctl's random UUID). */
function ledgerPaths(stateDir: string, marker: string): { record: string; cidFile: string } {
  if (!MARKER.test(marker)) throw new Error(`not a launch marker: ${JSON.stringify(marker)}`);
  return { record: join(ledgerDir(stateDir), `${marker}.json`), cidFile: join(ledgerDir(stateDir), `${marker}.cid`) };
}

export function writeLedger(stateDir: string, rec: Omit<LedgerRecord, 'cidFile'>): LedgerRecord {
  const { record, cidFile } = ledgerPaths(stateDir, rec.marker);
  ensureDir(ledgerDir(stateDir), 'state folder', 'set SPARKCTL_STATE_DIR to a writable folder');
  // a cid file left at this name would make `run --cidfile` refuse; a fresh UUID never has one
  const full: LedgerRecord = { ...rec, cidFile };
  writeFileAtomic(record, `${JSON.stringify(full, null, 2)}\n`);
  return full;
}

export function removeLedger(stateDir: string, marker: string | undefined): void {
  if (!marker || !MARKER.test(marker)) return;
  const { record, cidFile } = ledgerPaths(stateDir, marker);
  rmSync(record, { force: true });
  rmSync(cidFile, { force: true });
}

const LedgerShape = (x: unknown): x is LedgerRecord => {
  const r = x as Partial<LedgerRecord> | null;
  return (
    typeof r === 'object' &&
    r !== null &&
    typeof r.marker === 'string' &&
    MARKER.test(r.marker) &&
    !cliWordProblem(r.cli) &&
    !cliArgsProblem(r.cliArgs) &&
    typeof r.name === 'string' &&
    typeof r.instance === 'string' &&
    typeof r.profile === 'string' &&
    typeof r.launchedAt === 'string' &&
    typeof r.logFile === 'string'
  );
};

/** Every launch this state folder recorded (a record that does not parse is passed over: it proves nothing). */
export function ledgerRecords(stateDir: string): LedgerRecord[] {
  let files: string[];
  try {
    files = readdirSync(ledgerDir(stateDir)).filter((f) => /^[0-9a-f-]{36}\.json$/.test(f));
  } catch {
    return [];
  }
  const out: LedgerRecord[] = [];
  for (const f of files.sort()) {
    try {
      const v = JSON.parse(
        readTextSync(join(ledgerDir(stateDir), f), { maxBytes: READ_LIMITS.record, noFollow: true }),
      ) as unknown;
      // the paths are ours to derive, whatever the file says
      if (LedgerShape(v) && `${v.marker}.json` === f)
        out.push({ ...v, cidFile: ledgerPaths(stateDir, v.marker).cidFile });
    } catch {
      /* unreadable: no proof */
    }
  }
  return out;
}
