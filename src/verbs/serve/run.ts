// serve: flags (validated by cli.ts) -> profile read once (the profile file, the model's files, the installed vLLM or
// the image) -> preflight (typed GPU facts) -> the plan, made again from what was read against the GPUs preflight saw
// -> the engine, which returns an outcome and reports events -> render -> exit code (errors.ts).
import { interrupts } from '../../util/interrupt.js';
import { hostShapeFromGpus } from '../../profiles/resolve.js';
import { prepare, versionWarnings, type Prepared } from '../../engine/inputs.js';
import type { GpuFact } from '../../host/gpu-facts.js';
import type { HostShape } from '../../profiles/validate.js';
import {
  buildServePlan,
  launchRecord,
  withFingerprint,
  readSecrets,
  replicaRun,
  withRouterFlag,
  type ServePlan,
} from '../../engine/plan.js';
import { validateServeFlags, type ServeOptions } from './options.js';
import type { ServeOutcome } from '../../engine/events.js';
import { runtimeFor } from '../../engine/runtime/index.js';
import { planMemory } from '../../profiles/planner.js';
import { envelope, shellCommand, commentValue, c } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { ExitWith, exitCodeOf, UsageError } from '../../errors.js';
import { renderConfig, routerMetricsEndpoint, hopInWords } from '../../profiles/router.js';
import { HAPROXY_MALLOC_ENV } from '../../profiles/haproxy.js';
import { findHaproxy, INSTALL_FIX } from '../../router/process.js';
import { modelGate, applyGate, pullBeforeReading } from './model-gate.js';
import { stateDir } from '../common.js';
import {
  decideImagePin,
  inspectForPin,
  movedLine,
  pinLine,
  pinOfDecision,
  pinsAt,
  readPins,
  writePin,
  writePinFile,
  type ImagePinDecision,
} from '../../engine/pins.js';
import { installedLoaders } from '../../engine/loader.js';
import { containerCliArgs } from '../../engine/runtime/container.js';

export type { ServeOptions };

function planEnvelope(plan: ServePlan) {
  const rt = runtimeFor(plan);
  return {
    profile: plan.profile.name,
    engine: plan.engine,
    vllmVersion: plan.profile.engine.vllmVersion,
    servedName: plan.servedName,
    platform: plan.platform.name,
    host: { gpus: plan.host.gpus, source: plan.host.gpusSource },
    runtime: plan.runtime,
    replicas: plan.replicas.map((x) => ({
      name: x.name,
      argv: x.argv,
      ...rt.render(replicaRun(plan, x), '<marker>').envelope,
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
    memory: planMemory(plan.profile, plan.host.gpuMemoryBytes, plan.modelFacts),
    // vLLM's start caches (engine/caches.ts): the folder, and the variables the profile sets itself
    caches: plan.caches ? { dir: plan.caches.dir, key: plan.caches.key, kept: plan.caches.kept } : null,
    // the weights' loader (engine/loader.ts): the --load-format rendered (null: vLLM's default) and why
    loader: plan.loader ? { format: plan.loader.format ?? null, note: plan.loader.note } : null,
    warnings: plan.warnings,
  };
}

/**
 * On unified memory (a DGX Spark) what the server leaves to the OS, the page cache and everything else: one line, or
 * undefined on a GPU with its own memory.
 */
function osShare(r: Pick<Prepared, 'platform' | 'host' | 'profile'>): string | undefined {
  if (!r.platform.gpu.unifiedMemory || !r.host.gpuMemoryBytes) return undefined;
  const gib = (b: number) => `${(b / 1024 ** 3).toFixed(1)} GiB`;
  const share = r.profile.engine.gpuMemoryUtilization;
  const total = r.host.gpuMemoryBytes;
  return `unified memory: vLLM takes ${share} x ${gib(total)} = ${gib(share * total)}; ${gib((1 - share) * total)} is left to the OS, the page cache and every other process (sparkctl preflight --only host.memory-pressure checks swap and an OOM daemon)`;
}

/** A plan's warning; the exposure rule's own (util/exposure.ts) already starts with WARNING. */
const warningLine = (w: string) => (w.startsWith('WARNING: ') ? c.yellow(w) : `${c.yellow('warning')}: ${w}`);

function printDryRun(plan: ServePlan, r: Prepared) {
  for (const w of plan.warnings) note(warningLine(w));
  if (plan.hostNote) note(c.dim(`note: ${plan.hostNote}`));
  note(c.dim(`planned for ${r.hostLine}`));
  note(c.dim(`vLLM: ${r.vllm.note}`));
  if (r.model) note(c.dim(`model: ${r.model.note}`));
  if (plan.loader) note(c.dim(plan.loader.note));
  if (plan.caches) note(c.dim(`start caches: ${plan.caches.dir}`));
  for (const w of r.generated?.why ?? []) note(c.dim(`chosen: ${w}`));
  const os = osShare(r);
  if (os) note(c.dim(os));
  const rt = runtimeFor(plan);
  for (const x of plan.replicas) {
    say(
      c.dim(
        `# replica ${x.index}: GPUs ${x.gpus.join(',')}, ${x.uds ? `socket ${commentValue(x.uds)}` : `port ${x.port}`}, log ${commentValue(x.logFile)}`,
      ),
    );
    const line = rt.render(replicaRun(plan, x), '<marker>');
    for (const n of line.notes ?? []) say(c.dim(`# ${n.what}: ${commentValue(n.value)}`));
    // the key is named, never written: its value is read from the variable the profile names
    const refs = Object.entries(line.envFrom).map(([k, v]) => `${k}="$${v}"`);
    const cmd = shellCommand(line.argv, line.env);
    say(refs.length ? `${refs.join(' ')} ${cmd}` : cmd);
    say();
  }
  if (plan.router) {
    const rt = plan.router;
    say(
      c.dim(
        `# router: HAProxy on port ${rt.bind.port} over ${rt.servers.length} replica(s) ${rt.hop.uds ? 'on Unix sockets' : 'on loopback'}, stats 127.0.0.1:${rt.stats.port}; config ${commentValue(rt.configFile)}`,
      ),
    );
    say(c.dim(`# ${commentValue(hopInWords(rt))}`));
    say(c.dim(`# (sparkctl router config ${commentValue(plan.profile.name)} prints it)`));
    say(shellCommand([rt.settings.bin, '-db', '-f', rt.configFile], { ...HAPROXY_MALLOC_ENV }));
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
        haproxy
          ? '--router (or router: in the profile) puts HAProxy in front of them'
          : `--router needs HAProxy, which is not installed here (${INSTALL_FIX})`
      }`,
    ),
  );
}

/**
 * serve of a profile that runs already: healthy, it is said (exit 0, nothing started: serve is
 * idempotent); otherwise a refusal that names the replicas and restart.
 */
async function sayAlreadyRunning(profile: string, opts: ServeOptions): Promise<boolean> {
  const { alreadyRunning } = await import('../../engine/already-running.js');
  const running = await alreadyRunning(stateDir(), profile);
  if (!running) return false;
  const names = running.replicas.map((x) => `${x.name} (port ${x.port}, pid ${x.pid})`).join(', ');
  if (opts.foreground)
    throw new UsageError(`${profile} is already running (${names}): serve --foreground would not own it`, [
      `sparkctl stop ${profile} first, then start it here (or under systemd)`,
    ]);
  if (running.unhealthy.length)
    throw new UsageError(
      `${profile} is already running, but ${running.unhealthy.join(', ')} does not answer /health: nothing started`,
      [
        `sparkctl restart ${profile} starts it again; sparkctl probe ${profile} says what is wrong; sparkctl stop ${profile} stops it`,
      ],
    );
  const endpoint = running.router
    ? `${running.router.url} (the router)`
    : running.replicas.map((x) => x.url).join(', ');
  if (opts.json)
    say(
      envelope('serve', {
        status: 'healthy',
        exitCode: 0,
        alreadyRunning: true,
        failure: null,
        replicas: running.replicas.map((x) => ({
          name: x.name,
          url: x.url,
          port: x.port,
          gpus: x.gpus,
          pid: x.pid,
          readyMs: null,
          failure: null,
          prewarm: null,
          probe: null,
        })),
      }),
    );
  else {
    say(`${profile} is already running and healthy: ${names}; nothing started`);
    say(
      `clients use ${endpoint}; sparkctl restart ${profile} applies a changed profile, sparkctl stop ${profile} stops it`,
    );
  }
  return true;
}

type Reads = Parameters<typeof prepare>[1];

export async function run(profileName: string, opts: ServeOptions) {
  validateServeFlags(opts);
  if (opts.nodes) {
    const multi = await import('./nodes.js');
    await multi.serveNodes(profileName, opts);
    return;
  }
  const reads: Reads = {
    profiles: opts.profiles,
    set: opts.set,
    gpus: opts.gpus,
    platform: opts.platform,
    vllmBin: opts.vllmBin,
    engine: opts.engine,
    runtime: opts.runtime,
    pickPort: true,
    pin: { stateDir: stateDir(), repin: opts.repin },
  };
  if (opts.dryRun) return dryRun(profileName, opts, reads);
  // read: the profile (or the one generated for a model) that preflight checks; planned again below against the GPUs it
  // read
  await pullBeforeReading(profileName, opts);
  const loaded = await prepare(profileName, { ...reads, readHost: false });
  if (await sayAlreadyRunning(loaded.profile.name, opts)) return;
  // The model before the GPUs: absent, serve refuses (or --pull fetches it) before any check or launch.
  const gate = await modelGate(loaded.profile, opts);
  const { textRenderer, jsonRenderer } = await import('./render.js');
  const render = opts.json
    ? jsonRenderer(codeOf)
    : textRenderer({ profile: loaded.profile.name, simulated: opts.engine === 'sim' });
  const seen = await preflight(loaded, opts, render);
  // plan: the profile validated once, against the host preflight saw; then the runtime's own checks
  const { plan, pin } = await planned(profileName, opts, { ...reads, prior: loaded.read }, seen, gate);
  const secrets = readSecrets(plan.profile);
  await runtimeChecks(plan, opts);
  // act; render the outcome; its exit code, from the one table
  const outcome = await act(plan, secrets, render);
  render.outcome(outcome);
  const code = codeOf(outcome);
  // the image served is pinned: from now on serve, restart and upgrade run it, never the tag
  if (code === 0 && pin) await recordPin(plan, pin, opts.json);
  if (code !== 0) throw new ExitWith(code);
}

const codeOf = (o: ServeOutcome) => exitCodeOf(o.status);
type Renderer = ReturnType<Awaited<typeof import('./render.js')>['textRenderer']>;

/**
 * --dry-run: the host serve would see (its GPUs, the model's files and the installed vLLM, all read, bounded), and the
 * plan; nothing spawned.
 */
async function dryRun(profileName: string, opts: ServeOptions, reads: Reads): Promise<void> {
  const r = await prepare(profileName, reads);
  const plan = buildServePlan(r, {
    ...opts,
    imageEntrypoint: r.image?.entrypoint,
    imageId: r.image?.id,
    installedVllm: r.vllm.installed,
    installedLoaders: loadersOf(opts),
  });
  pinNotes(plan, r.imagePin, opts.json);
  plan.warnings.unshift(...versionWarnings(r.vllm, true));
  applyGate(plan, await modelGate(r.profile, opts));
  if (opts.json) say(envelope('launch-plan', planEnvelope(plan)));
  else {
    routerNote(plan);
    printDryRun(plan, r);
  }
}

/** The loaders installed beside the host's vLLM (a container's image is not read for them). */
function loadersOf(opts: ServeOptions): string[] | undefined {
  return opts.engine === 'vllm' && (opts.runtime ?? 'host') === 'host' ? installedLoaders(opts.vllmBin) : undefined;
}

interface Seen {
  platform?: string;
  host?: HostShape;
  gpuFacts?: GpuFact[];
  /** preflight's gpu.topology: the evidence on which vLLM's P2P check is skipped */
  topology?: { status: string; observed: string };
}

/** The blocking checks (refused: exit from the table); the host's shape comes from its typed GPU facts. */
async function preflight(
  loaded: Awaited<ReturnType<typeof prepare>>,
  opts: ServeOptions,
  render: Renderer,
): Promise<Seen> {
  const sim = opts.engine === 'sim';
  const seen: Seen = { platform: opts.platform ?? loaded.profile.platform };
  if (sim && !opts.json) {
    const { loadPlatform, DEFAULT_PLATFORM } = await import('../../profiles/load.js');
    const pl = loadPlatform(seen.platform ?? DEFAULT_PLATFORM);
    note(c.dim(`engine sim: simulating ${pl.gpu.count} x ${pl.gpu.displayName} (${pl.name}); no GPU is used`));
  }
  if (opts.skipPreflight) return seen;
  const { servePreflight } = await import('./preflight.js');
  // --router is checked like a router: block (HAProxy installed, its ports free).
  const pf = await servePreflight(withRouterFlag(loaded, opts.router).profile, {
    engine: opts.engine,
    platform: opts.platform,
    stateDir: stateDir(),
  });
  render.preflight(pf, sim);
  if (pf.report.checks.some((x) => x.status === 'fail')) {
    render.preflightFailed(pf, loaded.profile.name);
    throw new ExitWith(exitCodeOf('preflight-failed'));
  }
  return {
    platform: pf.platform.name,
    host: sim ? undefined : hostShapeFromGpus(pf.gpus, pf.platform, opts.gpus),
    gpuFacts: pf.gpus,
    ...(pf.topology ? { topology: pf.topology } : {}),
  };
}

/** The serve plan for the host preflight saw, its warnings said, the model gate applied. */
async function planned(
  profileName: string,
  opts: ServeOptions,
  reads: Reads,
  seen: Seen,
  gate: Awaited<ReturnType<typeof modelGate>>,
) {
  const sim = opts.engine === 'sim';
  const { host, gpuFacts } = seen;
  const r = await prepare(profileName, {
    ...reads,
    gpus: sim ? undefined : opts.gpus,
    platform: gpuFacts ? seen.platform : opts.platform,
    gpuFacts: host ? gpuFacts : undefined,
    readHost: !sim && !host,
  });
  versionWarnings(r.vllm, false);
  const plan = buildServePlan(r, {
    ...opts,
    imageEntrypoint: r.image?.entrypoint,
    imageId: r.image?.id,
    installedVllm: r.vllm.installed,
    installedLoaders: loadersOf(opts),
    launch: withFingerprint(
      launchRecord(opts, r.vllm, r.image?.ref ?? r.vllm.image, r.profile),
      await hostFingerprint(opts, r.vllm.image),
    ),
    ...(seen.topology ? { topology: seen.topology } : {}),
  });
  pinNotes(plan, r.imagePin, opts.json);
  if (!opts.json) for (const w of plan.warnings) note(warningLine(w));
  // the exposure warning (--allow-unauthenticated) at every start, --json or not: on stderr, the envelope stays whole
  else for (const w of plan.warnings.filter((x) => x.startsWith('WARNING: '))) note(w);
  const os = osShare(r);
  if (!opts.json && os) note(c.dim(os));
  // a model id's port is chosen by a rule (the first free from 8000 up): say which and why
  if (!opts.json) for (const w of r.generated?.why ?? []) if (w.startsWith('port ')) note(c.dim(`chosen: ${w}`));
  if (!opts.json) routerNote(plan);
  applyGate(plan, gate);
  if (!opts.json) for (const w of gate.warnings) note(`${c.yellow('warning')}: ${w}`);
  return { plan, pin: r.imagePin };
}

/**
 * The host install this serve starts (engine vllm, runtime host): its version and its environment's packages, or
 * undefined.
 */
async function hostFingerprint(opts: ServeOptions, image: string | undefined) {
  if (opts.engine !== 'vllm' || image) return undefined;
  const { vllmFingerprint } = await import('../../engine/vllm-version.js');
  return vllmFingerprint(opts.vllmBin ?? 'vllm');
}

/** What the image runs as: one line, and a tag that moved under its pin as a warning. */
function pinNotes(plan: ServePlan, pin: ImagePinDecision | undefined, json?: boolean): void {
  if (!pin) return;
  const moved = movedLine(pin, plan.profile.name);
  if (moved) plan.warnings.unshift(moved);
  if (pin.finding) plan.warnings.unshift(pin.finding);
  if (!json) note(c.dim(pinLine(pin)));
}

/** Write the pin a serve took (first serve, --repin, an edited reference; a tag pulled at launch is read now). */
async function recordPin(plan: ServePlan, pin: ImagePinDecision, json?: boolean): Promise<void> {
  let d = pin;
  const images = runtimeFor(plan).images;
  if (d.state === 'unpinned' && images) {
    const inspected = await inspectForPin(images, containerCliArgs(plan.profile), d.ref);
    d = {
      ...decideImagePin(d.ref, readPins(stateDir(), plan.profile.name, pin.lock), inspected),
      ...(pin.lock ? { lock: pin.lock } : {}),
    };
    if (d.state !== 'unpinned' && !json) note(c.dim(pinLine(d)));
  }
  const p = pinOfDecision(d, plan.profile.engine.vllmVersion);
  if (p) writePin(stateDir(), plan.profile.name, p, d.lock);
  // served healthy on the lock file's pin where the state folder said another: this host's state follows it
  else if (d.state === 'kept' && d.lock && d.finding) {
    const locked = pinsAt(stateDir(), plan.profile.name, d.lock);
    if (locked.from === 'lockfile' && locked.file) writePinFile(stateDir(), locked.file);
  }
}

/** The runtime's own checks (a container's CLI, image and GPU access), for the GPUs the replicas use. */
async function runtimeChecks(plan: ServePlan, opts: ServeOptions): Promise<void> {
  if (opts.skipPreflight) return;
  const gpus = [...new Set(plan.replicas.flatMap((x) => x.gpus))].sort((a, b) => a - b);
  const own = await runtimeFor(plan).preflight(replicaRun(plan, plan.replicas[0]!), gpus);
  if (!own) return;
  const checks = own.checks.filter((x) => x.status !== 'skip');
  if (!opts.json) note(`preflight (${own.label}): ${checks.map((x) => `${x.id} ${x.status}`).join(', ')}`);
  const failed = checks.filter((x) => x.status === 'fail');
  if (!failed.length) return;
  for (const f of failed) note(`${c.red('fail')} ${f.id}: ${f.detail}${f.fix ? `\n  fix: ${f.fix}` : ''}`);
  if (opts.json) say(envelope('serve', { profile: plan.profile.name, status: 'preflight-failed', checks }));
  throw new ExitWith(exitCodeOf('preflight-failed'));
}

/** Launch, supervise, warm and probe, with Ctrl-C wired to the run's cancellation. */
async function act(plan: ServePlan, secrets: Record<string, string>, render: Renderer): Promise<ServeOutcome> {
  const { serve } = await import('../../engine/serve.js');
  // Ctrl-C / SIGTERM: the first stops what was started (drain); a second stops it at once. Never swallowed.
  const sig = interrupts({ second: 'force' });
  let readyCount = 0;
  try {
    return await serve(plan, {
      signal: sig.signal,
      force: sig.force,
      secrets,
      router: plan.router ? (await import('../../router/driver.js')).haproxy : undefined,
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
}
