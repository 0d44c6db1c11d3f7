// Launch one replica in a container: refuse a leftover of the same name (reported with the fix,
// never replaced), `run --detach` with the key in the CLI's environment only, record the id, then
// follow the container's output with `logs -f` into the replica's usual log, so that readiness,
// the stall timer and the diagnosis read the same file as on the host. The follower ends when the
// container does: it is the Launched child whose exit means "the server ended".
import { spawn } from 'node:child_process';
import { closeSync, existsSync, writeSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { prepareReplicaSocket } from './replica-socket.js';
import { childRecord, openLaunchLog, type Launched } from './child.js';
import { UsageError } from '../../errors.js';
import { renderContainerRun, withCliArgs, type ContainerCli, type ContainerPlan } from './container.js';
import { cliArgsProblem } from './cli-words.js';
import { cliRun, failureLine, proveRecord, rememberCli, writeLedger, type ContainerRecord } from './ops.js';
import type { ReplicaRun } from './runtime.js';
import { proveIdentity, stopGroup } from './proc.js';
import { READ_LIMITS, readTextSync } from '../../util/read.js';
import { pause } from '../../util/pause.js';
import { pollUntil } from '../../util/poll.js';

/** The fix for a container of our name that is already there. */
function leftoverFix(cli: string, name: string): string[] {
  return [
    `check it is not in use (${cli} ps -a --filter name=^${name}$; ${cli} logs ${name}), then remove it: ${cli} rm ${name}`,
    'sparkctl never replaces a container it cannot prove it launched',
  ];
}

/** One replica's container run line, for the marker of its launch (dry run: "<marker>"). */
export function renderContainer(x: ReplicaRun, cli: ContainerCli, marker: string, detached = true): ContainerPlan {
  return renderContainerRun({ ...x, cli, marker, detached });
}

/**
 * Refuse a container plan that the runtime would run wrongly or a later verb could not read: a mount
 * whose host path is missing, container.cliArgs of a form sparkctl does not write.
 */
function refuseBadSpec(cp: ContainerPlan): void {
  // docker creates a missing bind source as an empty root-owned folder (podman refuses it): a typo in
  // model.path or container.mounts would leave a folder sparkctl did not mean to make, and serve nothing
  const missing = cp.spec.mounts.find((m) => !existsSync(m.host));
  if (missing)
    throw new UsageError(`container mount ${missing.host}: not on this host (from model.path or container.mounts)`, [
      'fix the path in the profile, or make the folder first: sparkctl never lets the container runtime create it',
    ]);
  // what is recorded must read back: a record whose options are not of the forms sparkctl writes is
  // refused as corrupt by every later verb (engine/runtime/cli-words.ts), so such options are refused here
  const badArgs = cliArgsProblem(cp.cliArgs);
  if (badArgs)
    throw new UsageError(`container.cliArgs: ${badArgs}`, [
      'set container.cliArgs to the global options listed, or leave it empty',
    ]);
}

/** Refuse the launch where a container of its name is already there (or the CLI cannot be asked). */
function refuseExisting(cp: ContainerPlan): void {
  // A container of this name: a leftover of an earlier run, or someone else's. Never replaced.
  const seen = cliRun(
    withCliArgs([cp.cli, 'inspect', '--type', 'container', '--format', '{{.Id}}', cp.name], cp.cliArgs),
    { timeoutMs: 15_000 },
  );
  if (seen.error)
    throw new UsageError(`runtime container: ${seen.error}`, [
      `install ${cp.cli}, or --set container.cli=docker|podman, or --runtime host`,
    ]);
  if (seen.code === 0 && seen.stdout.trim())
    throw new UsageError(
      `a container named ${cp.name} already exists (${seen.stdout.trim().slice(0, 12)})`,
      leftoverFix(cp.cli, cp.name),
    );
}

/** The plan's argv with `--cidfile FILE` right after `run`, so that the runtime writes the id there at create. */
function withCidfile(cp: ContainerPlan, cidFile: string): string[] {
  const at = 1 + cp.cliArgs.length + 1; // [cli, ...cliArgs, 'run', HERE ...]
  if (cp.argv[at - 1] !== 'run')
    throw new Error(`internal: a container argv without run at ${at - 1}: ${cp.argv.slice(0, at).join(' ')}`);
  return [...cp.argv.slice(0, at), '--cidfile', cidFile, ...cp.argv.slice(at)];
}

/** A launch record with no child: pid 0 while `run` is under way, -1 once it failed (exit says why). */
function childless(
  base: Pick<Launched, 'plan' | 'marker' | 'tail' | 'container'>,
  pid: 0 | -1,
  exit: Launched['exit'],
): Launched {
  return {
    plan: base.plan,
    child: undefined as never,
    pid,
    pgid: pid,
    startTime: 0,
    marker: base.marker,
    exit,
    exited: Promise.resolve(),
    tail: base.tail,
    container: base.container,
  };
}

/** The container id `run --detach` printed: the last line of 64 hex digits (undefined where none). */
function containerIdOf(stdout: string): string | undefined {
  return stdout
    .trim()
    .split('\n')
    .map((w) => w.trim())
    .reverse()
    .find((w) => /^[a-f0-9]{64}$/.test(w));
}

export function launchContainer(
  x: ReplicaRun,
  cli: ContainerCli,
  secrets: Record<string, string>,
  record: (l: Launched) => void,
): Launched {
  const p = x.replica;
  const marker = randomUUID();
  // a replica on --uds: its folder made and checked ours before the mount is checked, a stale socket removed
  if (p.uds) prepareReplicaSocket(p.uds);
  const cp = renderContainer(x, cli, marker);
  refuseBadSpec(cp);
  refuseExisting(cp);

  // argv names the key, never holds it: it may be logged
  // sparkctl's own record of this launch, before `run`: the marker it chose and where `run
  // --cidfile` writes the id (at create, so a sparkctl killed during `run` still has it). This, not
  // the container's labels, is what later proves the container ours.
  const ledger = writeLedger(x.stateDir, {
    marker,
    cli: cp.cli,
    cliArgs: cp.cliArgs,
    name: cp.name,
    instance: p.name,
    profile: x.profile.name,
    launchedAt: new Date().toISOString(),
    logFile: p.logFile,
  });
  const argv = withCidfile(cp, ledger.cidFile);
  const { fd, tail } = openLaunchLog(p.logFile, 'server log', argv);
  rememberCli(x.stateDir, cp.cli, cp.cliArgs);
  const rec: ContainerRecord = {
    cli: cp.cli,
    cliArgs: cp.cliArgs,
    name: cp.name,
    image: cp.image,
    cidFile: ledger.cidFile,
  };
  const base = { plan: p, marker, tail, container: rec };
  const failed = (error: string): Launched => {
    closeSync(fd);
    return childless(base, -1, { code: null, signal: null, error });
  };
  // Recorded before `run`: a sparkctl killed while the runtime creates it leaves an entry whose
  // cid file names the container.
  record(childless(base, 0, undefined));
  const run = cliRun(argv, { env: { ...process.env, ...secrets }, timeoutMs: 300_000 });
  if (run.stderr) writeSync(fd, run.stderr.endsWith('\n') ? run.stderr : `${run.stderr}\n`);
  if (run.error || run.code !== 0)
    return failed(
      `${cp.cli} run failed: ${(run.error ?? failureLine(run.stderr) ?? `exit ${run.code}`).slice(0, 400)}`,
    );
  const id = containerIdOf(run.stdout);
  if (!id) return failed(`${cp.cli} run printed no container id: ${JSON.stringify(run.stdout.slice(0, 200))}`);
  rec.id = id;
  // no marker in its environment: it is no server of its own (the orphan scan reads markers); it is
  // proven by its pid and start time, recorded below, and its argv
  const child = spawn(cp.cli, [...cp.cliArgs, 'logs', '-f', id], {
    detached: true,
    stdio: ['ignore', fd, fd],
    env: process.env,
  });
  closeSync(fd);
  // the follower ends with the container: its own exit code says nothing about the server's
  const l = childRecord(
    { plan: p, container: rec },
    child,
    marker,
    tail,
    (e) => `${cp.cli} logs: ${e.message}`,
    (code) => (code === 0 ? 1 : code),
  );
  if (l.pid > 0 && l.startTime > 0) rec.follower = { pid: l.pid, startTime: l.startTime };
  record(l);
  return l;
}

/**
 * End a log follower that outlived its container. It normally ends on its own a moment after the
 * container (settleMs); podman's `logs -f` can miss that end under load and follow a removed
 * container forever (a CI run left one). Proven by what sparkctl recorded at its launch, the pid and
 * its start time (the kernel's, so a reused pid is another process), and its argv still following
 * this container; anything else is left alone. Whether none of it is left.
 */
export async function endFollower(rec: ContainerRecord, settleMs: number, graceMs = 1000): Promise<boolean> {
  const f = rec.follower;
  // a record from before followers were recorded: the moment, as before
  if (!f) return (await pause(settleMs), true);
  const id = { pid: f.pid, pgid: f.pid, startTime: f.startTime };
  const ours = () => proveIdentity(id).state === 'alive' && follows(f.pid, rec.id);
  if ((await pollUntil(ours, (o) => !o, { deadlineMs: settleMs, intervalMs: 50 })).done) return true;
  return (await stopGroup(id, graceMs)) !== 'unproven';
}

/** The process's argv ends in `logs -f ID` (read bounded; one that cannot be read follows nothing). */
function follows(pid: number, containerId: string | undefined): boolean {
  if (!containerId) return false;
  try {
    return readTextSync(`/proc/${pid}/cmdline`, { maxBytes: READ_LIMITS.proc }).endsWith(
      `\0logs\0-f\0${containerId}\0`,
    );
  } catch {
    return false;
  }
}
/** Readiness "ours": the container we ran (id and marker label) is running; proven once, then kept. */
export function containerOurs(l: Launched): () => boolean {
  let proven = false;
  return () => {
    if (proven) return true;
    if (!l.container?.id || l.exit) return false;
    proven = proveRecord(l.container, l.marker).state === 'alive';
    return proven;
  };
}
