// Ray in containers: vLLM in the head's container is proven by its pid and start time, read inside
// the container proven by ID, and stopped by the one stop (engine/cluster/ray-containers.ts
// readInHead / stopVllmInHead over node-proc.ts). The container is a stand-in here: `podman` is a
// shell function that answers `inspect` with the recorded ID (or another one, or "no such
// container") and runs `exec ID sh -c SCRIPT` on this host, so the proof's scripts and signals are
// real, against real process groups; only the container runtime is not (test/e2e/
// multinode-ray-containers.test.ts runs it for real where podman can start containers in the nodes).
import { describe, it, expect, afterAll } from 'vitest';
import { execa } from 'execa';
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readInHead, stopVllmInHead } from '../../src/engine/cluster/ray-containers.js';
import { VLLM_PID_FILE } from '../../src/engine/cluster/containers.js';
import { groupMembers } from '../../src/engine/runtime/proc.js';
import { processStartTime } from '../../src/util/pid.js';
import type { NodesFile } from '../../src/profiles/schema.js';
import { tempDir, rmrf } from '../helpers.js';

const ID = 'a'.repeat(64);
const nf = { head: { name: 'n0', address: '10.0.0.1' }, workers: [] } as unknown as NodesFile;
const head = { node: 'n0', containerId: ID, cli: ['podman'] };
const dir = tempDir('sparkctl-inhead-');
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children)
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {}
  rmrf(dir);
});

type Container = 'ours' | 'other' | 'gone';
/** The node's shell, with `podman` standing for the head's container (its pid file at `pidFile` on this host). */
const shellOf = (container: Container, pidFile: string) => async (cmd: string, o: { timeoutMs: number }) => {
  const fake = [
    'podman() {',
    '  case "$1" in',
    `    inspect) ${container === 'gone' ? 'echo "Error: no such container" >&2; return 125;;' : `echo ${container === 'other' ? 'b'.repeat(64) : ID}; return 0;;`}`,
    `    exec) shift; [ "$1" = --detach ] && shift; shift; s=$(printf '%s' "$3" | sed "s#${VLLM_PID_FILE}#${pidFile}#g"); sh -c "$s";;`,
    '  esac',
    '}',
  ].join('\n');
  const r = await execa('sh', ['-c', `${fake}\n${cmd}`], { reject: false, timeout: o.timeoutMs });
  return { exitCode: r.exitCode ?? null, stdout: String(r.stdout), stderr: String(r.stderr) };
};

/** A group leader of its own running `body` (as the exec'd shell that became vLLM), its pid in a pid file. */
function leader(body: string): { c: ChildProcess; pidFile: string } {
  const c = spawn('sh', ['-c', body], { detached: true, stdio: 'ignore' });
  children.push(c);
  const pidFile = join(dir, `pid-${c.pid}`);
  writeFileSync(pidFile, `${c.pid}\n`);
  return { c, pidFile };
}
const alive = (pid: number) => groupMembers(pid).includes(pid);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.concurrent('vLLM in the head container: pid and start time, read inside the container proven by ID', () => {
  it('readInHead: a group leader: its pid and kernel start time', async () => {
    const { c, pidFile } = leader('exec sleep 30');
    await sleep(100);
    expect(await readInHead(nf, head, undefined, shellOf('ours', pidFile))).toEqual({ pid: c.pid, startTime: processStartTime(c.pid!) });
  });

  it.each<[string, string]>([
    ['not a number', 'abc'],
    ['a number with junk', '123abc'],
    ['pid 1 (the container init)', '1'],
    ['a negative pid', '-5'],
    ['no such process', '999999999'],
  ])('readInHead: a pid file with %s: nothing recorded', async (_, text) => {
    const pidFile = join(dir, `bad-${text.replace(/\W/g, '_')}`);
    writeFileSync(pidFile, text);
    expect(await readInHead(nf, head, undefined, shellOf('ours', pidFile))).toBeUndefined();
  });

  it('readInHead: a process that does not lead its own group: nothing recorded (the one proof wants a leader)', async () => {
    const { pidFile } = leader('sleep 30 & echo $! > /dev/null; wait');
    // the member, not the leader, named in the pid file
    await sleep(200);
    const member = (await execa('sh', ['-c', `ps -eo pid=,ppid= | awk -v p=${children.at(-1)!.pid} '$2 == p { print $1 }'`])).stdout.trim().split('\n')[0]!;
    writeFileSync(pidFile, `${member}\n`);
    expect(await readInHead(nf, head, undefined, shellOf('ours', pidFile))).toBeUndefined();
  });

  it('readInHead: the container not provably ours: nothing read', async () => {
    const { pidFile } = leader('exec sleep 30');
    expect(await readInHead(nf, head, undefined, shellOf('other', pidFile))).toBeUndefined();
  });

  it.each<[string, string, Container, number, number, 'stopped' | 'killed' | 'unproven' | undefined, boolean]>([
    // name, the process's body, the container's answer, the recorded start time's offset, the grace (s), the state, alive after
    ['the recorded process ends on TERM: stopped', 'exec sleep 30', 'ours', 0, 10, 'stopped', false],
    ['a process that ignores TERM is killed after the grace', `trap '' TERM; while :; do sleep 0.1; done`, 'ours', 0, 1, 'killed', false],
    ['another start time (the pid reused in the container): not signalled, left to the container stop', 'exec sleep 30', 'ours', -7, 1, undefined, true],
    ['the container answers another ID: unproven, nothing signalled', 'exec sleep 30', 'other', 0, 1, 'unproven', true],
    ['the container gone: vLLM gone with it, nothing signalled', 'exec sleep 30', 'gone', 0, 1, 'stopped', true],
  ])('stop: %s', async (_, body, container, offset, graceS, state, after) => {
    const { c, pidFile } = leader(body);
    await sleep(200);
    const x = await stopVllmInHead(nf, head, { pid: c.pid!, startTime: processStartTime(c.pid!)! + offset }, graceS, undefined, shellOf(container, pidFile));
    expect(x?.state).toBe(state);
    expect(alive(c.pid!)).toBe(after);
  });

  it('stop: nothing recorded (a record from before): nothing signalled here', async () => {
    expect(await stopVllmInHead(nf, head, undefined, 1)).toBeUndefined();
  });
});
