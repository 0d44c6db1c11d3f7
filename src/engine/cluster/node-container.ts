// A container on a remote node, driven over ssh: the one place that launches, watches, reads and
// stops the containers of both executors (native: a vLLM rank per node; Ray: `ray start --block`
// per node, vLLM exec'd in the head's). Identity is sparkctl's own: the full container ID that the
// runtime wrote into a --cidfile in a folder this launch made on the node (the ID `run --detach`
// prints is read from there, so a run that fails after create is removed by that ID too), recorded
// in the cluster record. A label or a name is what a container says about itself: never a proof.
import type { NodesFile, NodeEntry } from '../../profiles/schema.js';
import type { ClusterRank } from '../registry.js';
import { shellQuote } from '../../output/format.js';
import { ssh, remoteWhy, type Remote } from './ssh.js';
import { REMOTE_UNPROVEN_EXIT } from './node-proc.js';
import { MARKER_PLACEHOLDER } from './containers.js';
import { stopArgv, withCliArgs, type ContainerCli } from '../runtime/container.js';
import { allNodes, type NodeStep } from './ray-plan.js';
import { cliLineProblem } from '../runtime/cli-words.js';

/** A full container ID as the runtimes print it: the only thing that names one container for good. */
const CONTAINER_ID = /^[a-f0-9]{64}$/;

/** What a launched container is known by: the node, the CLI that runs it and the ID it got back. */
export interface NodeContainerRef {
  node: string;
  containerId: string;
  /** [cli, ...cliArgs] */
  cli: string[];
}

const line = (cli: string[], args: string[]) => [...cli, ...args].map(shellQuote).join(' ');

/**
 * The shell that runs a node's `run --detach` line with `--cidfile` in a fresh folder: prints the
 * ID the runtime wrote there (exit 0), or, when the run failed, removes the container that ID names
 * (a failure after create) and exits with the run's code. `argv`: the planned line, marker in place.
 */
export function runLine(argv: string[], cliLen: number, withKey: boolean): string {
  const at = cliLen + 1;
  if (argv[at - 1] !== 'run')
    throw new Error(`internal: a container line without run at ${at - 1}: ${argv.slice(0, at + 1).join(' ')}`);
  const cli = argv.slice(0, cliLen);
  const run = [...argv.slice(0, at), '--cidfile', '__CID__', ...argv.slice(at)]
    .map((a) => (a === '__CID__' ? '"$d/cid"' : shellQuote(a)))
    .join(' ');
  return [
    withKey ? 'IFS= read -r VLLM_API_KEY; export VLLM_API_KEY' : ':',
    'd=$(mktemp -d) || exit 70',
    `${run} >"$d/out" 2>&1; rc=$?`,
    'id=$(cat "$d/cid" 2>/dev/null)',
    `if [ $rc -ne 0 ]; then cat "$d/out" >&2; case "$id" in *[!a-f0-9]*|'') ;; *) ${removeLoop(cli, '"$id"')}; [ $gone = 1 ] || printf 'container %s left after the failed run: %s\n' "$id" "$(printf '%s' "$out" | tail -n 1)" >&2;; esac; rm -rf "$d"; exit $rc; fi`,
    'rm -rf "$d"; echo "$id"',
  ].join('; ');
}

/** A container launched on its node: its ID, or the failure in the runtime's words. */
export async function runOnNode(
  nf: NodesFile,
  n: NodeEntry,
  step: NodeStep,
  marker: string,
  key: string | undefined,
  signal?: AbortSignal,
): Promise<{ ref: NodeContainerRef } | { error: string; evidence: string[] }> {
  const c = step.container!;
  const cli = [c.cli, ...c.cliArgs];
  // what is recorded must read back (engine/runtime/cli-words.ts): options of another form would make the record
  // corrupt to every later verb
  const bad = cliLineProblem(cli);
  if (bad) return { error: `container.cliArgs: ${bad}`, evidence: [] };
  const argv = step.argv[0]!.map((a) => a.replace(MARKER_PLACEHOLDER, marker));
  const r = await ssh(nf, n, runLine(argv, cli.length, !!key), {
    input: key ? `${key}\n` : undefined,
    timeoutMs: 180_000,
    signal,
  });
  const id = (r.stdout.trim().split('\n').pop() ?? '').trim();
  if (r.exitCode !== 0 || !CONTAINER_ID.test(id))
    return { error: `${c.cli} run: ${remoteWhy(r)}`, evidence: (r.stderr || r.stdout).trim().split('\n').slice(-6) };
  return { ref: { node: n.name, containerId: id, cli } };
}

/**
 * Shell that sets `s` to the runtime's answer to `inspect` (its stdout alone: a busy runtime's
 * warnings on stderr are no part of it). A failed read is asked again for its words (stderr): the
 * runtime saying "no such" container exits `goneExit`; a second failure exits 5 with its last words
 * on stderr; a second read that succeeds is asked once more for the answer. One shape for every
 * reader of a recorded container (the guard, the state), so none reads a busy runtime's failure as
 * an answer, and none reads a recovered one as a failure.
 */
function inspected(inspect: string, goneExit: number): string {
  return `s=$(${inspect} 2>/dev/null) || { e=$(${inspect} 2>&1 >/dev/null) && s=$(${inspect} 2>/dev/null) || { if printf '%s' "$e" | grep -qi 'no such'; then exit ${goneExit}; fi; printf '%s\\n' "$e" | tail -n 3 >&2; exit 5; }; }`;
}

/**
 * The guard every later step of a recorded container runs behind: the runtime is asked for the
 * container of the recorded ID; "no such container" is gone (exit `goneExit`), an answer that is not
 * that ID is unproven (4), a runtime that does not answer is a failure (5).
 */
function provenId(r: NodeContainerRef, goneExit: number): string {
  // the record's CLI words are run only when they are what sparkctl writes (the registry refuses
  // such a record as corrupt; this is the guard of any other path that hands one here)
  if (cliLineProblem(r.cli))
    return `echo 'unproven: the record names a container CLI sparkctl does not run' >&2; exit ${REMOTE_UNPROVEN_EXIT}`;
  const id = CONTAINER_ID.test(r.containerId) ? r.containerId : '';
  if (!id) return `echo 'unproven: the record holds no full container ID' >&2; exit ${REMOTE_UNPROVEN_EXIT}`;
  const inspect = line(r.cli, ['inspect', '--type', 'container', '--format', '{{.Id}}', id]);
  // the answer is its stdout alone: a busy runtime's warnings on stderr (CI: podman under load) are not another
  // container
  return [
    inspected(inspect, goneExit),
    `[ "$s" = ${id} ] || { printf 'unproven: the runtime answers %s with another container (%s)\\n' ${id.slice(0, 12)} "$(printf '%s' "$s" | head -c 80 | tr -c '[:alnum:]._:-' ' ')" >&2; exit ${REMOTE_UNPROVEN_EXIT}; }`,
  ].join('; ');
}

/**
 * The guard a script on the node's host runs first: exit 9 the container is gone, 4 not provably ours, 5 the runtime
 * did not answer.
 */
export const provenGuard = (r: NodeContainerRef) => provenId(r, 9);

/** The runtime's own command line for the recorded container (no guard: put provenGuard before it). */
export const cliLine = (r: NodeContainerRef, args: string[]) => line(r.cli, args);

/**
 * Whether the proven container runs: exit 0 running; 9 it ended (the runtime says exited, stopped or
 * dead, printing "STATUS EXITCODE" on stdout) or the runtime no longer knows it; 5 the runtime did
 * not answer (what it said on stderr) or says another state (created, paused, restarting, stopping:
 * not running, not ended). A runtime that fails to answer is never read as "ended": CI saw a busy
 * podman's failed inspect taken for a Ray head container that had ended, and the launch given up.
 * (255 is ssh failing, not an answer.)
 */
export function aliveLine(r: NodeContainerRef): string {
  const inspect = line(r.cli, [
    'inspect',
    '--type',
    'container',
    '--format',
    '{{.State.Status}} {{.State.ExitCode}}',
    r.containerId,
  ]);
  return [
    provenId(r, 9),
    // a failed read is asked once more, its stderr kept: "no such container" is gone, another failure no answer
    inspected(inspect, 9),
    `case "$s" in 'running '*) exit 0;; 'exited '*|'stopped '*|'dead '*) printf '%s\n' "$s"; exit 9;; esac`,
    `printf 'the runtime says the container is %s\n' "$(printf '%s' "$s" | head -c 80 | tr -c '[:alnum:] ._:-' ' ')" >&2; exit 5`,
  ].join('; ');
}

/**
 * The container stopped (the runtime's SIGTERM, `graceS`, SIGKILL) and removed; 0: gone (the
 * runtime's `rm` succeeded, or it no longer knows the ID), 4: not provably ours, left alone, 5: still
 * there after three `rm -f` a second apart (what the last one said on stderr). "Removed" is never
 * said on the word of a command whose exit was not read: a busy runtime's `rm` can fail.
 */
export function stopLine(r: NodeContainerRef, graceS: number): string {
  // the runtime's own stop line (docker's and podman's flags differ)
  const stop = withCliArgs(
    stopArgv(r.cli[0] as ContainerCli, r.containerId, Math.max(0, Math.round(graceS))),
    r.cli.slice(1),
  );
  return [
    provenId(r, 0),
    `${stop.map(shellQuote).join(' ')} >/dev/null 2>&1`,
    removeLoop(r.cli, r.containerId),
    `[ $gone = 1 ] && exit 0`,
    `printf 'still there after rm -f: %s\n' "$(printf '%s' "$out" | tail -n 1)" >&2; exit 5`,
  ].join('; ');
}

/**
 * Shell that removes a container and sets gone=1 once the runtime removed it or no longer knows it
 * (three `rm -f`, a second apart; `out` keeps what the last said). `id`: a checked full ID, or "$id"
 * for the shell's own variable.
 */
function removeLoop(cli: string[], id: string): string {
  const idArg = id === '"$id"' ? id : shellQuote(id);
  const rm = `${line(cli, ['rm', '-f'])} ${idArg}`;
  const inspect = `${line(cli, ['inspect', '--type', 'container', '--format', '{{.Id}}'])} ${idArg}`;
  return `gone=0; out=; for i in 1 2 3; do out=$(${rm} 2>&1) && { gone=1; break; }; s=$(${inspect} 2>&1) || { printf '%s' "$s" | grep -qi 'no such' && { gone=1; break; }; }; sleep 1; done`;
}

/** The image the proven container was created from (`inspect --format {{.Image}}`); exit 9: gone. */
export const imageLine = (r: NodeContainerRef) =>
  `${provenId(r, 9)}; ${line(r.cli, ['inspect', '--type', 'container', '--format', '{{.Image}}', r.containerId])}`;

/** The container's last lines (its output: the runtime keeps it after the container ended). */
export const logsLine = (r: NodeContainerRef, lines = 60) =>
  `${provenId(r, 9)}; ${line(r.cli, ['logs', '--tail', String(lines), r.containerId])} 2>&1`;

/** A command inside the proven container (argv, no shell of sparkctl's in between). */
export const execLine = (r: NodeContainerRef, argv: string[], opts: { detach?: boolean; envByName?: string[] } = {}) =>
  `${provenId(r, 9)}; ${line(r.cli, ['exec', ...(opts.detach ? ['--detach'] : []), ...(opts.envByName ?? []).flatMap((k) => ['--env', k]), r.containerId, ...argv])}`;

export type ContainerStopState = 'stopped' | 'unproven' | 'failed';

/** One container's stop over ssh, as the stop outcome says it. */
export async function stopOnNode(
  nf: NodesFile,
  n: NodeEntry,
  r: NodeContainerRef,
  graceS: number,
  signal?: AbortSignal,
): Promise<{ state: ContainerStopState; detail?: string; remote: Remote }> {
  const x = await ssh(nf, n, stopLine(r, graceS), { timeoutMs: (graceS + 30) * 1000, signal });
  const state = x.exitCode === 0 ? 'stopped' : x.exitCode === REMOTE_UNPROVEN_EXIT ? 'unproven' : 'failed';
  return { state, detail: state === 'stopped' ? undefined : remoteWhy(x, 1), remote: x };
}

/** Every container stopped and removed, each proven by its recorded ID: the head's first, then the rest together. */
export async function stopAllContainers(
  nf: NodesFile,
  refs: NodeContainerRef[],
  graceS: number,
  signal?: AbortSignal,
): Promise<Array<{ node: string; id: string; state: ContainerStopState; detail?: string }>> {
  const one = async (r: NodeContainerRef) => {
    const n = allNodes(nf).find((x) => x.name === r.node)!;
    const x = await stopOnNode(nf, n, r, graceS, signal);
    return { node: r.node, id: r.containerId, state: x.state, detail: x.detail };
  };
  const first = refs.filter((r) => r.node === nf.head.name);
  const out = await Promise.all(first.map(one));
  return [...out, ...(await Promise.all(refs.filter((r) => r.node !== nf.head.name).map(one)))];
}

/** A record's rank as a container reference (undefined: the rank is a host process). */
export const refOf = (r: Pick<ClusterRank, 'node' | 'containerId' | 'cli'>): NodeContainerRef | undefined =>
  r.containerId && r.cli ? { node: r.node, containerId: r.containerId, cli: r.cli } : undefined;
