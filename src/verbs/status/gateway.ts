// The gateway's line and `gateway` key in status: from the registry's launch record and the keeper's details.
import type { Registry } from '../../engine/registry.js';
import { c } from '../../output/format.js';
import { runningGateway, gatewayUrl } from '../../gateway/control.js';

/**
 * The gateway as status shows it (the `gateway` key of --json): from the registry's launch record and the keeper's
 * details.
 */
interface GatewayStatus {
  state: 'running' | 'starting' | 'degraded' | 'unproven';
  /**
   * launched by gateway up (stop --all and gateway down stop it); false: a foreground `gateway run` (its service
   * manager's)
   */
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

export function gatewayStatus(reg: Registry): GatewayStatus | undefined {
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
  if (e.proof.state === 'unproven')
    return {
      ...base,
      state: 'unproven',
      why: `${e.proof.reason} (never signalled; sparkctl gateway down --force-forget drops the record)`,
    };
  if (e.proof.state === 'degraded')
    return {
      ...base,
      state: 'degraded',
      why: `its keeper ${e.launch.pid} is gone; ${e.proof.members.length} process(es) of its group (HAProxy) still run: sparkctl gateway down or stop --all stops them`,
    };
  return { ...base, state: 'starting' };
}

export function gatewayLine(g: GatewayStatus): string {
  if (g.state !== 'running')
    return `gateway: ${g.state === 'starting' ? c.yellow('starting') : c.red(g.state.toUpperCase())} (keeper pid ${g.pid})`;
  const n = g.models?.length ?? 0;
  return `gateway: ${c.green('running')} on ${g.url} (keeper pid ${g.pid}, HAProxy pid ${g.haproxyPid}): ${n} model${n === 1 ? '' : 's'}${n ? ` (${g.models!.join(', ')})` : ''}${g.managed ? '' : ' [foreground: not stopped by stop --all]'}`;
}
