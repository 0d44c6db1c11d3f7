// The instance registry: one JSON file per server under the state folder, written atomically
// (temp file + rename), guarded by a lock file against concurrent sparkctl runs. Never a secret.
import type { StartReport } from './phases.js';
import { existsSync, mkdirSync, readdirSync, rmSync, renameSync, readlinkSync } from 'node:fs';
import { writeFileAtomic } from '../util/atomic.js';
import { fsProblem, ensureDir } from '../util/dirs.js';
import { join, basename, dirname } from 'node:path';
import { proveIdentity, processEnv, processGroup, INSTANCE_ENV, type Proof } from './runtime/proc.js';
import { processStartTime } from '../util/pid.js';
import { ledgerMarkerOf, runtimeOf } from './runtime/index.js';
import { z } from 'zod';
import { UsageError } from '../errors.js';
import { lockFile } from '../util/lock.js';
import { ledgerRecords, removeLedger, readCidFile, type ContainerRecord } from './runtime/ops.js';
import { removeIpcFolder } from './runtime/ipc-folder.js';
import { readTextSync, READ_LIMITS } from '../util/read.js';
import { CliArgs, CliLine, CliWord } from './runtime/cli-words.js';
import { imageRefProblem, RecordImage } from '../util/image-ref.js';
import { CONTROL_CLASS } from '../util/control.js';

/**
 * What the registry keeps of any server sparkctl started, wherever it runs: what it serves, where it
 * answers, its log, and what proves its process ours before a signal (pid, kernel start time, the
 * launch's marker; proveIdentity judges them here or on a node). A server on this host (Instance)
 * and one over nodes (ClusterRecord) are each this plus their placement.
 */
interface ServerRecord {
  version: 1;
  profile: string;
  pid: number;
  startTime?: number;
  /**
   * SPARKCTL_INSTANCE=<marker> is in the environment of every process of this server (proves a group member is ours)
   */
  marker?: string;
  port: number;
  url: string;
  servedName: string;
  logFile: string;
  startedAt: string;
}

/** A server on this host: a ServerRecord placed here (a replica, or the router), its process group, GPUs and launch. */
export interface Instance extends ServerRecord {
  name: string;
  replica: number;
  pgid: number;
  startTime: number;
  host: string;
  gpus: number[];
  engine: 'vllm' | 'sim';
  argv: string[];
  apiKeyEnv?: string;
  readyAt?: string;
  readyTimeoutSeconds: number;
  probe?: {
    timeoutMs: number;
    kvCacheUsageMax: number;
    waitingMax: number;
    gpuMemoryHeadroomPct: number;
    gpuMemoryUtilization: number;
  };
  prewarm?: {
    promptTokens: number[];
    maxRounds: number;
    settleMargin: number;
    decodeTokens: number;
    timeoutSeconds: number;
  };
  maxModelLen?: number;
  /** the --shutdown-timeout rendered (vLLM drains that long on SIGTERM); absent or 0: vLLM aborts */
  shutdownTimeoutSeconds?: number;
  /** 'router': the HAProxy in front of this profile's replicas (absent: a vLLM replica) */
  role?: 'router';
  router?: RouterRecord;
  /**
   * a replica behind a router on vLLM's --uds: the Unix socket it listens on (url is then util/socket-url.ts's unixUrl
   * of it; port is not listened on)
   */
  uds?: string;
  /** a replica behind a router: the router's public address (the profile is down while no live router answers there) */
  routedAt?: { host: string; port: number };
  /** runtime container: the container that runs it (pid, pgid and startTime are 0: the runtime owns its processes) */
  container?: ContainerRecord;
  /**
   * how serve was asked to start it and what it resolved: restart starts it the same way unless the operator changes it
   */
  launch?: LaunchRecord;
  /** where its start's time went, phase by phase (engine/phases.ts) */
  start?: StartReport;
}

/**
 * What any serve's launch record keeps of its inputs beyond the profile file, wherever the server runs
 * (one definition; LaunchRecord on this host and ClusterLaunch over nodes are each this plus their own).
 */
export interface LaunchBase {
  /**
   * serve's --set overrides, in the order given (over nodes --runtime too, as engine.runtime; restart and upgrade apply
   * them first, their own after)
   */
  sets: string[];
  /** --profiles: the folder the profile was read from */
  profilesDir?: string;
  platform?: string;
}

/**
 * serve's inputs beyond the profile file, and what it resolved from them (absent in entries written before it was
 * kept).
 */
export interface LaunchRecord extends LaunchBase {
  gpus?: number;
  runtime?: 'host' | 'container';
  /** --router: HAProxy in front though the profile has no router: block */
  router?: boolean;
  /**
   * --allow-unauthenticated: beyond loopback without a key, as the operator allowed (restart, upgrade and watch start
   * it so again, warned)
   */
  allowUnauthenticated?: boolean;
  /** engine.vllmVersion as the profile asked (auto or a pin), what it resolved to, and how */
  vllm: { asked: string; resolved: string; how: 'pinned' | 'installed' | 'unknown' };
  /** runtime container: the image it ran */
  image?: string;
  /**
   * runtime host: the vLLM it started on, fingerprinted (its version and its environment's packages: vllm-version.ts)
   */
  fingerprint?: { version: string; packages: string; count: number };
  /**
   * What reaches the server but not its command line: each profile env variable's name with a
   * fingerprint of its value (never the value), server.apiKeyEnv (a variable's name), and a
   * fingerprint of the container block. restart compares them, so such an edit is shown, not "unchanged".
   */
  settings?: { env: Record<string, string>; apiKeyEnv?: string; containerBlock?: string };
}

/** What a router's entry keeps: where its runtime API and config are, and which replicas it balances. */
export interface RouterRecord {
  socket: string;
  configFile: string;
  backend: string;
  statsPort: number;
  /** uds: the replica's Unix socket (vLLM --uds), HAProxy's unix@PATH */
  servers: Array<{ name: string; host: string; port: number; uds?: string }>;
}

export interface Entry {
  inst: Instance;
  /** proven ours and at least one process of its group lives (proof.state alive or degraded) */
  alive: boolean;
  proof: Proof;
  /** its entry was unreadable; found by the marker of its processes */
  recovered?: boolean;
  /** (recovered) the log it writes to was deleted while it ran (rotated away); logFile is the name it had */
  logDeleted?: boolean;
}

/** Where a registered server runs: this host (host) or over nodes (nodes). */
export type Placement = 'host' | 'nodes';

/**
 * A registered server, wherever it runs: one listing (Registry.servers()) for every verb, with what is
 * particular to the placement behind the discriminant: on this host the entry with the proof of its
 * processes (list()), over nodes the record serve --nodes wrote (clusters(); proven on its node when acted on).
 */
export type ServerEntry = ({ kind: 'host' } & Entry) | { kind: 'nodes'; record: ClusterRecord };

interface CorruptEntry {
  file: string;
  keptAs: string;
  reason: string;
}

/**
 * ServerRecord's fields whose rule is one wherever the server runs (each placement's shape below
 * places them where its records have always kept them: a parsed record's keys come in its shape's order).
 */
const server = {
  version: z.literal(1),
  startTime: z.number().optional(),
  marker: z.string().optional(),
  port: z.number().int().min(1).max(65535),
  servedName: z.string(),
  startedAt: z.string(),
};

/**
 * The shape an entry must have to be used at all. pid, pgid and startTime are checked by
 * proveIdentity (an entry without a start time is loaded, reported and never signalled).
 */
const InstanceShape = z
  .object({
    version: server.version,
    name: z.string().regex(/^[A-Za-z0-9._-]{1,200}$/),
    profile: z.string(),
    replica: z.number().int().nonnegative(),
    pid: z.number(),
    pgid: z.number(),
    startTime: server.startTime,
    marker: server.marker,
    host: z.string(),
    port: server.port,
    servedName: server.servedName,
    gpus: z.array(z.number().int().nonnegative()),
    logFile: z.string(),
    engine: z.enum(['vllm', 'sim']),
    startedAt: server.startedAt,
    // the words status, stop, logs and restart run: only what sparkctl writes (runtime/cli-words.ts)
    container: z
      .object({
        cli: CliWord,
        cliArgs: CliArgs,
        name: z.string().max(300),
        image: RecordImage,
        id: z
          .string()
          .regex(/^[a-f0-9]{64}$/)
          .optional(),
        cidFile: z
          .string()
          .regex(new RegExp(`^/[^${CONTROL_CLASS}]{1,4095}$`), 'an absolute path')
          .optional(),
      })
      .passthrough()
      .optional(),
    // the launch record is read where it is used (launchOf); its image goes to the runtime (upgrade's
    // image inspect, the pin), so an image of no reference's shape makes the entry corrupt here
    launch: z.unknown().superRefine((l, ctx) => {
      const image = typeof l === 'object' && l !== null && 'image' in l ? (l as { image: unknown }).image : undefined;
      const p = image === undefined ? undefined : imageRefProblem(image);
      if (p) ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['image'], message: p });
    }),
  })
  .passthrough();

/** LaunchBase's fields, checked (one rule each for both launch records: a state file is untrusted input). */
const LaunchBaseShape = z.object({
  sets: z.array(z.string().max(4096)).max(256),
  profilesDir: z.string().max(4096).optional(),
  platform: z.string().max(200).optional(),
});
const base = LaunchBaseShape.shape;

// the keys in the order records have always kept them (a parsed record is written back as parsed)
const LaunchShape = z.object({
  sets: base.sets,
  profilesDir: base.profilesDir,
  gpus: z.number().int().positive().optional(),
  platform: base.platform,
  runtime: z.enum(['host', 'container']).optional(),
  router: z.boolean().optional(),
  allowUnauthenticated: z.boolean().optional(),
  vllm: z.object({
    asked: z.string().max(100),
    resolved: z.string().max(100),
    how: z.enum(['pinned', 'installed', 'unknown']),
  }),
  image: RecordImage.optional(),
  fingerprint: z
    .object({
      version: z.string().max(96),
      packages: z.string().regex(/^[a-f0-9]{16}$/),
      count: z.number().int().min(0).max(100_000),
    })
    .optional(),
  settings: z
    .object({
      env: z.record(z.string().max(256), z.string().max(64)).refine((e) => Object.keys(e).length <= 512),
      apiKeyEnv: z.string().max(256).optional(),
      containerBlock: z.string().max(64).optional(),
    })
    .optional(),
});

/**
 * The shape a record of a server over nodes must have to be used at all (a state file is untrusted
 * input: a record of another shape would end a reader in a TypeError). Every field added since the
 * first multi-node records is optional: the executor (absent: Ray), the ranks, the start reports,
 * Ray-in-containers' vLLM proof (inHead) and the launch (checked where it is read: upgrade/nodes.ts);
 * a record written by an earlier sparkctl reads. What a node's shell is handed (pids, the log, a
 * container's ID) must be what sparkctl wrote there: a number, a path, an ID.
 */
/**
 * A log as a node's shell names it: a file under $HOME or an absolute path (node-proc.ts NODE_LOGS;
 * quoted where a shell line names it: nodePathWord), or `docker|podman logs ID12` as a container's;
 * nothing a shell would run ($(...), `...`, ;, quotes), `$` only as the leading $HOME.
 */
const NodeLog = z
  .string()
  .regex(
    /^(?:\$HOME)?\/[\w./ -]{1,4090}$|^(?:docker|podman) logs [a-f0-9]{12}$/,
    'a log path ($HOME/... or /...) of letters, digits and . / _ - only, or "podman logs ID"; a record sparkctl wrote never names another: check the file',
  );

const ClusterShape = z
  .object({
    version: server.version,
    profile: z.string().regex(/^[A-Za-z0-9._-]{1,200}$/),
    nodesFile: z.string(),
    head: z.string(),
    executor: z.enum(['ray', 'native']).optional(),
    pid: z.number().int(),
    startTime: server.startTime,
    marker: server.marker,
    port: server.port,
    url: z.string(),
    servedName: server.servedName,
    logFile: NodeLog,
    startedAt: server.startedAt,
    ranks: z
      .array(
        z
          .object({
            node: z.string(),
            rank: z.number().int().nonnegative(),
            pid: z.number().int(),
            startTime: z.number().optional(),
            marker: z.string().optional(),
            logFile: NodeLog,
            // what a launch got back from the runtime (node-container.ts CONTAINER_ID)
            containerId: z
              .string()
              .regex(/^[a-f0-9]{64}$/)
              .optional(),
            // [cli, ...cliArgs]: run over ssh on the node, as root: only what sparkctl writes (runtime/cli-words.ts)
            cli: CliLine.optional(),
          })
          .passthrough(),
      )
      .optional(),
    inHead: z.object({ pid: z.number().int(), startTime: z.number() }).optional(),
  })
  .passthrough();

/**
 * A multi-node server (serve --nodes): a ServerRecord placed over nodes (its process lives on the head
 * node, so it is kept apart from the per-process entries).
 */
export interface ClusterRecord extends ServerRecord {
  nodesFile: string;
  head: string;
  /** how it spreads over the nodes (absent: ray, as records written before native multi-node) */
  executor?: 'ray' | 'native';
  /** native: one vLLM per node, each with what proves it ours (rank 0 is the head's pid above) */
  ranks?: ClusterRank[];
  /** the server's start, phase by phase (rank 0's: the head's vLLM, its API, the first token; engine/phases.ts) */
  start?: StartReport;
  /**
   * each rank's start (native) or each node's whose lines Ray forwarded (cluster/rank-start.ts); read back through
   * startOf
   */
  starts?: Array<{ rank: number; node: string; start: StartReport }>;
  /**
   * Ray in containers: vLLM's process in the head's container, as the head's host sees it (its pid
   * there and its kernel start time), found and proven right after sparkctl exec'd it: what its stop
   * proves (with the marker) before any signal (absent: a record from before, or a launch whose vLLM
   * was not found; the stop then uses the pid file in the container proven by ID)
   */
  inHead?: { pid: number; startTime: number };
  /**
   * how serve --nodes was asked to start it (absent in records written before it was kept): upgrade serves it again the
   * same way
   */
  launch?: ClusterLaunch;
}

/**
 * serve --nodes' inputs beyond the profile file: what an upgrade over nodes serves the candidate (and the previous pin)
 * with.
 */
export interface ClusterLaunch extends LaunchBase {
  /** the profile as serve was given it (a name, a file's whole path, or a model id) */
  asked: string;
  engine: 'vllm' | 'sim';
  vllmBin?: string;
  simLoadSeconds?: string;
  prewarm: boolean;
  readyTimeoutMs?: number;
  skipPreflight?: boolean;
}

/**
 * serve --nodes' launch as the record kept it: hostile bytes too (a state file), checked field by field (keys in the
 * record's order).
 */
const ClusterLaunchShape = z.object({
  asked: z.string().min(1).max(4096),
  ...base,
  engine: z.enum(['vllm', 'sim']),
  vllmBin: z.string().max(4096).optional(),
  simLoadSeconds: z.string().max(40).optional(),
  prewarm: z.boolean(),
  readyTimeoutMs: z.number().int().positive().optional(),
  skipPreflight: z.boolean().optional(),
});

/** What each placement's launch record is: serve's on this host, serve --nodes' over nodes. */
export interface LaunchAt {
  host: LaunchRecord;
  nodes: ClusterLaunch;
}

const LAUNCH_SHAPE = { host: LaunchShape, nodes: ClusterLaunchShape };

/**
 * A record's launch, checked by its placement's shape (a state file is read as untrusted input): the
 * launch, or none with why (problem: every field of the wrong shape; undefined: the record kept none).
 */
export function readLaunch<P extends Placement>(
  at: P,
  rec: { launch?: unknown },
): { launch: LaunchAt[P] } | { launch?: undefined; problem?: string } {
  const p = LAUNCH_SHAPE[at].safeParse(rec.launch);
  if (p.success) return { launch: p.data as LaunchAt[P] };
  return rec.launch === undefined
    ? {}
    : { problem: p.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') };
}

export interface ClusterRank {
  node: string;
  rank: number;
  pid: number;
  startTime?: number;
  marker?: string;
  logFile: string;
  /** engine.runtime container: the rank's container (pid is 0) and the CLI that runs it ([cli, ...cliArgs]) */
  containerId?: string;
  cli?: string[];
}

/**
 * sparkctl's gateway (`gateway up`): the keeper's process group (the keeper leads it and runs HAProxy
 * under it). What proves it ours is what the launching sparkctl saw of its own child right after the
 * spawn (its pid, that pid's kernel start time, the marker it put into the child's environment),
 * never what the keeper writes about itself.
 */
interface GatewayLaunch {
  version: 1;
  pid: number;
  pgid: number;
  startTime: number;
  marker: string;
  logFile: string;
  launchedAt: string;
}

export interface GatewayEntry {
  launch: GatewayLaunch;
  proof: Proof;
  /** proven ours and at least one process of its group lives */
  alive: boolean;
  /** its launch record was missing or unreadable; found by the marker of its processes and its log */
  recovered?: boolean;
}

/**
 * The logs the gateway writes (the keeper's and HAProxy's): how a marked group without its record is known as the
 * gateway.
 */
const GATEWAY_LOGS = ['gateway-keeper.log', 'gateway.log'];

const GatewayLaunchShape = z.object({
  version: z.literal(1),
  pid: z.number().int(),
  pgid: z.number().int(),
  startTime: z.number().int(),
  marker: z.string().min(8),
  logFile: z.string(),
  launchedAt: z.string(),
});

/**
 * The start time a group found by its marker is proven with: its leader's, or, when the leader has
 * died (a SIGKILLed keeper or API server), a tick no live leader can have, so the proof rests on the
 * marker its members carry (degraded) instead of failing as 'entry-incomplete' and hiding the group.
 * A dead leader's pid is not reused while its group lives (the kernel keeps it as the group's id).
 */
const LEADER_GONE_START = 2;
const leaderStartOrGone = (pgid: number) => processStartTime(pgid) ?? LEADER_GONE_START;

/** Why a state file was not used: the first three places its shape is wrong, each by its field. */
const shapeIssues = (e: z.ZodError, whole: string): string =>
  e.issues
    .map((i) => `${i.path.join('.') || whole}: ${i.message}`)
    .slice(0, 3)
    .join('; ');

/** What each placement's record is: an entry on this host, a record over nodes. */
export interface RecordAt {
  host: Instance;
  nodes: ClusterRecord;
}

/** Where each placement's records are kept under the state folder. */
const RECORD_DIR: Record<Placement, string> = { host: 'instances', nodes: 'clusters' };

/**
 * The name a record is filed by: an entry on this host by its instance name, a record over nodes by its profile (one
 * per profile).
 */
const keyOf = <P extends Placement>(at: P, rec: RecordAt[P]): string =>
  at === 'host' ? (rec as Instance).name : (rec as ClusterRecord).profile;

export class Registry {
  readonly dir: string;
  constructor(readonly stateDir: string) {
    this.dir = join(stateDir, RECORD_DIR.host);
    // A state folder that is a file, a dangling link, read-only or under /proc is bad input (exit 2).
    const fix = 'set SPARKCTL_STATE_DIR (or XDG_STATE_HOME) to a writable folder';
    ensureDir(stateDir, 'state folder', fix);
    ensureDir(this.dir, 'state folder', fix);
    ensureDir(join(stateDir, 'logs'), 'state folder', fix);
  }

  /**
   * The file a server's record is kept in: the placement decides (this host: instances/NAME.json; over nodes:
   * clusters/PROFILE.json).
   */
  private fileOf(at: Placement, name: string) {
    return join(this.stateDir, RECORD_DIR[at], `${name}.json`);
  }

  /**
   * Record a server where its placement keeps it (an entry on this host by its instance name, a record
   * over nodes by its profile), written whole in one step (temp file + rename).
   */
  write<P extends Placement>(at: P, rec: RecordAt[P]) {
    const file = this.fileOf(at, keyOf(at, rec));
    try {
      mkdirSync(dirname(file), { recursive: true });
      writeFileAtomic(file, JSON.stringify(rec, null, 2) + '\n');
    } catch (e) {
      throw fsProblem(e, 'registry entry', file, 'set SPARKCTL_STATE_DIR to a writable folder');
    }
  }

  /**
   * Drop a server's record (this host: by instance name; over nodes: by profile), and for a container
   * on this host its launch-ledger record: what it recorded is released. Only that placement's file is touched.
   */
  remove(at: Placement, name: string) {
    const file = this.fileOf(at, name);
    let marker: string | undefined;
    // the launch ledger is this host's (a container launched here): a record over nodes never names one
    if (at === 'host')
      try {
        marker = ledgerMarkerOf(
          JSON.parse(readTextSync(file, { maxBytes: READ_LIMITS.record, noFollow: true })) as {
            marker?: unknown;
            container?: unknown;
          },
        );
      } catch {
        /* no entry (a recovered orphan): its name is not a file */
      }
    rmSync(file, { force: true });
    removeLedger(this.stateDir, marker);
    // a replica on this host: the folder of vLLM's IPC sockets goes with its record
    if (at === 'host') removeIpcFolder(this.stateDir, name);
  }

  /** Entries that could not be read, each renamed aside to *.corrupt (filled by list()). */
  corrupt: CorruptEntry[] = [];

  /**
   * Every entry, each with the proof of whether its processes are still the ones we started
   * (see proveIdentity), plus instances whose entry is corrupt but whose processes still run
   * (found by their marker and their log in this state folder; `recovered`). An unreadable entry
   * is never fatal and never silently dropped: it is renamed aside and listed in `corrupt`.
   */
  list(): Entry[] {
    const out: Entry[] = [];
    this.corrupt = [];
    let files: string[];
    try {
      files = readdirSync(this.dir);
    } catch (e) {
      throw fsProblem(e, 'state folder', this.dir, 'set SPARKCTL_STATE_DIR to a writable folder');
    }
    for (const f of files.sort()) {
      if (f.endsWith('.corrupt')) {
        this.corrupt.push({ file: join(this.dir, f), keptAs: join(this.dir, f), reason: 'kept aside earlier' });
        continue;
      }
      if (!f.endsWith('.json')) continue;
      const file = join(this.dir, f);
      let reason: string;
      try {
        const parsed = InstanceShape.safeParse(
          JSON.parse(readTextSync(file, { maxBytes: READ_LIMITS.record, noFollow: true })),
        );
        if (parsed.success && parsed.data.name === f.slice(0, -5)) {
          const inst = parsed.data as unknown as Instance;
          const proof = runtimeOf(inst).prove(inst);
          out.push({ inst, alive: proof.state === 'alive' || proof.state === 'degraded', proof });
          continue;
        }
        reason = parsed.success
          ? `names "${parsed.data.name}", not ${f.slice(0, -5)}`
          : shapeIssues(parsed.error, '(entry)');
      } catch (e) {
        reason = (e as Error).message;
      }
      const keptAs = `${file}.corrupt`;
      try {
        renameSync(file, keptAs);
      } catch {
        /* another sparkctl moved it first */
      }
      this.corrupt.push({ file, keptAs, reason });
    }
    const known = new Set(out.map((e) => e.inst.marker).filter((m): m is string => Boolean(m)));
    // the gateway is not a server: its group is listed by gateway(), never adopted as one
    const gw = this.readGatewayLaunch();
    if (gw) known.add(gw.marker);
    out.push(...this.orphans(known), ...this.containerOrphans(known));
    return out;
  }

  private gatewayFile() {
    return join(this.stateDir, 'gateway', 'launch.json');
  }

  /** Record the gateway's launch (written by the sparkctl that spawned it, from its own child). */
  writeGateway(rec: GatewayLaunch) {
    const dir = join(this.stateDir, 'gateway');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    try {
      writeFileAtomic(this.gatewayFile(), JSON.stringify(rec, null, 2) + '\n', { mode: 0o600 });
    } catch (e) {
      throw fsProblem(e, 'gateway record', this.gatewayFile(), 'set SPARKCTL_STATE_DIR to a writable folder');
    }
  }

  removeGateway() {
    rmSync(this.gatewayFile(), { force: true });
  }

  private readGatewayLaunch(): GatewayLaunch | undefined {
    try {
      const r = GatewayLaunchShape.safeParse(
        JSON.parse(readTextSync(this.gatewayFile(), { maxBytes: READ_LIMITS.record, noFollow: true })),
      );
      return r.success ? (r.data as GatewayLaunch) : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * The gateway, if one was launched from this state folder and is not known to be gone: from its
   * launch record, or (record lost) from the processes that carry a marker and write to its logs.
   */
  gateway(): GatewayEntry | undefined {
    const launch = this.readGatewayLaunch();
    if (launch) {
      const proof = proveIdentity(launch);
      return { launch, proof, alive: proof.state === 'alive' || proof.state === 'degraded' };
    }
    for (const [marker, g] of this.markedGroups(new Set())) {
      if (!GATEWAY_LOGS.includes(basename(g.log)) || dirname(g.log) !== join(this.stateDir, 'logs')) continue;
      const pgid = processGroup(g.pids[0]!);
      if (!pgid) continue;
      const rec: GatewayLaunch = {
        version: 1,
        pid: pgid,
        pgid,
        startTime: leaderStartOrGone(pgid),
        marker,
        logFile: g.log,
        launchedAt: new Date(0).toISOString(),
      };
      const proof = proveIdentity(rec);
      if (proof.state === 'alive' || proof.state === 'degraded')
        return { launch: rec, proof, alive: true, recovered: true };
    }
    return undefined;
  }

  /**
   * Containers this state folder launched whose entry is gone (a kill -9 of sparkctl before it
   * recorded them, a deleted entry): found from the launch ledger sparkctl wrote before `run`, and
   * proven by the id it recorded (the cid file) and the marker it chose. Never from the labels a
   * container carries: a copy of the image (docker/podman commit) carries them all.
   */
  private containerOrphans(known: Set<string>): Entry[] {
    const out: Entry[] = [];
    for (const c of ledgerRecords(this.stateDir)) {
      if (known.has(c.marker)) continue;
      const inst: Instance = {
        version: 1,
        name: /^[A-Za-z0-9._-]{1,200}$/.test(c.instance) ? c.instance : `container-${c.marker.slice(0, 8)}`,
        profile: c.profile,
        replica: 0,
        pid: 0,
        pgid: 0,
        startTime: 0,
        marker: c.marker,
        host: '127.0.0.1',
        port: 0,
        url: '',
        servedName: '',
        gpus: [],
        logFile: c.logFile,
        engine: 'vllm',
        argv: [],
        startedAt: c.launchedAt,
        readyTimeoutSeconds: 0,
        container: {
          cli: c.cli,
          cliArgs: c.cliArgs,
          name: c.name,
          image: '',
          id: readCidFile(c.cidFile),
          cidFile: c.cidFile,
        },
      };
      const proof = runtimeOf(inst).prove(inst);
      if (proof.state === 'alive' || proof.state === 'degraded')
        out.push({ inst, alive: true, proof, recovered: true });
      // the run never made a container: the record is spent
      else if (proof.state === 'gone') removeLedger(this.stateDir, c.marker);
    }
    return out;
  }

  /**
   * Live processes that carry a marker not in `known` and write to a log under this state folder's logs/, by marker.
   */
  private markedGroups(
    known: Set<string>,
  ): Map<string, { pids: number[]; log: string; logDeleted: boolean; haproxy: boolean }> {
    const logs = join(this.stateDir, 'logs') + '/';
    const byMarker = new Map<string, { pids: number[]; log: string; logDeleted: boolean; haproxy: boolean }>();
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      const pid = Number(d);
      const marker = processEnv(pid, INSTANCE_ENV);
      if (!marker || known.has(marker)) continue;
      let log: LogTarget | undefined;
      for (const fd of [1, 2]) {
        try {
          const l = logTarget(readlinkSync(`/proc/${pid}/fd/${fd}`), existsSync);
          if (l.file.startsWith(logs)) log = l;
        } catch {
          /* gone or not ours */
        }
      }
      const g = byMarker.get(marker) ?? { pids: [], log: '', logDeleted: false, haproxy: false };
      g.pids.push(pid);
      if (log) {
        g.log = log.file;
        g.logDeleted = log.deleted;
      }
      if (isHaproxy(pid)) g.haproxy = true;
      byMarker.set(marker, g);
    }
    for (const [marker, g] of byMarker) if (!g.log) byMarker.delete(marker); // not launched from this state folder
    return byMarker;
  }

  /**
   * Live processes launched from this state folder (they carry SPARKCTL_INSTANCE and write to a log
   * under logs/) whose entry is gone or corrupt: still ours, so still stoppable, never hidden.
   */
  private orphans(known: Set<string>): Entry[] {
    const out: Entry[] = [];
    for (const [marker, g] of this.markedGroups(known)) {
      // the gateway's group (its record lost): gateway() finds it; it is not a server
      if (GATEWAY_LOGS.includes(basename(g.log))) continue;
      const pgid = processGroup(g.pids[0]!);
      if (!pgid) continue;
      const name = basename(g.log).replace(/\.log$/, '');
      const inst: Instance = {
        version: 1,
        name,
        profile: g.haproxy ? name.replace(/-router$/, '') : name.replace(/-\d+$/, ''),
        replica: 0,
        // sparkctl's HAProxy: stopped with its soft stop, never as a vLLM
        ...(g.haproxy ? { role: 'router' as const } : {}),
        pid: pgid,
        pgid,
        startTime: leaderStartOrGone(pgid),
        marker,
        host: '127.0.0.1',
        port: 0,
        url: '',
        servedName: '',
        gpus: [],
        logFile: g.log,
        engine: 'vllm',
        argv: [],
        startedAt: new Date(0).toISOString(),
        readyTimeoutSeconds: 0,
      };
      const proof = proveIdentity(inst);
      if (proof.state === 'alive' || proof.state === 'degraded')
        out.push({ inst, alive: true, proof, recovered: true, ...(g.logDeleted ? { logDeleted: true } : {}) });
    }
    return out;
  }

  /** Instances by instance name or profile name. */
  find(name: string): Entry[] {
    return this.list().filter(({ inst }) => inst.name === name || inst.profile === name);
  }

  /**
   * Every registered server, on this host and over nodes (or only those of one placement), read once:
   * what list() and clusters() each give, in that order. What could not be read is in `corrupt`, by
   * placement in corruptOf().
   */
  servers(only?: Placement): ServerEntry[] {
    const host: ServerEntry[] = only === 'nodes' ? [] : this.list().map((e) => ({ kind: 'host' as const, ...e }));
    const nodes: ServerEntry[] =
      only === 'host' ? [] : this.clusters().map((record) => ({ kind: 'nodes' as const, record }));
    return [...host, ...nodes];
  }

  /**
   * The entries of one placement that could not be read (an entry on this host is kept aside; a record over nodes is
   * left in place).
   */
  corruptOf(placement: Placement): CorruptEntry[] {
    return this.corrupt.filter((c) => this.nodesCorrupt.has(c) === (placement === 'nodes'));
  }

  private nodesCorrupt = new WeakSet<CorruptEntry>();

  /**
   * Every record of a server over nodes. One that cannot be read or has another shape is listed in
   * `corrupt` (left where it is: it may be a running cluster's, and `stop NAME --nodes FILE` or the
   * operator decides), never handed to a reader.
   */
  clusters(): ClusterRecord[] {
    const dir = join(this.stateDir, RECORD_DIR.nodes);
    let files: string[];
    try {
      files = readdirSync(dir).filter((f) => f.endsWith('.json'));
    } catch {
      return [];
    }
    const out: ClusterRecord[] = [];
    for (const f of files.sort()) {
      const file = join(dir, f);
      let reason: string;
      try {
        const parsed = ClusterShape.safeParse(
          JSON.parse(readTextSync(file, { maxBytes: READ_LIMITS.record, noFollow: true })),
        );
        if (parsed.success && parsed.data.profile === f.slice(0, -5)) {
          out.push(parsed.data as unknown as ClusterRecord);
          continue;
        }
        reason = parsed.success
          ? `names "${parsed.data.profile}", not ${f.slice(0, -5)}`
          : shapeIssues(parsed.error, '(record)');
      } catch (e) {
        reason = (e as Error).message;
      }
      if (this.corrupt.some((c) => c.file === file)) continue;
      const c = { file, keptAs: file, reason };
      this.nodesCorrupt.add(c);
      this.corrupt.push(c);
    }
    return out;
  }

  /**
   * Exclusive lock: a file holding "PID STARTTIME" of its holder, created complete in one step
   * (written to an exclusive temp file, then link()ed to the lock name: it exists with its content
   * or not at all). A lock whose holder is dead (or whose pid now belongs to another process) is
   * taken over atomically: under a second exclusive "break" lock the taker re-reads the lock and
   * removes it only if it is still the very stale lock it saw, so two takers never both win.
   */
  async lock(timeoutMs = 10_000): Promise<() => void> {
    return lockFile(
      join(this.stateDir, 'lock'),
      timeoutMs,
      (pid) =>
        new UsageError(`another sparkctl (pid ${pid}) is launching or stopping servers`, [
          'wait for it to finish, or check it with ps -p ' + pid,
        ]),
    );
  }
}

interface LogTarget {
  /** the log's path, without the kernel's " (deleted)" */
  file: string;
  /** the file was unlinked while the process held it open (a log rotated away) */
  deleted: boolean;
}

/**
 * What /proc/PID/fd/N points at -> the file and whether it was deleted. Linux appends " (deleted)"
 * to the link of an unlinked file; a file really named so (it still exists under the whole name) keeps it.
 */
export function logTarget(link: string, exists: (p: string) => boolean): LogTarget {
  const SUFFIX = ' (deleted)';
  if (link.endsWith(SUFFIX) && !exists(link)) return { file: link.slice(0, -SUFFIX.length), deleted: true };
  return { file: link, deleted: false };
}

/** The process runs the haproxy executable (its argv[0]'s name): a router of ours, found by its marker. */
function isHaproxy(pid: number): boolean {
  try {
    return (
      basename(readTextSync(`/proc/${pid}/cmdline`, { maxBytes: READ_LIMITS.proc }).split('\0')[0] ?? '') === 'haproxy'
    );
  } catch {
    return false;
  }
}
