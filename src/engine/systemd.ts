// The systemd units a profile runs under, rendered for `sparkctl systemd`: one unit that runs
// `serve --foreground` for a profile on the host (with its router inside), or, where the runtime runs
// each replica under a unit of its own (a container, attached), one unit per replica or a Podman
// Quadlet file. Every ExecStart= argument is quoted and every value with a control character refused
// (runtime/unit.ts): a newline would start a new setting. Library code: the units and the notes go
// to the caller's sink, which prints them.
import { resolve } from 'node:path';
import { requireValid, resolveLoaded, readModelFor, type Resolved } from '../profiles/resolve.js';
import { UsageError } from '../errors.js';
import { commentValue } from '../output/format.js';
import { servedName, shutdownTimeoutArg } from '../profiles/render.js';
import { graceMsOf } from './stop.js';
import { serveExposure, sparkctlBin, buildServePlan, replicaRun } from './plan.js';
import { execArg, refuseControl } from './runtime/unit.js';
import { traitsOfProfile } from './runtime/traits.js';
import { routerDrainSeconds } from '../profiles/router.js';

export interface SystemdOptions {
  set: string[];
  profiles?: string;
  gpus?: number;
  user?: string;
  environmentFile: string;
  runtime?: 'host' | 'container';
  quadlet?: boolean;
  /**
   * --allow-unauthenticated: a unit listening beyond loopback without a key (its serve --foreground carries the flag
   * and warns at every start)
   */
  allowUnauthenticated?: boolean;
}

/** Where the units and the notes about them go: stdout and stderr, for the verb. */
interface UnitSink {
  unit(text: string): void;
  note(text: string): void;
}

/** A value in a unit file line (Description=, a comment): specifiers escaped. */
const unitValue = (v: string) => v.replace(/%/g, '%%');

/**
 * The units of a resolved profile: the runtime's kind (one per replica, or serve --foreground for the profile) or
 * --quadlet's files.
 */
export async function systemdUnits(r: Resolved, opts: SystemdOptions, out: UnitSink): Promise<void> {
  const perReplica = traitsOfProfile(r.profile, opts.runtime).unitPerReplica;
  if (opts.quadlet && !perReplica)
    throw new UsageError('--quadlet: a Quadlet unit runs a container; this profile runs on the host', [
      'add --runtime container',
    ]);
  if (opts.quadlet) return quadletUnits(r, opts, out);
  if (perReplica) return containerUnits(r, opts, out);
  return serveUnit(r, opts, out);
}

/**
 * Refuse what cannot go into the serve unit as given: a value with a control character (it would start
 * a new setting), a --user that is no user name, a profile name that cannot name a unit.
 */
function refuseUnitInputs(p: Resolved['profile'], opts: SystemdOptions): void {
  for (const s of opts.set) refuseControl(`--set ${s.split('=')[0]}`, s);
  refuseControl('description', p.description ?? '');
  refuseControl('profile name', p.name);
  refuseControl('--environment-file', opts.environmentFile);
  if (opts.profiles !== undefined) refuseControl('--profiles', resolve(opts.profiles));
  // Where sparkctl and node live is the environment's say: a control character there would inject lines just the same.
  refuseControl('the node executable path', process.execPath);
  refuseControl("sparkctl's own path", sparkctlBin());
  if (opts.user !== undefined && !/^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$/.test(opts.user))
    throw new UsageError(`--user ${JSON.stringify(opts.user)}: not a user name`, [
      'a user name like vllm or svc_llm (letters, digits, _ . -)',
    ]);
  if (!/^[A-Za-z0-9._-]+$/.test(p.name))
    throw new UsageError(`profile name ${JSON.stringify(p.name)}: only letters, digits, . _ - can name a unit`);
}

/**
 * One unit for the profile: `serve --foreground` supervises every replica (and the router) and forwards systemd's stop.
 */
function serveUnit(r: Resolved, opts: SystemdOptions, out: UnitSink): void {
  const p = r.profile;
  refuseUnitInputs(p, opts);
  const cmd = (...args: string[]) => [process.execPath, sparkctlBin(), ...args].map(execArg).join(' ');
  // refused here as serve --foreground would refuse it at each start; allowed, the unit carries the flag
  const exposed = serveExposure(p, Boolean(opts.allowUnauthenticated), false);
  if (exposed) out.note(exposed);
  const serveArgs = [
    'serve',
    p.name,
    ...(opts.profiles ? ['--profiles', resolve(opts.profiles)] : []),
    ...opts.set.flatMap((s) => ['--set', s]),
    '--foreground',
    '--no-prewarm',
    ...(exposed ? ['--allow-unauthenticated'] : []),
  ];
  const startBudget = p.server.readyTimeoutSeconds + p.prewarm.timeoutSeconds + 60;
  // serve --foreground gives vLLM its drain + teardown before SIGKILL; systemd waits that and a margin
  // engine.vllmVersion auto: the vLLM found when the service starts decides whether it drains, so the
  // unit leaves room for the drain the profile asks for and says whose decision it is
  const auto = p.engine.vllmVersion === 'auto';
  const drain = auto ? Math.max(0, p.server.shutdownTimeoutSeconds) : shutdownTimeoutArg(p);
  // with a router, its soft stop drains first (then its hard stop, 3 s), then the replicas
  const routerDrain = p.router?.enabled ? routerDrainSeconds(p) + 3 : 0;
  const stopBudget = routerDrain + Math.ceil(graceMsOf({ shutdownTimeoutSeconds: drain }) / 1000) + 15;
  const unit = `# sparkctl systemd ${p.name}: ${commentValue(p.description ?? '')}
# Install: save as /etc/systemd/system/sparkctl-${p.name}.service, then
#   systemctl daemon-reload && systemctl enable --now sparkctl-${p.name}
[Unit]
Description=vLLM server ${p.name} (sparkctl)
Documentation=https://docs.vllm.ai/
After=network-online.target nvidia-persistenced.service nvidia-fabricmanager.service
Wants=network-online.target
# Back-off: at most 5 restarts in 10 minutes, then stay failed until someone looks.
StartLimitIntervalSec=600
StartLimitBurst=5

[Service]
Type=simple
${opts.user ? `User=${opts.user}\n` : ''}# The API key${p.server.apiKeyEnv ? ` (${p.server.apiKeyEnv}=...)` : ''} lives here, mode 0600, never in the unit or the profile.
EnvironmentFile=-${unitValue(opts.environmentFile)}
Environment=SPARKCTL_STATE_DIR=/var/lib/sparkctl
Environment=NO_COLOR=1
${routerLines(p)}# serve --foreground: preflight, launch, wait until really ready; SIGTERM is forwarded to vLLM's process group.
ExecStart=${cmd(...serveArgs)}
# Once started, take it from cold to warm (waits for readiness itself).
ExecStartPost=${cmd('prewarm', p.name, '--deadline', `${p.server.readyTimeoutSeconds + p.prewarm.timeoutSeconds}s`)}
TimeoutStartSec=${startBudget}
# ${
    auto
      ? `engine.vllmVersion auto: the vLLM found when the service starts decides the drain (one with --shutdown-timeout gets ${drain} s for in-flight requests on SIGTERM, an older one aborts them)`
      : drain
        ? `vLLM drains in-flight requests for up to ${drain} s on SIGTERM (--shutdown-timeout)`
        : `this vLLM (${p.engine.vllmVersion}) aborts in-flight requests on SIGTERM (no --shutdown-timeout in its flag table)`
  }; sparkctl escalates to SIGKILL after its own grace.
KillMode=mixed
TimeoutStopSec=${stopBudget}
Restart=on-failure
RestartSec=15
LimitNOFILE=${Math.max(65536, r.platform.host.nofileMin)}
LimitMEMLOCK=infinity

[Install]
WantedBy=multi-user.target
`;
  out.unit(unit);
  out.note(
    `install: sparkctl systemd ${p.name} > /etc/systemd/system/sparkctl-${p.name}.service && systemctl daemon-reload && systemctl enable --now sparkctl-${p.name}`,
  );
  if (p.server.apiKeyEnv) out.note(`put ${p.server.apiKeyEnv}=<key> in ${opts.environmentFile} (chmod 600)`);
}

/**
 * A container unit fixes vLLM's arguments when it is written, not when it runs (serve --foreground
 * reads the installed vLLM at each start). With engine.vllmVersion auto they are rendered for the
 * image's vLLM, read here as serve reads it (label, else asked in the image, cached by image id), else
 * as its reference states it (vllm/vllm-openai:vX.Y.Z, a known NGC release), and for its entrypoint;
 * an image whose version none of these gives is refused (exit 2) rather than rendered for a guess.
 */
async function forImage(r: Resolved, gpus?: number): Promise<{ r: Resolved; entrypoint?: string[]; note?: string }> {
  const { imageVersion } = await import('./inputs.js');
  const { decideVersion, unknownImageVersion } = await import('./vllm-version.js');
  const read = await imageVersion(r.profile, r.platform, false);
  const pinned = r.profile.engine.vllmVersion;
  const v = decideVersion(pinned, read.installed);
  const stated = read.installed.source === 'tag' || read.installed.source === 'release-notes';
  const note =
    v.how === 'unknown' || (pinned === 'auto' && stated)
      ? `flags rendered for ${v.note}`
      : v.mismatch
        ? `engine.vllmVersion is pinned to ${pinned}, but the image ${read.installed.image} has vLLM ${v.installed}: the unit would run flags for a vLLM that is not there`
        : undefined;
  if (pinned !== 'auto') return { r, entrypoint: read.image?.entrypoint, note };
  if (v.how === 'unknown') throw unknownImageVersion(read.installed.image ?? 'none', read.installed.why, 'the unit');
  const profile = { ...r.profile, engine: { ...r.profile.engine, vllmVersion: v.version } };
  const r2 = resolveLoaded(
    { profile, file: r.file },
    { gpus, platform: r.platform.name, modelRead: await readModelFor(profile) },
  );
  requireValid(r2);
  return { r: r2, entrypoint: read.image?.entrypoint, note };
}

/** With a router: container units run the replicas only; serve --foreground runs HAProxy in front of them too. */
function routerNote(p: Resolved['profile'], ports: number[]): string | undefined {
  if (!p.router?.enabled) return undefined;
  return `router.enabled: these units run the replicas only (ports ${ports.join(', ')}), not HAProxy on port ${p.server.port}; for the router in front, one unit that runs serve --foreground: sparkctl systemd ${p.name} --runtime host --set engine.runtime=container`;
}

/** The container units' common start: the image's own version and entrypoint read, then the serve plan for it. */
async function containerPlan(r0: Resolved, opts: SystemdOptions, out: UnitSink) {
  const { runtimeFor } = await import('./runtime/index.js');
  const { r: r1, entrypoint, note: versionNote } = await forImage(r0, opts.gpus);
  if (versionNote) out.note(`note: ${versionNote}`);
  // the replicas keep loopback ports in units (router.replicaSocket false): a unit runs without sparkctl,
  // so nothing makes and checks the socket folder before podman mounts it, and the operator's own
  // router in front (routerNote) reaches them by port
  const r = r1.profile.router
    ? { ...r1, profile: { ...r1.profile, router: { ...r1.profile.router, replicaSocket: false } } }
    : r1;
  // no start caches in a unit (yet): its folder would be this user's, not the unit's, and nothing made it before podman
  // mounts it
  const plan = buildServePlan(r, {
    engine: 'vllm',
    vllmBin: 'vllm',
    prewarm: false,
    runtime: 'container',
    imageEntrypoint: entrypoint,
    startCaches: false,
    allowUnauthenticated: opts.allowUnauthenticated,
  });
  // a unit runs without sparkctl: the exposure is said now, when it is written (its comment says it too)
  for (const w of plan.warnings.filter((x) => x.startsWith('WARNING: '))) out.note(w);
  return { p: r.profile, plan, replicaRun, runtimeFor, versionNote };
}

/**
 * engine.runtime container: one unit per replica that runs the container itself, attached
 * (`run --rm`), so systemd supervises the CLI and its stop reaches vLLM as SIGTERM with the drain
 * (--stop-timeout). The key is named (--env VLLM_API_KEY) and read from the EnvironmentFile by the CLI.
 * A `podman run` unit by default, which every podman runs: Debian 12's podman 4.3 has no Quadlet
 * (4.4+); --quadlet writes the .container file instead.
 */
async function containerUnits(r0: Resolved, opts: SystemdOptions, out: UnitSink) {
  const { p, plan, replicaRun, runtimeFor, versionNote } = await containerPlan(r0, opts, out);
  const rn = routerNote(
    p,
    plan.replicas.map((x) => x.port),
  );
  if (rn) out.note(`note: ${rn}`);
  const rt = runtimeFor(plan);
  for (const x of plan.replicas) {
    // the unit's container has no sparkctl registry entry: systemd owns it; its marker names the unit
    const u = rt.systemd(replicaRun(plan, x), `systemd-${x.name}`)!;
    const refused = opts.user === undefined ? undefined : u.userRefusal?.(opts.user, p.name);
    if (refused) throw refused;
    const { cli, image } = rt.render(replicaRun(plan, x), `systemd-${x.name}`, { detached: false }).container!;
    const stopBudget = u.stopTimeoutS + 30;
    const unit = `# sparkctl systemd ${p.name} (container, replica ${x.index}): ${commentValue(p.description ?? '')}
# Install: save as /etc/systemd/system/${u.unit}.service, then
#   systemctl daemon-reload && systemctl enable --now ${u.unit}
# The image must be present (${cli} pull ${image}): the unit never pulls (--pull=never).
${versionNote ? `# ${commentValue(versionNote)}\n` : ''}${rn ? `# ${commentValue(rn)}\n` : ''}[Unit]
Description=vLLM server ${unitValue(x.name)} in ${cli} (sparkctl)
After=${['network-online.target', 'nvidia-persistenced.service', ...u.after].join(' ')}
${u.requires.map((r) => `Requires=${r}\n`).join('')}Wants=network-online.target
StartLimitIntervalSec=600
StartLimitBurst=5

[Service]
Type=simple
${opts.user ? `User=${opts.user}\n` : ''}# The API key${p.server.apiKeyEnv ? ` (VLLM_API_KEY=..., from ${p.server.apiKeyEnv})` : ''} lives here, mode 0600, never in the unit: the container gets it by name.
EnvironmentFile=-${unitValue(opts.environmentFile)}
${u.execStartPre.length ? `# a leftover container of this unit (by its recorded id), then the stale id file, which would make podman refuse to run\n${u.execStartPre.map((l) => `ExecStartPre=${l}\n`).join('')}` : ''}ExecStart=${u.execStart}
ExecStop=${u.execStop}
${u.execStopPost.map((l) => `ExecStopPost=${l}\n`).join('')}TimeoutStartSec=${p.server.readyTimeoutSeconds + 60}
TimeoutStopSec=${stopBudget}
Restart=on-failure
RestartSec=15

[Install]
WantedBy=multi-user.target
`;
    out.unit(unit);
  }
  out.note(
    `install: save each unit as /etc/systemd/system/<name>.service, then systemctl daemon-reload && systemctl enable --now <name>`,
  );
  if (p.server.apiKeyEnv)
    out.note(`put VLLM_API_KEY=<key> in ${opts.environmentFile} (chmod 600): the container reads VLLM_API_KEY by name`);
}

/**
 * --quadlet: one Podman Quadlet .container file per replica, from the same container settings. The
 * key is a podman secret (Secret=, type=env): its value is in podman's secret store, never in the
 * file or a file it names. A Quadlet unit runs as the user whose folder holds it, so --user is not
 * a setting here.
 */
async function quadletUnits(r0: Resolved, opts: SystemdOptions, out: UnitSink) {
  if (opts.user !== undefined)
    throw new UsageError('--user with --quadlet: a Quadlet unit runs as the user whose folder holds it', [
      `save it in ~${opts.user}/.config/containers/systemd/ (rootless podman) instead of /etc/containers/systemd/`,
    ]);
  const { p, plan, replicaRun, runtimeFor, versionNote } = await containerPlan(r0, opts, out);
  const secret = `sparkctl-${p.name}-api-key`;
  const rn = routerNote(
    p,
    plan.replicas.map((x) => x.port),
  );
  if (rn) out.note(`note: ${rn}`);
  let min = '4.4';
  const rt = runtimeFor(plan);
  for (const x of plan.replicas) {
    // the watcher's verdict as the container's health check: a Quadlet unit's server is in no registry, so sparkctl
    // watch never sees it
    const w = p.watch;
    const liveness = {
      check: {
        port: x.port,
        model: servedName(p),
        windowS: w.windowSeconds,
        maxWindowS: w.maxWindowSeconds,
        probeTimeoutS: w.probeTimeoutSeconds,
      },
      startPeriodS: p.server.readyTimeoutSeconds,
      restart: w.action === 'restart',
    };
    const q = rt.quadlet(replicaRun(plan, x), `systemd-${x.name}`, {
      description: `vLLM server ${x.name} in podman (sparkctl)`,
      secret,
      startTimeoutS: p.server.readyTimeoutSeconds + 60,
      liveness,
    })!;
    min = q.minPodman;
    out.unit(
      `# sparkctl systemd ${p.name} --quadlet (replica ${x.index}): ${commentValue(p.description ?? '')}\n${versionNote ? `# ${commentValue(versionNote)}\n` : ''}${rn ? `# ${commentValue(rn)}\n` : ''}${q.text}`,
    );
  }
  out.note(
    `install: save each as /etc/containers/systemd/<unit>.container (podman >= ${min}), then systemctl daemon-reload && systemctl start <unit>`,
  );
  if (p.server.apiKeyEnv)
    out.note(
      `the key: printf '%s' "$${p.server.apiKeyEnv}" | sudo podman secret create ${secret} - (root's secret store, for a unit in /etc/containers/systemd/; for a rootless unit in ~/.config/containers/systemd/, the same without sudo, as that user; the container gets it as VLLM_API_KEY)`,
    );
}

/** With a router: what runs inside the service, and how to restart it without dropping requests. */
function routerLines(p: { name: string; server: { port: number }; router?: { enabled: boolean } }): string {
  if (!p.router?.enabled) return '';
  return `# The router (HAProxy on port ${p.server.port}) runs inside this service with the replicas behind it on loopback.
# systemctl restart stops everything; SPARKCTL_STATE_DIR=/var/lib/sparkctl sparkctl restart ${p.name} --rolling replaces
# one replica at a time while the service keeps running (it stays up while any replica of the profile is registered and alive).
`;
}
