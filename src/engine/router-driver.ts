// The router in front of a serve's replicas, as serve sees it: required before the first launch,
// started once the replicas are ready (or warm), asked how it sees them, and soft-stopped before
// them. HAProxy drives it (src/router/driver.ts), a storey above the engine: the verb hands the
// driver in, so that the engine never imports the router.
import type { ChildRecord } from './runtime/child.js';
import type { RouterPlan } from '../profiles/router.js';
import type { ServePlan } from './plan.js';
import type { Registry } from './registry.js';
import type { RouterOutcome } from './events.js';

/** A router process we spawned: its own group, the instance marker, like a replica. */
export interface RouterLaunched extends ChildRecord {
  plan: RouterPlan;
  argv: string[];
}

export interface RouterDriver {
  /** throws a UsageError naming the fix when the router's program is not installed */
  require(r: RouterPlan): void;
  /**
   * before any replica is launched: the router's failure when it could not start now (its config refused, a port
   * another process holds), else undefined
   */
  precheck(r: RouterPlan): Promise<RouterOutcome | undefined>;
  /**
   * launch it, registered the moment it is spawned, and wait until it is ready; never throws for a router that fails:
   * the outcome says why
   */
  start(plan: ServePlan, registry: Registry): Promise<{ launched?: RouterLaunched; outcome: RouterOutcome }>;
  /** each server as the router sees it now ('unknown' when it does not answer, 'missing' when it lacks one) */
  servers(r: RouterPlan, servers: RouterOutcome['servers']): Promise<RouterOutcome['servers']>;
  /** stop taking requests, let the open ones finish for up to drainMs (0: at once), then stop; never throws */
  softStop(l: RouterLaunched, drainMs: number, signal?: AbortSignal): Promise<void>;
}
