// Ray in containers, launched as vLLM's examples/online_serving/run_cluster.sh does it: one
// container per node on the host's network with that node's GPUs, /dev/infiniband and the memlock
// limit, running `ray start --block` (--head on the head node, --address HEAD:PORT on the others);
// vLLM is started inside the head's container with `exec`. Order: the head's container, until its
// Ray answers `ray status` there; every worker's container, concurrently; until Ray (asked inside the
// head's container) lists exactly the nodes and GPUs of the file; vLLM exec'd in the head's
// container; then the same readiness as on the host (rayWatch), with every node's container
// watched too. Right after the exec, vLLM's process is found on the head's host (the pid its shell
// wrote in the container, mapped through the container's pid namespace: hostPidLine) and proven
// there by the one proof (its group, its start time, the instance marker the exec gave it); its pid
// and start time go in the record (inHead). Stop: vLLM first, by the one stop over the head's shell
// (node-proc.ts: SIGTERM, its API drains, SIGKILL after the grace), then every container on every
// node, each proven by the ID its `run` got back (node-container.ts). The proof reads on the node's
// host, never with the image's tools: an image need not have ps, awk, sed or head (this suite's has
// none of them, which is why reading inside the container recorded nothing: s5 note).
import type { NodesFile, NodeEntry } from '../../profiles/schema.js';
import { Registry, type ClusterRecord } from '../registry.js';
import { randomUUID } from 'node:crypto';
import { diagnose, failedBefore, type Diagnosis } from '../diagnose.js';
import { ssh, remoteWhy } from './ssh.js';
import { REMOTE_UNPROVEN_EXIT, nodeProc, stopOnNode, sshShell, NodeUnreachable, type NodeShell } from './node-proc.js';
import { INSTANCE_ENV } from '../runtime/proc.js';
import { shellQuote } from '../../output/format.js';
import { fabricAddress, nodeOf, parseRayStatus, type NodeStep } from './ray-plan.js';
import { rayReadLines } from './ray-read.js';
import { pollUntil } from '../../util/poll.js';
import { rayWatch, rayStatus, waitForCluster, type ClusterVia, type EngineWatch, type HeadLaunch } from './ray.js';
import type { ClusterPlan } from '../plan.js';
import {
  endedOnNodes,
  refuseRecorded,
  type NodesPlacement,
  type ClusterStatus,
  type RunCtx,
  type StopClusterOutcome,
} from './common.js';
import {
  aliveLine,
  cliLine,
  execLine,
  logsLine,
  provenGuard,
  refOf,
  runOnNode,
  stopAllContainers,
  type NodeContainerRef,
} from './node-container.js';
import { groupsOf, launchInOrder, stepOf } from '../groups.js';
import { VLLM_PID_FILE } from './containers.js';

const at = (n: NodeEntry) => `${n.name} (${n.address})`;

/** The head's Ray answering inside its container (`ray status`), its container running; a deadline of `joinS`. */
async function headRayUp(
  plan: ClusterPlan,
  head: NodeContainerRef,
  joinS: number,
  signal?: AbortSignal,
): Promise<Diagnosis | undefined> {
  const { nf } = plan;
  const cancelled = failedBefore('interrupted', 'cancelled while waiting for the Ray head', []);
  if (signal?.aborted) return cancelled;
  const status = rayReadLines(nf, head).status;
  let last = '';
  let endedAs = '';
  // one reading: Ray answering, or why not and whether the container ended
  const read = async () => {
    const r = await ssh(nf, nf.head, status, { timeoutMs: 30_000, signal });
    if (r.exitCode === 0 && parseRayStatus(r.stdout)) return { up: true, ended: false };
    last = remoteWhy(r, 2);
    const gone = await ssh(nf, nf.head, aliveLine(head), { timeoutMs: 15_000, signal });
    // exit 9 prints the runtime's "STATUS EXITCODE" (nothing when it no longer knows the container)
    if (gone.exitCode === 9) endedAs = endedWords(gone.stdout) && ` (${endedWords(gone.stdout)})`;
    return { up: false, ended: gone.exitCode === 9 };
  };
  const p = await pollUntil(read, (x) => x.up || x.ended, { deadlineMs: joinS * 1000, intervalMs: 1000, signal });
  if (p.value.up) return undefined;
  if (!p.done && p.reason === 'aborted') return cancelled;
  const logs = (await ssh(nf, nf.head, logsLine(head, 20), { timeoutMs: 15_000 })).stdout.trim().split('\n');
  return failedBefore(
    'not-started',
    `Ray head on ${at(nf.head)} did not start in its container ${head.containerId.slice(0, 12)}: ${p.value.ended ? `the container ended${endedAs}: ${logs.at(-1) ?? ''}` : `ray status did not answer within ${joinS} s (${last})`}`,
    logs.slice(-10).map((l) => `${nf.head.name}: ${l}`),
    {
      fix: `read its output: ${head.cli[0]} logs ${head.containerId.slice(0, 12)} on ${nf.head.name}; sparkctl preflight --nodes ${plan.nodesFile}`,
      node: nf.head.name,
    },
  );
}

/**
 * aliveLine's "STATUS EXITCODE" of an ended container as words ("exited, exit code 137"), or '' for an answer of
 * another shape.
 */
export function endedWords(stdout: string): string {
  const m = /^(exited|stopped|dead) (-?\d{1,4})$/.exec(stdout.trim().split('\n')[0] ?? '');
  return m ? `${m[1]}, exit code ${m[2]}` : '';
}

/** The containers that ended, each named by node with the last line of its output. undefined: all run. */
async function endedContainers(
  plan: ClusterPlan,
  refs: NodeContainerRef[],
  what: string,
): Promise<Diagnosis | undefined> {
  const { nf } = plan;
  const seen = await Promise.all(
    refs.map(async (r) => ({ r, x: await ssh(nf, nodeOf(nf, r.node), aliveLine(r), { timeoutMs: 15_000 }) })),
  );
  const gone = seen.filter(({ x }) => x.exitCode === 9).map(({ r }) => r);
  if (!gone.length) return undefined;
  const how = new Map(seen.map(({ r, x }) => [r, endedWords(x.stdout) && `, ${endedWords(x.stdout)}`]));
  const parts = await Promise.all(
    gone.map(async (r) => {
      const text = (await ssh(nf, nodeOf(nf, r.node), logsLine(r, 40), { timeoutMs: 15_000 })).stdout;
      return { r, d: diagnose({ reason: 'exited', detail: 'exited', ms: 0 }, text), text, node: r.node };
    }),
  );
  return endedOnNodes(
    parts,
    parts
      .map(
        ({ r, d, text }) =>
          `${what} on ${at(nodeOf(nf, r.node))} ended (container ${r.containerId.slice(0, 12)}${how.get(r) ?? ''})${d.cause ? `: ${d.cause}` : text.trim() ? `: ${text.trim().split('\n').pop()}` : ''}`,
      )
      .join('\n'),
    parts.flatMap(({ r, text }) =>
      text
        .trim()
        .split('\n')
        .slice(-6)
        .map((l) => `${r.node}: ${l}`),
    ),
    `read its output on ${parts[0]!.r.node}: ${parts[0]!.r.cli[0]} logs ${parts[0]!.r.containerId.slice(0, 12)}; sparkctl preflight --nodes ${plan.nodesFile}`,
  );
}

/** The plan's exec line in the head's container, as what follows the container's name: the command exec runs. */
function execCommand(plan: ClusterPlan): string[] {
  const s = plan.steps[0]!;
  const exec = s.argv[1];
  const name = s.container!.name;
  const i = exec ? exec.indexOf(name) : -1;
  if (!exec || i < 0) throw new Error(`internal: the head's Ray step has no exec line in ${name}`);
  return exec.slice(i + 1);
}

/** vLLM started in the head's container, through exec (the key by name from the CLI's environment, read from stdin). */
async function execVllm(
  plan: ClusterPlan,
  head: NodeContainerRef,
  marker: string,
  signal?: AbortSignal,
): Promise<Diagnosis | undefined> {
  const { nf } = plan;
  const key = plan.apiKey;
  // the instance marker in vLLM's own environment (by name, as the key): what the one proof reads on the host
  const cmd = [
    key ? 'IFS= read -r VLLM_API_KEY; export VLLM_API_KEY' : ':',
    `${INSTANCE_ENV}=${shellQuote(marker)}; export ${INSTANCE_ENV}`,
    execLine(head, execCommand(plan), { detach: true, envByName: [...(key ? ['VLLM_API_KEY'] : []), INSTANCE_ENV] }),
  ].join('; ');
  const r = await ssh(nf, nf.head, cmd, { input: key ? `${key}\n` : undefined, timeoutMs: 60_000, signal });
  if (r.exitCode !== 0)
    return failedBefore(
      'not-started',
      `vLLM did not start in the head's container on ${at(nf.head)}: ${head.cli[0]} exec: ${remoteWhy(r)}`,
      (r.stderr || r.stdout).trim().split('\n').slice(-6),
      {
        node: nf.head.name,
      },
    );
  return undefined;
}

/**
 * Whether vLLM in the head's container runs: exit 0 yes (or its pid file is not written yet: the exec'd
 * shell writes it a moment after exec returns), 9 its pid is gone (the shell's 9) or the container
 * ended (aliveLine's 9); an exec the runtime failed (125-127: a busy podman) while the container runs
 * is no answer (5), never "gone".
 */
export function vllmInHeadAlive(head: NodeContainerRef): string {
  const exec = execLine(head, [
    'sh',
    '-c',
    `[ -s ${VLLM_PID_FILE} ] || exit 0; read -r p < ${VLLM_PID_FILE}; kill -0 "$p" 2>/dev/null || exit 9`,
  ]);
  return `{ ${exec}; }; rc=$?; case $rc in 0|9) exit $rc;; esac; ( ${aliveLine(head)} ) >/dev/null; [ $? -eq 9 ] && exit 9; exit 5`;
}

/**
 * Readiness watch of vLLM in the head's container: its pid (kept there by VLLM_IN_HEAD), the container's output, every
 * node's container.
 */
function containerWatch(plan: ClusterPlan, refs: NodeContainerRef[]): EngineWatch {
  const head = refs[0]!;
  return {
    alive: vllmInHeadAlive(head),
    tail: (n) => logsLine(head, n),
    via: { head, ended: () => endedContainers(plan, refs, 'the Ray container') },
  };
}

/**
 * Ray in containers as a placement for serve's one loop: before, the head's container until its Ray
 * answers, every worker's container (together), then until Ray (asked in the head's container) lists
 * the whole cluster; the head's group's vLLM is exec'd into its container, the record (every
 * container by the ID its run got back) written first; the watch adds every node's container; a
 * failure stops vLLM, then every container.
 */
export function rayContainersPlacement(plan: ClusterPlan, ctx: RunCtx): NodesPlacement<HeadLaunch> {
  const { nf } = plan;
  const emit = ctx.emit ?? (() => {});
  const signal = ctx.signal;
  const marker = randomUUID();
  const joinS = plan.joinTimeoutS ?? 90;
  const refs: NodeContainerRef[] = [];
  const registry = new Registry(plan.stateDir);
  return {
    // the runtime's own refusal (the same image on every node) is added after this one by the executor (node-runtime.ts
    // placed)
    refuse: async (r) => refuseRecorded(plan, r),
    before: async () => {
      // 1-2. the head's container until its Ray answers, then every worker's, concurrently
      const named = (s: NodeStep, error: string) =>
        s.role === 'head'
          ? `Ray head container on ${at(nodeOf(nf, s.node))} did not start: ${error}`
          : `node ${s.node} (${s.address}) failed to join the Ray cluster: its container did not start: ${error}`;
      const launched = await launchInOrder(
        groupsOf(plan),
        async (g) => {
          const s = stepOf(g);
          const r = await runOnNode(nf, nodeOf(nf, s.node), s, marker, undefined, signal);
          return 'error' in r ? { error: named(s, r.error), evidence: r.evidence } : r;
        },
        undefined,
        undefined,
        async (head) => {
          const up = await headRayUp(plan, head, joinS, signal);
          if (!up) emit({ type: 'ray-head', node: nf.head.name });
          return up;
        },
      );
      refs.push(...launched.refs);
      if (launched.failure) return { failure: launched.failure };
      // 3. Ray, asked in the head's container, lists exactly the file's nodes and GPUs (a worker whose container ended
      //    is named at once)
      const via: ClusterVia = { head: refs[0]!, ended: () => endedContainers(plan, refs, 'the Ray container') };
      const cluster = await waitForCluster(plan, signal, via);
      if ('failure' in cluster) {
        cluster.failure.fix ??= `check that every node can reach ${fabricAddress(nf.head)}:${nf.rayPort}`;
        return cluster;
      }
      // the workers joined once the head's Ray lists them (a container that runs is not yet a node that joined)
      emit({ type: 'ray-workers', nodes: nf.workers.map((w) => w.name) });
      emit({ type: 'ray-cluster', nodes: cluster.view.nodes, gpus: cluster.view.gpus });
      return cluster;
    },
    // 4. vLLM in the head's container; the record holds every container by the ID its run got back, written before the
    //    exec
    launch: async () => {
      const head = refs[0]!;
      const record = containersRecord(plan, refs, marker);
      registry.write('nodes', record);
      const noExec = await execVllm(plan, head, marker, signal);
      if (noExec) {
        registry.remove('nodes', plan.profile.name);
        return { error: noExec.detail, evidence: noExec.lastLines };
      }
      // what proves vLLM ours from now on: its process on the head's host, proven there at once
      const inHead = await readInHead(sshShell(nf, nf.head), head, marker, signal);
      if (inHead) Object.assign(record, { inHead });
      return { ref: { node: nf.head.name, pid: 0, logFile: record.logFile, record } };
    },
    record: ([head]) => head!.record,
    watch: (_record, start) => rayWatch(plan, emit, signal, containerWatch(plan, refs), start),
    joined: (_record, view) => view!,
    stop: async (_launched, record) => {
      if (record) await stopVllmInHead(nf, refs[0]!, record, 5);
      for (const x of await stopAllContainers(nf, refs, 5))
        emit({
          type: 'cleanup',
          node: x.node,
          what: x.state === 'stopped' ? 'container removed' : `container left: ${x.detail}`,
        });
    },
  };
}

/**
 * The record of Ray in containers: every node's container by the ID its run got back (vLLM's log is the head
 * container's output).
 */
function containersRecord(plan: ClusterPlan, refs: NodeContainerRef[], marker: string): ClusterRecord {
  const head = refs[0]!;
  return {
    version: 1,
    executor: 'ray',
    profile: plan.profile.name,
    nodesFile: plan.nodesFile,
    head: plan.nf.head.name,
    pid: 0,
    port: plan.replica.port,
    url: `http://${plan.nf.head.address}:${plan.replica.port}`,
    servedName: plan.servedName,
    logFile: `${head.cli[0]} logs ${head.containerId.slice(0, 12)}`,
    startedAt: new Date().toISOString(),
    ...(plan.launch ? { launch: plan.launch } : {}),
    marker,
    ranks: refs.map((r, rank) => ({
      node: r.node,
      rank,
      pid: 0,
      marker,
      logFile: `${r.cli[0]} logs ${r.containerId.slice(0, 12)}`,
      containerId: r.containerId,
      cli: r.cli,
    })),
  };
}

/**
 * vLLM's own SIGTERM inside the head's container, `graceS` for its drain, then SIGKILL: exit 0 it
 * ended (or was not running), 3 it was killed, 9 the container is gone, 4 the container is not
 * provably ours.
 */
function vllmStopLine(head: NodeContainerRef, graceS: number): string {
  const polls = Math.max(0, Math.round(graceS * 10));
  return execLine(head, [
    'sh',
    '-c',
    `[ -s ${VLLM_PID_FILE} ] || exit 0; read -r p < ${VLLM_PID_FILE}; kill -TERM "$p" 2>/dev/null || exit 0; i=0; while kill -0 "$p" 2>/dev/null; do i=$((i+1)); if [ $i -gt ${polls} ]; then kill -KILL "$p" 2>/dev/null; exit 3; fi; sleep 0.1; done; exit 0`,
  ]);
}

/**
 * The shell, on the head's host, that names vLLM's process there: the pid its shell wrote in the head's
 * container (read through the runtime's exec behind the container's proof by ID, at most 24 bytes,
 * digits only) is a pid in the container's pid namespace; the host process whose NSpid ends with it,
 * in that same namespace (the container's init's, from inspect), is it. Prints `@host PID`; exit 7:
 * not (yet) there; 8: the pid file holds no pid; 9: the container is gone; 4: the container is not
 * provably ours.
 */
function hostPidLine(head: NodeContainerRef): string {
  const inspect = cliLine(head, ['inspect', '--type', 'container', '--format', '{{.State.Pid}}', head.containerId]);
  const cat = cliLine(head, ['exec', head.containerId, 'cat', VLLM_PID_FILE]);
  return [
    provenGuard(head),
    `c=$(${inspect} 2>/dev/null); case "$c" in ''|0|*[!0-9]*) exit 7;; esac`,
    `i=$(${cat} 2>/dev/null | head -c 24 | tr -d ' \\n'); case "$i" in '') exit 7;; *[!0-9]*) exit 8;; esac`,
    'ns=$(readlink /proc/$c/ns/pid) || exit 7',
    // only a process in a nested pid namespace (NSpid has two fields or more) whose innermost pid is $i, then the one
    // in the container's
    `for d in $(grep -H '^NSpid:' /proc/[0-9]*/status 2>/dev/null | awk -v i="$i" 'NF > 2 && $NF == i { sub(/[/]status:.*/, "", $1); print $1 }'); do [ "$(readlink $d/ns/pid 2>/dev/null)" = "$ns" ] && { echo "@host \${d#/proc/}"; exit 0; }; done`,
    'exit 7',
  ].join('\n');
}

/** The pid hostPidLine printed (the last line, as hostile as any node's answer). */
export function hostPidFrom(stdout: string): number | undefined {
  const m = /^@host (\d{1,9})$/.exec(stdout.trim().split('\n').pop()?.trim() ?? '');
  return m && Number(m[1]) > 1 ? Number(m[1]) : undefined;
}

/**
 * vLLM's process on the head's host, proven by the one proof's facts right after the exec: the leader
 * of its own group (podman/runc exec starts it so: pid = pgid = sid, checked in a real container), with
 * the marker its exec gave it; its pid and start time then prove it at every stop. undefined: not found
 * within 5 s, or not proven (nothing is recorded, and the stop falls back: stopVllmInHead).
 */
export async function readInHead(
  shell: NodeShell,
  head: NodeContainerRef,
  marker: string,
  signal?: AbortSignal,
  tries = 20,
): Promise<ClusterRecord['inHead']> {
  // the pid file is written a moment after exec returns: a few tries, bounded
  for (let i = 0; i < tries && !signal?.aborted; i++) {
    const r = await shell(hostPidLine(head), { timeoutMs: 15_000, signal });
    const pid = r.exitCode === 0 ? hostPidFrom(r.stdout) : undefined;
    if (pid) {
      try {
        const facts = await nodeProc(shell).facts({ pid, pgid: pid });
        const startTime = facts.startTime(pid);
        return startTime && facts.groupMembers(pid).includes(pid) && facts.marker(pid) === marker
          ? { pid, startTime }
          : undefined;
      } catch (e) {
        if (e instanceof NodeUnreachable) return undefined;
        throw e;
      }
    }
    if (r.exitCode !== 7) return undefined;
    await new Promise((res) => setTimeout(res, 250));
  }
  return undefined;
}

/**
 * vLLM in the head's container stopped. Recorded at launch (inHead): the one stop over the head's
 * shell, proven by its pid, start time and marker (a process that is not it is never signalled:
 * 'unproven'). A record without it (written before, or a launch whose vLLM was not found): vLLM's
 * SIGTERM from its pid file inside the head's container, proven by ID, as before.
 */
async function stopVllmInHead(
  nf: NodesFile,
  head: NodeContainerRef,
  record: Pick<ClusterRecord, 'inHead' | 'marker' | 'head'>,
  graceS: number,
  signal?: AbortSignal,
): Promise<StopClusterOutcome['engine']> {
  if (record.inHead) {
    const x = await stopOnNode(sshShell(nf, nf.head), { ...record.inHead, marker: record.marker }, graceS, signal);
    return { node: record.head, ...x };
  }
  const x = await ssh(nf, nf.head, vllmStopLine(head, graceS), { timeoutMs: (graceS + 30) * 1000, signal });
  return {
    node: record.head,
    state:
      x.exitCode === 0 || x.exitCode === 9
        ? 'stopped'
        : x.exitCode === 3
          ? 'killed'
          : x.exitCode === REMOTE_UNPROVEN_EXIT
            ? 'unproven'
            : 'failed',
    detail: x.exitCode === 0 || x.exitCode === 3 || x.exitCode === 9 ? undefined : remoteWhy(x, 1),
  };
}

/**
 * A recorded Ray-in-containers cluster: vLLM in the head's container first (it drains), then every node's container.
 */
export async function stopRayContainers(
  nf: NodesFile,
  record: ClusterRecord,
  timeoutS: number,
  signal?: AbortSignal,
): Promise<StopClusterOutcome> {
  const refs = (record.ranks ?? []).map(refOf).filter((r): r is NodeContainerRef => !!r);
  const head = refs.find((r) => r.node === record.head);
  let engine: StopClusterOutcome['engine'] = { node: record.head, state: 'not-recorded' };
  if (head) engine = await stopVllmInHead(nf, head, record, timeoutS, signal);
  // the recorded process is not vLLM any more (vLLM ended; its pid reused): nothing was signalled; vLLM's
  // container, proven by its ID, is still stopped below, and ends whatever of it is left inside
  const processGone = !!record.inHead && engine.state === 'unproven';
  // a head container not provably ours is left alone, and so is the rest of what it names
  const stops = engine.state === 'unproven' && !processGone ? [] : await stopAllContainers(nf, refs, timeoutS, signal);
  const headStop = stops.find((x) => x.node === record.head);
  if (processGone && headStop)
    engine =
      headStop.state === 'stopped'
        ? { node: record.head, state: 'stopped' }
        : { node: record.head, state: headStop.state, detail: headStop.detail };
  return {
    engine,
    ray: stops.map((x) => ({
      node: x.node,
      ok: x.state === 'stopped',
      detail: x.state === 'stopped' ? `container ${x.id.slice(0, 12)} removed` : (x.detail ?? x.state),
    })),
  };
}

export async function statusRayContainers(
  record: ClusterRecord,
  nf: NodesFile | undefined,
  signal?: AbortSignal,
): Promise<ClusterStatus> {
  const head = (record.ranks ?? []).map(refOf).find((r) => r?.node === record.head);
  return rayStatus(record, nf, signal, head);
}
