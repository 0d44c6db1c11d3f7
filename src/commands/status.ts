import { Registry } from '../engine/registry.js';
import { stateDir } from './common.js';
import { http } from '../client/http.js';
import { targetFromInstance } from '../health/target.js';
import { envelope, table, c, formatDuration } from '../output/format.js';
import { say, note } from '../output/log.js';

export async function run(opts: { json?: boolean }) {
  const reg = new Registry(stateDir());
  const all = reg.list();
  const rows = await Promise.all(
    all.map(async ({ inst, alive }) => {
      let health = 'stale';
      if (alive) {
        const h = await http(`${targetFromInstance(inst).url}/health`, { timeoutMs: 1500 });
        health = h.ok ? (h.status === 200 ? 'healthy' : h.status === 503 ? 'engine dead' : `HTTP ${h.status}`) : h.error === 'refused' ? (inst.readyAt ? 'refused' : 'starting') : h.error;
      }
      return { inst, alive, health, uptimeMs: Date.now() - Date.parse(inst.startedAt) };
    }),
  );
  // A dead pid (or a pid reused by another process) is not our server: clean the entry.
  const stale = rows.filter((r) => !r.alive);
  for (const r of stale) reg.remove(r.inst.name);
  if (opts.json) {
    say(
      envelope('status', {
        clusters: (await (await import('./nodes.js')).clusterStatuses()).map((x) => ({ ...x.record, state: x.state, server: x.server, nodes: x.nodes })),
        instances: rows.map((r) => ({ name: r.inst.name, profile: r.inst.profile, replica: r.inst.replica, pid: r.inst.pid, alive: r.alive, health: r.health, port: r.inst.port, url: targetFromInstance(r.inst).url, gpus: r.inst.gpus, engine: r.inst.engine, uptimeSeconds: Math.round(r.uptimeMs / 1000), logFile: r.inst.logFile, removed: !r.alive })),
      }),
    );
    return;
  }
  // Multi-node servers (serve --nodes) run on other hosts: the head's server and each node's Ray.
  const { clusterStatuses, renderClusterStatus } = await import('./nodes.js');
  const clusters = await clusterStatuses();
  if (!rows.length && !clusters.length) return say('no servers registered');
  if (clusters.length) {
    say(clusters.map(renderClusterStatus).join('\n\n'));
    if (!rows.length) return;
    say('');
  }
  say(
    table(
      rows.map((r) => [
        r.inst.name,
        r.inst.profile,
        String(r.inst.pid),
        r.alive ? c.green('alive') : c.red('dead'),
        r.health === 'healthy' ? c.green(r.health) : c.yellow(r.health),
        String(r.inst.port),
        r.alive ? formatDuration(r.uptimeMs) : '-',
        r.inst.gpus.join(',') + (r.inst.engine === 'sim' ? ' (sim)' : ''),
      ]),
      ['NAME', 'PROFILE', 'PID', 'PROCESS', 'HEALTH', 'PORT', 'UPTIME', 'GPUS'],
    ),
  );
  if (stale.length) note(`removed ${stale.length} stale entr${stale.length === 1 ? 'y' : 'ies'} (process gone or pid reused): ${stale.map((r) => r.inst.name).join(', ')}`);
}
