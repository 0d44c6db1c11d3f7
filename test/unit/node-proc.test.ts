// One proof and one stop, over both transports: this host (LOCAL_PROC: /proc read directly,
// process.kill) and a node's shell (nodeProc: the scripts ssh carries to a node, run here by `sh`
// against real process groups). Every case is run over both, and both must judge alike: the rule
// "never signal a process whose identity was proven only from what it says about itself" is
// proveIdentity alone (engine/runtime/proc.ts), whichever machine the processes are on.
import { describe, it, expect, afterAll } from 'vitest';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, copyFileSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import {
  INSTANCE_ENV,
  LOCAL_FACTS,
  LOCAL_PROC,
  groupMembers,
  proveIdentity,
  provenSignal,
  stopGroupOver,
  type Identity,
  type ProcTransport,
} from '../../src/engine/runtime/proc.js';
import {
  factsFrom,
  factsScript,
  launchAndReport,
  nodeProc,
  signalScript,
  stopOnNode,
  waitScript,
  type NodeShell,
} from '../../src/engine/cluster/node-proc.js';
import { processStartTime } from '../../src/util/pid.js';
import { killGroupLeft, sleep, startTimeOf, waitFor } from '../helpers.js';
import { tempDir } from '../temp-dirs.js';

/** The node's shell, here: the same scripts ssh would carry, run by sh on this host. */
const localShell: NodeShell = async (script, o) => {
  const r = await execa('sh', ['-c', script], { reject: false, timeout: o.timeoutMs, cancelSignal: o.signal });
  if (r.timedOut || r.isCanceled || r.exitCode === undefined)
    return { exitCode: null, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? ''), error: 'failed' };
  return { exitCode: r.exitCode, stdout: String(r.stdout), stderr: String(r.stderr) };
};
const NODE = nodeProc(localShell);
const TRANSPORTS: Array<[string, ProcTransport]> = [
  ['this host', LOCAL_PROC],
  ["a node's shell", NODE],
];

const leaders: Array<{ pid: number; start?: number }> = [];
const children: Array<{ c: ChildProcess; start?: number }> = [];
// after the whole file, not each test: the cases run at once (describe.concurrent), each on its own
// processes; a group whose leader ended meanwhile is never signalled by its number (killGroupLeft)
afterAll(() => {
  for (const { pid, start } of leaders.splice(0)) killGroupLeft(pid, start);
  for (const { c, start } of children.splice(0)) killGroupLeft(c.pid, start);
});

// a zombie (killed, not yet reaped by whatever adopted it) counts as gone
const alive = (pid: number) => {
  try {
    return !/^Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/.*\) /s, ''));
  } catch {
    return false;
  }
};
const groupAlive = (pgid: number) => groupMembers(pgid).length > 0;

/**
 * A group leader that is not our child (reparented, as the head's server is after ssh exits), running
 * `body` under sh in its own session with `env`; waits until setsid() has run.
 */
async function group(body: string, env: Record<string, string> = {}): Promise<number> {
  // async (never spawnSync): the cases run at once, and a synchronous spawn would stall every other case's timers
  const out = await execa(
    'sh',
    [
      '-c',
      `setsid sh -c '${body}' < /dev/null > /dev/null 2>&1 & p=$!; for i in $(seq 1 100); do [ -d /proc/$p ] || break; [ "$(ps -o pgid= -p $p | tr -d " ")" = "$p" ] && break; sleep 0.05; done; echo $p`,
    ],
    { timeout: 20_000, env: { ...process.env, ...env } },
  );
  const pid = Number(String(out.stdout).trim());
  leaders.push({ pid, start: startTimeOf(pid) });
  return pid;
}

interface Case {
  name: string;
  /** the processes, and the identity the record holds for them */
  make: () => Promise<{ id: Identity; pid: number }>;
  state: 'alive' | 'degraded' | 'gone' | 'unproven';
  code?: string;
}

const marker = () => randomUUID();
const CASES: Case[] = [
  {
    name: 'the recorded start time and marker: alive',
    async make() {
      const m = marker();
      const pid = await group('sleep 60', { [INSTANCE_ENV]: m });
      return { pid, id: { pid, pgid: pid, startTime: processStartTime(pid), marker: m } };
    },
    state: 'alive',
  },
  {
    name: 'an entry from before markers, start time matches: alive',
    async make() {
      const pid = await group('sleep 60');
      return { pid, id: { pid, pgid: pid, startTime: processStartTime(pid) } };
    },
    state: 'alive',
  },
  {
    name: 'a reused pid (another start time), no marker: unproven, pid-reused',
    async make() {
      const pid = await group('sleep 60');
      return { pid, id: { pid, pgid: pid, startTime: processStartTime(pid)! - 1 } };
    },
    state: 'unproven',
    code: 'pid-reused',
  },
  {
    name: 'no start time in the entry: unproven, entry-incomplete',
    async make() {
      const m = marker();
      const pid = await group('sleep 60', { [INSTANCE_ENV]: m });
      return { pid, id: { pid, pgid: pid, marker: m } };
    },
    state: 'unproven',
    code: 'entry-incomplete',
  },
  {
    name: "the start time matches but the leader carries another launch's marker: unproven",
    async make() {
      const pid = await group('sleep 60', { [INSTANCE_ENV]: marker() });
      return { pid, id: { pid, pgid: pid, startTime: processStartTime(pid), marker: marker() } };
    },
    state: 'unproven',
    code: 'group-unmarked',
  },
  {
    name: 'another start time, a marker that nobody carries (what a process says of itself proves nothing): unproven',
    async make() {
      const pid = await group('sleep 60', { [INSTANCE_ENV]: 'not-the-marker-of-this-launch' });
      return { pid, id: { pid, pgid: pid, startTime: 2, marker: marker() } };
    },
    state: 'unproven',
    code: 'group-unmarked',
  },
  {
    name: 'the leader gone, a member carrying the marker lives on (an orphaned EngineCore): degraded',
    async make() {
      const m = marker();
      const pid = await group('sleep 60 & exit 0', { [INSTANCE_ENV]: m });
      await waitFor(() => !alive(pid), 5000);
      return { pid, id: { pid, pgid: pid, startTime: 12345, marker: m } };
    },
    state: 'degraded',
  },
  {
    name: 'the leader gone, the member left carries no marker: unproven, group-unmarked',
    async make() {
      const m = marker();
      const pid = await group(`env -u ${INSTANCE_ENV} sleep 60 & exit 0`, { [INSTANCE_ENV]: m });
      await waitFor(() => !alive(pid), 5000);
      return { pid, id: { pid, pgid: pid, startTime: 12345, marker: m } };
    },
    state: 'unproven',
    code: 'group-unmarked',
  },
  {
    name: 'nothing left of the group: gone',
    async make() {
      const pid = await group('sleep 60');
      process.kill(-pid, 'SIGKILL');
      await waitFor(() => !alive(pid), 5000);
      return { pid, id: { pid, pgid: pid, startTime: 12345, marker: marker() } };
    },
    state: 'gone',
  },
  {
    name: 'an entry whose group is not its pid (sparkctl always launches a group leader): unproven',
    async make() {
      const pid = await group('sleep 60');
      return { pid, id: { pid, pgid: process.pid, startTime: processStartTime(pid) } };
    },
    state: 'unproven',
    code: 'not-group-leader',
  },
];

describe.concurrent('proveIdentity over both transports: one rule', () => {
  for (const c of CASES)
    it(c.name, async () => {
      const { id, pid } = await c.make();
      const judged: Array<[string, { state: string; code?: string }]> = [];
      for (const [name, t] of TRANSPORTS)
        judged.push([
          name,
          proveIdentity(id, await t.facts({ pid, pgid: typeof id.pgid === 'number' ? id.pgid : pid })),
        ]);
      for (const [name, p] of judged) {
        expect(p.state, name).toBe(c.state);
        if (c.code) expect((p as { code?: string }).code, name).toBe(c.code);
      }
      // and nothing was signalled by reading
      if (c.state === 'alive') expect(alive(pid)).toBe(true);
    });
});

describe("the node's facts are hostile: a line that does not parse proves less, never more", () => {
  const M = '0123abcd-4567';
  const T: Array<[string, string, { start?: number; members: number[]; marker?: string }]> = [
    [
      'well formed',
      `@proc 100 S 100 555\n@env 100 ${M}\n@proc 101 S 100 556`,
      { start: 555, members: [100, 101], marker: M },
    ],
    ['a zombie is gone', '@proc 100 Z 100 555', { members: [] }],
    ['a marker for a pid the node did not list is nobody', `@env 100 ${M}`, { members: [] }],
    [
      'a marker with a space or quote is not a marker',
      `@proc 100 S 100 555\n@env 100 ${M} x\n@env 100 '${M}'`,
      { start: 555, members: [100] },
    ],
    ['a short marker is not a marker', '@proc 100 S 100 555\n@env 100 abc', { start: 555, members: [100] }],
    ['a negative or non-numeric start is left out', '@proc 100 S 100 -5\n@proc 100 S 100 5e3', { members: [] }],
    [
      'a line with a leading space or an escape is left out',
      ` @proc 100 S 100 555\n\x1b[2J@proc 100 S 100 555`,
      { members: [] },
    ],
    [
      'a stray line between is skipped, the rest read',
      `garbage\n@proc 100 R 100 7\n@@proc 1 S 1 1`,
      { start: 7, members: [100] },
    ],
  ];
  for (const [name, text, want] of T)
    it(name, () => {
      const f = factsFrom(text);
      expect(f.startTime(100)).toBe(want.start);
      expect(f.groupMembers(100)).toEqual(want.members);
      expect(f.marker(100)).toBe(want.marker);
    });

  it('a forged line in a command name cannot reach the facts (newlines in stat are folded)', async () => {
    // the kernel keeps 15 bytes of the program's name: a name of a newline and a whole @proc line
    const dir = tempDir('node-proc-');
    const forged = join(dir, '\n@proc 9 S 9 9');
    copyFileSync('/bin/sleep', forged);
    chmodSync(forged, 0o755);
    const c = child(`exec '${forged}' 60`);
    try {
      await sleep(200);
      const r = await localShell(factsScript(c.pid!, c.pid!), { timeoutMs: 10_000 });
      const f = factsFrom(r.stdout);
      expect(f.startTime(c.pid!)).toBe(processStartTime(c.pid!));
      expect(f.startTime(9)).toBeUndefined();
      expect(f.groupMembers(9)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the node sends only the marker of an environment, never the rest (its secrets stay on the node)', async () => {
    const m = marker();
    const pid = await group('sleep 60', { [INSTANCE_ENV]: m, HF_TOKEN: 'hf_secretsecretsecret' });
    const r = await localShell(factsScript(pid, pid), { timeoutMs: 10_000 });
    expect(r.stdout).toContain(`@env ${pid} ${m}`);
    expect(r.stdout).not.toContain('hf_secret');
  });

  it('only integers > 1 are put into a script', () => {
    expect(() => factsScript(1, 1)).toThrow(/not a process id/);
    expect(() => waitScript(Number.NaN, 100)).toThrow(/not a process id/);
    expect(() => signalScript({ target: -0.5, anchor: { pid: 2, start: 1, pgid: 2 }, members: [] }, 'SIGTERM')).toThrow(
      /not a process id/,
    );
  });
});

describe.concurrent('a signal rests on its anchor: sent only while the anchor is still that process in that group', () => {
  for (const [name, t] of TRANSPORTS) {
    it(`${name}: the proven group is signalled; a stale anchor (another start time) sends nothing`, async () => {
      const m = marker();
      const pid = await group('sleep 60', { [INSTANCE_ENV]: m });
      const id = { pid, pgid: pid, startTime: processStartTime(pid), marker: m };
      const s = provenSignal(id, LOCAL_FACTS)!;
      expect(s.anchor).toEqual({ pid, start: processStartTime(pid), pgid: pid });
      expect(await t.signal({ ...s, anchor: { ...s.anchor, start: s.anchor.start + 1 } }, 'SIGKILL')).toBe(false);
      expect(alive(pid)).toBe(true);
      expect(await t.signal(s, 'SIGKILL')).toBe(true);
      expect(await waitFor(() => !groupAlive(pid), 5000)).toBe(true);
    });
  }
  it('a degraded group rests on a member that carries the marker', async () => {
    const m = marker();
    const pid = await group('sleep 60 & exit 0', { [INSTANCE_ENV]: m });
    await waitFor(() => !alive(pid), 5000);
    const s = provenSignal({ pid, pgid: pid, startTime: 5, marker: m }, LOCAL_FACTS)!;
    expect(s.target).toBe(-pid);
    expect(s.anchor.pid).not.toBe(pid);
    expect(provenSignal({ pid, pgid: pid, startTime: 5, marker: m }, LOCAL_FACTS, 'leader')).toBeUndefined();
  });
});

/** A group of its own that is our child (reaped here, so no zombie lingers); `body` runs under sh. */
function child(body: string, env: Record<string, string> = {}): ChildProcess {
  const c = spawn('sh', ['-c', body], { detached: true, stdio: 'ignore', env: { ...process.env, ...env } });
  children.push({ c, start: c.pid ? startTimeOf(c.pid) : undefined });
  return c;
}
const idOf = (c: ChildProcess, m?: string) => ({
  pid: c.pid!,
  pgid: c.pid!,
  startTime: processStartTime(c.pid!),
  marker: m,
});

describe.concurrent('stopGroupOver, one stop over both transports', () => {
  for (const [name, t] of TRANSPORTS) {
    it(`${name}: a group that ends on TERM is terminated within the grace`, async () => {
      const c = child('exec sleep 30');
      await sleep(100);
      const t0 = performance.now();
      // ended by the TERM, well before the grace (the cases run at once: the bound leaves room for a busy host)
      expect(await stopGroupOver(t, idOf(c), 20_000)).toBe('terminated');
      expect(performance.now() - t0).toBeLessThan(12_000);
      expect(groupAlive(c.pid!)).toBe(false);
    });

    it(`${name}: a group that ignores TERM is killed after the grace`, async () => {
      const c = child("trap '' TERM; sleep 30 & wait; sleep 30");
      await sleep(200);
      const t0 = performance.now();
      expect(await stopGroupOver(t, idOf(c), 500)).toBe('killed');
      expect(performance.now() - t0).toBeGreaterThanOrEqual(450);
      expect(await waitFor(() => !groupAlive(c.pid!), 3000)).toBe(true);
    });

    it(`${name}: an unproven group (a reused pid) is never signalled`, async () => {
      const c = child('exec sleep 30');
      await sleep(100);
      expect(await stopGroupOver(t, { ...idOf(c), startTime: processStartTime(c.pid!)! - 1 }, 500)).toBe('unproven');
      expect(alive(c.pid!)).toBe(true);
    });

    it(`${name}: TERM goes to the leader alone; a member that outlives it by 5 s gets its own TERM`, async () => {
      // the leader ends on TERM; its child (a stand-in for an EngineCore, carrying the launch's marker as
      // vLLM's does) is never signalled by the leader
      const m = marker();
      const c = child("sleep 30 & trap 'exit 0' TERM; wait", { [INSTANCE_ENV]: m });
      await sleep(200);
      const t0 = performance.now();
      expect(await stopGroupOver(t, idOf(c, m), 20_000)).toBe('terminated');
      const took = performance.now() - t0;
      expect(took).toBeGreaterThanOrEqual(4500);
      // the member's own TERM came after the linger, not the grace's KILL at 20 s
      expect(took).toBeLessThan(16_000);
      expect(groupAlive(c.pid!)).toBe(false);
    });

    it(`${name}: a stopped member without the marker, seen under the proven leader, is killed by pid and start time`, async () => {
      const m = marker();
      const c = spawn(
        'sh',
        [
          '-c',
          `env -u ${INSTANCE_ENV} sh -c "kill -STOP \\$\\$; sleep 60" & echo $!; trap "exit 0" TERM; while :; do sleep 0.1; done`,
        ],
        {
          detached: true,
          env: { ...process.env, [INSTANCE_ENV]: m },
          stdio: ['ignore', 'pipe', 'ignore'],
        },
      );
      children.push({ c, start: c.pid ? startTimeOf(c.pid) : undefined });
      const member = Number(
        await new Promise<string>((r) => c.stdout!.once('data', (d: Buffer) => r(d.toString().trim()))),
      );
      expect(await waitFor(() => groupMembers(c.pid!).includes(member), 5000)).toBe(true);
      await sleep(200);
      expect(await stopGroupOver(t, idOf(c, m), 1500)).toBe('killed');
      expect(await waitFor(() => !groupAlive(c.pid!), 3000), 'the stopped, unmarked member was left').toBe(true);
    });
  }

  it('grace 0 (stop --grace 0) on a node: KILL at once', async () => {
    const c = child("trap '' TERM; sleep 30 & wait; sleep 30");
    await sleep(200);
    const t0 = performance.now();
    expect(await stopGroupOver(NODE, idOf(c), 0)).toBe('killed');
    // no grace waited: the reads and the two signals only (a few sh calls; seconds on a loaded CI host),
    // never the 30 s its group would take to end on its own
    expect(performance.now() - t0).toBeLessThan(25_000);
  });
});

describe('stopOnNode: what stop --nodes reports for a rank', () => {
  it('stopped, unproven (nothing signalled, said why) and failed (the node did not answer)', async () => {
    const c = child('exec sleep 30');
    await sleep(100);
    const st = processStartTime(c.pid!)!;
    const unproven = await stopOnNode(localShell, { pid: c.pid!, startTime: st - 1 }, 1);
    expect(unproven.state).toBe('unproven');
    expect(unproven.detail).toMatch(/not provably the server sparkctl started: not signalled/);
    expect(alive(c.pid!)).toBe(true);
    const down: NodeShell = async () => ({
      exitCode: 255,
      stdout: '',
      stderr: 'ssh: connect to host 10.0.0.9 port 22: Connection refused',
    });
    expect(await stopOnNode(down, { pid: c.pid!, startTime: st }, 1)).toEqual({
      state: 'failed',
      detail: 'ssh: connect to host 10.0.0.9 port 22: Connection refused',
    });
    expect(alive(c.pid!)).toBe(true);
    expect(await stopOnNode(localShell, { pid: c.pid!, startTime: st }, 5)).toEqual({ state: 'stopped' });
  });

  it('launchAndReport prints the pid and its kernel start time', () => {
    const r = spawnSync('sh', ['-c', launchAndReport('setsid sleep 30 < /dev/null > /dev/null 2>&1')], {
      encoding: 'utf8',
    });
    const [pid, st] = r.stdout.trim().split(' ').map(Number);
    leaders.push({ pid: pid!, start: startTimeOf(pid!) });
    expect(pid).toBeGreaterThan(1);
    expect(st).toBe(processStartTime(pid!));
  });
});
