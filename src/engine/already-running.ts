// serve of a profile sparkctl already runs: recognised from the registry (proven processes), not
// from a port that happens to answer, so an idempotent `serve` says "running" instead of failing
// preflight on its own ports.
import { Registry } from './registry.js';
import type { Instance } from './registry.js';

export interface AlreadyRunning {
  replicas: Instance[];
  router?: Instance;
  /** replicas whose /health did not answer 200 within the deadline */
  unhealthy: string[];
}

async function healthy(inst: Instance, timeoutMs: number): Promise<boolean> {
  try {
    const u = new URL(inst.url);
    const host = u.hostname === '0.0.0.0' ? '127.0.0.1' : u.hostname;
    const r = await fetch(`http://${host.includes(':') ? `[${host}]` : host}:${inst.port}/health`, { signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' });
    await r.body?.cancel();
    return r.status === 200;
  } catch {
    return false;
  }
}

/** The live, proven instances of `profile` in this state folder, or undefined when none runs. */
export async function alreadyRunning(stateDir: string, profile: string, timeoutMs = 2000): Promise<AlreadyRunning | undefined> {
  const live = new Registry(stateDir)
    .list()
    .filter((x) => x.alive && x.inst.profile === profile)
    .map((x) => x.inst);
  const replicas = live.filter((x) => x.role !== 'router').sort((a, b) => a.replica - b.replica);
  if (!replicas.length) return undefined;
  const checks = await Promise.all(replicas.map((x) => healthy(x, timeoutMs)));
  return { replicas, router: live.find((x) => x.role === 'router'), unhealthy: replicas.filter((_, i) => !checks[i]).map((x) => x.name) };
}
