// The remote group stop that serve (a head that never became ready) and stop --nodes share, run
// here by sh against real process groups: TERM, poll, then KILL after the grace.
import { describe, it, expect, afterEach } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { groupStopScript } from '../../src/engine/cluster/common.js';

const started: ChildProcess[] = [];
afterEach(() => {
  for (const c of started.splice(0)) {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
});

/** A process group of its own (as setsid gives the head's vLLM); `trapTerm` ignores SIGTERM. */
function group(trapTerm: boolean): ChildProcess {
  const c = spawn('sh', ['-c', trapTerm ? "trap '' TERM; sleep 30 & wait; sleep 30" : 'exec sleep 30'], { detached: true, stdio: 'ignore' });
  started.push(c);
  return c;
}
/** Runs the script while this process keeps reaping its children (a zombie still counts as alive to kill -0). */
const runScript = (script: string) => new Promise<number | null>((resolve) => spawn('sh', ['-c', script], { stdio: 'ignore' }).on('exit', (code) => resolve(code)));
const alive = (pid: number) => {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('groupStopScript', () => {
  it('a group that ends on TERM: exit 0 within the grace', async () => {
    const c = group(false);
    await new Promise((r) => setTimeout(r, 100));
    const t = performance.now();
    expect(await runScript(groupStopScript(c.pid!, 5))).toBe(0);
    expect(performance.now() - t).toBeLessThan(3000);
    expect(alive(c.pid!)).toBe(false);
  });

  it('a group that ignores TERM: killed after the grace, exit 3', async () => {
    const c = group(true);
    await new Promise((r) => setTimeout(r, 200));
    const t = performance.now();
    expect(await runScript(groupStopScript(c.pid!, 0.5))).toBe(3);
    expect(performance.now() - t).toBeGreaterThanOrEqual(450);
    // the group's members are reaped (ours by this process, the orphan by init) moments later
    for (let i = 0; i < 40 && alive(c.pid!); i++) await new Promise((res) => setTimeout(res, 50));
    expect(alive(c.pid!)).toBe(false);
  });

  it('TERM goes to the leader alone (vLLM drains from its API server); a member that outlives the leader by 5 s gets its own TERM', async () => {
    // the leader ends on TERM; its child (a stand-in for an EngineCore) is never signalled by the leader
    const c = spawn('sh', ['-c', "sleep 30 & trap 'exit 0' TERM; wait"], { detached: true, stdio: 'ignore' });
    started.push(c);
    await new Promise((r) => setTimeout(r, 200));
    const t = performance.now();
    expect(await runScript(groupStopScript(c.pid!, 20))).toBe(0);
    const took = performance.now() - t;
    expect(took).toBeGreaterThanOrEqual(4500);
    expect(took).toBeLessThan(10_000);
    expect(alive(c.pid!)).toBe(false);
  });

  it('grace 0 (stop --grace 0): KILL at once', () => {
    expect(groupStopScript(42, 0)).toContain('seq 1 0');
    expect(groupStopScript(42, 30)).toContain('seq 1 300');
  });
});
