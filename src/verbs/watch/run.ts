// watch: one watcher per state folder (a lock), then the supervisor's loop until a signal. The hands
// it gives the supervisor: the restart is `sparkctl restart` run as a child (the very code path a
// person's restart takes: identity proof, the one stop, serve with the settings it was served with;
// --rolling --replica for a replica behind its router), the deep probe is the probe's own identity
// and 1-token checks, incidents go to the history `report` reads and to the probe's webhook.
import { interrupts } from '../../util/interrupt.js';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { stateDir } from '../common.js';
import { sparkctlBin } from '../../engine/plan.js';
import { readLaunch, Registry, type Entry } from '../../engine/registry.js';
import { recordedProfiles } from '../../engine/relaunch.js';
import type { InstanceTarget } from '../../engine/target.js';
import { clusterStatus } from '../../engine/cluster/index.js';
import { readGpuRows, readXid } from '../../health/gpu.js';
import { RealHost } from '../../host/real.js';
import { readTextSync } from '../../util/read.js';
import { parseComputeApps, parseMeminfo, type GpuFacts } from '../../watch/gpu.js';
import type { ClusterRecord } from '../../engine/registry.js';
import { identityCheck, inferenceCheck, probe, type ProbeResult } from '../../health/probe.js';
import { saveStateAndAlert } from '../../health/alerts.js';
import { appendSample } from '../../history/store.js';
import { buildSample } from '../../history/sample.js';
import { WatchBlock } from '../../profiles/watch-block.js';
import { loadNodesFile, loadProfile } from '../../profiles/load.js';
import { lockFile } from '../../util/lock.js';
import { ensureDir } from '../../util/dirs.js';
import { checkNewFile, writeNewFile, wroteItLast, recordOwnWrite } from '../../util/new-file.js';
import { pause } from '../../util/pause.js';
import { redactText } from '../../util/redact.js';
import { parseServerUrl } from '../../util/url.js';
import { say, note } from '../../output/log.js';
import { UsageError, ExitWith, ExitCode } from '../../errors.js';
import { Watcher, type Hands, type Incident, type RestartHow, type WatchEvent } from '../../watch/supervisor.js';
import { renderTextfile } from '../../watch/textfile.js';
import { PROM_FIX } from '../../health/prometheus.js';

interface WatchOptions {
  all?: boolean;
  interval: number;
  dryRun?: boolean;
  once?: boolean;
  action?: 'restart' | 'alert' | 'none';
  window?: number;
  probeTimeout?: number;
  maxRestarts?: number;
  restartWindow?: number;
  prometheus?: string;
  force?: boolean;
  alertWebhook?: string;
  history?: boolean;
  json?: boolean;
}

/** The flags over a profile's watch: block, checked by the block's own schema (a bad value names its flag). */
export function policyWith(block: Partial<WatchBlock>, o: WatchOptions): WatchBlock {
  const over: Partial<WatchBlock> = {
    ...(o.action ? { action: o.action } : {}),
    ...(o.window !== undefined ? { windowSeconds: o.window } : {}),
    ...(o.probeTimeout !== undefined ? { probeTimeoutSeconds: o.probeTimeout } : {}),
    ...(o.maxRestarts !== undefined ? { circuitRestarts: o.maxRestarts } : {}),
    ...(o.restartWindow !== undefined ? { circuitWindowMinutes: o.restartWindow / 60 } : {}),
  };
  const r = WatchBlock.safeParse({ ...block, ...over });
  if (r.success) return r.data;
  const flag: Record<string, string> = {
    windowSeconds: '--window',
    probeTimeoutSeconds: '--probe-timeout',
    circuitRestarts: '--max-restarts',
    circuitWindowMinutes: '--restart-window',
  };
  const i = r.error.issues[0]!;
  const field = String(i.path[0] ?? '');
  throw new UsageError(`${flag[field] ?? `watch.${field}`}: ${i.message}`, [
    'see sparkctl watch --help for the ranges',
  ]);
}

function line(e: WatchEvent): string {
  const t = new Date().toISOString();
  switch (e.kind) {
    case 'start':
      return `${t} watch: watching ${e.watching} in ${e.stateDir} every ${e.intervalS} s${e.dryRun ? ' (dry run: nothing is stopped or started)' : ''}`;
    case 'verdict':
      return `${t} ${e.target}: ${e.verdict}${e.from ? ` (was ${e.from})` : ''}: ${e.why}${e.verdict === 'wedged' || e.verdict === 'dead' ? `\n    evidence: ${e.evidence.map((x) => `${x.signal}=${x.value}${x.at ? ` @${x.at}` : ''}${x.note ? ` (${x.note})` : ''}`).join('; ')}` : ''}`;
    case 'probe':
      return `${t} ${e.target}: deep probe ${e.ok ? 'answered' : 'NOT answered'}: ${e.detail}`;
    case 'skip':
      return `${t} ${e.target}: skipped: ${e.why}`;
    case 'action':
      return `${t} ${e.target}: ${e.action}${e.attempt ? ` #${e.attempt}` : ''}${e.ms !== undefined ? ` in ${(e.ms / 1000).toFixed(1)} s` : ''}: ${e.why}`;
    case 'incident':
      return `${t} ${e.target}: incident over: ${e.verdict} seen ${e.seen}, back ${e.back}, unavailable ${e.unavailableS} s; done: ${e.done.join(', ') || 'nothing'}`;
    case 'gpu':
      return `${t} ${e.target}: GPUs: ${e.findings.map((f) => f.note).join('; ') || 'nothing found'}`;
    case 'forget':
      return `${t} ${e.target}: no longer watched: ${e.why}`;
    case 'tick':
      return '';
  }
}

/** `sparkctl restart` as a child: its stdout and stderr bounded, a deadline, its exit code the outcome. */
function restartChild(h: RestartHow): Promise<{ ok: boolean; detail: string }> {
  const inst = h.entry.inst;
  const args = ['restart', inst.profile];
  if (h.routed) args.push('--rolling', '--replica', inst.name, '--drain-timeout', `${h.policy.drainSeconds}s`);
  else args.push('--skip-preflight');
  // a wedged engine drains nothing: SIGKILL after 5 s rather than the server's whole drain
  if (h.verdict === 'wedged') args.push('--grace', '5s');
  const deadlineMs = (inst.readyTimeoutSeconds || 600) * 1000 + 180_000;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [sparkctlBin(), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: process.env,
    });
    let tail = '';
    const keep = (d: Buffer) => {
      tail = (tail + d.toString()).slice(-4000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => child.kill('SIGTERM'), deadlineMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ ok: false, detail: `sparkctl ${args.join(' ')}: ${e.message}` });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      const last = redactText(tail.trim().split('\n').slice(-3).join(' | ')).slice(0, 600);
      resolve({ ok: code === 0, detail: `sparkctl ${args.join(' ')} exited ${code}${last ? `: ${last}` : ''}` });
    });
  });
}

async function deepProbe(t: InstanceTarget, timeoutMs: number): Promise<{ ok: boolean; ms: number; detail: string }> {
  const r = await probe(
    t,
    { timeoutMs, kvCacheUsageMax: 1, waitingMax: Number.MAX_SAFE_INTEGER, gpuMemoryHeadroomPct: 100, gpus: false },
    [identityCheck, inferenceCheck],
  );
  const fail = r.steps.find((s) => s.status === 'fail');
  return {
    ok: r.state === 'healthy',
    ms: r.ms,
    detail: fail ? `${fail.step}: ${fail.detail}` : (r.steps.at(-1)?.detail ?? r.state),
  };
}

/**
 * A multi-node server's ranks, read on their nodes as `sparkctl status` reads them (the record's
 * executor: each native rank's pid and start time or container, Ray's node list), bounded by the
 * executor's ssh deadlines. Undefined when its nodes file cannot be read (the ranks are unknown,
 * never "gone").
 */
async function ranksOf(rec: ClusterRecord): Promise<{ alive: number; total: number; detail?: string } | undefined> {
  let nf: ReturnType<typeof loadNodesFile>;
  try {
    nf = loadNodesFile(rec.nodesFile);
  } catch {
    return undefined;
  }
  const st = await clusterStatus(rec, nf, AbortSignal.timeout(20_000));
  const ranks = st.nodes.filter((n) => n.rank);
  if (ranks.length) {
    if (ranks.some((n) => n.rank!.process === 'unknown')) return undefined;
    const gone = ranks.filter((n) => n.rank!.process === 'gone');
    return {
      alive: ranks.length - gone.length,
      total: ranks.length,
      detail: gone.length ? `rank ${gone.map((n) => `${n.rank!.rank} on ${n.node}`).join(', ')} gone` : undefined,
    };
  }
  // Ray: the nodes Ray lists of the nodes file's
  if (st.nodes.some((n) => n.ray === 'unknown')) return undefined;
  const missing = st.nodes.filter((n) => n.ray === 'missing');
  return {
    alive: st.nodes.length - missing.length,
    total: st.nodes.length,
    detail: missing.length ? `not in Ray: ${missing.map((n) => n.node).join(', ')}` : undefined,
  };
}

/**
 * The host's GPU facts for the watcher: nvidia-smi --query-gpu (preflight's fields and retry), the
 * compute apps, the kernel log's Xid lines newer than the watcher's start, /proc/meminfo. Undefined
 * where nvidia-smi does not answer (no GPU): nothing is judged then.
 */
function gpuReader(): () => Promise<GpuFacts | undefined> {
  const host = new RealHost(5000);
  let since: number | undefined;
  return async () => {
    const rows = await readGpuRows(host, 5000);
    if (!rows) return undefined;
    const [apps, xid] = await Promise.all([
      host.run(
        ['nvidia-smi', '--query-compute-apps=pid,process_name,used_memory,gpu_bus_id', '--format=csv,noheader,nounits'],
        { timeoutMs: 5000 },
      ),
      readXid(host, 5000),
    ]);
    let newXid: GpuFacts['xid'];
    if (xid.readable) {
      const newest = Math.max(0, ...xid.events.map((x) => x.ts ?? 0));
      newXid = since === undefined ? [] : xid.events.filter((x) => (x.ts ?? 0) > since!);
      since = Math.max(since ?? 0, newest);
    }
    let mem: ReturnType<typeof parseMeminfo> = {};
    try {
      mem = parseMeminfo(readTextSync('/proc/meminfo', { maxBytes: 64 * 1024 }));
    } catch {
      /* not Linux */
    }
    return { rows, apps: apps.exitCode === 0 ? parseComputeApps(apps.stdout) : undefined, xid: newXid, ...mem };
  };
}

/** The real host's GPUs for a vLLM server; none for a simulated one (`serve --engine sim` uses no GPU of this host). */
export function hostGpus(
  real: () => Promise<GpuFacts | undefined> = gpuReader(),
): (engine: 'vllm' | 'sim') => Promise<GpuFacts | undefined> {
  return (engine) => (engine === 'sim' ? Promise.resolve(undefined) : real());
}

/**
 * The profile's watch: block (read again at most once a minute: an edit applies without a restart of the watcher), the
 * flags over it.
 */
function policies(o: WatchOptions, emit: (e: WatchEvent) => void): (profile: string, e: Entry) => WatchBlock {
  const cache = new Map<string, { at: number; block: Partial<WatchBlock> }>();
  const said = new Set<string>();
  const base = policyWith({}, o);
  return (profile, e) => {
    const c = cache.get(profile);
    if (c && Date.now() - c.at < 60_000) return policyWith(c.block, o);
    let block: Partial<WatchBlock> = {};
    try {
      const rec = readLaunch('host', e.inst).launch;
      block = loadProfile(profile, { profilesDir: recordedProfiles(rec?.profilesDir), sets: rec?.sets }).profile.watch;
    } catch (err) {
      if (!said.has(profile))
        emit({
          kind: 'skip',
          target: profile,
          why: `its profile cannot be read (${(err as Error).message.split('\n')[0]}): watched with the defaults and flags`,
        });
      said.add(profile);
      return base;
    }
    cache.set(profile, { at: Date.now(), block });
    return policyWith(block, o);
  };
}

function incidents(dir: string, o: WatchOptions, emit: (e: WatchEvent) => void): Hands['incident'] {
  return async (i: Incident, phase) => {
    const at = new Date(phase === 'open' ? i.seenMs : (i.backMs ?? Date.now()));
    const step = i.verdict === 'dead' ? 'live' : 'inference';
    const detail =
      phase === 'open'
        ? `watch: ${i.verdict}: ${i.why}${i.done.length ? ` (${i.done.join(', ')})` : ''}`
        : `watch: back after ${Math.round(((i.backMs ?? 0) - i.seenMs) / 1000)} s ${i.verdict} (${i.done.join(', ') || 'nothing done'})`;
    const state: 'healthy' | 'unhealthy' | 'unreachable' =
      phase === 'close' ? 'healthy' : i.verdict === 'dead' ? 'unreachable' : 'unhealthy';
    if (o.history !== false) {
      try {
        appendSample(
          dir,
          buildSample({
            at,
            target: i.target,
            url: i.url,
            profile: i.profile,
            verdict: state as 'healthy' | 'unhealthy' | 'unreachable',
            ms: 0,
            steps: [{ step, status: phase === 'open' ? 'fail' : 'warn', detail, ms: 0 }],
          }),
        );
      } catch (err) {
        emit({ kind: 'skip', target: i.target, why: `history not written: ${(err as Error).message}` });
      }
    }
    const result: ProbeResult = {
      target: i.target,
      url: i.url,
      state,
      steps: phase === 'open' ? [{ step, status: 'fail', detail, ms: 0 }] : [],
      ms: 0,
    };
    const { delivery, stateProblem } = await saveStateAndAlert(join(dir, 'watch'), [result], o.alertWebhook, undefined);
    if (stateProblem)
      emit({ kind: 'skip', target: i.target, why: `alert state not saved: ${(stateProblem as Error).message}` });
    if (delivery && !delivery.ok)
      emit({ kind: 'skip', target: i.target, why: `alert not delivered (${delivery.why}); retried with the next one` });
  };
}

/** The flags refused before anything is locked or read: what to watch, --interval, the policy flags. */
function refuseBadInputs(names: string[], o: WatchOptions): void {
  if (!names.length && !o.all)
    throw new UsageError('watch what? name profiles or instances, or --all', [
      'sparkctl watch --all',
      'sparkctl watch qwen3.5-9b',
    ]);
  if (names.length && o.all) throw new UsageError('give profiles or --all, not both');
  if (o.interval < 500)
    throw new UsageError(`--interval: ${o.interval} ms is below 500 ms`, [
      'one reading a second or slower: --interval 5s',
    ]);
  policyWith({}, o);
}

/** Each event said: a JSON line (--json: every one but the ticks, unless --once), or its text line. */
function emitter(o: WatchOptions): (e: WatchEvent) => void {
  return (e: WatchEvent) => {
    if (o.json) {
      if (e.kind !== 'tick' || o.once)
        say(JSON.stringify({ version: 1, at: new Date().toISOString(), event: e.kind, ...e, kind: 'watch-event' }));
    } else {
      const l = line(e);
      if (l) say(l);
    }
  };
}

/**
 * The Prometheus textfile written after a tick (the one it wrote last is its own to replace); a failure is said, and
 * the next tick tries again.
 */
function writeTextfile(w: Watcher, o: WatchOptions, dir: string, prometheus: string): void {
  try {
    writeNewFile(prometheus, renderTextfile(w, o.interval), '--prometheus', {
      force: o.force || wroteItLast(dir, prometheus),
      fix: PROM_FIX,
    });
    recordOwnWrite(dir, prometheus);
  } catch (err) {
    note(`watch: textfile not written: ${(err as Error).message}`);
  }
}

export async function run(names: string[], o: WatchOptions) {
  refuseBadInputs(names, o);
  // the webhook from the environment (the unit's EnvironmentFile): a URL with a token stays out of argv
  if (!o.alertWebhook && process.env.SPARKCTL_ALERT_WEBHOOK)
    o.alertWebhook = parseServerUrl(process.env.SPARKCTL_ALERT_WEBHOOK, 'SPARKCTL_ALERT_WEBHOOK');
  const dir = stateDir();
  // the textfile it wrote last time (a restarted watcher, its systemd unit) is its own to replace
  if (o.prometheus)
    checkNewFile(o.prometheus, '--prometheus', { force: o.force || wroteItLast(dir, o.prometheus), fix: PROM_FIX });
  const registry = new Registry(dir);
  ensureDir(join(dir, 'watch'), 'state folder', 'set SPARKCTL_STATE_DIR to a writable folder');
  const release = await lockFile(
    join(dir, 'watch', 'lock'),
    0,
    (pid) =>
      new UsageError(`another sparkctl watch (pid ${pid}) already watches ${dir}`, [
        `one watcher per state folder: stop it first, or check it with ps -p ${pid}`,
      ]),
  );
  const ac = interrupts();
  const emit = emitter(o);
  const w = new Watcher({
    registry,
    names,
    intervalMs: o.interval,
    dryRun: Boolean(o.dryRun || o.once),
    hands: {
      restart: restartChild,
      probe: deepProbe,
      ranks: ranksOf,
      gpus: hostGpus(),
      policyOf: policies(o, emit),
      incident: incidents(dir, o, emit),
      emit,
    },
  });
  emit({
    kind: 'start',
    stateDir: dir,
    intervalS: o.interval / 1000,
    dryRun: Boolean(o.dryRun),
    watching: names.length ? names.join(', ') : 'every registered server',
  });
  try {
    while (!ac.signal.aborted) {
      const t0 = Date.now();
      try {
        await w.tick();
      } catch (err) {
        if (o.once) throw err;
        note(`watch: this tick failed (${(err as Error).message}); the next one tries again`);
      }
      if (o.prometheus) writeTextfile(w, o, dir, o.prometheus);
      if (o.once) break;
      await pause(Math.max(0, o.interval - (Date.now() - t0)), ac.signal);
    }
    await w.settle();
  } finally {
    ac.off();
    release();
  }
  if (o.once && w.state().some((s) => s.verdict === 'dead' || s.verdict === 'wedged'))
    throw new ExitWith(ExitCode.problems);
}
