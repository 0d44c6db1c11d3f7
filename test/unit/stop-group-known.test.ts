// stopGroup (src/engine/runtime/proc.ts) and a member that cannot show the marker once its leader is
// gone: vLLM's EngineCore and Worker blank their environ (setproctitle), and a SIGSTOPped EngineCore
// outlives its API server (seen against the real vLLM CPU build: restart of a wedged server left it
// behind, "1 process(es) left"). Real processes: a marked leader (sh) that exits on SIGTERM and a
// stopped child without the marker (env -i) in its group. The child was seen under the proven leader,
// so it is SIGKILLed by pid and start time; a process merely in no group of ours is never touched.
import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { groupMembers, stopGroup, INSTANCE_ENV } from '../../src/engine/runtime/proc.js';
import { processStartTime } from '../../src/util/pid.js';
import { sleep, waitFor } from '../helpers.js';

describe('stopGroup: a stopped member without the marker outlives its leader', () => {
  it('is killed by the membership seen while the leader was proven', async () => {
    const marker = randomUUID();
    // leader: starts the unmarked child in its group, prints its pid, exits at once on SIGTERM (the child stays, stopped)
    const leader = spawn('sh', ['-c', 'env -u SPARKCTL_INSTANCE sh -c "kill -STOP \\$\\$; sleep 60" & echo $!; trap "exit 0" TERM; while :; do sleep 0.1; done'], {
      detached: true,
      env: { ...process.env, [INSTANCE_ENV]: marker },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const child = Number(await new Promise<string>((r) => leader.stdout!.once('data', (d: Buffer) => r(d.toString().trim()))));
    try {
      expect(await waitFor(() => groupMembers(leader.pid!).includes(child), 5000)).toBe(true);
      await sleep(200);
      const id = { pid: leader.pid!, pgid: leader.pid!, startTime: processStartTime(leader.pid!), marker };
      const how = await stopGroup(id, 1500);
      expect(how).toBe('killed');
      expect(await waitFor(() => !groupMembers(leader.pid!).length, 3000), 'the stopped, unmarked child was left').toBe(true);
    } finally {
      try {
        process.kill(-leader.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });
});
