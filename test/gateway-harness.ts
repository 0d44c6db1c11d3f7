// What the gateway suites that drive HAProxy themselves (no sparkctl in between) share: the things a
// suite starts (HAProxy processes, HTTP servers standing in for vLLM, temporary folders), all ended
// when the file's suites are done, whatever failed.
import { afterAll } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';
import { rmSync } from 'node:fs';

export interface Leftovers {
  dirs: string[];
  procs: ChildProcess[];
  servers: Server[];
}

/**
 * Lists to push what the file starts into; after all its tests the processes are SIGKILLed, the servers closed, the
 * folders removed.
 */
export function endedAfterAll(): Leftovers {
  const left: Leftovers = { dirs: [], procs: [], servers: [] };
  afterAll(() => {
    for (const p of left.procs) p.kill('SIGKILL');
    for (const s of left.servers) s.close();
    for (const d of left.dirs) rmSync(d, { recursive: true, force: true });
  });
  return left;
}
