// serve on one host: preflight -> plan -> launch every replica -> ready -> prewarm -> deep probe.
// A server we launched is never orphaned: each is registered the moment it is spawned, and a
// failure or an interrupt before "ready" stops every group we started.
import type { ServeOptions } from '../commands/serve.js';
import { buildPlan, executableFor } from '../commands/serve.js';
import { resolveProfile, stateDir, type Resolved } from '../commands/common.js';
import { loadProfile, loadPlatform } from '../profiles/load.js';
import { servedName, type ReplicaPlan } from '../profiles/render.js';
import type { HostShape } from '../profiles/validate.js';
import { GIB } from '../profiles/planner.js';
import { Registry, type Instance } from './registry.js';
import { launchReplica, waitReady, type Launched } from './launch.js';
import type { LogTail } from './logtail.js';
import { classifyLog } from './classify.js';
import { stopGroup } from './proc.js';
import { runPreflight } from '../preflight/run.js';
import { SimHost } from '../host/sim.js';
import { RealHost } from '../host/real.js';
import type { Host } from '../host/host.js';
import { prewarm, gpuMemoryReader } from '../health/prewarm.js';
import { probe } from '../health/probe.js';
import { targetFromInstance } from '../health/target.js';
import { progress, say, note } from '../output/log.js';
import { c, formatDuration, statusMark, table } from '../output/format.js';
import { log } from '../output/logger.js';
import { UsageError, LaunchError, ProblemsFound, ExitWith, type ExitCode } from '../errors.js';


function secretsFor(r: Resolved): Record<string, string> {
  const name = r.profile.server.apiKeyEnv;
  if (!name) return {};
  const v = process.env[name];
  if (!v) throw new UsageError(`server.apiKeyEnv names ${name}, which is not set in this environment`, [`export ${name}=... (or put it in the systemd EnvironmentFile); the key itself never goes in a profile`]);
  return { VLLM_API_KEY: v };
}

function instanceOf(r: Resolved, p: ReplicaPlan, l: Launched, engine: 'vllm' | 'sim'): Instance {
  const e = r.profile.engine;
  return {
    version: 1,
    name: p.name,
    profile: r.profile.name,
    replica: p.index,
    pid: l.pid,
    pgid: l.pid,
    startTime: l.startTime,
    marker: l.marker,
    host: r.profile.server.host,
    port: p.port,
    url: `http://${r.profile.server.host === '0.0.0.0' ? '127.0.0.1' : r.profile.server.host}:${p.port}`,
    servedName: servedName(r.profile),
    gpus: p.gpus,
    logFile: p.logFile,
    engine,
    argv: p.argv,
    apiKeyEnv: r.profile.server.apiKeyEnv,
    startedAt: new Date().toISOString(),
    readyTimeoutSeconds: r.profile.server.readyTimeoutSeconds,
    probe: { ...r.profile.probe, gpuMemoryUtilization: e.gpuMemoryUtilization },
    prewarm: r.profile.prewarm,
    maxModelLen: e.maxModelLen ?? r.profile.model.maxContext,
  };
}

export async function serveLocal(profileName: string, opts: ServeOptions): Promise<void> {
  const sim = opts.engine === 'sim';
  const base = loadProfile(profileName, { profilesDir: opts.profiles, sets: opts.set }).profile;
  // The simulated host is the profile's platform; a real host is checked against the baseline that
  // fits it (auto), as `sparkctl preflight` does: a Qwen profile written for the documents' DGX A100
  // must not refuse an H200 because its driver is not 535.129.03.
  let platform = loadPlatform(opts.platform ?? base.platform ?? 'hopper-cuda13');
  const host: Host = sim ? new SimHost(platform) : new RealHost();

  // 1. preflight: the blocking checks, on the simulated host for --engine sim
  let shape: HostShape | undefined;
  if (sim) note(c.dim(`engine sim: simulating ${platform.gpu.count} x ${platform.gpu.displayName} (${platform.name}); no GPU is used`));
  if (!opts.skipPreflight) {
    const rep = await runPreflight(host, { profile: base, platform: sim ? platform.name : (opts.platform ?? 'auto'), blocking: true });
    if (!sim) platform = loadPlatform(rep.platform);
    const failed = rep.checks.filter((x) => x.status === 'fail');
    note(`preflight (${sim ? 'simulated host' : `${rep.host}, platform ${rep.platform}`}): ${rep.checks.map((x) => `${x.id} ${x.status}`).join(', ')} in ${rep.wallMs} ms`);
    if (failed.length) {
      for (const f of failed) note(`  ${statusMark('fail')} ${f.id}: ${f.observed}${f.fix ? `\n        fix: ${f.fix}` : ''}`);
      throw new ProblemsFound('preflight failed: not launching', ['sparkctl preflight --profile ' + base.name + ' shows every check; --skip-preflight launches anyway']);
    }
    const n = rep.versions.gpus;
    const memMiB = Number(/GPU\d+ [\d.]+ GiB free of ([\d.]+) GiB/.exec(rep.checks.find((x) => x.id === 'gpu.memory')?.observed ?? '')?.[1]);
    if (!sim && n > 0) shape = { gpus: opts.gpus ?? n, gpusSource: opts.gpus ? 'flag' : 'detected', gpuMemoryBytes: Number.isFinite(memMiB) ? memMiB * GIB : platform.gpu.memoryGiB * GIB, computeCapability: platform.gpu.computeCapability, gpuName: rep.versions.gpu ?? platform.gpu.displayName };
  }
  const r = resolveProfile(profileName, { profilesDir: opts.profiles, sets: opts.set, gpus: sim ? undefined : opts.gpus, platform: platform.name, host: shape });
  const { replicas, warnings } = buildPlan(r, opts);
  for (const w of warnings) note(`${c.yellow('warning')}: ${w}`);
  const secrets = secretsFor(r);

  // 2. refuse what a live registered instance holds
  const registry = new Registry(stateDir());
  const release = await registry.lock();
  const launched: Launched[] = [];
  let abort: AbortController | undefined;
  const cleanup = async () => {
    await Promise.all(launched.map(async (l) => {
      await stopGroup(l, 5000);
      registry.remove(l.plan.name);
    }));
  };
  try {
    const live = registry.list().filter((x) => x.alive);
    for (const x of registry.list().filter((x) => x.proof.state === 'gone')) registry.remove(x.inst.name);
    const conflicts: string[] = [];
    for (const p of replicas) {
      for (const { inst } of live) {
        if (inst.port === p.port) conflicts.push(`port ${p.port}: held by ${inst.name} (pid ${inst.pid})`);
        // Simulated GPUs are held like real ones: the same refusal, testable without a GPU.
        else if (inst.engine === opts.engine && inst.gpus.some((g) => p.gpus.includes(g))) conflicts.push(`GPU(s) ${inst.gpus.filter((g) => p.gpus.includes(g)).join(',')}: held by ${inst.name} (pid ${inst.pid})`);
      }
    }
    if (conflicts.length) throw new UsageError(`${r.profile.name} would collide with running servers`, [...new Set(conflicts), `sparkctl stop <name> first, or --set server.port=N / parallel.firstGpu=N`]);

    // 3. launch every replica, registered at once
    for (const p of replicas) {
      const l = launchReplica(p, secrets);
      launched.push(l);
      (await log())?.debug({ replica: p.name, pid: l.pid, port: p.port, gpus: p.gpus, argv: p.argv, log: p.logFile }, 'launched');
      if (l.pid > 0) registry.write(instanceOf(r, p, l, opts.engine));
    }
  } catch (e) {
    await cleanup();
    release();
    throw e;
  }
  release();

  // Ctrl-C / SIGTERM while starting: stop what we started.
  abort = new AbortController();
  const onSignal = () => abort!.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const prog = progress();
  const readyTimeoutMs = opts.readyTimeout ?? r.profile.server.readyTimeoutSeconds * 1000;
  const phases = new Map<string, string>();
  const show = () => prog.update([...phases].map(([n, p]) => `${n}: ${p}`).join(' | '));
  const results = await Promise.all(
    launched.map((l) =>
      waitReady(l, {
        url: `http://127.0.0.1:${l.plan.port}`,
        servedName: servedName(r.profile),
        apiKey: secrets.VLLM_API_KEY,
        deadlineMs: readyTimeoutMs,
        stallMs: r.profile.server.stallTimeoutSeconds * 1000,
        signal: abort.signal,
        onPhase: (ph) => {
          phases.set(l.plan.name, ph);
          if (process.stderr.isTTY && !process.env.CI) show();
          else prog.phase(`${l.plan.name}: ${ph}`);
        },
      }),
    ),
  );
  prog.done();
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);

  const failed = results.map((res, i) => ({ res, l: launched[i]! })).filter((x) => !x.res.ok);
  if (failed.length) {
    // Nothing of any group may be left holding a port or a GPU.
    await cleanup();
    const interrupted = failed.some((f) => !f.res.ok && f.res.reason === 'interrupted');
    if (interrupted) {
      note(`interrupted: stopped ${launched.length} replica(s) of ${r.profile.name}; nothing is left running`);
      throw new LaunchError('', []);
    }
    for (const { res, l } of failed) {
      if (res.ok) continue;
      const tail = (l as Launched & { tail?: LogTail }).tail;
      const text = tail?.text() ?? '';
      const cause = classifyLog(text);
      note(`${c.red('launch failed')}: ${l.plan.name} (port ${l.plan.port}, GPUs ${l.plan.gpus.join(',')}): ${res.detail}`);
      if (cause) {
        note(`  cause: ${cause.cause}`);
        note(`  fix:   ${cause.fix}`);
      } else if (res.reason === 'stalled' || res.reason === 'timeout') {
        note(`  cause: ${res.reason === 'stalled' ? 'the server stopped logging while loading' : 'the load took longer than the ready timeout'}`);
        note(`  fix:   ${res.reason === 'stalled' ? 'check the model storage (NFS?) and the GPUs (sparkctl preflight); raise server.stallTimeoutSeconds if loads are legitimately quiet' : '--ready-timeout 30m (or server.readyTimeoutSeconds) for large models; check the log for progress'}`);
      }
      const last = text.split('\n').filter((x) => x.trim()).slice(-20);
      if (last.length) {
        note(c.dim(`  last ${last.length} log lines (${l.plan.logFile}):`));
        for (const x of last) note(c.dim(`  | ${x}`));
      }
    }
    note(`stopped every replica of ${r.profile.name}; nothing is left holding a port or a GPU`);
    throw new LaunchError('', []);
  }

  for (const l of launched) {
    l.child.unref();
    const inst = registry.find(l.plan.name)[0]?.inst;
    if (inst) registry.write({ ...inst, readyAt: new Date().toISOString() });
  }
  const slowest = Math.max(...results.map((x) => x.ms));
  say(`${c.green('ready')}: ${r.profile.name}, ${launched.length} replica(s) in ${formatDuration(slowest)}${sim ? ' (simulated engine)' : ''}`);
  say(table(launched.map((l, i) => [l.plan.name, `http://127.0.0.1:${l.plan.port}/v1`, `GPUs ${l.plan.gpus.join(',')}`, `pid ${l.pid}`, formatDuration(results[i]!.ms)])));

  if (opts.foreground) return foreground(launched, registry);

  // 4. prewarm, then 5. one deep probe whose verdict ends the output
  const targets = launched.map((l) => targetFromInstance(registry.find(l.plan.name)[0]!.inst));
  if (opts.prewarm) {
    const pprog = progress();
    const onRequest = (name: string) => (q: { round: number; kind: string; promptTokens: number; ms: number }) =>
      pprog.update(`prewarm ${name}: round ${q.round}, ${q.kind === 'prefill' ? `${q.promptTokens} prompt tokens` : 'decode'}: ${q.ms} ms`);
    const pw = await Promise.all(targets.map((t) => prewarm({ ...t, apiKey: secrets.VLLM_API_KEY ?? t.apiKey }, r.profile.prewarm, onRequest(t.name), sim ? undefined : gpuMemoryReader(t.gpus))));
    pprog.done();
    for (const w of pw) {
      const lens = Object.keys(w.cold).map(Number);
      const detail = lens.map((n) => `${n} tok ${w.cold[n]} -> ${w.warm[n]} ms`).join(', ');
      say(`prewarm ${w.target}: ${w.error ? c.yellow(w.error) : `warm after ${w.rounds} round(s)`}; first token cold -> warm: ${detail}`);
    }
  }
  const probes = await Promise.all(targets.map((t) => probe({ ...t, apiKey: secrets.VLLM_API_KEY ?? t.apiKey }, { ...r.profile.probe, gpuMemoryUtilization: r.profile.engine.gpuMemoryUtilization, gpus: !sim })));
  for (const p of probes) say(`probe ${p.target}: ${p.state === 'healthy' ? c.green('healthy') : c.red(p.state)} (${p.steps.map((s) => `${s.step} ${s.status}`).join(', ')}) in ${p.ms} ms`);
  say(`stop with: sparkctl stop ${r.profile.name}   (status: sparkctl status, logs: sparkctl logs ${launched[0]!.plan.name})`);
  if (probes.some((p) => p.state !== 'healthy')) throw new ProblemsFound(`${r.profile.name} is up but the deep probe failed`);
}

/** systemd Type=simple / containers: stay attached, forward signals to every group, exit with the server. */
async function foreground(launched: Launched[], registry: Registry): Promise<void> {
  const forward = (sig: NodeJS.Signals) => () => {
    note(`${sig}: stopping ${launched.length} replica(s)`);
    for (const l of launched) void stopGroup(l, 30_000);
  };
  process.on('SIGTERM', forward('SIGTERM'));
  process.on('SIGINT', forward('SIGINT'));
  for (const l of launched) l.child.ref();
  await Promise.all(launched.map((l) => l.exited));
  // The API server is gone; make sure its EngineCore is too.
  await Promise.all(launched.map((l) => stopGroup(l, 5000)));
  for (const l of launched) registry.remove(l.plan.name);
  const bad = launched.find((l) => l.exit && (l.exit.code ?? 1) !== 0);
  const code = bad ? (bad.exit?.code ?? 1) : 0;
  note(`server(s) exited${bad ? ` (${bad.plan.name}: ${bad.exit?.signal ?? `code ${bad.exit?.code}`})` : ''}`);
  if (code !== 0) throw new ExitWith(Math.min(code, 255) as ExitCode);
}

export { executableFor };
