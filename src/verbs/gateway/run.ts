// gateway up | down | status | config | run: read the settings (a file's gateway: block, the flags
// over it), then the library (src/gateway/) does the work.
import { interrupts } from '../../util/interrupt.js';
import { readTextSync } from '../../util/read.js';
import yaml from 'js-yaml';
import { stateDir, sparkctlBin, parseSize } from '../common.js';
import { GatewaySettings, parseAliases, planGateway, exposure } from '../../gateway/plan.js';
import { renderGatewayConfig, haproxyEnv } from '../../gateway/config.js';
import { Keeper, servedInstances } from '../../gateway/keeper.js';
import {
  startGateway,
  stopGateway,
  runningGateway,
  readRecord,
  recordProblem,
  writeRecord,
  viewGateway,
  gatewayUrl,
  modelsRecord,
  gatewayEntry,
  type DownResult,
  type GatewayRecord,
} from '../../gateway/control.js';
import { findHaproxy, INSTALL_FIX } from '../../router/process.js';
import { envelope, table } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { UsageError, ExitWith, ExitCode } from '../../errors.js';
import { processStartTime } from '../../util/pid.js';
import { Registry } from '../../engine/registry.js';
import { downText } from '../gateway-text.js';
import type { UsageCounts } from '../../gateway/usage.js';
import { terminalText } from '../../util/control.js';

interface SettingsFlags {
  port?: number;
  host?: string;
  config?: string;
  alias?: string[];
  apiKeyEnv?: string;
  idleSleep?: string;
  balance?: string;
  onDemand?: string[];
  gpuMemory?: string;
  evict?: string;
  allowUnauthenticated?: boolean;
  json?: boolean;
}

/**
 * The file's gateway: block (a regular file, at most 1 MiB), the flags over it, checked by the schema (every problem
 * named).
 */
export function settingsFrom(o: SettingsFlags): GatewaySettings {
  let block: Record<string, unknown> = {};
  if (o.config) {
    let text: string;
    try {
      // one open of a regular file, bounded (a check, then a read by name, let a FIFO swapped in between hang the verb)
      text = readTextSync(o.config, { maxBytes: 1024 * 1024, what: '--config' });
    } catch (e) {
      throw new UsageError(`--config ${o.config}: ${(e as Error).message}`, ['give a YAML file with a gateway: block']);
    }
    const doc = yaml.load(text) as { gateway?: unknown } | undefined;
    if (!doc || typeof doc !== 'object' || typeof doc.gateway !== 'object' || doc.gateway === null)
      throw new UsageError(`--config ${o.config}: no gateway: block`, [
        'gateway:\n  port: 8080\n  aliases: { coder: Qwen/Qwen3.5-9B }',
      ]);
    block = doc.gateway as Record<string, unknown>;
  }
  // gateway.models from the file, each --on-demand PROFILE added to the set
  const models: Record<string, unknown> = { ...((block.models as Record<string, unknown>) ?? {}) };
  for (const p of o.onDemand ?? []) models[p] = { ...((models[p] as Record<string, unknown>) ?? {}), onDemand: true };
  // gateway.onDemand.gpuMemory ("80GiB") and --gpu-memory become bytes
  const od: Record<string, unknown> = { ...((block.onDemand as Record<string, unknown>) ?? {}) };
  const mem = o.gpuMemory ?? (typeof od.gpuMemory === 'string' ? od.gpuMemory : undefined);
  delete od.gpuMemory;
  if (mem) od.gpuMemoryBytes = parseSize(mem, o.gpuMemory ? '--gpu-memory' : 'gateway.onDemand.gpuMemory');
  if (o.evict) od.evict = o.evict;
  const merged = {
    ...block,
    models,
    onDemand: od,
    ...(o.port !== undefined ? { port: o.port } : {}),
    ...(o.host ? { host: o.host } : {}),
    ...(o.apiKeyEnv ? { apiKeyEnv: o.apiKeyEnv } : {}),
    ...(o.idleSleep ? { idleSleep: o.idleSleep } : {}),
    ...(o.balance ? { balance: o.balance } : {}),
    aliases: { ...((block.aliases as Record<string, string>) ?? {}), ...parseAliases(o.alias ?? []) },
  };
  const r = GatewaySettings.safeParse(merged);
  if (!r.success)
    throw new UsageError(
      'gateway settings are invalid',
      r.error.issues.map((i) => `gateway.${i.path.join('.')}: ${i.message}`),
    );
  return r.data;
}

function settingsArgs(o: SettingsFlags): string[] {
  const a: string[] = [];
  if (o.config) a.push('--config', o.config);
  if (o.port !== undefined) a.push('--port', String(o.port));
  if (o.host) a.push('--host', o.host);
  for (const x of o.alias ?? []) a.push('--alias', x);
  if (o.apiKeyEnv) a.push('--api-key-env', o.apiKeyEnv);
  if (o.idleSleep) a.push('--idle-sleep', o.idleSleep);
  if (o.allowUnauthenticated) a.push('--allow-unauthenticated');
  if (o.balance) a.push('--balance', o.balance);
  for (const p of o.onDemand ?? []) a.push('--on-demand', p);
  if (o.gpuMemory) a.push('--gpu-memory', o.gpuMemory);
  if (o.evict) a.push('--evict', o.evict);
  return a;
}

function haproxyOf(s: GatewaySettings): string {
  const h = findHaproxy(s.bin);
  if (!h) throw new UsageError('the gateway needs HAProxy, and it is not installed here', [INSTALL_FIX]);
  return h;
}

export async function up(o: SettingsFlags) {
  const s = settingsFrom(o);
  const warn = exposure(s, !!o.allowUnauthenticated);
  if (warn) note(warn);
  haproxyOf(s);
  const plan = planGateway(s, servedInstances(stateDir()), stateDir());
  const { missing } = haproxyEnv(plan, process.env);
  if (s.apiKeyEnv && missing.includes(s.apiKeyEnv))
    throw new UsageError(`--api-key-env ${s.apiKeyEnv}: the variable is not set`, [
      `export ${s.apiKeyEnv}=... (the key never goes into a file or argv)`,
    ]);
  for (const v of missing) note(`gateway: $${v} is not set: requests for its model will carry no key`);
  const r = await startGateway({ bin: sparkctlBin(), args: settingsArgs(o), stateDir: stateDir() });
  if (o.json) return say(envelope('gateway', { state: 'running', ...r, url: gatewayUrl(r) }));
  say(
    `gateway: ${gatewayUrl(r)}/v1 (keeper pid ${r.pid}, HAProxy pid ${r.haproxyPid}): ${r.models.length} model(s)${r.models.length ? `: ${r.models.map((m) => m.name).join(', ')}` : ''}`,
  );
  for (const [a, m] of Object.entries(r.aliases)) say(`  alias ${a} -> ${m}`);
  say(`  stats: http://127.0.0.1:${r.statsPort}/stats; log: ${r.logFile}`);
}

export async function down(o: { json?: boolean; forceForget?: boolean }) {
  const release = await new Registry(stateDir()).lock(60_000);
  let r: DownResult;
  try {
    r = await stopGateway(stateDir(), undefined, { forceForget: o.forceForget });
  } finally {
    release();
  }
  if (o.json) say(envelope('gateway-down', { ...r }));
  else say(downText(r));
  if ((r.how === 'unproven' && !r.forgotten) || r.how === 'unmanaged' || r.left) throw new ExitWith(ExitCode.problems);
}

export async function status(o: { json?: boolean }) {
  const r = runningGateway(stateDir());
  if (!r) {
    sayNotRunning(o.json);
    throw new ExitWith(ExitCode.problems);
  }
  const v = await viewGateway(r);
  if (o.json)
    return say(
      envelope('gateway-status', {
        state: 'running',
        url: gatewayUrl(r),
        pid: r.pid,
        haproxyPid: r.haproxyPid,
        managed: r.managed,
        aliases: r.aliases,
        usageRecorded: v.usageRecorded,
        ...(v.unattributed !== undefined ? { unattributed: v.unattributed } : {}),
        models: v.models,
      }),
    );
  // (each model: name, profile, state, queued, servers, asleep, sleepMode, onDemand when in the set)
  say(
    `gateway: ${gatewayUrl(r)}/v1 (keeper pid ${r.pid}, HAProxy pid ${r.haproxyPid})${r.managed ? '' : ' in the foreground (not started by gateway up: stop --all leaves it to its service manager)'}`,
  );
  if (!v.models.length) return say('  no models yet (it follows sparkctl serve)');
  say(modelsTable(v.models));
  if (!v.usageRecorded) say('  tokens and prefix hits are not counted: this HAProxy is built without Lua');
  if (v.unattributed)
    say(
      `  ${n(v.unattributed)} request(s) for no model it routes (no key, an unknown model, none named), answered by the gateway itself`,
    );
  else if (v.models.some((m) => m.usage?.streamsWithoutUsage))
    say(
      '  ~N: streams whose client did not ask for usage (stream_options.include_usage), counted by their chunks (about a token each), not in the tokens',
    );
}

/** A gateway that does not run whole, said: degraded, unproven, starting or stopped, or its record unreadable. */
function sayNotRunning(json: boolean | undefined): void {
  // launched, but not (or no longer) whole: a keeper that died with HAProxy left, or a record that cannot be proven
  const e = gatewayEntry(stateDir())?.entry;
  const state =
    e?.proof.state === 'degraded'
      ? 'degraded'
      : e?.proof.state === 'unproven'
        ? 'unproven'
        : e?.alive
          ? 'starting'
          : 'stopped';
  // a record that is there but cannot be read is said, never taken for "not running"
  const unreadable = recordProblem(stateDir());
  if (json)
    say(
      envelope('gateway-status', {
        state,
        ...(e && state !== 'stopped' ? { pid: e.launch.pid } : {}),
        ...(unreadable ? { recordUnreadable: unreadable } : {}),
      }),
    );
  else if (unreadable)
    say(
      `gateway: ${state === 'stopped' ? 'state unknown' : state}: its record cannot be read (${unreadable}); sparkctl gateway down stops a gateway it launched, and gateway up writes the record again`,
    );
  else
    say(
      state === 'degraded'
        ? `gateway: DEGRADED: its keeper (pid ${e!.launch.pid}) is gone, HAProxy still runs: sparkctl gateway down stops it`
        : state === 'unproven'
          ? `gateway: pid ${e!.launch.pid} cannot be proven ours (${e!.proof.state === 'unproven' ? e!.proof.reason : ''}): never signalled; sparkctl gateway down --force-forget drops the record`
          : state === 'starting'
            ? `gateway: starting (keeper pid ${e!.launch.pid})`
            : 'gateway: not running',
    );
}

/** What viewGateway reads of a running gateway (its models, their usage). */
type GatewayView = Awaited<ReturnType<typeof viewGateway>>;

/** The models table: one row a model (its state, queue, on-demand swaps, servers, tokens and prefix hits). */
function modelsTable(models: GatewayView['models']): string {
  return table(
    models.map((m) => [
      m.name,
      m.profile,
      m.state === 'running'
        ? `running (${m.servers.filter((x) => x.state === 'up').length}/${m.servers.length} up)`
        : m.state,
      String(m.queued),
      m.onDemand
        ? `${m.onDemand.pinned ? 'pinned; ' : ''}start ${m.onDemand.lastStartMs ?? '-'} ms, evict ${m.onDemand.lastEvictMs ?? '-'} ms (${m.onDemand.starts}/${m.onDemand.evictions})`
        : '-',
      m.servers.map((x) => `${x.name}:${x.state}`).join(' ') || '-',
      m.usage ? usageCell(m.usage) : '-',
      m.usage ? prefixCell(m.usage) : '-',
    ]),
    [
      'MODEL',
      'PROFILE',
      'STATE',
      'QUEUED',
      'ON DEMAND (last swap; starts/evictions)',
      'SERVERS',
      'TOKENS (prompt/completion)',
      'PREFIX (hit/spill/new)',
    ],
  );
}

const n = (v: number) => Math.round(v).toLocaleString('en-US');

/** Tokens the answers said, and the streams that said none (their chunks, an estimate, apart). */
function usageCell(u: UsageCounts): string {
  const est = u.streamsWithoutUsage ? `; ${n(u.streamsWithoutUsage)} stream(s) ~${n(u.chunksWithoutUsage)}` : '';
  return `${n(u.prompt)}/${n(u.completion)} (${n(u.withUsage)} of ${n(u.requests)} req${est})`;
}

function prefixCell(u: UsageCounts): string {
  const { hit, spill, new: fresh } = u.prefix;
  const seen = hit + spill;
  return `${n(hit)}/${n(spill)}/${n(fresh)}${seen ? ` (${Math.round((100 * hit) / seen)} % hit)` : ''}`;
}

export async function config(o: SettingsFlags) {
  const s = settingsFrom(o);
  const plan = planGateway(s, servedInstances(stateDir()), stateDir());
  say(renderGatewayConfig(plan));
  for (const x of plan.skipped) note(`left out: ${x}`);
}

/** What gateway status shows of the keeper now: its models, the on-demand set, the usage counts. */
function views(keeper: Keeper): Pick<GatewayRecord, 'models' | 'onDemand' | 'usage'> {
  const onDemand = keeper.od?.view();
  const usage = keeper.usage ? { models: keeper.usage.view(), unattributed: keeper.usage.unattributed } : undefined;
  return { models: modelsRecord(keeper.routed), ...(onDemand ? { onDemand } : {}), ...(usage ? { usage } : {}) };
}

/** The keeper in the foreground: SIGTERM/SIGINT end it (HAProxy soft-stopped first). */
export async function runForeground(o: SettingsFlags) {
  const s = settingsFrom(o);
  // every start says it (gateway up's keeper, a service manager's restart), into the keeper's log
  const warn = exposure(s, !!o.allowUnauthenticated);
  if (warn) process.stderr.write(`${new Date().toISOString()} gateway: ${terminalText(warn)}\n`);
  const haproxy = haproxyOf(s);
  // for the keeper's whole life: the first ends it (HAProxy soft-stopped first), a second at once
  const ac = interrupts();
  const dir = stateDir();
  const log = (line: string) => process.stderr.write(`${new Date().toISOString()} ${terminalText(line)}\n`);
  // set once the record exists (a change before it is in the first record)
  let changed: (usage?: boolean) => void = () => {};
  const keeper = new Keeper({
    settings: s,
    stateDir: dir,
    haproxy,
    sparkctl: sparkctlBin(),
    log,
    signal: ac.signal,
    onChange: (usage) => changed(usage),
    onReady: ({ haproxyPid, plan }) => {
      writeRecord(dir, {
        version: 1,
        pid: process.pid,
        pgid: process.pid,
        startTime: processStartTime(process.pid) ?? 0,
        launch: process.env.SPARKCTL_GATEWAY_MARKER ?? '',
        haproxyPid,
        url: `http://${plan.bind.host}:${plan.bind.port}`,
        host: plan.bind.host,
        port: plan.bind.port,
        statsPort: plan.stats.port,
        keeperSocket: plan.keeper.socket,
        socket: plan.files.socket,
        master: plan.files.master,
        configFile: plan.files.config,
        logFile: plan.files.log,
        apiKeyEnv: plan.apiKeyEnv,
        startedAt: new Date().toISOString(),
        aliases: plan.aliases,
        // the models, the on-demand set and whether usage is counted: from the first record on
        ...views(keeper),
      });
    },
  });
  // the record follows the models (gateway status reads it): written as soon as the keeper says what
  // status shows changed (a reload, an on-demand start or eviction, a sleep), the usage counts at most
  // every 250 ms, and checked every second as well
  let usageTimer: NodeJS.Timeout | undefined;
  const refresh = () => {
    const r = readRecord(dir);
    if (!r || r.pid !== process.pid || !keeper.plan) return;
    const v = views(keeper);
    if (
      JSON.stringify(v.models) !== JSON.stringify(r.models) ||
      JSON.stringify(v.onDemand) !== JSON.stringify(r.onDemand) ||
      JSON.stringify(v.usage) !== JSON.stringify(r.usage)
    )
      writeRecord(dir, { ...r, ...v });
  };
  changed = (usage) => {
    if (!usage) return refresh();
    usageTimer ??= setTimeout(() => {
      usageTimer = undefined;
      refresh();
    }, 250);
  };
  const every = setInterval(refresh, 1000);
  try {
    await keeper.run();
  } finally {
    clearInterval(every);
    clearTimeout(usageTimer);
  }
}
