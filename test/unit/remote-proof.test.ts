// The identity guard that runs on a remote head before `stop --nodes` signals anything, run here
// with sh against real processes (ssh only carries it there). No group is ever signalled unless
// its leader's start time matches the record or a member carries the launch's marker.
import { describe, it, expect, afterEach } from 'vitest';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { remoteProven, launchAndReport, REMOTE_UNPROVEN_EXIT } from '../../src/engine/cluster/remote-proof.js';
import { INSTANCE_ENV } from '../../src/engine/runtime/proc.js';

const started: number[] = [];
afterEach(() => {
  for (const pid of started.splice(0))
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
});

const startTimeOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/.*\) /s, '').split(' ')[19]);
// a zombie (killed, not yet reaped by whatever adopted it) counts as gone
const alive = (pid: number) => {
  try {
    return !/^Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/.*\) /s, ''));
  } catch {
    return false;
  }
};
const sh = (script: string, env: Record<string, string> = {}) => spawnSync('sh', ['-c', script], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, ...env } });
const KILL = (pid: number) => `kill -KILL -${pid}; exit 3`;
const gone = async (pid: number) => {
  for (let i = 0; i < 50 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
  return !alive(pid);
};

/** A group leader that is not our child (reparented, so reaped by init, as on the head after ssh exits). */
function group(env: Record<string, string> = {}) {
  // wait until setsid() has run: the pid leads its own group, as the head's server does long before a stop
  const pid = Number(
    sh('setsid sleep 60 < /dev/null > /dev/null 2>&1 & p=$!; for i in $(seq 1 100); do [ "$(ps -o pgid= -p $p | tr -d " ")" = "$p" ] && break; sleep 0.05; done; echo $p', env).stdout.trim(),
  );
  started.push(pid);
  return pid;
}

describe('remoteProven: identity before a remote signal', () => {
  it('the recorded start time: proven, the group is signalled', async () => {
    const pid = group();
    const r = sh(remoteProven({ pid, startTime: startTimeOf(pid) }, KILL(pid)));
    expect(r.status).toBe(3);
    expect(await gone(pid)).toBe(true);
  });

  it('a reused pid (another start time) and no marker: exit 4, left alone', () => {
    const pid = group();
    const r = sh(remoteProven({ pid, startTime: startTimeOf(pid) - 1 }, KILL(pid)));
    expect(r.status).toBe(REMOTE_UNPROVEN_EXIT);
    expect(r.stderr).toMatch(/not provably the server sparkctl started/);
    expect(alive(pid)).toBe(true);
  });

  it('an old record without start time or marker: left alone', () => {
    const pid = group();
    expect(sh(remoteProven({ pid }, KILL(pid))).status).toBe(REMOTE_UNPROVEN_EXIT);
    expect(alive(pid)).toBe(true);
  });

  it('a member carrying the marker proves the group even when the start time does not match', async () => {
    const marker = randomUUID();
    const pid = group({ [INSTANCE_ENV]: marker });
    expect(sh(remoteProven({ pid, startTime: 1, marker }, KILL(pid))).status).toBe(3);
    expect(await gone(pid)).toBe(true);
  });

  it('a wrong marker proves nothing', () => {
    const pid = group({ [INSTANCE_ENV]: randomUUID() });
    expect(sh(remoteProven({ pid, startTime: 1, marker: randomUUID() }, KILL(pid))).status).toBe(REMOTE_UNPROVEN_EXIT);
    expect(alive(pid)).toBe(true);
  });

  it('nothing left of the group: gone (exit 0), nothing signalled', async () => {
    const pid = group();
    process.kill(-pid, 'SIGKILL');
    expect(await gone(pid)).toBe(true);
    expect(sh(remoteProven({ pid, startTime: 123 }, 'exit 7')).status).toBe(0);
  });

  it('launchAndReport prints the pid and its kernel start time', () => {
    const r = sh(`${launchAndReport('setsid sleep 30 < /dev/null > /dev/null 2>&1')}`);
    const [pid, st] = r.stdout.trim().split(' ').map(Number);
    try {
      expect(pid).toBeGreaterThan(1);
      expect(st).toBe(startTimeOf(pid!));
    } finally {
      try {
        process.kill(pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });
});
