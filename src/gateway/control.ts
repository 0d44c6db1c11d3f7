// gateway up / down / status: the keeper (`sparkctl gateway run`) started in its own process group
// with a marker, its record (gateway.json, written by the keeper once HAProxy answers), and a stop
// that proves the keeper is ours before it signals: SIGTERM to the keeper, which soft-stops HAProxy
// (the requests in flight finish), then the group is stopped if anything is left.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, lstatSync, openSync, closeSync, mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { writeFileAtomic } from '../util/fs.js';
import { pause } from '../util/pause.js';
import { processStartTime } from '../util/pid.js';
import { proveIdentity, signalProven, stopGroup, groupMembers } from '../engine/runtime/proc.js';
import { showStat, serverState, type ServerStat } from '../router/api.js';
import { UsageError, LaunchError } from '../errors.js';
import type { GatewayModel } from './plan.js';

export interface GatewayRecord {
  version: 1;
  pid: number;
  pgid: number;
  startTime: number;
  /** the launch's id (SPARKCTL_GATEWAY_MARKER), by which gateway up knows its keeper's record */
  launch: string;
  haproxyPid: number;
  url: string;
  host: string;
  port: number;
  statsPort: number;
  wakerPort: number;
  socket: string;
  configFile: string;
  logFile: string;
  apiKeyEnv?: string;
  startedAt: string;
  models: Array<{ name: string; profile: string; backend: string; servers: string[]; sleepMode: boolean }>;
  aliases: Record<string, string>;
}

export const recordPath = (stateDir: string) => join(stateDir, 'gateway', 'gateway.json');

/** The record, if there is one (a regular file, at most 1 MiB, of the right shape); hostile like any file. */
export function readRecord(stateDir: string): GatewayRecord | undefined {
  const p = recordPath(stateDir);
  try {
    const st = lstatSync(p);
    if (!st.isFile() || st.size > 1024 * 1024) return undefined;
    const r = JSON.parse(readFileSync(p, 'utf8')) as GatewayRecord;
    return r && r.version === 1 && Number.isInteger(r.pid) && Number.isInteger(r.startTime) && typeof r.launch === 'string' ? r : undefined;
  } catch {
    return undefined;
  }
}

export function writeRecord(stateDir: string, r: GatewayRecord) {
  writeFileAtomic(recordPath(stateDir), `${JSON.stringify(r, null, 2)}\n`, { mode: 0o600 });
}

export const modelsRecord = (ms: GatewayModel[]) => ms.map((m) => ({ name: m.name, profile: m.profile, backend: m.backend, servers: m.servers.map((s) => s.name), sleepMode: m.sleepMode }));

/** The running gateway, proven ours (pid + start time + marker), or undefined. */
export function runningGateway(stateDir: string): GatewayRecord | undefined {
  const r = readRecord(stateDir);
  if (!r) return undefined;
  const proof = proveIdentity(r);
  return proof.state === 'alive' ? r : undefined;
}

export const gatewayUrl = (r: Pick<GatewayRecord, 'host' | 'port'>) => `http://${r.host === '0.0.0.0' || r.host === '::' ? '127.0.0.1' : r.host}:${r.port}`;

/** Start the keeper and wait until it says HAProxy answers (its record), at most deadlineMs. */
export async function startGateway(o: { bin: string; args: string[]; stateDir: string; deadlineMs?: number }): Promise<GatewayRecord> {
  const already = runningGateway(o.stateDir);
  if (already) throw new UsageError(`a gateway already runs (pid ${already.pid}) on ${gatewayUrl(already)}`, ['sparkctl gateway down stops it; sparkctl gateway status shows it']);
  const marker = randomUUID();
  const log = join(o.stateDir, 'logs', 'gateway-keeper.log');
  mkdirSync(dirname(log), { recursive: true });
  const fd = openSync(log, 'a', 0o600);
  const child = spawn(process.execPath, [o.bin, 'gateway', 'run', ...o.args], {
    detached: true,
    stdio: ['ignore', fd, fd],
    // no SPARKCTL_INSTANCE: that marks a server of the registry, and the registry would adopt the keeper as one
    env: { ...process.env, SPARKCTL_GATEWAY_MARKER: marker, SPARKCTL_STATE_DIR: o.stateDir },
  });
  closeSync(fd);
  child.unref();
  const end = Date.now() + (o.deadlineMs ?? 20_000);
  while (Date.now() < end) {
    const r = readRecord(o.stateDir);
    if (r && r.launch === marker && r.pid === child.pid) return r;
    if (child.exitCode !== null) break;
    await pause(50);
  }
  const tail = (() => {
    try {
      return readFileSync(log, 'utf8').split('\n').slice(-8).join('\n');
    } catch {
      return '';
    }
  })();
  if (child.pid && child.exitCode === null) {
    const st = processStartTime(child.pid);
    if (st) await stopGroup({ pid: child.pid, pgid: child.pid, startTime: st }, 3000);
  }
  throw new LaunchError(`the gateway did not come up${child.exitCode !== null ? ` (the keeper exited with code ${child.exitCode})` : ''}`, [tail || `see ${log}`]);
}

export interface DownResult {
  how: 'not-running' | 'stopped' | 'killed' | 'unproven';
  ms: number;
  pid?: number;
}

export async function stopGateway(stateDir: string, graceMs = 35_000): Promise<DownResult> {
  const r = readRecord(stateDir);
  const t0 = performance.now();
  const ms = () => Math.round(performance.now() - t0);
  if (!r) return { how: 'not-running', ms: 0 };
  const proof = proveIdentity(r);
  if (proof.state === 'gone') return { how: 'not-running', ms: 0 };
  if (proof.state === 'unproven') return { how: 'unproven', ms: 0, pid: r.pid };
  // the keeper soft-stops HAProxy itself (its streams finish), then exits
  if (signalProven(r, 'SIGTERM', 'leader')) {
    const end = Date.now() + graceMs;
    while (Date.now() < end && groupMembers(r.pgid).length) await pause(50);
  }
  if (!groupMembers(r.pgid).length) return { how: 'stopped', ms: ms(), pid: r.pid };
  const how = await stopGroup(r, 3000);
  return { how: how === 'killed' ? 'killed' : how === 'unproven' ? 'unproven' : 'stopped', ms: ms(), pid: r.pid };
}

export interface GatewayView {
  record: GatewayRecord;
  models: Array<{ name: string; profile: string; sleepMode: boolean; servers: Array<{ name: string; state: string; check: string; inFlight: number }>; asleep: boolean }>;
}

/** The gateway's models as HAProxy sees them now (its runtime API). */
export async function viewGateway(r: GatewayRecord): Promise<GatewayView> {
  let stats: ServerStat[] = [];
  try {
    stats = await showStat(r.socket, 2000);
  } catch {
    /* silent runtime API: every server reads missing */
  }
  return {
    record: r,
    models: r.models.map((m) => {
      const servers = m.servers.map((name) => {
        const st = stats.find((s) => s.backend === m.backend && s.server === name);
        return { name, state: st ? serverState(st) : 'missing', check: st ? `${st.checkStatus} ${st.lastCheck}`.trim() : '', inFlight: st ? st.scur + st.qcur : 0 };
      });
      const asleep = m.sleepMode && servers.length > 0 && servers.every((s) => s.state === 'maint' || (s.state === 'down' && s.check.startsWith('L7RSP')));
      return { name: m.name, profile: m.profile, sleepMode: m.sleepMode, servers, asleep };
    }),
  };
}
