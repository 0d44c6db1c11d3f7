// The typed plan that `serve` hands to the engine: built by the command from validated flags and a
// profile resolved (parsed and validated) once against the host's shape. Everything a launch needs
// is decided here, before anything is spawned: each replica's argv, environment, port, GPUs and
// log, the executable, the state folder, and the ready and stall deadlines. Pure, table-tested.
import { join, resolve } from 'node:path';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { ModelFacts } from '../model/facts.js';
import { BUILTIN_DIR } from '../profiles/load.js';
import type { NodesFile, Platform, Profile } from '../profiles/schema.js';
import type { HostShape } from '../profiles/validate.js';
import {
  renderReplicas,
  servedName,
  checkRendered,
  shutdownTimeoutOf,
  cpuBuild,
  type ReplicaPlan,
} from '../profiles/render.js';
import { graceMsOf } from './stop.js';
import { formatFlagProblem } from '../profiles/vllm-flags.js';
import { unifiedKvBytes } from '../profiles/unified-kv.js';
import { requireValid, type Resolved } from '../profiles/resolve.js';
import { stateDir } from '../util/paths.js';
import { UsageError } from '../errors.js';
import { RouterBlock } from '../profiles/schema.js';
import { planRouter, type RouterPlan } from '../profiles/router.js';
import { traitsOfProfile, type RuntimePlanPart } from './runtime/traits.js';
import type { ReplicaRun } from './runtime/runtime.js';
import type { ClusterLaunch, LaunchRecord } from './registry.js';
import type { ProbeSettings } from '../health/probe.js';
import type { NodeStep } from './cluster/ray-plan.js';
import type { NodeCaches } from './cluster/node-caches.js';
import type { VersionDecision } from './vllm-version.js';
import { checkExposure } from '../util/exposure.js';
import { chooseLoader, type LoaderChoice } from './loader.js';
import { planCaches, cacheRoot as cacheRootFor, type CachePlan } from './caches.js';

export type EngineKind = 'vllm' | 'sim';

/**
 * A serve plan, wherever its server groups run: one type, its `placement` the discriminant. A plan is
 * a list of server groups, each placed on a node and run by a Runtime (groups.ts groupsOf is that
 * list, read from either placement's fields). On this host (ServePlan, 'local') each replica is one
 * group on the local node; over nodes (ClusterPlan, 'nodes') the groups are the ranks (native) or
 * Ray's per-node starts before the head's vLLM, each on the node its step names. engine/serve.ts
 * `serve` runs either. What every plan has lives once, in PlanCore.
 */
export type Plan = ServePlan | ClusterPlan;

/** What every serve plan has, wherever its server groups run (Plan). */
export interface PlanCore {
  placement: 'local' | 'nodes';
  /** the profile as resolved for this placement (the host's shape, or the nodes') */
  profile: Profile;
  engine: EngineKind;
  stateDir: string;
  servedName: string;
  /** the wait for ready (server.readyTimeoutSeconds, or --ready-timeout) */
  readyTimeoutMs: number;
  /** no log output for this long ends the wait as stalled (server.stallTimeoutSeconds) */
  stallTimeoutMs: number;
  /** each endpoint is prewarmed once ready (with the profile's prewarm settings) */
  prewarm: boolean;
  /**
   * the deep probe of each ready endpoint: the profile's, with what this placement can read (its GPUs; a cold first
   * generation)
   */
  probe: ProbeSettings;
}

/** A plan on this host: every group (a replica) on the local node. */
export interface ServePlan extends PlanCore {
  placement: 'local';
  /** the profile's file (the simulator reads the architecture facts from it) */
  file: string;
  platform: Platform;
  host: HostShape;
  hostNote?: string;
  executable: string[];
  /** the model facts the memory plan uses (config.json with the profile's overrides) */
  modelFacts?: ModelFacts;
  replicas: ReplicaPlan[];
  /** cross-field warnings (errors never reach a plan: they are exit 2) */
  warnings: string[];
  foreground: boolean;
  /** HAProxy in front of the replicas (router: in the profile, or --router) */
  router?: RouterPlan;
  runtime: 'host' | 'container';
  /** the container runtime's CLI and how to render each replica's container (runtime container) */
  container?: RuntimePlanPart;
  /** what each replica's registry entry keeps of how it was asked to start (restart reuses it) */
  launch?: LaunchRecord;
  /** vLLM's start caches kept between starts (caches.ts): their folder and variables, in every replica's env */
  caches?: CachePlan;
  /** the weights' loader (--load-format) and the sentence that says why */
  loader?: LoaderChoice;
  /**
   * vLLM's P2P check: skipped on preflight's evidence, or left to vLLM, and the sentence that says which (TP > 1 only)
   */
  p2p?: { skip: boolean; note: string };
}

export type ExecutorKind = 'ray' | 'native';

/** A cluster's one endpoint: the one-host replica's rendering, as far as a launch on a node reads it. */
export type NodesReplica = Pick<ReplicaPlan, 'name' | 'argv' | 'env' | 'port'>;

/** A plan over nodes: its groups placed on the nodes file's nodes (cluster/plan.ts toClusterPlan). */
export interface ClusterPlan extends PlanCore {
  placement: 'nodes';
  executor: ExecutorKind;
  nodesFile: string;
  nf: NodesFile;
  tensor: number;
  pipeline: number;
  /** the server groups, in start order, each on the node it names */
  steps: NodeStep[];
  /**
   * the one endpoint the head serves: rendered as a replica on one host is (renderReplicas), what a launch on a node
   * needs of it
   */
  replica: NodesReplica;
  /** VLLM_API_KEY, set by serve from ServeRun.secrets (never in the plan as built) */
  apiKey?: string;
  /** vLLM's start caches on each node (node-caches.ts): made and pointed at by each launch line on a node's host */
  caches?: NodeCaches;
  /** each `ray start` (seconds, enforced on the node) */
  joinTimeoutS?: number;
  /** the whole wait for Ray to list every node */
  rayWaitMs?: number;
  /** a cluster whose view has not changed for this long, with every join done, is what it will be */
  settleMs?: number;
  /** serve's inputs, kept in the cluster's record (upgrade serves it again the same way) */
  launch?: ClusterLaunch;
}

/** What runs the servers, as the caller settled it (serve's verb from its flags, restart from a record). */
export interface RunInputs {
  engine: EngineKind;
  /** the vllm executable (engine vllm) */
  vllmBin: string;
  /** the simulator's model load time, seconds */
  simLoad?: number;
  /** the same as the simulator's own argv has it (restart starts again with what the first start had) */
  simLoadSeconds?: string;
  /** ms */
  readyTimeout?: number;
  prewarm: boolean;
  foreground?: boolean;
  dryRun?: boolean;
  /** HAProxy in front of the replicas even where the profile has no router: block */
  router?: boolean;
  /** host (the vllm executable here) or container (docker/podman); default the profile's engine.runtime */
  runtime?: 'host' | 'container';
  /** let the container CLI pull a missing image */
  pull?: boolean;
  /** listen beyond loopback without a key (warned at every start; util/exposure.ts) */
  allowUnauthenticated?: boolean;
}

/** What the profile was read with (restart reads it again with the same). */
export interface ReadInputs {
  set: string[];
  profiles?: string;
  gpus?: number;
  platform?: string;
  runtime?: 'host' | 'container';
  router?: boolean;
  allowUnauthenticated?: boolean;
}

export type PlanInputs = RunInputs & {
  stateDir?: string;
  /** the image's entrypoint, as read (it decides whether the command repeats `vllm serve`) */
  imageEntrypoint?: string[];
  /** the version of the vLLM that will run, as read (installed or in the image): a CPU build changes its environment */
  installedVllm?: string;
  /** serve's inputs and what they resolved to, recorded in each replica's entry */
  launch?: LaunchRecord;
  /** the container image's content id, where read: the start caches are kept per image */
  imageId?: string;
  /** false: no start caches whatever the profile says (a generated unit, which runs without sparkctl) */
  startCaches?: false;
  /** the load formats whose packages are installed beside the vLLM that runs (loader.ts), where read */
  installedLoaders?: string[];
  /**
   * What serve's preflight read of the GPU topology (its gpu.topology check): pass (every pair of each
   * TP group on NVLink) lets vLLM's P2P check be skipped; absent, the preflight did not run or read it.
   */
  topology?: { status: string; observed: string };
};

/**
 * serve's inputs beyond the profile file and what they resolved to (the version, the image): what restart starts from
 * again.
 */
export function launchRecord(
  opts: ReadInputs,
  vllm: Pick<VersionDecision, 'version' | 'how'>,
  image?: string,
  profile?: Pick<Profile, 'env' | 'server' | 'container'>,
): LaunchRecord {
  return {
    ...(profile ? { settings: settingsOf(profile) } : {}),
    sets: [...opts.set],
    // by its whole path, as over nodes: restart, upgrade and the watcher read it from another folder
    ...(opts.profiles ? { profilesDir: resolve(opts.profiles) } : {}),
    ...(opts.gpus !== undefined ? { gpus: opts.gpus } : {}),
    ...(opts.platform ? { platform: opts.platform } : {}),
    ...(opts.runtime ? { runtime: opts.runtime } : {}),
    ...(opts.router ? { router: true } : {}),
    ...(opts.allowUnauthenticated ? { allowUnauthenticated: true } : {}),
    vllm: { asked: vllm.how === 'pinned' ? vllm.version : 'auto', resolved: vllm.version, how: vllm.how },
    ...(image ? { image } : {}),
  };
}

/** The launch record with the host install's fingerprint (undefined: none to take, a container or the simulator). */
export function withFingerprint(
  rec: LaunchRecord,
  fp: { version: string; packages: string; count: number } | undefined,
): LaunchRecord {
  return fp ? { ...rec, fingerprint: { version: fp.version, packages: fp.packages, count: fp.count } } : rec;
}

/** A value's fingerprint: enough to tell that it changed, not what it is. */
const fingerprint = (v: string) => createHash('sha256').update(v).digest('hex').slice(0, 16);

/**
 * What reaches the server but not its argv, fingerprinted for restart's comparison (registry.ts LaunchRecord.settings).
 */
function settingsOf(p: Pick<Profile, 'env' | 'server' | 'container'>): NonNullable<LaunchRecord['settings']> {
  return {
    env: Object.fromEntries(Object.entries(p.env ?? {}).map(([k, v]) => [k, fingerprint(String(v))])),
    ...(p.server.apiKeyEnv ? { apiKeyEnv: p.server.apiKeyEnv } : {}),
    // the container block whatever the runtime (absent: the fingerprint of null)
    containerBlock: fingerprint(JSON.stringify(p.container ?? null)),
  };
}

export function sparkctlBin(): string {
  return join(BUILTIN_DIR, '..', 'bin', 'sparkctl.js');
}

export function executableFor(opts: Pick<RunInputs, 'engine' | 'vllmBin'>): string[] {
  return opts.engine === 'sim' ? [process.execPath, sparkctlBin(), 'sim'] : [opts.vllmBin];
}

/**
 * The simulator's own knobs: the profile (architecture facts), the platform it pretends to be, and
 * the vLLM version it parses flags and logs as (the profile's, --set included: the file alone may say another).
 */
export function simTail(
  r: Pick<Resolved, 'file' | 'platform' | 'profile'>,
  opts: Pick<RunInputs, 'simLoad' | 'simLoadSeconds'>,
): string[] {
  // A profile generated for a model has no file: the simulator reads the model's config.json itself.
  const tail = existsSync(r.file)
    ? ['--sim-profile', r.file, '--sim-platform', r.platform.name]
    : ['--sim-platform', r.platform.name];
  tail.push('--sim-vllm-version', r.profile.engine.vllmVersion);
  const load = opts.simLoad !== undefined ? String(opts.simLoad) : opts.simLoadSeconds;
  if (load !== undefined) tail.push('--sim-load-seconds', load);
  return tail;
}

/**
 * The rendered flags checked against the target vLLM's table: those it would refuse thrown (UsageError), or under
 * --dry-run warned as refused; the table's warnings after them.
 */
function renderedFlagWarnings(profile: Profile, dryRun: boolean | undefined): string[] {
  const flags = checkRendered(profile);
  const refused = flags.filter((p) => p.severity === 'error').map(formatFlagProblem);
  if (refused.length && !dryRun)
    throw new UsageError(
      `profile ${profile.name}: vLLM ${profile.engine.vllmVersion} would refuse ${refused.length} rendered flag(s)`,
      refused,
    );
  return [
    ...refused.map((x) => `serve would refuse: ${x}`),
    ...flags.filter((p) => p.severity === 'warning').map(formatFlagProblem),
  ];
}

/**
 * Resolved profile + the caller's settled inputs (serve's verb checked its flags) -> the plan. Throws UsageError (exit
 * 2) on any profile error.
 */
export function buildServePlan(r0: Resolved, opts: PlanInputs): ServePlan {
  const r1 = withRouterFlag(r0, opts.router);
  // a DGX Spark: the planned KV cache in bytes, so vLLM's profiling on unified memory cannot starve it
  // (profiles/unified-kv.ts)
  const ukv =
    opts.engine === 'vllm'
      ? unifiedKvBytes(r1.profile, r1.platform, r1.host?.gpuMemoryBytes, r1.model?.facts)
      : undefined;
  const r = ukv
    ? { ...r1, profile: { ...r1.profile, engine: { ...r1.profile.engine, kvCacheMemoryBytes: ukv.bytes } } }
    : r1;
  const warnings = requireValid(r);
  if (ukv) warnings.push(ukv.note);
  // beyond loopback without a key: refused unless allowed (a dry-run says so), allowed: warned first
  const exposed = serveExposure(
    r.profile,
    Boolean(opts.allowUnauthenticated || opts.launch?.allowUnauthenticated),
    Boolean(opts.dryRun),
  );
  if (exposed) warnings.unshift(exposed);
  // Every rendered flag and value against the target vLLM's table: serve refuses what that
  // vLLM would refuse, --dry-run shows it as a warning.
  warnings.push(...renderedFlagWarnings(r.profile, opts.dryRun));
  const dir = opts.stateDir ?? stateDir();
  const rt = traitsOfProfile(r.profile, opts.runtime);
  const executable = executableFor(opts);
  // the runtime refuses what it cannot run before anything is rendered (a container: multi-node, no image)
  const container = rt.planPart(r.profile, r.platform, {
    executableLen: executable.length,
    pull: Boolean(opts.pull),
    entrypoint: opts.imageEntrypoint,
  });
  const replicas = renderReplicas(r.profile, r.host, {
    executable,
    stateDir: dir,
    tail: opts.engine === 'sim' ? simTail(r, opts) : [],
    cpuBuild: opts.engine === 'vllm' && cpuBuild(opts.installedVllm),
    runtime: rt.runtime,
  });
  const caches = withCaches(r.profile, replicas, opts, rt.image(r.profile, r.platform));
  const loader = withLoader(r.profile, replicas, opts, rt.packagesUnread);
  const p2p = withP2p(r.profile, replicas, opts);
  return {
    placement: 'local',
    profile: r.profile,
    file: r.file,
    platform: r.platform,
    host: r.host,
    hostNote: r.hostNote,
    engine: opts.engine,
    executable,
    stateDir: dir,
    servedName: servedName(r.profile),
    modelFacts: r.model?.facts,
    replicas,
    warnings,
    readyTimeoutMs: opts.readyTimeout ?? r.profile.server.readyTimeoutSeconds * 1000,
    stallTimeoutMs: r.profile.server.stallTimeoutSeconds * 1000,
    prewarm: opts.prewarm,
    // without prewarm the probe's generation is the server's first (cold, not hung)
    probe: {
      ...r.profile.probe,
      gpuMemoryUtilization: r.profile.engine.gpuMemoryUtilization,
      gpus: opts.engine !== 'sim',
      ...(opts.prewarm ? {} : { firstTokenTimeoutMs: r.profile.prewarm.timeoutSeconds * 1000 }),
    },
    foreground: Boolean(opts.foreground),
    router: planRouter(r.profile, replicas.length, dir, rt.runtime),
    runtime: rt.runtime,
    container,
    launch: opts.launch,
    ...(caches ? { caches } : {}),
    loader,
    ...(p2p ? { p2p } : {}),
  };
}

/**
 * vLLM's GPU peer-to-peer check (custom all-reduce at TP > 1: about 60 s at TP 8, vllm #19824) is
 * skipped (VLLM_SKIP_P2P_CHECK=1, vllm/envs.py) only where serve's preflight has read this host's
 * topology and found every pair of each TP group on NVLink (its gpu.topology check passed): the
 * answer is then already known. Otherwise vLLM checks as it would (newer vLLM skips by default and
 * trusts the driver; older ones test and cache the answer under VLLM_CACHE_ROOT). Said either way.
 */
export function withP2p(
  p: Profile,
  replicas: ReplicaPlan[],
  opts: Pick<PlanInputs, 'engine' | 'topology'>,
): { skip: boolean; note: string } | undefined {
  // the simulator stands for vLLM here too: the same plan, the variable ignored by it
  if (p.parallel.tensor < 2) return undefined;
  if (p.env.VLLM_SKIP_P2P_CHECK !== undefined)
    return {
      skip: String(p.env.VLLM_SKIP_P2P_CHECK) === '1',
      note: `P2P check: the profile sets VLLM_SKIP_P2P_CHECK=${String(p.env.VLLM_SKIP_P2P_CHECK)} itself`,
    };
  const t = opts.topology;
  if (t?.status !== 'pass') {
    const why = !t
      ? 'preflight did not read the topology (--skip-preflight, or no GPU)'
      : `preflight's gpu.topology was ${t.status}: ${t.observed}`;
    return { skip: false, note: `P2P check left to vLLM: ${why}` };
  }
  for (const x of replicas) x.env = { ...x.env, VLLM_SKIP_P2P_CHECK: '1' };
  return {
    skip: true,
    note: `P2P check skipped (VLLM_SKIP_P2P_CHECK=1): preflight read the topology, every TP pair on NVLink (${t.observed})`,
  };
}

/**
 * The address clients reach (the router's, or each replica's without one) against util/exposure.ts's
 * rule: no key (server.apiKeyEnv), or vLLM's sleep mode, whose development routes (/sleep, /wake_up,
 * /collective_rpc...) vLLM guards with no key at all (its AuthenticationMiddleware guards /v1, /v2,
 * /inference and /cohere only: vllm/entrypoints/serve/utils/server_utils.py GUARDED_PREFIX).
 * A dry-run shows the refusal as a warning, as it does vLLM's refusals.
 */
export function serveExposure(
  p: Pick<Profile, 'name' | 'server'>,
  allow: boolean,
  dryRun: boolean,
): string | undefined {
  const e = {
    who: `${p.name}'s server`,
    field: 'server.host',
    host: p.server.host,
    keyed: Boolean(p.server.apiKeyEnv),
    openRoutes: p.server.sleepMode
      ? "vLLM's sleep mode (server.sleepMode: /sleep, /wake_up and vLLM's other development routes)"
      : undefined,
    fixes: [
      '--set server.host=127.0.0.1 (the default; a router or the gateway in front for other hosts)',
      ...(p.server.apiKeyEnv
        ? []
        : ['server.apiKeyEnv: NAME in the profile (export NAME=...): vLLM asks every client for that key']),
      ...(p.server.sleepMode ? ['--set server.sleepMode=false'] : []),
    ],
  };
  try {
    return checkExposure(e, allow);
  } catch (err) {
    if (!dryRun || !(err instanceof UsageError)) throw err;
    return `serve would refuse: ${err.message} (${err.details.join('; ')})`;
  }
}

/** The loader chosen (loader.ts), rendered right after the model in each replica's argv. */
function withLoader(
  p: Profile,
  replicas: ReplicaPlan[],
  opts: PlanInputs,
  packagesUnread: string | undefined,
): LoaderChoice {
  const choice = chooseLoader({
    pinned: p.engine.loadFormat,
    installed: opts.installedLoaders,
    gpu: !cpuBuild(opts.installedVllm),
    packagesUnread,
    extraArgs: p.engine.extraArgs,
    engine: opts.engine,
  });
  if (choice.format)
    for (const x of replicas) x.argv.splice(x.argv.indexOf('serve') + 2, 0, '--load-format', choice.format);
  return choice;
}

/**
 * vLLM's start caches for this profile and the vLLM that runs (the installed one as read, else the
 * profile's), and the image for a container: each replica's env points them into the folder (the
 * same path inside a container, which mounts it). profile.engine.startCaches: false leaves vLLM's own.
 */
/** torch's loggers that say whether a compile came from its caches (codecache.py, autograd_cache.py). */
export const TORCH_CACHE_LOGS = 'torch._inductor.codecache,torch._functorch._aot_autograd.autograd_cache';

function withCaches(
  p: Profile,
  replicas: ReplicaPlan[],
  opts: PlanInputs,
  image: string | undefined,
): CachePlan | undefined {
  if (p.engine.startCaches === false || opts.startCaches === false) return undefined;
  const stateEnv = opts.stateDir ? { ...process.env, SPARKCTL_STATE_DIR: opts.stateDir } : process.env;
  const plan = planCaches(
    {
      profile: p.name,
      vllm: opts.installedVllm ?? p.engine.vllmVersion,
      ...(image ? { image: opts.imageId ?? image } : {}),
    },
    p.env,
    cacheRootFor(stateEnv),
  );
  // This CPU build cannot load the AOT artifact it saved itself ("Compiling model again due to a load
  // failure ... 'function' object has no attribute 'finalize_loading'", test/fixtures/vllm-start): its
  // restart compiled again (75 s), while the standard compile cache (VLLM_USE_AOT_COMPILE=0, vllm/envs.py)
  // brought a restart's compile from 108 s to 13 s on the same host. A GPU build keeps vLLM's default.
  if (cpuBuild(opts.installedVllm) && opts.engine === 'vllm' && p.env.VLLM_USE_AOT_COMPILE === undefined) {
    plan.env.VLLM_USE_AOT_COMPILE = '0';
    plan.notes.push(
      'VLLM_USE_AOT_COMPILE=0: a CPU build of vLLM cannot load its own AOT compile artifact, so the restart reuses the standard compile cache instead',
    );
  }
  // A CPU build never uses vLLM's own compile cache: vllm/platforms/cpu.py turns VLLM_COMPILE into
  // DYNAMO_TRACE_ONCE with the inductor backend, so vLLM's CompilerManager (and its "Directly load the
  // compiled graph(s) ... from the cache" line) is not on its path. What a restart reuses there is
  // torch's own caches in TORCHINDUCTOR_CACHE_DIR (AOTAutograd and the FX graph cache), and torch says
  // hit or miss only at INFO on these two loggers: enabled, so the start report can say which it was.
  if (cpuBuild(opts.installedVllm) && opts.engine === 'vllm' && p.env.TORCH_LOGS === undefined) {
    plan.env.TORCH_LOGS = TORCH_CACHE_LOGS;
    plan.notes.push(
      `TORCH_LOGS=${TORCH_CACHE_LOGS}: a CPU build compiles through torch's caches, not vLLM's, and torch logs their hit or miss only with these loggers on`,
    );
  }
  for (const x of replicas) {
    x.env = { ...plan.env, ...x.env };
    x.cacheDir = plan.dir;
  }
  return plan;
}

/** What the plan's runtime renders and launches one replica from (runtimeFor(plan).render / launch). */
export function replicaRun(plan: ServePlan, replica: ReplicaPlan): ReplicaRun {
  return {
    profile: plan.profile,
    platform: plan.platform,
    replica,
    engine: plan.engine,
    stateDir: plan.stateDir,
    profileFile: plan.file,
    executableLen: plan.container?.executableLen ?? plan.executable.length,
    // the runtime's own SIGKILL waits as long as stop would: the drain plus vLLM's teardown
    stopTimeoutS: Math.ceil(graceMsOf({ shutdownTimeoutSeconds: shutdownTimeoutOf(replica.argv) }) / 1000),
    pull: Boolean(plan.container?.pull),
    entrypoint: plan.container?.entrypoint,
  };
}

/** --router turns the router on (its settings from the profile's router: block, if any, else the defaults). */
export function withRouterFlag<T extends { profile: Profile }>(r: T, flag?: boolean): T {
  if (!flag || r.profile.router?.enabled) return r;
  return { ...r, profile: { ...r.profile, router: { ...RouterBlock.parse(r.profile.router ?? {}), enabled: true } } };
}

/** The API key, read from the environment variable the profile names (never from the profile). */
export function readSecrets(profile: Profile, env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const name = profile.server.apiKeyEnv;
  if (!name) return {};
  const v = env[name];
  if (!v)
    throw new UsageError(`server.apiKeyEnv names ${name}, which is not set in this environment`, [
      `export ${name}=... (or put it in the systemd EnvironmentFile); the key itself never goes in a profile`,
    ]);
  return { VLLM_API_KEY: v };
}
