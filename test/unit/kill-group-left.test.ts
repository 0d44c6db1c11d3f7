// The suites' own cleanup (test/helpers.ts killGroupLeft) holds the project's rule: a group is
// signalled by its number only while its leader is still the process the test started; once the
// leader ended, what is left of the group is killed member by member, and a live process that now
// holds the number is left alone. (A vitest run here was killed twice by another suite's after-hook
// that sent SIGKILL to a group number its own leader had freed minutes before.)
import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { killGroupLeft, startTimeOf, waitFor } from '../helpers.js';

const alive = (pid: number) => startTimeOf(pid) !== undefined;

function group(body: string) {
  const c = spawn('sh', ['-c', body], { detached: true, stdio: 'ignore' });
  c.unref();
  return c;
}

describe('killGroupLeft', () => {
  it('a live leader whose start time differs (another process under the number): nothing is signalled', async () => {
    const c = group('exec sleep 30');
    await waitFor(() => alive(c.pid!), 5000);
    killGroupLeft(c.pid, (startTimeOf(c.pid!) ?? 0) + 1);
    await new Promise((r) => setTimeout(r, 200));
    expect(alive(c.pid!)).toBe(true);
    killGroupLeft(c.pid, startTimeOf(c.pid!));
    await waitFor(() => !alive(c.pid!), 5000);
  });

  it('the leader ended: its remaining member is killed by its own pid', async () => {
    // the leader starts a member in its group, prints its pid, then ends
    const c = spawn('sh', ['-c', 'sleep 30 >/dev/null & echo $!; exit 0'], {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let out = '';
    c.stdout!.on('data', (d) => {
      out += d;
    });
    // 'close', not 'exit': 'exit' may come before the pipe's last data (CI: the pid read as 0, the member left running)
    await new Promise((r) => c.once('close', r));
    const member = Number(out.trim());
    expect(member).toBeGreaterThan(1);
    expect(alive(member)).toBe(true);
    killGroupLeft(c.pid);
    await waitFor(() => !alive(member), 5000);
    expect(alive(member)).toBe(false);
  });
});
