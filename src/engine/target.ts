// A registry instance as a target for prewarm, the probe and bench.
import type { Instance } from './registry.js';
import type { Target } from '../health/target.js';
import { unixUrl } from '../util/socket-url.js';

/** A target that may be a running instance of the registry (a router's own checks need it). */
export interface InstanceTarget extends Target {
  instance?: Instance;
  /**
   * a server over nodes (serve --nodes): its record's launch time and its start report (rank 0's), for the probe's
   * history
   */
  cluster?: { profile: string; startedAt?: string; start?: unknown };
}

export function targetFromInstance(inst: Instance): InstanceTarget {
  const host = inst.host === '0.0.0.0' || inst.host === '::' ? '127.0.0.1' : inst.host;
  return {
    name: inst.name,
    // a replica on vLLM's --uds: its socket (every reader through client/http.ts speaks it)
    url: inst.uds ? unixUrl(inst.uds) : `http://${host.includes(':') ? `[${host}]` : host}:${inst.port}`,
    servedName: inst.servedName,
    apiKeyEnv: inst.apiKeyEnv,
    apiKey: inst.apiKeyEnv ? process.env[inst.apiKeyEnv] : undefined,
    gpus: inst.gpus,
    engine: inst.engine,
    maxModelLen: inst.maxModelLen,
    instance: inst,
  };
}
