// What a degraded proof means is the Runtime's word (engine/runtime: Runtime.degraded), not a
// caller's reading of the record's container field: on the host, some members of the group are gone
// and the server may still run; in a container, the container exited, which is the server gone. The
// watcher's reader (watch/read.ts readServer) asks it.
import { describe, it, expect } from 'vitest';
import { runtimeOf } from '../../src/engine/runtime/index.js';
import { readServer } from '../../src/watch/read.js';
import type { Entry } from '../../src/engine/registry.js';
import type { ContainerRecord } from '../../src/engine/runtime/ops.js';

const ID = 'f'.repeat(64);
const target = (container?: Partial<ContainerRecord>) => ({ pid: container ? 0 : 4242, pgid: container ? 0 : 4242, startTime: 7, container: container as ContainerRecord | undefined });

describe('Runtime.degraded: what a degraded proof means, by runtime', () => {
  it.each<[string, ReturnType<typeof target>, { gone: boolean; detail: string }]>([
    ['the host: members of the group gone, the server not', target(), { gone: false, detail: 'some members of its group are gone' }],
    ['podman, by its ID: the container exited', target({ cli: 'podman', id: ID, name: 'sparkctl-p-0' }), { gone: true, detail: `its container ${ID.slice(0, 12)} exited (podman inspect)` }],
    ['docker, by its ID', target({ cli: 'docker', id: ID, name: 'sparkctl-p-0' }), { gone: true, detail: `its container ${ID.slice(0, 12)} exited (docker inspect)` }],
    ['a container whose run never printed its ID: named by its name', target({ cli: 'podman', name: 'sparkctl-p-1' }), { gone: true, detail: 'its container sparkctl-p-1 exited (podman inspect)' }],
  ])('%s', (_, t, want) => {
    expect(runtimeOf(t).degraded(t)).toEqual(want);
  });
});

describe("readServer takes the runtime's word on a degraded proof", () => {
  it("a container that exited is read as gone, with the runtime's sentence, and nothing more is asked of it", async () => {
    const e = {
      alive: true,
      proof: { state: 'degraded', pgid: 0, members: [] },
      inst: { name: 'p-0', profile: 'p', pid: 0, pgid: 0, startTime: 7, url: 'http://127.0.0.1:9', container: { cli: 'podman', cliArgs: [], name: 'sparkctl-p-0', image: 'x', id: ID } },
    } as unknown as Entry;
    const r = await readServer(e, { timeoutMs: 500, now: () => 1000 });
    expect(r.process).toBe('gone');
    expect(r.processDetail).toBe(`its container ${ID.slice(0, 12)} exited (podman inspect)`);
    expect(r.health).toBe('unreachable');
  });
});
