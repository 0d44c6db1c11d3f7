// What `sparkctl status` says of each registered server: its process (from the registry's proof of
// identity) and its health (asked over HTTP: /health, then vLLM's sleep route, since a sleeping
// vLLM answers /health 200). A router's health is how its HAProxy sees the replicas: the router
// room reads that (the caller hands it in; the engine is a storey below the router).
import type { Entry, Instance } from './registry.js';
import { http } from '../client/http.js';
import { readSleep } from '../client/sleep.js';
import { targetFromInstance } from './target.js';
import { sleepCapable } from './sleep.js';
import { runtimeOf } from './runtime/index.js';

export interface InstanceStatus {
  inst: Instance;
  alive: boolean;
  health: string;
  sleepLevel?: number;
  /** alive, dead, UNPROVEN or DEGRADED */
  process: string;
  why?: string;
  recovered: boolean;
  uptimeMs: number;
}

/** The process column from the proof: dead (gone), UNPROVEN, DEGRADED or alive, and why when it is not plain. Pure. */
function processOf({ inst, proof }: Pick<Entry, 'inst' | 'proof'>): { process: string; why?: string } {
  if (proof.state === 'gone') return { process: 'dead' };
  if (proof.state === 'unproven') return { process: 'UNPROVEN', why: proof.reason };
  // what a degraded proof means is the runtime's sentence (the host: members of the group gone; a container: it exited)
  if (proof.state === 'degraded')
    return { process: 'DEGRADED', why: runtimeOf(inst).degraded(inst, proof.members).why };
  return { process: 'alive' };
}

/** A live server's health from its /health answer (and, when healthy, its sleep route). */
async function serverHealth(inst: Instance): Promise<{ health: string; sleepLevel?: number }> {
  const url = targetFromInstance(inst).url;
  const h = await http(`${url}/health`, { timeoutMs: 1500 });
  const health = h.ok
    ? h.status === 200
      ? 'healthy'
      : h.status === 503
        ? 'engine dead'
        : `HTTP ${h.status}`
    : h.error === 'refused'
      ? inst.readyAt
        ? 'refused'
        : 'starting'
      : h.error;
  if (health !== 'healthy' || !sleepCapable(inst)) return { health };
  const s = await readSleep(url, 1500);
  return s.state === 'sleeping' ? { health: 'sleeping', sleepLevel: s.level } : { health };
}

/** Every entry's status, asked at once. */
export function statusOf(
  entries: readonly Entry[],
  routerHealth: (rec: NonNullable<Instance['router']>) => Promise<string>,
): Promise<InstanceStatus[]> {
  return Promise.all(
    entries.map(async (e) => {
      const { inst, alive, proof, recovered } = e;
      const base = {
        inst,
        alive,
        ...processOf(e),
        recovered: Boolean(recovered),
        uptimeMs: Date.now() - Date.parse(inst.startedAt),
      };
      if (recovered) return { ...base, health: 'entry corrupt' };
      if (proof.state === 'degraded') return { ...base, health: 'degraded' };
      if (alive && inst.role === 'router' && inst.router) return { ...base, health: await routerHealth(inst.router) };
      if (alive) return { ...base, ...(await serverHealth(inst)) };
      return { ...base, health: proof.state === 'unproven' ? 'unproven' : 'stale' };
    }),
  );
}
