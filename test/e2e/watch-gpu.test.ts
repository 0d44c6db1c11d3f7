// The GPU rule in the watcher's loop: a dead server whose GPU shows a fault only a reset clears (the
// hot H200 capture's Xid 48, see test/unit/watch-gpu.test.ts) is alerted with that evidence and NOT
// restarted; the same dead server on a quiet GPU is restarted. A simulator served through the CLI
// (GPUs stand in: the facts are the capture's, handed to the watcher as its nvidia-smi reader would).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Registry } from '../../src/engine/registry.js';
import { GPU_FIELDS, parseQueryGpu } from '../../src/nvidia/smi.js';
import { parseXid } from '../../src/nvidia/xid.js';
import { DEFAULT_WATCH, Watcher, type Hands, type WatchEvent } from '../../src/watch/supervisor.js';
import { hostGpus } from '../../src/verbs/watch/run.js';
import { cli, FIXTURES, freePort, isolated } from '../helpers.js';

const t = isolated({
  prefix: 'sparkctl-watch-gpu-',
  env: { SPARKCTL_SIM_LOAD_SECONDS: '0.2', SPARKCTL_SIM_COLD_MS: '20' },
});
const out = (n: number) =>
  readFileSync(
    join(FIXTURES, 'bundles', 'h200x2-serving-hot', 'out', `cmd-${String(n).padStart(3, '0')}.stdout`),
    'utf8',
  );
const hot = { rows: parseQueryGpu(out(12), GPU_FIELDS), xid: parseXid(out(9)) };
const quiet = {
  rows: hot.rows.map((g) => ({ ...g, 'ecc.errors.uncorrected.volatile.total': '0', 'remapped_rows.pending': 'No' })),
  xid: [],
};

async function deadServer() {
  const port = await freePort();
  const r = await cli(
    [
      'serve',
      'qwen3.5-9b',
      '--engine',
      'sim',
      '--no-prewarm',
      '--set',
      'parallel.replicas=1',
      '--set',
      'server.host=127.0.0.1',
      '--set',
      `server.port=${port}`,
    ],
    {
      env: t.env(),
      timeout: 60_000,
    },
  );
  expect(r.exitCode, r.stdout + r.stderr).toBe(0);
  const reg = new Registry(t.state);
  process.kill(-reg.list()[0]!.inst.pid, 'SIGKILL');
  return reg;
}

async function watchOnce(reg: Registry, facts: typeof hot | Hands['gpus']) {
  const events: WatchEvent[] = [];
  const restarts: string[] = [];
  const w = new Watcher({
    registry: reg,
    names: [],
    intervalMs: 500,
    dryRun: false,
    hands: {
      restart: async (h) => {
        restarts.push(h.entry.inst.name);
        return { ok: true, detail: 'restarted' };
      },
      probe: async () => ({ ok: false, ms: 1, detail: 'no answer' }),
      gpus: typeof facts === 'function' ? facts : async () => facts,
      policyOf: () => ({ ...DEFAULT_WATCH }),
      emit: (e) => events.push(e),
    },
  });
  for (let i = 0; i < 3 && !events.some((e) => e.kind === 'action'); i++) await w.tick();
  await w.settle();
  return { events, restarts };
}

describe('watch: GPU findings are evidence; a fault only a reset clears stops a restart', () => {
  it('dead on a GPU with Xid 48: alerted with the Xid, not restarted; dead on quiet GPUs: restarted', async () => {
    const hotRun = await watchOnce(await deadServer(), hot);
    expect(hotRun.restarts).toEqual([]);
    const gpu = hotRun.events.find((e) => e.kind === 'gpu') as Extract<WatchEvent, { kind: 'gpu' }>;
    expect(gpu.findings.map((f) => f.signal)).toEqual(expect.arrayContaining(['ecc', 'xid']));
    const alert = hotRun.events.find((e) => e.kind === 'action') as Extract<WatchEvent, { kind: 'action' }>;
    expect(alert.action).toBe('alert');
    expect(alert.why).toMatch(/^dead, not restarted: GPU1: Xid 48 \(.+\): needs a GPU reset or a reboot$/);
    await cli(['stop', '--all'], { env: t.env() });

    const quietRun = await watchOnce(await deadServer(), quiet);
    expect(quietRun.restarts).toEqual(['qwen3.5-9b-0']);
    // nothing found is nothing said (a gpu event comes when the findings change)
    expect(quietRun.events.filter((e) => e.kind === 'gpu')).toEqual([]);
    await cli(['stop', '--all'], { env: t.env() });

    // the CLI's own reader: a simulated server uses none of the host's GPUs, so the host's facts (here
    // the hot capture) are never read or judged for it. Seen on a real H200: a sim server's 'GPU0' was
    // named as holding a foreign torch process's 21090 MiB of the real GPU 0
    let read = 0;
    const simRun = await watchOnce(
      await deadServer(),
      hostGpus(async () => {
        read++;
        return hot;
      }),
    );
    expect(read).toBe(0);
    expect(simRun.events.filter((e) => e.kind === 'gpu')).toEqual([]);
    expect(simRun.restarts).toEqual(['qwen3.5-9b-0']);
  }, 120_000);
});
