// A group sparkctl launched whose record is lost (deleted, or sparkctl killed between the spawn and the
// write) and whose leader has died since (a SIGKILLed gateway keeper leaves HAProxy; a SIGKILLed vLLM
// API server leaves EngineCore): what is left still carries the launch's marker and writes to its log
// under the state folder's logs/, so it is still ours, found, shown and stopped, never hidden.
// Real processes: `sh -c 'sleep 30 & exit 0'` in its own group stands for the leader that died and
// the child that lives on in its group.
import { describe, it, expect, afterEach } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdirSync, openSync, closeSync, realpathSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Registry } from '../../src/engine/registry.js';
import { stopGateway } from '../../src/gateway/control.js';
import { processesWithEnv, waitFor } from '../helpers.js';
import { processStartTime } from '../../src/util/pid.js';
import { tempDir } from '../temp-dirs.js';

const tag = randomUUID();
const dirs: string[] = [];
afterEach(() => {
  for (const p of processesWithEnv('SPARKCTL_TEST_CASE', tag)) process.kill(p, 'SIGKILL');
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A group whose leader exits at once and whose child lives on, marked, writing to logs/<log>. */
async function leaderGone(log: string) {
  const state = realpathSync(tempDir('sparkctl-lost-'));
  dirs.push(state);
  mkdirSync(join(state, 'logs'));
  const marker = randomUUID();
  const fd = openSync(join(state, 'logs', log), 'a', 0o600);
  const sh = spawn('sh', ['-c', 'sleep 30 & exit 0'], {
    detached: true,
    stdio: ['ignore', fd, fd],
    env: { ...process.env, SPARKCTL_INSTANCE: marker, SPARKCTL_TEST_CASE: tag },
  });
  closeSync(fd);
  await new Promise((r) => sh.once('exit', r));
  const pgid = sh.pid!;
  expect(await waitFor(() => processStartTime(pgid) === undefined, 3000)).toBe(true);
  const [child] = processesWithEnv('SPARKCTL_TEST_CASE', tag).filter((p) =>
    processesWithEnv('SPARKCTL_INSTANCE', marker).includes(p),
  );
  expect(child).toBeDefined();
  return { state, marker, pgid, child: child! };
}

describe('a launch whose record is lost and whose leader died is still found and stopped', () => {
  it('the gateway: a HAProxy left by a dead keeper, its launch record lost, is found (degraded) and gateway down ends it', async () => {
    const g = await leaderGone('gateway.log');
    const e = new Registry(g.state).gateway();
    expect(e, 'the orphaned gateway group is invisible').toBeDefined();
    expect(e).toMatchObject({ recovered: true, alive: true, proof: { state: 'degraded', pgid: g.pgid } });
    const down = await stopGateway(g.state, 2000);
    expect(down).toMatchObject({ how: 'stopped', orphaned: true, left: 0 });
    expect(await waitFor(() => processStartTime(g.child) === undefined, 3000)).toBe(true);
  });

  it('a server: an EngineCore left by a dead API server, its entry lost, is listed (recovered, degraded), never hidden', async () => {
    const g = await leaderGone('qwen-dev-0.log');
    const found = new Registry(g.state).list().filter((x) => x.inst.marker === g.marker);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({
      recovered: true,
      alive: true,
      proof: { state: 'degraded', pgid: g.pgid },
      inst: { name: 'qwen-dev-0', pgid: g.pgid },
    });
  });
});
