// Which runtime: the plan's (runtimeFor), or the one a launch record or registry entry names
// (runtimeOf). The only place that asks whether something runs in a container.
import type { ContainerCli } from './container.js';
import type { ContainerRecord } from './ops.js';
import { containerRuntime } from './container-runtime.js';
import { hostRuntime } from './host.js';
import type { Runtime } from './runtime.js';

export type {
  Runtime,
  RuntimeKind,
  RuntimeImages,
  ReplicaRun,
  LaunchLine,
  RuntimeTarget,
  Stopped,
  StopOpts,
  Described,
} from './runtime.js';
export { hostRuntime } from './host.js';
export { traitsOfProfile, type RuntimeTraits } from './traits.js';

const byCli: Partial<Record<ContainerCli, Runtime>> = {};
/** The runtime of a container CLI (found as serve finds it: container.ts detectCli). */
export function ofCli(cli: ContainerCli): Runtime {
  byCli[cli] ??= containerRuntime(cli);
  return byCli[cli]!;
}

/** The runtime a serve plan picked: its container CLI (engine.runtime container), else the host. */
export function runtimeFor(plan: { container?: { cli: ContainerCli } }): Runtime {
  return plan.container ? ofCli(plan.container.cli) : hostRuntime;
}

/** The runtime that launched a replica, from its launch record or registry entry. */
export function runtimeOf(t: { container?: Pick<ContainerRecord, 'cli'> }): Runtime {
  return t.container ? ofCli(t.container.cli) : hostRuntime;
}

/**
 * Whether a relaunch runs the executable its record names from this host's install: no container
 * asked for (`runtime`: --runtime or the launch record's) and every recorded replica ran on the host
 * (a runtime without images).
 */
export function relaunchRunsHostInstall(
  runtime: 'host' | 'container' | undefined,
  recorded: Array<{ container?: Pick<ContainerRecord, 'cli'> }>,
): boolean {
  return runtime !== 'container' && recorded.every((t) => runtimeOf(t).images === undefined);
}

/**
 * The marker of a container launch's ledger record, read from a registry entry's raw JSON (undefined: a host process
 * keeps none).
 */
export function ledgerMarkerOf(v: { container?: unknown; marker?: unknown }): string | undefined {
  return v.container && typeof v.marker === 'string' ? v.marker : undefined;
}
