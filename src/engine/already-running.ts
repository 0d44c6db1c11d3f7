// serve of a profile sparkctl already runs: recognised from the registry (proven processes), not
// from a port that happens to answer, so an idempotent `serve` says "running" instead of failing
// preflight on its own ports.
import { Registry } from './registry.js';
import type { Instance } from './registry.js';
import { http } from '../client/http.js';
import { targetFromInstance } from './target.js';

interface AlreadyRunning {
  replicas: Instance[];
  router?: Instance;
  /** replicas whose /health did not answer 200 within the deadline */
  unhealthy: string[];
}

async function healthy(inst: Instance, timeoutMs: number): Promise<boolean> {
  // the one client (bounded, no redirects), which speaks a replica's Unix socket too (targetFromInstance's url)
  const r = await http(`${targetFromInstance(inst).url}/health`, { timeoutMs, maxBytes: 64 * 1024 });
  return r.ok && r.status === 200;
}

/** The live, proven instances of `profile` in this state folder, or undefined when none runs. */
export async function alreadyRunning(
  stateDir: string,
  profile: string,
  timeoutMs = 2000,
): Promise<AlreadyRunning | undefined> {
  const live = new Registry(stateDir)
    .list()
    .filter((x) => x.alive && x.inst.profile === profile)
    .map((x) => x.inst);
  const replicas = live.filter((x) => x.role !== 'router').sort((a, b) => a.replica - b.replica);
  if (!replicas.length) return undefined;
  const checks = await Promise.all(replicas.map((x) => healthy(x, timeoutMs)));
  return {
    replicas,
    router: live.find((x) => x.role === 'router'),
    unhealthy: replicas.filter((_, i) => !checks[i]).map((x) => x.name),
  };
}
