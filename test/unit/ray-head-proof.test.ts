// Ray in containers: vLLM in the head's container found on the head's host and proven there by the
// one proof (ray-containers.ts hostPidLine + readInHead). Real processes in real pid namespaces on
// this host (unshare --pid, as a container's are), the node's shell is `sh` here, and the container
// runtime is a shell function standing in for podman: it answers inspect (the ID, the init's host pid)
// and `exec ID cat FILE` (the pid the exec'd shell wrote, in the container's namespace). What the real
// runtime does is pinned by test/e2e/multinode-ray-containers.test.ts (real podman on the netns nodes).
import { describe, it, expect, afterAll } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { execa } from 'execa';
import { hostPidFrom, readInHead } from '../../src/engine/cluster/ray-containers.js';
import type { NodeShell } from '../../src/engine/cluster/node-proc.js';
import type { Remote } from '../../src/engine/cluster/ssh.js';

const why =
  process.getuid?.() !== 0
    ? 'pid namespaces need root here'
    : spawnSync('unshare', ['--pid', '--fork', 'true']).status !== 0
      ? 'unshare --pid does not work here'
      : undefined;
if (why) console.warn(`ray-head-proof skipped: ${why}`);

describe('hostPidFrom: the answer is hostile', () => {
  it.each<[string, string, number | undefined]>([
    ['one line', '@host 4242\n', 4242],
    ['the last line counts (a warning before it)', 'WARN something\n@host 4242', 4242],
    ['pid 1 is never ours', '@host 1', undefined],
    ['not a number', '@host 42a', undefined],
    ['too long', '@host 12345678901', undefined],
    ['a line after it', '@host 4242\nmore', undefined],
    ['negative', '@host -4', undefined],
    ['nothing', '', undefined],
  ])('%s', (_, text, want) => expect(hostPidFrom(text)).toBe(want));
});

const CID = 'c'.repeat(64);
const kids: ChildProcess[] = [];
afterAll(() => {
  for (const k of kids) k.kill('SIGKILL');
});

/** A process in a pid namespace of its own (unshare's child, pid 1 there): a container's init. */
async function namespaceInit(env: Record<string, string> = {}, ...cmd: string[]): Promise<number> {
  const u = spawn('unshare', ['--pid', '--fork', '--kill-child=SIGKILL', ...(cmd.length ? cmd : ['sleep', '120'])], {
    env: { ...process.env, ...env },
    stdio: 'ignore',
  });
  kids.push(u);
  for (let i = 0; i < 100; i++) {
    const c = readFileSync(`/proc/${u.pid}/task/${u.pid}/children`, 'utf8').trim().split(' ')[0];
    if (c) return Number(c);
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('unshare did not fork');
}

/** A second process in the namespace of `init`, leading its own session (as an exec'd one does): its host pid. */
async function execInto(init: number, marker: string | undefined): Promise<number> {
  const env = marker ? ['env', `SPARKCTL_INSTANCE=${marker}`] : [];
  const p = spawn('nsenter', ['-t', String(init), '-p', '--', 'setsid', ...env, 'sleep', '120'], { stdio: 'ignore' });
  kids.push(p);
  for (let i = 0; i < 100; i++) {
    const c = readFileSync(`/proc/${p.pid}/task/${p.pid}/children`, 'utf8').trim().split(' ')[0];
    // once it is sleep: setsid and env have run (its group, its environment)
    if (
      c &&
      readlinkSync(`/proc/${c}/ns/pid`) === readlinkSync(`/proc/${init}/ns/pid`) &&
      readFileSync(`/proc/${c}/cmdline`, 'utf8').startsWith('sleep\0')
    )
      return Number(c);
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('nsenter did not start');
}

const innerPid = (host: number) => /^NSpid:.*\s(\d+)\s*$/m.exec(readFileSync(`/proc/${host}/status`, 'utf8'))![1]!;

/**
 * The head's host: `sh` here, with `podman` answering for a container whose init is `init` and whose pid file holds
 * `pidFile`.
 */
const shellFor =
  (o: { init: number; pidFile: string; gone?: boolean }): NodeShell =>
  async (script, { timeoutMs }) => {
    const fake = [
      'podman() {',
      `  case "$*" in *'{{.Id}}'*) ${o.gone ? "echo 'Error: no such container' >&2; return 125" : `echo ${CID}`};;`,
      `  *'{{.State.Pid}}'*) echo ${o.init};;`,
      `  exec' '*' cat '*) printf '%s' '${o.pidFile.replaceAll("'", `'\\''`)}';;`,
      '  *) return 1;; esac; }',
    ].join('\n');
    const r = await execa('sh', ['-c', `${fake}\n${script}`], { reject: false, timeout: timeoutMs });
    return { exitCode: r.exitCode ?? null, stdout: r.stdout, stderr: r.stderr } as Remote;
  };

const head = { node: 'n0', containerId: CID, cli: ['podman'] };

describe.skipIf(!!why).concurrent("readInHead: vLLM in the head's container, found and proven on the host", () => {
  it("the exec'd process, by the pid its shell wrote in the container: its host pid and start time", async () => {
    const marker = randomUUID();
    // a decoy with the same pid inside another namespace, started first (listed first on the host): never taken for it
    const other = await namespaceInit();
    await execInto(other, marker);
    const init = await namespaceInit();
    const vllm = await execInto(init, marker);
    const got = await readInHead(shellFor({ init, pidFile: `${innerPid(vllm)}\n` }), head, marker);
    expect(got?.pid).toBe(vllm);
    expect(got?.startTime).toBe(Number(readFileSync(`/proc/${vllm}/stat`, 'utf8').split(') ')[1]!.split(' ')[19]));
  });

  it.each<[string, (inner: string) => string, string | undefined, boolean]>([
    ["another launch's marker: nothing recorded", (i) => i, 'other', false],
    ['no marker at all', (i) => i, undefined, false],
    ['a pid file that is not a pid', () => '12; rm -rf /', 'same', false],
    ['a pid file naming a pid no process of the container has', () => '99999', 'same', false],
    ['the container gone', (i) => i, 'same', true],
  ])('%s', async (_, pidFile, carries, gone) => {
    const marker = randomUUID();
    const init = await namespaceInit();
    const vllm = await execInto(init, carries === 'same' ? marker : carries === 'other' ? randomUUID() : undefined);
    const sh = shellFor({ init, pidFile: pidFile(innerPid(vllm)), gone });
    let calls = 0;
    const got = await readInHead((script, o) => (calls++, sh(script, o)), head, marker, undefined, 4);
    expect(got).toBeUndefined();
    // an answer that will not change is not asked again (only a pid not there yet is, `tries` times at most: 20 by
    // default)
    expect(calls).toBe(pidFile('').startsWith('99999') ? 4 : gone || !/^\d+$/.test(pidFile('1')) ? 1 : 2);
  });

  it('a process that does not lead its own group is not recorded', async () => {
    const marker = randomUUID();
    // sleep under a shell inside the namespace: in the shell's group (the shell leads it), not its own
    const init = await namespaceInit({ SPARKCTL_INSTANCE: marker }, 'setsid', 'sh', '-c', 'sleep 120 & wait');
    let sleeper = 0;
    for (let i = 0; i < 100 && !sleeper; i++) {
      sleeper = Number(readFileSync(`/proc/${init}/task/${init}/children`, 'utf8').trim().split(' ')[0] || 0);
      if (!sleeper) await new Promise((r) => setTimeout(r, 20));
    }
    expect(await readInHead(shellFor({ init, pidFile: innerPid(sleeper) }), head, marker)).toBeUndefined();
    // the same namespace's leader (its init, pid 1 there, carrying the marker) is
    expect((await readInHead(shellFor({ init, pidFile: '1' }), head, marker))?.pid).toBe(init);
  });
});
