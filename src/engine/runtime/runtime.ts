// How vLLM runs: ONE interface, three implementations (the host process, docker, podman; the two
// container CLIs share one implementation, parameterised by the CLI). The plan picks one
// (runtimeFor in ./index.ts), a launch record or a registry entry names its own (runtimeOf); serve,
// stop, status, restart, systemd, k8s and preflight ask it instead of asking "is this a container?".
// Identity proof lives inside each implementation: pid + kernel start time + the launch's marker
// for a host process, the container id + the marker sparkctl recorded for a container.
import type { Platform, Profile } from '../../profiles/schema.js';
import type { ReplicaPlan } from '../../profiles/render.js';
import type { Proof, UnprovenCode } from './proc.js';
import type { ChildExit, Launched } from './child.js';
import type { ContainerCli, ContainerPlan } from './container.js';
import type { ContainerRecord } from './ops.js';
import type { ContainerCheck } from './preflight.js';
import type { QuadletInput, QuadletUnit } from './quadlet.js';
import type { UnitExec } from './unit.js';
import type { RuntimeTraits } from './traits.js';
import type { PullRequest, PullResult } from './image-pull.js';

export type RuntimeKind = 'host' | ContainerCli;

/** What a runtime renders one replica from: the plan's part for that replica (plan.ts: replicaRun). */
export interface ReplicaRun {
  profile: Profile;
  platform: Pick<Platform, 'name'>;
  engine: 'vllm' | 'sim';
  stateDir: string;
  /** the profile's file (the simulator reads the architecture facts from it) */
  profileFile?: string;
  replica: ReplicaPlan;
  /** how many leading argv elements are the host executable (a container runs the image's vllm instead) */
  executableLen: number;
  /** seconds the runtime itself waits after SIGTERM before SIGKILL (a container's --stop-timeout) */
  stopTimeoutS: number;
  /** serve --pull: the container CLI may fetch a missing image */
  pull: boolean;
  /** the image's entrypoint, where it was read */
  entrypoint?: string[];
}

/**
 * One replica's launch line, rendered in one place: what is spawned and with which environment. argv never holds a
 * secret.
 */
export interface LaunchLine {
  argv: string[];
  /** variables by value (never a secret) */
  env: Record<string, string>;
  /** variables read at launch from sparkctl's environment: VLLM_API_KEY -> the variable the profile names */
  envFrom: Record<string, string>;
  /** what the plan's JSON envelope shows of this launch beyond argv (a container: its run line and image) */
  envelope: Record<string, unknown>;
  /**
   * what the launch adds that this line does not hold, each a path or fact and why (a dry-run prints them as comments)
   */
  notes?: Array<{ what: string; value: string }>;
  /**
   * a container runtime: the run line and the settings it was rendered from (a Quadlet unit renders the same settings
   * as keys)
   */
  container?: ContainerPlan;
}

/** What identifies a launched replica, as its launch record or its registry entry holds it. */
export interface RuntimeTarget {
  pid: number;
  pgid: number;
  startTime: number;
  /** SPARKCTL_INSTANCE of a host launch; the marker sparkctl recorded for a container */
  marker?: string;
  container?: ContainerRecord;
}

export interface Stopped {
  /**
   * gone: nothing of it was running; terminated: it ended within the grace; killed: SIGKILL after it; unproven: nothing
   * was signalled
   */
  how: 'gone' | 'terminated' | 'killed' | 'unproven';
  /** nothing of it is left to release (host: no member of its group; container: removed) */
  released: boolean;
  /** host: the members of its group still alive after the stop */
  left: number;
  /** the processes proven ours before the stop (where GPU memory is looked for afterwards) */
  members: number[];
  /** the server's exit code, where the runtime reports it (a container's: 137 after the runtime's SIGKILL) */
  exitCode?: number;
  /** how: unproven */
  unproven?: { code: UnprovenCode; detail: string };
  /**
   * what it still holds that the runtime could not release, in the runtime's words (a container it could not remove)
   */
  held?: string;
}

export interface StopOpts {
  /** aborting it cuts the grace short (the host: SIGKILL at once) */
  signal?: AbortSignal;
  /** called once the first SIGTERM has gone out */
  onTerm?: () => void;
}

/** What status shows of a launched replica: the column and the JSON envelope's fields. */
export interface Described {
  /** a pid, or CLI:container-id */
  shown: string;
  envelope: Record<string, unknown>;
}

/**
 * What a runtime whose vLLM comes from an image reads of images: serve's pin, upgrade's candidate and
 * roll, and status's drift ask it (a runtime without one, the host, runs an install: no image to pin).
 * Every answer is the runtime's own text, read by the caller as hostile.
 */
export interface RuntimeImages {
  /**
   * a reference as this runtime reads it (`image inspect`: "<ID> <RepoDigests as JSON>"), or why it could not be read
   */
  inspect(ref: string, cliArgs: readonly string[]): Promise<{ stdout: string } | { error: string }>;
  /** the command that fetches a reference this runtime could not read */
  pullCommand(ref: string): string;
  /**
   * the runtime's own pull of a reference (image-pull.ts: a deadline, progress lines, a failure read into its kind);
   * never throws
   */
  pull(
    ref: string,
    cliArgs: readonly string[],
    opts: Pick<PullRequest, 'timeoutMs' | 'signal' | 'onLine'>,
  ): Promise<PullResult>;
  /** the image a launched server runs, as the runtime answers for it now (64 hex; undefined: not read) */
  runningId(t: RuntimeTarget): Promise<string | undefined>;
}

/** runtime, why, noHostGpu: its traits (traits.ts) */
export interface Runtime extends RuntimeTraits {
  readonly kind: RuntimeKind;
  /**
   * the launch line of one replica; marker is the launch's ("<marker>" in a dry run); detached: false for a systemd
   * unit's foreground run
   */
  render(x: ReplicaRun, marker: string, opts?: { detached?: boolean }): LaunchLine;
  /**
   * Start one replica; its output goes to the replica's log. record(l) is called whenever there is
   * something to register (a container: before `run` too, so a sparkctl killed meanwhile leaves an
   * entry that finds it by its marker). Throws UsageError for what must be fixed first.
   */
  launch(x: ReplicaRun, secrets: Record<string, string>, record: (l: Launched) => void): Launched;
  /**
   * The runtime's own checks before a launch, for the GPUs the replicas use (a container: the CLI,
   * the image, the NVIDIA toolkit or CDI). The host's are preflight's; none here.
   */
  preflight(x: ReplicaRun, gpus: number[]): Promise<{ label: string; checks: ContainerCheck[] } | undefined>;
  /** readiness: is what answers on the replica's port the launch's own? */
  ours(l: Launched): () => boolean;
  /** the identity a registry entry keeps of a launch (a container's processes are the runtime's: pid 0) */
  recordOf(l: Launched): RuntimeTarget;
  /** is the target still the one launched? The only basis for a signal or a stop. */
  prove(t: RuntimeTarget): Proof;
  /** SIGTERM, the grace, SIGKILL; every step proven first; safe to call twice */
  stop(t: RuntimeTarget, graceMs: number, opts?: StopOpts): Promise<Stopped>;
  /** SIGKILL now (a second Ctrl-C), by what this process launched and proved */
  kill(t: RuntimeTarget): Promise<void>;
  /** after its stop: end what of the launch is still ours (a container's log follower) */
  release(l: Launched): void;
  /** how the server ended, once stopped (undefined: no exit seen) */
  exitOf(l: Launched, stopped?: Stopped): ChildExit | undefined;
  /**
   * where its output is: the replica's log (a container's, fed by its log follower), and the runtime's own reader where
   * it has one
   */
  logs(t: RuntimeTarget & { logFile: string }): { file: string; argv?: string[] };
  describe(t: RuntimeTarget & { marker?: string }): Described;
  /**
   * What a degraded proof (prove: 'degraded') means for this runtime: the host, some members of the
   * group are gone and the server may still run; a container, the container exited (still there, to
   * be removed), which is the server gone. `detail` says it for the watcher, `why` for status's
   * process column (members: the group's members still alive, as the proof found them).
   */
  degraded(t: RuntimeTarget, members?: readonly number[]): { gone: boolean; detail: string; why: string };
  /** its images, where its vLLM comes from one (undefined: the host's install, nothing to pin or compare by image) */
  readonly images?: RuntimeImages;
  /**
   * The unit one replica runs under, systemd's Exec*= lines (marker: the unit's, it has no registry
   * entry). undefined: this runtime's replicas run under `sparkctl serve --foreground`, one unit per profile.
   */
  systemd(x: ReplicaRun, marker: string): UnitExec | undefined;
  /** A Podman Quadlet .container file of one replica (undefined: not a container) */
  quadlet(
    x: ReplicaRun,
    marker: string,
    u: { description: string; secret: string; startTimeoutS: number; liveness?: QuadletInput['liveness'] },
  ): QuadletUnit | undefined;
}
