// status's two renderings of the same rows: the --json envelope's instances, and the table.
import { startOf } from '../../engine/start-shape.js';
import { runtimeOf } from '../../engine/runtime/index.js';
import { targetFromInstance } from '../../engine/target.js';
import type { InstanceStatus } from '../../engine/status.js';
import { table, c, formatDuration } from '../../output/format.js';

/** One instance of the `status` envelope (its shape is pinned by tests). */
export function instanceJson(r: InstanceStatus) {
  return {
    name: r.inst.name,
    profile: r.inst.profile,
    replica: r.inst.replica,
    pid: r.inst.pid,
    ...runtimeOf(r.inst).describe(r.inst).envelope,
    alive: r.alive,
    process: r.process.toLowerCase(),
    ...(r.why ? { why: r.why } : {}),
    recovered: r.recovered,
    health: r.health,
    ...(r.health === 'sleeping' ? { sleep: { level: r.sleepLevel ?? null } } : {}),
    port: r.inst.port,
    // a replica on vLLM's --uds: its socket (url is then http+unix://, which sparkctl's readers take); its port is not
    // listened on
    ...(r.inst.uds ? { socket: r.inst.uds } : {}),
    url: targetFromInstance(r.inst).url,
    gpus: r.inst.gpus,
    engine: r.inst.engine,
    uptimeSeconds: Math.round(r.uptimeMs / 1000),
    logFile: r.inst.logFile,
    // where its start's time went (engine/phases.ts), as its entry kept it, checked: null when absent or malformed
    start: startOf(r.inst.start),
    ...(r.inst.role ? { role: r.inst.role } : {}),
    removed: r.process === 'dead',
  };
}

export function instanceTable(rows: readonly InstanceStatus[]): string {
  return table(
    rows.map((r) => [
      r.inst.name,
      r.inst.profile,
      // what identifies it: a pid, or a container's id (its processes are the runtime's)
      runtimeOf(r.inst).describe(r.inst).shown,
      r.process === 'alive' ? c.green('alive') : c.red(r.process),
      r.health.startsWith('healthy')
        ? c.green(r.health)
        : r.health === 'sleeping'
          ? c.bold(`sleeping${r.sleepLevel ? ` (level ${r.sleepLevel})` : ''}`)
          : c.yellow(r.health),
      r.inst.uds ? 'socket' : String(r.inst.port),
      r.alive ? formatDuration(r.uptimeMs) : '-',
      r.inst.gpus.join(',') + (r.inst.engine === 'sim' ? ' (sim)' : ''),
    ]),
    ['NAME', 'PROFILE', 'PID', 'PROCESS', 'HEALTH', 'PORT', 'UPTIME', 'GPUS'],
  );
}

/** The note under the table for a row that is not plainly alive or dead. */
export function whyNote(r: InstanceStatus): string {
  return `${r.inst.name}: ${r.process}: ${r.why}${r.process === 'UNPROVEN' ? ' (never signalled; sparkctl stop --force-forget drops the record)' : ' (sparkctl stop stops the rest of the group)'}`;
}
