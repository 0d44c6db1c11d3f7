import { Registry, type Instance } from '../../engine/registry.js';
import { runtimeOf } from '../../engine/runtime/index.js';
import { stateDir } from '../common.js';
import { http } from '../../client/http.js';
import { targetFromInstance } from '../../engine/target.js';
import { envelope, table, c, formatDuration } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { sleepCapable } from '../../engine/sleep.js';
import { readSleep } from '../../client/sleep.js';
import { runningGateway, gatewayUrl } from '../../gateway/control.js';

export async function run(opts: { json?: boolean }) {
  const reg = new Registry(stateDir());
  const all = reg.list();
  for (const c of reg.corrupt) note(`unreadable registry entry ${c.file} (${c.reason}): kept as ${c.keptAs}`);
  const rows = await Promise.all(
    all.map(async ({ inst, alive, proof, recovered }) => {
      let health = proof.state === 'unproven' ? 'unproven' : 'stale';
      let sleepLevel: number | undefined;
      const procState = proof.state === 'gone' ? 'dead' : proof.state === 'unproven' ? 'UNPROVEN' : proof.state === 'degraded' ? 'DEGRADED' : 'alive';
      const why = proof.state === 'unproven' ? proof.reason : proof.state === 'degraded' ? `its API server ${inst.pid} is gone; ${proof.members.length} process(es) of its group still run` : undefined;
      if (recovered) health = 'entry corrupt';
      else if (proof.state === 'degraded') health = 'degraded';
      else if (alive && inst.role === 'router' && inst.router) health = await routerHealth(inst.router);
      else if (alive) {
        const h = await http(`${targetFromInstance(inst).url}/health`, { timeoutMs: 1500 });
        health = h.ok ? (h.status === 200 ? 'healthy' : h.status === 503 ? 'engine dead' : `HTTP ${h.status}`) : h.error === 'refused' ? (inst.readyAt ? 'refused' : 'starting') : h.error;
        // a sleeping vLLM answers /health 200: only its own route tells (health/sleep.ts)
        if (health === 'healthy' && sleepCapable(inst)) {
          const s = await readSleep(targetFromInstance(inst).url, 1500);
          if (s.state === 'sleeping') {
            health = 'sleeping';
            sleepLevel = s.level;
          }
        }
      }
      return { inst, alive, health, sleepLevel, process: procState, why, recovered: Boolean(recovered), uptimeMs: Date.now() - Date.parse(inst.startedAt) };
    }),
  );
  // Only an entry with nothing of it left is cleaned; one we cannot prove is reported, never dropped.
  const stale = rows.filter((r) => r.process === 'dead');
  for (const r of stale) reg.remove(r.inst.name);
  const gateway = gatewayStatus(reg);
  if (opts.json) {
    say(
      envelope('status', {
        gateway: gateway ?? null,
        clusters: (await (await import('../nodes.js')).clusterStatuses()).map((x) => ({ ...x.record, state: x.state, server: x.server, nodes: x.nodes })),
        instances: rows.map((r) => ({
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
          url: targetFromInstance(r.inst).url,
          gpus: r.inst.gpus,
          engine: r.inst.engine,
          uptimeSeconds: Math.round(r.uptimeMs / 1000),
          logFile: r.inst.logFile,
          ...(r.inst.role ? { role: r.inst.role } : {}),
          removed: r.process === 'dead',
        })),
        corrupt: reg.corrupt,
      }),
    );
    return;
  }
  // Multi-node servers (serve --nodes) run on other hosts: the head's server and each node's Ray.
  const { clusterStatuses, renderClusterStatus } = await import('../nodes.js');
  const clusters = await clusterStatuses();
  if (gateway) {
    say(gatewayLine(gateway));
    if (gateway.why) note(`gateway: ${gateway.why}`);
  }
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
        // what identifies it: a pid, or a container's id (its processes are the runtime's)
        runtimeOf(r.inst).describe(r.inst).shown,
        r.process === 'alive' ? c.green('alive') : c.red(r.process),
        r.health.startsWith('healthy') ? c.green(r.health) : r.health === 'sleeping' ? c.bold(`sleeping${r.sleepLevel ? ` (level ${r.sleepLevel})` : ''}`) : c.yellow(r.health),
        String(r.inst.port),
        r.alive ? formatDuration(r.uptimeMs) : '-',
        r.inst.gpus.join(',') + (r.inst.engine === 'sim' ? ' (sim)' : ''),
      ]),
      ['NAME', 'PROFILE', 'PID', 'PROCESS', 'HEALTH', 'PORT', 'UPTIME', 'GPUS'],
    ),
  );
  for (const r of rows)
    if (r.why)
      note(`${r.inst.name}: ${r.process}: ${r.why}${r.process === 'UNPROVEN' ? ' (never signalled; sparkctl stop --force-forget drops the record)' : ' (sparkctl stop stops the rest of the group)'}`);
  if (stale.length) note(`removed ${stale.length} stale entr${stale.length === 1 ? 'y' : 'ies'} (process gone or pid reused): ${stale.map((r) => r.inst.name).join(', ')}`);
}

/** A router's health in status: how many of its replicas HAProxy sends traffic to. */
async function routerHealth(rec: NonNullable<Instance['router']>): Promise<string> {
  const { showStat, serverState } = await import('../../router/api.js');
  try {
    const st = (await showStat(rec.socket, 1500)).filter((s) => s.backend === rec.backend);
    const up = st.filter((s) => serverState(s) === 'up').length;
    return up === rec.servers.length ? `healthy (${up}/${rec.servers.length} up)` : `${up}/${rec.servers.length} up`;
  } catch {
    return 'runtime API silent';
  }
}

/** The gateway as status shows it (the `gateway` key of --json): from the registry's launch record and the keeper's details. */
interface GatewayStatus {
  state: 'running' | 'starting' | 'degraded' | 'unproven';
  /** launched by gateway up (stop --all and gateway down stop it); false: a foreground `gateway run` (its service manager's) */
  managed: boolean;
  pid: number;
  haproxyPid?: number;
  url?: string;
  port?: number;
  models?: string[];
  aliases?: Record<string, string>;
  startedAt?: string;
  logFile?: string;
  why?: string;
}

function gatewayStatus(reg: Registry): GatewayStatus | undefined {
  const running = runningGateway(reg.stateDir);
  if (running)
    return {
      state: 'running',
      managed: running.managed,
      pid: running.pid,
      haproxyPid: running.haproxyPid,
      url: `${gatewayUrl(running)}/v1`,
      port: running.port,
      models: Array.isArray(running.models) ? running.models.map((m) => String(m.name)) : [],
      aliases: running.aliases,
      startedAt: running.startedAt,
      logFile: running.logFile,
    };
  const e = reg.gateway();
  if (!e) return undefined;
  // nothing of it is left: its record goes, as a dead server's entry does
  if (e.proof.state === 'gone') {
    reg.removeGateway();
    return undefined;
  }
  const base = { managed: true, pid: e.launch.pid, logFile: e.launch.logFile };
  if (e.proof.state === 'unproven') return { ...base, state: 'unproven', why: `${e.proof.reason} (never signalled; sparkctl gateway down --force-forget drops the record)` };
  if (e.proof.state === 'degraded')
    return {
      ...base,
      state: 'degraded',
      why: `its keeper ${e.launch.pid} is gone; ${e.proof.members.length} process(es) of its group (HAProxy) still run: sparkctl gateway down or stop --all stops them`,
    };
  return { ...base, state: 'starting' };
}

function gatewayLine(g: GatewayStatus): string {
  if (g.state !== 'running') return `gateway: ${g.state === 'starting' ? c.yellow('starting') : c.red(g.state.toUpperCase())} (keeper pid ${g.pid})`;
  const n = g.models?.length ?? 0;
  return `gateway: ${c.green('running')} on ${g.url} (keeper pid ${g.pid}, HAProxy pid ${g.haproxyPid}): ${n} model${n === 1 ? '' : 's'}${n ? ` (${g.models!.join(', ')})` : ''}${g.managed ? '' : ' [foreground: not stopped by stop --all]'}`;
}
