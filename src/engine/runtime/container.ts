// How one replica runs in a container (docker or podman), as NVIDIA ships vLLM: pure rendering of
// the run/stop/inspect command lines and of the identity proof from what the runtime reports. The
// same spec renders both CLIs; they differ only where the tools do (GPUs: docker's --gpus, podman's
// CDI devices). Secrets travel by name (-e VLLM_API_KEY): the value only in the environment.

import { homedir } from 'node:os';
import { join, isAbsolute, resolve, dirname } from 'node:path';
import { existsSync, statSync } from 'node:fs';
import type { ContainerBlock, Platform, Profile } from '../../profiles/schema.js';
import { replicaAddress, type ReplicaPlan } from '../../profiles/render.js';
import { UsageError } from '../../errors.js';

export type ContainerCli = 'docker' | 'podman';

/** The label that carries the instance marker: the one basis for stopping or removing a container. */
export const MARKER_LABEL = 'io.sparkctl.instance';
export const NAME_LABEL = 'io.sparkctl.name';

export interface Mount {
  host: string;
  container: string;
  readOnly: boolean;
}

export interface ContainerSpec {
  cli: ContainerCli;
  image: string;
  /** derived from the instance name (sparkctl-<instance>) */
  name: string;
  marker: string;
  /** the replica's GPUs */
  gpus: number[];
  /** publish the port on the profile's host address, or share the host's network (Ray) */
  network: { mode: 'publish'; host: string; port: number } | { mode: 'host' } | { mode: 'private' };
  mounts: Mount[];
  /** --ipc=host (vLLM's docs) or a /dev/shm of this size (NVIDIA's run_cluster.sh: 10.24g) */
  ipc: 'host' | { shmSize: string };
  /** non-secret variables, by value */
  env: Record<string, string>;
  /** variables passed by name only (their values come from sparkctl's environment) */
  envByName: string[];
  /** the arguments after `vllm serve` */
  vllmArgs: string[];
  /** seconds the runtime waits after SIGTERM before SIGKILL (the drain + teardown) */
  stopTimeoutS: number;
  /** global options of the CLI, before the subcommand (podman --runtime runc --cgroup-manager=cgroupfs) */
  cliArgs?: string[];
  /** more labels (profile, replica, the state folder that launched it) */
  labels?: Record<string, string>;
  /** --ulimit NAME=VALUE each; default NVIDIA's memlock=-1, stack=67108864 */
  ulimits?: Record<string, string>;
  /** false: attached with --rm (a systemd unit runs the CLI in the foreground); default detached */
  detached?: boolean;
  /** serve --pull: fetch a missing image; otherwise never (no pull at 3 a.m.) */
  pull?: boolean;
  /** how the image starts vLLM (imageStart); default: it runs the command given */
  start?: ImageStart;
}

/**
 * How an image starts vLLM, from its entrypoint: `vllm serve` already (vLLM's own images: ENTRYPOINT
 * ["vllm", "serve"], so the command is only the arguments; repeating `vllm serve` fails with
 * "unrecognized arguments: serve"), an api_server module (older images: vllm is named as the
 * entrypoint instead), or a wrapper that runs the command it is given (NGC's nvidia_entrypoint.sh,
 * which also sets up CUDA compatibility, so it is kept). Not read (no image here, or a unit written
 * for another host): vLLM's own repository is known to be the first kind.
 */
export type ImageStart = 'args' | 'entrypoint-vllm' | 'command';
export function imageStart(image: string, entrypoint?: readonly string[]): ImageStart {
  if (!entrypoint) return /(^|\/)vllm\/vllm-openai(:|@|$)/.test(image) ? 'args' : 'command';
  const n = entrypoint.length;
  if (n >= 2 && /(^|\/)vllm$/.test(entrypoint[n - 2]!) && entrypoint[n - 1] === 'serve') return 'args';
  if (entrypoint.some((a) => /^vllm\.entrypoints\./.test(a))) return 'entrypoint-vllm';
  return 'command';
}

/**
 * The image for a platform: NVIDIA's NGC build on the DGX baselines (its tag is the NGC release,
 * YY.MM), vLLM's own image of the target version elsewhere.
 */
export function defaultImage(platform: string, vllmVersion: string, ngcTag?: string): string {
  if (platform.startsWith('dgx-') && ngcTag) return `nvcr.io/nvidia/vllm:${ngcTag}-py3`;
  return `vllm/vllm-openai:v${vllmVersion}`;
}

/** A container name from an instance name (docker: [a-zA-Z0-9][a-zA-Z0-9_.-]*). */
export function containerName(instance: string): string {
  return `sparkctl-${instance.replace(/[^a-zA-Z0-9_.-]/g, '-')}`;
}

export const NVIDIA_ULIMITS: Record<string, string> = { memlock: '-1', stack: '67108864' };

function gpuArgs(cli: ContainerCli, gpus: number[]): string[] {
  if (!gpus.length) return [];
  // docker reads --gpus as CSV: a list of devices must be quoted inside the value
  if (cli === 'docker') return ['--gpus', `"device=${gpus.join(',')}"`];
  return gpus.flatMap((g) => ['--device', `nvidia.com/gpu=${g}`]);
}

/** `docker|podman run -d ...`: the argv (never a shell string). */
export function runArgv(s: ContainerSpec): string[] {
  const out = [
    s.cli,
    ...(s.cliArgs ?? []),
    'run',
    s.detached === false ? '--rm' : '--detach',
    `--pull=${s.pull ? 'missing' : 'never'}`,
    '--name',
    s.name,
    '--label',
    `${MARKER_LABEL}=${s.marker}`,
    '--label',
    `${NAME_LABEL}=${s.name}`,
  ];
  for (const [k, v] of Object.entries(s.labels ?? {})) out.push('--label', `${k}=${v}`);
  out.push(...gpuArgs(s.cli, s.gpus));
  out.push(...(s.ipc === 'host' ? ['--ipc=host'] : ['--shm-size', s.ipc.shmSize]));
  // the ulimits NVIDIA's DGX instructions use
  for (const [k, v] of Object.entries(s.ulimits ?? NVIDIA_ULIMITS)) out.push('--ulimit', `${k}=${v}`);
  if (s.network.mode === 'host') out.push('--network', 'host');
  // a replica on vLLM's --uds: reached through its socket's bind-mounted folder, no port published
  else if (s.network.mode === 'private') {
    /* the runtime's own network, nothing published */
  } else
    out.push(
      '--publish',
      `${s.network.host === '0.0.0.0' ? '' : `${s.network.host}:`}${s.network.port}:${s.network.port}`,
    );
  for (const m of s.mounts) out.push('--volume', `${m.host}:${m.container}${m.readOnly ? ':ro' : ''}`);
  for (const k of s.envByName) out.push('--env', k);
  for (const [k, v] of Object.entries(s.env)) out.push('--env', `${k}=${v}`);
  out.push('--stop-timeout', String(s.stopTimeoutS));
  if (s.start === 'args') out.push(s.image, ...s.vllmArgs);
  else if (s.start === 'entrypoint-vllm') out.push('--entrypoint', 'vllm', s.image, 'serve', ...s.vllmArgs);
  else out.push(s.image, 'vllm', 'serve', ...s.vllmArgs);
  return out;
}

/** What the runtime is asked about a container: its id, its marker label, whether it runs. */
export function inspectArgv(cli: ContainerCli, idOrName: string): string[] {
  return [
    cli,
    'inspect',
    '--type',
    'container',
    '--format',
    `{{.Id}} {{index .Config.Labels "${MARKER_LABEL}"}} {{.State.Running}}`,
    idOrName,
  ];
}

// docker 23+ deprecates --time for --timeout (a warning on every stop), which 20.10 does not know: -t is both
export const stopArgv = (cli: ContainerCli, id: string, timeoutS: number) => [
  cli,
  'stop',
  cli === 'docker' ? '-t' : '--time',
  String(timeoutS),
  id,
];
export const removeArgv = (cli: ContainerCli, id: string) => [cli, 'rm', id];
/** The `info --format` template that prints where the runtime keeps its images (their disk). */
export const storageRootFormat = (cli: ContainerCli) =>
  cli === 'podman' ? '{{.Store.GraphRoot}}' : '{{.DockerRootDir}}';

export type ContainerProof =
  | { state: 'alive' | 'exited'; id: string }
  | { state: 'gone' }
  | { state: 'unproven'; code: 'id-differs' | 'no-label' | 'other-marker' | 'unreadable' | 'no-id'; reason: string };

/**
 * Is the container the record names ours? Only by the id recorded at launch AND the marker label;
 * a name alone proves nothing (another container may carry it now). Pure: the inspect output is
 * hostile text. `notFound` when the runtime said there is no such container.
 */
export function proveContainer(
  record: { containerId?: string; marker?: string },
  inspect: { stdout: string; notFound: boolean },
): ContainerProof {
  if (inspect.notFound) return { state: 'gone' };
  const line = inspect.stdout.trim().split('\n')[0] ?? '';
  // a missing label prints as Go's "<no value>"
  const m = /^([a-f0-9]{12,64}) (\S*|<no value>) (true|false)$/.exec(line);
  if (!m)
    return {
      state: 'unproven',
      code: 'unreadable',
      reason: `the runtime's answer is not an id, a label and a state: ${JSON.stringify(line.slice(0, 120))}`,
    };
  const [, id, label, running] = m as unknown as [string, string, string, string];
  if (!record.containerId || !id.startsWith(record.containerId))
    return {
      state: 'unproven',
      code: 'id-differs',
      reason: `container ${id.slice(0, 12)} is not the one recorded (${record.containerId?.slice(0, 12) ?? 'none'})`,
    };
  if (!label || label === '<no value>')
    return {
      state: 'unproven',
      code: 'no-label',
      reason: `container ${id.slice(0, 12)} carries no ${MARKER_LABEL} label`,
    };
  if (!record.marker || label !== record.marker)
    return {
      state: 'unproven',
      code: 'other-marker',
      reason: `container ${id.slice(0, 12)} carries another instance's marker`,
    };
  return { state: running === 'true' ? 'alive' : 'exited', id };
}

// ---- from a serve plan: the spec of one replica's container ----

/** The state folder that launched it: orphans are looked for among this folder's containers only. */
export const STATE_LABEL = 'io.sparkctl.state';
const PROFILE_LABEL = 'io.sparkctl.profile';
/** What the Hugging Face cache is mounted as inside the image (both images run as root). */
export const CONTAINER_HF_CACHE = '/root/.cache/huggingface';
/**
 * The NGC vLLM release the DGX baselines run by default. NGC tags are YY.MM of the container
 * release, not vLLM's version, so they cannot be derived: pin another one with container.image.
 * 26.03 carries vLLM 0.17.1 (NVIDIA's release notes, rel-26-03.html; see NGC_VLLM_RELEASES), the
 * first NGC release known to carry vLLM >= 0.17, which the shipped Qwen3.5 profiles need (25.10 had 0.10.2).
 * It is built on CUDA 13.2: the host needs a driver that runs it (R580+, or CUDA forward compatibility).
 */
export const NGC_VLLM_TAG = '26.03';

/** `cli ARGS...` with the profile's global CLI options in front of the subcommand. */
export const withCliArgs = (argv: string[], cliArgs: readonly string[]) => [argv[0]!, ...cliArgs, ...argv.slice(1)];

/** The image a profile runs: its own, else NGC's on a DGX baseline, else vLLM's for the target version. */
export function imageFor(p: Profile, platform: Pick<Platform, 'name'>): string {
  if (p.container?.image) return p.container.image;
  const v = p.engine.vllmVersion;
  if (!platform.name.startsWith('dgx-') && !/^\d+\.\d+(\.\d+)?$/.test(v))
    throw new UsageError(`no container image for vLLM "${v}" (vllm/vllm-openai is tagged v<version>)`, [
      '--set engine.vllmVersion=0.11.0 (vllm/vllm-openai:v0.11.0), or --set container.image=REPO:TAG (or REPO@sha256:DIGEST); k8s: --image REPO:TAG',
    ]);
  return defaultImage(platform.name, v, NGC_VLLM_TAG);
}

/** The image the profile names itself (container.image), if it does. */
export const ownImage = (p: Pick<Profile, 'container'>): string | undefined => p.container?.image;

/** The CLIs to look for: the profile's, else podman and docker (detectCli takes the first on PATH). */
export const cliCandidates = (p: Pick<Profile, 'container'>): ContainerCli[] =>
  p.container?.cli ? [p.container.cli] : ['podman', 'docker'];

/** The CLI: the profile's, else podman, else docker, whichever is on PATH. */
export function detectCli(p: Pick<Profile, 'container'>, onPath: (bin: string) => boolean = binOnPath): ContainerCli {
  if (p.container?.cli) return p.container.cli;
  if (onPath('podman')) return 'podman';
  if (onPath('docker')) return 'docker';
  throw new UsageError('engine.runtime container: neither podman nor docker is on PATH', [
    'install podman (apt-get install podman) or docker, or --set engine.runtime=host',
  ]);
}

function binOnPath(bin: string, path = process.env.PATH ?? ''): boolean {
  return path.split(':').some((d) => {
    if (!d) return false;
    try {
      const st = statSync(join(d, bin));
      return st.isFile() && (st.mode & 0o111) !== 0;
    } catch {
      return false;
    }
  });
}

export interface ContainerPlan {
  cli: ContainerCli;
  /** global options before the subcommand (container.cliArgs), used for every call about this container */
  cliArgs: string[];
  image: string;
  name: string;
  /**
   * [cli, ...cliArgs, 'run', '--detach', ...options, image, 'vllm', 'serve', ...] (or only the arguments: imageStart)
   */
  argv: string[];
  /** variables the CLI process must carry (their names are in argv as --env NAME; never their values) */
  envByName: string[];
  stopTimeoutS: number;
  /** what argv was rendered from (a Quadlet unit renders the same settings as keys) */
  spec: ContainerSpec;
}

interface ContainerRenderInput {
  profile: Profile;
  platform: Pick<Platform, 'name'>;
  replica: ReplicaPlan;
  engine: 'vllm' | 'sim';
  /** the instance marker (a random id at launch; "<marker>" in a dry run) */
  marker: string;
  stateDir: string;
  /** the profile's file: the simulator reads the architecture facts from it (mounted read-only) */
  profileFile?: string;
  cli: ContainerCli;
  /** how many leading argv elements are the host executable (replaced by the image's vllm) */
  executableLen: number;
  /** what the runtime waits after SIGTERM before SIGKILL */
  stopTimeoutS: number;
  env?: NodeJS.ProcessEnv;
  detached?: boolean;
  /** serve --pull: the CLI may fetch a missing image */
  pull?: boolean;
  /** the image's entrypoint, where it was read (image inspect) */
  entrypoint?: string[];
  /** where a relative model.path resolves (sparkctl's working folder, as on the host) */
  cwd?: string;
}

/**
 * What the schema fills in for an empty container: block (a test holds them equal), here so that
 * preflight's container checks do not load the profile schema.
 */
export const CONTAINER_DEFAULTS: ContainerBlock = {
  cliArgs: [],
  gpus: 'auto',
  network: 'publish',
  ulimits: { ...NVIDIA_ULIMITS },
  mounts: [],
};
/**
 * The profile's container settings, the defaults where it has no container: block: the one reading of them (a node's
 * rank container too).
 */
export const settingsOf = (p: Pick<Profile, 'container'>): ContainerBlock =>
  p.container ?? { ...CONTAINER_DEFAULTS, ulimits: { ...NVIDIA_ULIMITS } };

/**
 * The container CLI's own arguments the profile gives (before the verb: `podman --root X run`); none without a
 * container: block.
 */
export const containerCliArgs = (p: Pick<Profile, 'container'>): string[] => p.container?.cliArgs ?? [];

/**
 * The profile with its container image replaced (a pin's image, a candidate), its other container settings kept (the
 * defaults where it had none).
 */
export function withContainerImage<P extends Pick<Profile, 'container'>>(p: P, image: string): P {
  return { ...p, container: { ...settingsOf(p), image } };
}

/**
 * Whether the container is given the replica's GPUs, and why not: the simulator pretends them, and
 * container.gpus none is a CPU build of vLLM (a GPU device would fail to resolve on a host without
 * the toolkit, and a CPU vLLM has no use for it).
 */
export function containerGpuUse(
  p: Pick<Profile, 'container'>,
  engine: 'vllm' | 'sim',
): { gpu: true } | { gpu: false; why: string } {
  if (engine === 'sim') return { gpu: false, why: 'the simulator uses no GPU' };
  if (p.container?.gpus === 'none')
    return { gpu: false, why: 'container.gpus is none: the container gets no GPU device' };
  return { gpu: true };
}

/**
 * No GPU flag is not no GPU: where nvidia is the default runtime (docker's daemon, a node's
 * containerd), an image with NVIDIA_VISIBLE_DEVICES=all (NGC's and vLLM's images) gets every GPU
 * anyway; void makes the NVIDIA runtime inject nothing. For container.gpus none, unless the profile
 * sets the variable itself: the one rule for a run line and a pod spec.
 */
export function noGpuEnv(
  p: Pick<Profile, 'container'>,
  env: Record<string, string | undefined>,
): Record<string, string> {
  return !containerGpuUse(p, 'vllm').gpu && env.NVIDIA_VISIBLE_DEVICES === undefined
    ? { NVIDIA_VISIBLE_DEVICES: 'void' }
    : {};
}

/**
 * What a pod spec cannot carry of the container settings (k8s's container spec): said in the manifest's header, not
 * dropped silently.
 */
export function podLimits(p: Profile): string[] {
  if (!p.container && p.engine.runtime !== 'container') return [];
  const ul = p.container?.ulimits ?? NVIDIA_ULIMITS;
  const list = Object.entries(ul).map(([k, v]) => `${k}=${v}`);
  return list.length
    ? [
        `ulimits ${list.join(' ')}: a pod spec has no ulimit field; they are the node's container runtime's (containerd/CRI-O) defaults`,
      ]
    : [];
}

/** Where the Hugging Face cache is on this host: the profile's, else $HF_HOME, else ~/.cache/huggingface. */
export function hfCacheDir(p: Profile, env: NodeJS.ProcessEnv = process.env): string {
  return settingsOf(p).hfCache ?? env.HF_HOME ?? join(env.HOME ?? homedir(), '.cache', 'huggingface');
}

/** Ray places workers over the host network: a published port cannot carry it. */
function usesHostNetwork(p: Profile): boolean {
  return settingsOf(p).network === 'host' || p.parallel.executor === 'ray' || p.parallel.nodes > 1;
}

/**
 * The arguments after `vllm serve` inside the container. With a published port vLLM must listen on
 * every interface of its own network namespace (the publish decides which host address reaches it).
 */
export function containerVllmArgs(r: Pick<ReplicaPlan, 'argv'>, executableLen: number, hostNet: boolean): string[] {
  const out = r.argv.slice(executableLen + 1); // after `serve`
  if (!hostNet) {
    const i = out.indexOf('--host');
    if (i >= 0 && i + 1 < out.length) out[i + 1] = '0.0.0.0';
  }
  return out;
}

/**
 * The model argument (first after `serve`) by its absolute path when the profile gave a relative one;
 * the name clients use stays what it was (vLLM would otherwise serve it under the absolute path).
 */
function withModelPath(args: string[], given: string | undefined, abs: string | undefined): string[] {
  if (!given || !abs || given === abs || args[0] !== given) return args;
  const named = args.includes('--served-model-name');
  return [abs, ...(named ? [] : ['--served-model-name', given]), ...args.slice(1)];
}

function mountOf(source: string, target: string, readOnly: boolean): Mount {
  // a bind spec is split on ':'; a path holding one (or ',') would mount something else
  if (/[:,]/.test(source) || /[:,]/.test(target))
    throw new UsageError(`container mount ${JSON.stringify(source)}: a path with ':' or ',' cannot be bind-mounted`, [
      'rename the folder, or link it from a plain path',
    ]);
  return { host: source, container: target, readOnly };
}

/** One replica's container from the plan the host runtime would spawn. Pure but for whether the mounted paths exist. */
export function renderContainerRun(x: ContainerRenderInput): ContainerPlan {
  const p = x.profile;
  const s = settingsOf(p);
  const env = x.env ?? process.env;
  const image = imageFor(p, x.platform);
  const name = containerName(x.replica.name);
  const hostNet = usesHostNetwork(p);
  const mounts: Mount[] = [];
  const hf = hfCacheDir(p, env);
  if (existsSync(hf)) mounts.push(mountOf(hf, CONTAINER_HF_CACHE, true));
  // HF_HUB_CACHE names the hub cache itself (huggingface_hub reads it before HF_HOME): mounted where
  // the image's huggingface_hub looks, so the snapshot `sparkctl pull` checked is the one vLLM reads.
  const hub = !s.hfCache && env.HF_HUB_CACHE ? resolve(env.HF_HUB_CACHE) : undefined;
  if (hub && hub !== join(hf, 'hub') && existsSync(hub)) mounts.push(mountOf(hub, `${CONTAINER_HF_CACHE}/hub`, true));
  // A relative model.path means sparkctl's folder, as on the host; inside the container it would mean
  // the image's working folder, where it is not: mounted and passed by its absolute path instead.
  const modelPath = p.model.path ? resolve(x.cwd ?? process.cwd(), p.model.path) : undefined;
  if (modelPath) mounts.push(mountOf(modelPath, modelPath, true));
  if (x.engine === 'sim' && x.profileFile && isAbsolute(x.profileFile) && existsSync(x.profileFile))
    mounts.push(mountOf(x.profileFile, x.profileFile, true));
  for (const m of s.mounts) mounts.push(mountOf(m.source, m.target, m.readOnly));
  // vLLM's start caches (engine/caches.ts): read-write at the same path, where the env points
  if (x.replica.cacheDir) mounts.push(mountOf(x.replica.cacheDir, x.replica.cacheDir, false));
  // a replica on vLLM's --uds: its socket's folder (0700, sparkctl's) at the same path, so HAProxy and sparkctl's
  // readers reach the socket the container binds (rootless podman maps the folder's owner to the container's root)
  if (x.replica.uds) mounts.push(mountOf(dirname(x.replica.uds), dirname(x.replica.uds), false));
  const vars = { ...x.replica.env };
  // the container sees its GPUs as 0..n-1: the host's indices would select the wrong ones (the simulator has none, it
  // pretends them)
  if (x.engine === 'vllm') delete vars.CUDA_VISIBLE_DEVICES;
  Object.assign(vars, noGpuEnv(p, vars));
  const envByName = Object.keys(x.replica.envFrom).sort();
  const spec: ContainerSpec = {
    cli: x.cli,
    cliArgs: s.cliArgs,
    image,
    name,
    marker: x.marker,
    labels: { [PROFILE_LABEL]: p.name, [STATE_LABEL]: x.stateDir },
    gpus: containerGpuUse(p, x.engine).gpu ? x.replica.gpus : [],
    // published where a host process would listen: behind the router on 127.0.0.1 only, so a
    // client cannot reach a replica past HAProxy (its auth, its drain during a rolling restart)
    network: hostNet
      ? { mode: 'host' }
      : x.replica.uds
        ? { mode: 'private' }
        : { mode: 'publish', host: replicaAddress(p, x.replica.index).host, port: x.replica.port },
    mounts,
    ipc: s.shmSize ? { shmSize: s.shmSize } : 'host',
    ulimits: s.ulimits,
    env: Object.fromEntries(Object.entries(vars).sort(([a], [b]) => a.localeCompare(b))),
    envByName,
    vllmArgs: withModelPath(containerVllmArgs(x.replica, x.executableLen, hostNet), p.model.path, modelPath),
    stopTimeoutS: x.stopTimeoutS,
    detached: x.detached,
    pull: x.pull,
    start: imageStart(image, x.entrypoint),
  };
  return {
    cli: x.cli,
    cliArgs: [...s.cliArgs],
    image,
    name,
    argv: runArgv(spec),
    envByName,
    stopTimeoutS: x.stopTimeoutS,
    spec,
  };
}
