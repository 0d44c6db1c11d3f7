// What a degraded proof means is the Runtime's word (engine/runtime: Runtime.degraded), not a
// caller's reading of the record's container field: on the host, some members of the group are gone
// and the server may still run; in a container, the container exited, which is the server gone. The
// watcher's reader (watch/read.ts readServer) asks it.
import { describe, it, expect } from 'vitest';
import { runtimeOf } from '../../src/engine/runtime/index.js';
import { readServer } from '../../src/watch/read.js';
import { statusOf } from '../../src/engine/status.js';
import type { Entry } from '../../src/engine/registry.js';
import type { ContainerRecord } from '../../src/engine/runtime/ops.js';

const ID = 'f'.repeat(64);
const target = (container?: Partial<ContainerRecord>) => ({
  pid: container ? 0 : 4242,
  pgid: container ? 0 : 4242,
  startTime: 7,
  container: container as ContainerRecord | undefined,
});

describe('Runtime.degraded: what a degraded proof means, by runtime', () => {
  // members: what the proof found still alive of the group (a container's processes are the runtime's: none)
  it.each<[string, ReturnType<typeof target>, number[], { gone: boolean; detail: string; why: string }]>([
    [
      'the host: members of the group gone, the server not',
      target(),
      [4243, 4244],
      {
        gone: false,
        detail: 'some members of its group are gone',
        why: 'its API server 4242 is gone; 2 process(es) of its group still run',
      },
    ],
    [
      'podman, by its ID: the container exited',
      target({ cli: 'podman', id: ID, name: 'sparkctl-p-0' }),
      [],
      {
        gone: true,
        detail: `its container ${ID.slice(0, 12)} exited (podman inspect)`,
        why: `its container ${ID.slice(0, 12)} exited (podman inspect)`,
      },
    ],
    [
      'docker, by its ID',
      target({ cli: 'docker', id: ID, name: 'sparkctl-p-0' }),
      [],
      {
        gone: true,
        detail: `its container ${ID.slice(0, 12)} exited (docker inspect)`,
        why: `its container ${ID.slice(0, 12)} exited (docker inspect)`,
      },
    ],
    [
      'a container whose run never printed its ID: named by its name',
      target({ cli: 'podman', name: 'sparkctl-p-1' }),
      [],
      {
        gone: true,
        detail: 'its container sparkctl-p-1 exited (podman inspect)',
        why: 'its container sparkctl-p-1 exited (podman inspect)',
      },
    ],
  ])('%s', (_, t, members, want) => {
    expect(runtimeOf(t).degraded(t, members)).toEqual(want);
  });
});

describe("readServer takes the runtime's word on a degraded proof", () => {
  it("a container that exited is read as gone, with the runtime's sentence, and nothing more is asked of it", async () => {
    const e = {
      alive: true,
      proof: { state: 'degraded', pgid: 0, members: [] },
      inst: {
        name: 'p-0',
        profile: 'p',
        pid: 0,
        pgid: 0,
        startTime: 7,
        url: 'http://127.0.0.1:9',
        container: { cli: 'podman', cliArgs: [], name: 'sparkctl-p-0', image: 'x', id: ID },
      },
    } as unknown as Entry;
    const r = await readServer(e, { timeoutMs: 500, now: () => 1000 });
    expect(r.process).toBe('gone');
    expect(r.processDetail).toBe(`its container ${ID.slice(0, 12)} exited (podman inspect)`);
    expect(r.health).toBe('unreachable');
  });
});

describe("status's process column takes the runtime's sentence on a degraded proof", () => {
  const entry = (inst: Record<string, unknown>, members: number[]) =>
    ({
      alive: true,
      proof: { state: 'degraded', pgid: inst.pgid, members },
      inst: { name: 'p-0', profile: 'p', startedAt: new Date(0).toISOString(), url: 'http://127.0.0.1:9', ...inst },
    }) as unknown as Entry;
  it.each<[string, Entry, string]>([
    // the host's sentence is the one status always said (its pinned text)
    [
      'the host: the API server gone, members left',
      entry({ pid: 4242, pgid: 4242, startTime: 7 }, [4243, 4244]),
      'its API server 4242 is gone; 2 process(es) of its group still run',
    ],
    // a container's processes are the runtime's: it was "its API server 0 is gone; 0 process(es)" before
    [
      'a container that exited',
      entry(
        {
          pid: 0,
          pgid: 0,
          startTime: 7,
          container: { cli: 'podman', cliArgs: [], name: 'sparkctl-p-0', image: 'x', id: ID },
        },
        [],
      ),
      `its container ${ID.slice(0, 12)} exited (podman inspect)`,
    ],
  ])('%s', async (_, e, why) => {
    const [s] = await statusOf([e], async () => 'unused');
    expect(s).toMatchObject({ process: 'DEGRADED', why, health: 'degraded' });
  });
});
