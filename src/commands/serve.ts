// serve: flags (validated by cli.ts) -> profile parsed once -> preflight (typed GPU facts) -> the
// plan -> the engine, which returns an outcome and reports events -> render -> exit code (errors.ts).
import { loadProfile } from '../profiles/load.js';
import { resolveLoaded, hostShapeFromGpus, type Resolved } from '../profiles/resolve.js';
import type { HostShape } from '../profiles/validate.js';
import { buildServePlan, readSecrets, validateServeInputs, type ServeOptions, type ServePlan } from '../engine/plan.js';
import type { ServeOutcome } from '../engine/events.js';
import { planMemory } from '../profiles/planner.js';
import { envelope, shellCommand, c } from '../output/format.js';
import { say, note } from '../output/log.js';
import { ExitWith, exitCodeOf } from '../errors.js';
import { renderConfig, routerMetricsEndpoint } from '../router/config.js';
import { findHaproxy, INSTALL_FIX } from '../router/process.js';

export type { ServeOptions };

export function planEnvelope(plan: ServePlan) {
  return {
    profile: plan.profile.name,
    engine: plan.engine,
    vllmVersion: plan.profile.engine.vllmVersion,
    servedName: plan.servedName,
    platform: plan.platform.name,
    host: { gpus: plan.host.gpus, source: plan.host.gpusSource },
    replicas: plan.replicas.map((x) => ({
      name: x.name,
      argv: x.argv,
      // The key travels by reference only: "$NAME" is read from sparkctl's environment at launch.
      env: { ...x.env, ...Object.fromEntries(Object.entries(x.envFrom).map(([k, v]) => [k, `$${v}`])) },
      port: x.port,
      gpus: x.gpus,
      logFile: x.logFile,
    })),
    router: plan.router
      ? {
          name: plan.router.name,
          bind: plan.router.bind,
          servers: plan.router.servers,
          stats: plan.router.stats,
          metrics: routerMetricsEndpoint(plan.router).url,
          socket: plan.router.socket,
          configFile: plan.router.configFile,
          config: renderConfig(plan.router, { socket: plan.router.socket, logStdout: true }),
        }
      : null,
    memory: planMemory(plan.profile, plan.host.gpuMemoryBytes),
    warnings: plan.warnings,
  };
}

function printDryRun(plan: ServePlan) {
  for (const w of plan.warnings) note(`${c.yellow('warning')}: ${w}`);
  if (plan.hostNote) note(c.dim(`note: ${plan.hostNote}`));
  for (const x of plan.replicas) {
    say(c.dim(`# replica ${x.index}: GPUs ${x.gpus.join(',')}, port ${x.port}, log ${x.logFile}`));
    const refs = Object.entries(x.envFrom).map(([k, v]) => `${k}="$${v}"`);
    const cmd = shellCommand(x.argv, x.env);
    say(refs.length ? `${refs.join(' ')} ${cmd}` : cmd);
    say();
  }
  if (plan.router) {
    const r = plan.router;
    say(c.dim(`# router: HAProxy on ${r.bind.host}:${r.bind.port} over ${r.servers.length} replica(s) on loopback, stats 127.0.0.1:${r.stats.port}; config ${r.configFile}`));
    say(c.dim(`# (sparkctl router config ${plan.profile.name} prints it)`));
    say(shellCommand([r.settings.bin, '-db', '-f', r.configFile], {}));
    say();
  }
}

/** Several replicas without a router: say what the clients face, and why --router may not be there. */
function routerNote(plan: ServePlan) {
  if (plan.router || plan.replicas.length < 2) return;
  const haproxy = findHaproxy();
  note(
    c.dim(
      `note: no router: clients pick one of ${plan.replicas.length} ports (${plan.replicas.map((x) => x.port).join(', ')}); ${
        haproxy ? '--router (or router: in the profile) puts HAProxy in front of them' : `--router needs HAProxy, which is not installed here (${INSTALL_FIX})`
      }`,
    ),
  );
}

/** Ctrl-C / SIGTERM: the first stops what was started (drain); a second stops it at once. Never swallowed. */
function wireSignals() {
  const graceful = new AbortController();
  const force = new AbortController();
  const on = () => (graceful.signal.aborted ? force.abort() : graceful.abort());
  process.on('SIGINT', on);
  process.on('SIGTERM', on);
  return {
    signal: graceful.signal,
    force: force.signal,
    off: () => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
    },
  };
}

export async function run(profileName: string, opts: ServeOptions) {
  validateServeInputs(opts);
  if (opts.nodes) {
    const multi = await import('./nodes.js');
    return multi.serveNodes(profileName, opts);
  }
  const loaded = loadProfile(profileName, { profilesDir: opts.profiles, sets: opts.set });
  const sim = opts.engine === 'sim';
  if (opts.dryRun) {
    const plan = buildServePlan(resolveLoaded(loaded, { gpus: opts.gpus, platform: opts.platform }), opts);
    if (opts.json) say(envelope('launch-plan', planEnvelope(plan)));
    else {
      routerNote(plan);
      printDryRun(plan);
    }
    return;
  }

  const { servePreflight, serveLocal } = await import('../engine/serve.js');
  const { textRenderer, jsonRenderer } = await import('../output/serve.js');
  const codeOf = (o: ServeOutcome) => exitCodeOf(o.status);
  const render = opts.json ? jsonRenderer(codeOf) : textRenderer({ profile: loaded.profile.name, simulated: sim });

  // 1. preflight: the blocking checks; the host's shape comes from its typed GPU facts
  let platform = opts.platform ?? loaded.profile.platform;
  let host: HostShape | undefined;
  if (sim && !opts.json) {
    const { loadPlatform } = await import('../profiles/load.js');
    const pl = loadPlatform(platform ?? 'hopper-cuda13');
    note(c.dim(`engine sim: simulating ${pl.gpu.count} x ${pl.gpu.displayName} (${pl.name}); no GPU is used`));
  }
  if (!opts.skipPreflight) {
    const pf = await servePreflight(loaded.profile, { engine: opts.engine, platform: opts.platform });
    render.preflight(pf, sim);
    if (pf.report.checks.some((x) => x.status === 'fail')) {
      render.preflightFailed(pf, loaded.profile.name);
      throw new ExitWith(exitCodeOf('preflight-failed'));
    }
    platform = pf.platform.name;
    if (!sim) host = hostShapeFromGpus(pf.gpus, pf.platform, opts.gpus);
  }

  // 2. the plan: the profile validated once, against the host preflight saw
  const r: Resolved = resolveLoaded(loaded, { gpus: sim ? undefined : opts.gpus, platform, host });
  const plan = buildServePlan(r, opts);
  if (!opts.json) for (const w of plan.warnings) note(`${c.yellow('warning')}: ${w}`);
  if (!opts.json) routerNote(plan);
  const secrets = readSecrets(plan.profile);

  // 3. act; 4. render the outcome; 5. its exit code, from the one table
  const sig = wireSignals();
  let readyCount = 0;
  let outcome: ServeOutcome;
  try {
    outcome = await serveLocal(plan, {
      signal: sig.signal,
      force: sig.force,
      secrets,
      onEvent: (e) => {
        render.event(e);
        // Once every replica is ready (and not --foreground), the servers run on their own: Ctrl-C
        // during prewarm/probe ends sparkctl only, as the default handler does.
        if (e.type === 'ready' && !plan.foreground && ++readyCount === plan.replicas.length) sig.off();
      },
    });
  } finally {
    sig.off();
  }
  render.outcome(outcome);
  const code = codeOf(outcome);
  if (code !== 0) throw new ExitWith(code);
}
