// upgrade over nodes: read (the cluster's record and how serve started it, the nodes file, the pin,
// the candidate: its image ID read on every node) -> plan (both sides planned over the nodes, the
// version diff, the in-place plan; --dry-run stops here) -> act IN PLACE (upgrade/nodes.ts decides):
// measure the running cluster, stop it, serve the candidate over every node through serve --nodes'
// own path, measure it with the same requests, then keep it (pinned, recorded) or stop it and serve
// the previous pin again over every node. Every wait has a deadline (serve's, stop's, the measure's).
import { basename, resolve } from 'node:path';
import { Registry, readLaunch, type ClusterLaunch, type ClusterRecord } from '../../engine/registry.js';
import { loadNodesFile } from '../../profiles/load.js';
import type { NodesFile } from '../../profiles/schema.js';
import {
  allNodes,
  planCluster,
  readImageIds,
  imageMismatch,
  stopCluster,
  nodesMissing,
  type PlannedCluster,
} from '../../engine/cluster/index.js';
import { imageOnNodes } from '../../engine/cluster/node-runtime.js';
import { readSecrets, executableFor } from '../../engine/plan.js';
import { flagsFields, type FlagsRead } from '../../upgrade/flag-defaults.js';
import type { HelpSide } from '../../upgrade/help-read.js';
import { compareSides } from './help-tables.js';
import { imageLine, refOf } from '../../engine/cluster/node-container.js';
import { imageIdOf } from '../../engine/runtime/ops.js';
import { graceMsOf } from '../../engine/stop.js';
import {
  imagePinOfNodes,
  readPins,
  rollbackPins,
  writePin,
  writePinFile,
  isPinnedRef,
  type Pin,
} from '../../engine/pins.js';
import { targetFromUrl } from '../../health/target.js';
import { interrupts } from '../../util/interrupt.js';
import { stateDir } from '../common.js';
import { envelope, c, formatDuration } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { UsageError, ExitWith, ExitCode, LaunchError, ProblemsFound, SparkError } from '../../errors.js';
import { versionDiff, diffLines } from '../../upgrade/diff.js';
import { defaultGolden, measure, measureBeside } from '../../upgrade/measure.js';
import { judge, sameVllmVersion, type Measured, type Thresholds, type Verdict } from '../../upgrade/judge.js';
import {
  nodesEnd,
  nodesPlanLines,
  afterCandidate,
  afterCanary,
  canaryRefusal,
  canaryNodesProblem,
  versionAnswer,
  sideVersion,
  currentUnfit,
  noService,
  type NodesRun,
  type NodesServed,
  recordMissingLeft,
  tagsReplacedLines,
} from '../../upgrade/nodes.js';
import { http } from '../../client/http.js';
import { appendUpgrade, whoAmI } from '../../upgrade/record.js';
import type { UpgradeStatus } from '../../upgrade/upgrade.js';
import type { ServeOptions } from '../serve/options.js';
import type { UpgradeOptions } from './options.js';
import type { CandidateImage } from '../../upgrade/candidate-image.js';
import type { ContainerCli } from '../../engine/runtime/container.js';
import { containerCliArgs, withContainerImage } from '../../engine/runtime/container.js';

/** upgrade's options, as the nodes path reads them (the one-host path's shape: options.ts). */
export type NodesUpgradeOptions = Omit<UpgradeOptions, 'drainTimeout'>;

const EXIT: Record<UpgradeStatus, ExitCode> = {
  rolled: ExitCode.ok,
  compared: ExitCode.ok,
  'canary-failed': ExitCode.problems,
  'roll-failed': ExitCode.launchFailed,
  interrupted: ExitCode.launchFailed,
};

/**
 * How serve --nodes started the cluster, or bad input with the upgrade by hand (a record written before sparkctl kept
 * it).
 */
function launchOrRefuse(rec: ClusterRecord): ClusterLaunch {
  const read = readLaunch('nodes', rec);
  if (read.launch) return read.launch;
  const [n, f] = [rec.profile, rec.nodesFile];
  throw new UsageError(
    read.problem === undefined
      ? `${n} is served over nodes (${f}) by a sparkctl that did not keep how it was served: upgrade cannot serve it again the same way`
      : `${n}'s cluster record: its launch is not readable (${read.problem})`,
    [
      `sparkctl stop ${n} --nodes ${f}, then sparkctl serve ${n} --nodes ${f} (as you served it; the record then keeps how) and upgrade again`,
      `or by hand: sparkctl preflight --nodes ${f} --profile ${n} --set container.image=NEW (the same image ID on every node), sparkctl stop ${n} --nodes ${f}, sparkctl serve ${n} --nodes ${f} --set container.image=NEW`,
    ],
  );
}

/**
 * One --set per field, the last given (an upgrade's sets go on top of serve's: the record keeps them without piling
 * up).
 */
export function lastOfEach(sets: string[]): string[] {
  const field = (x: string) => x.slice(0, Math.max(0, x.indexOf('='))) || x;
  return sets.filter((x, i) => !sets.slice(i + 1).some((y) => field(y) === field(x)));
}

/** The serve options that start the cluster as its record says, with `extra` --set on top. */
function serveOpts(l: ClusterLaunch, nodesFile: string, extra: string[], prewarm = l.prewarm): ServeOptions {
  return {
    engine: l.engine,
    vllmBin: l.vllmBin ?? 'vllm',
    ...(l.simLoadSeconds !== undefined ? { simLoadSeconds: l.simLoadSeconds } : {}),
    ...(l.readyTimeoutMs !== undefined ? { readyTimeout: l.readyTimeoutMs } : {}),
    prewarm,
    set: lastOfEach([...l.sets, ...extra]),
    ...(l.profilesDir ? { profiles: l.profilesDir } : {}),
    ...(l.platform ? { platform: l.platform } : {}),
    ...(l.skipPreflight ? { skipPreflight: true } : {}),
    nodes: nodesFile,
    json: true,
  };
}

/** One side planned over the nodes, as serve --nodes plans it (the pin decision included: what serve would run). */
async function planSide(l: ClusterLaunch, nf: NodesFile, nodesFile: string, extra: string[]): Promise<PlannedCluster> {
  const o = serveOpts(l, nodesFile, extra);
  const { readForNodes } = await import('../../engine/inputs.js');
  const t = await readForNodes(
    l.asked,
    { nodes: allNodes(nf).length, gpusPerNode: Math.min(...allNodes(nf).map((n) => n.gpus)) },
    o,
  );
  const pin = imagePinOfNodes(t.loaded, stateDir());
  const loaded = pin.pinned ? { ...t.loaded, profile: withContainerImage(t.loaded.profile, pin.pinned.run) } : t.loaded;
  return planCluster(l.asked, nf, { ...o, nodesFile: resolve(nodesFile), loaded, modelRead: t.modelRead });
}

interface NodesCandidate {
  sets: string[];
  image?: { ref?: string; id: string };
  rollback?: ReturnType<typeof rollbackPins>;
  /**
   * how the candidate image got onto every node: each line said in the plan (pulled here, copied to a node, already
   * there)
   */
  imageSteps?: string[];
  /** what each node held under the reference before it was given the candidate's bytes (a node on another build) */
  copied?: Array<{ node: string; had?: string; bytes: number }>;
  /** --dry-run: the image is not here, the upgrade would pull it (no ID yet) */
  wouldPull?: boolean;
}

/**
 * Each node's ID of the image the plan runs, over every nodes file given (each read with its own file's ssh settings).
 */
async function idsOn(
  pc: PlannedCluster,
  files: NodesFile[],
): Promise<Array<{ node: string; id?: string; error?: string }>> {
  return (await Promise.all(files.map((f) => readImageIds(f, stepsOn(pc, f))))).flat();
}

/**
 * The one image ID every node of every file holds for the reference, or bad input naming the nodes that differ (nothing
 * stopped yet).
 */
async function oneIdOn(pc: PlannedCluster, files: NodesFile[], what: string, fix: string): Promise<string> {
  const ids = await idsOn(pc, files);
  const bad = imageMismatch(imageOnNodes(pc)!.image, ids);
  if (bad) throw new UsageError(`${what}: ${bad}; nothing was stopped`, [fix]);
  return ids[0]!.id!;
}

/**
 * --image over nodes: the candidate here (pulled when it is not, unless --no-pull), then given to every
 * node by `pull --nodes`' own path (a node holding another build under the same reference gets the
 * candidate's bytes; its old ID said), then read back on every node: one image ID everywhere, the one
 * here, else refused naming the nodes and the IDs (nothing stopped yet). --dry-run pulls and copies
 * nothing: it reads each node's ID and says which would get a copy. --no-pull copies nothing: every
 * node must hold it already (today's refusal, with the fix).
 */
async function candidateOnNodes(
  name: string,
  opts: NodesUpgradeOptions,
  pc: PlannedCluster,
  files: NodesFile[],
  file: string,
): Promise<Pick<NodesCandidate, 'image' | 'imageSteps' | 'copied' | 'wouldPull'>> {
  const c0 = imageOnNodes(pc)!;
  const ref = opts.image!;
  const cliArgs = containerCliArgs(pc.resolved.profile);
  const fix = `the very image on every node first: ${c0.cli} save ${ref} | ssh NODE ${c0.cli} load, for each node named (or with ${ref} as the profile's container.image: sparkctl pull ${name} --nodes ${file})`;
  const { localImage } = await import('../../engine/cluster/image-sync.js');
  const here = await localImage({ cli: c0.cli, cliArgs, image: ref });
  const all = files.flatMap((f) => allNodes(f));
  if (!opts.pull || (opts.dryRun && 'error' in here)) {
    if (opts.dryRun && 'error' in here)
      return {
        wouldPull: true,
        imageSteps: [
          `${ref} is not here: the upgrade would pull it (${c0.cli} pull ${ref}) and copy it to every node that lacks it (${c0.cli} save | ssh NODE ${c0.cli} load); nothing pulled (--dry-run)`,
        ],
      };
    // --no-pull: nothing pulled or copied; every node must hold the one image already
    const id = await oneIdOn(pc, files, `--image ${ref}`, fix);
    return { image: { ref, id }, imageSteps: [`every node holds it already (--no-pull: nothing pulled or copied)`] };
  }
  if (opts.dryRun && !('error' in here)) {
    const ids = await idsOn(pc, files);
    const off = ids.filter((x) => x.id !== here.id);
    return {
      image: { ref, id: here.id },
      imageSteps: [
        off.length
          ? `copied before anything stops (${c0.cli} save ${ref} | ssh NODE ${c0.cli} load) to ${off.map((x) => `${x.node} (${x.id ? `holds another build ${x.id.slice(0, 12)}` : 'not there'})`).join(', ')}; nothing copied (--dry-run)`
          : `every node (${all.length}) holds it already`,
      ],
    };
  }
  const fetched = await copyToNodes(opts, c0.cli, cliArgs, ref, files);
  const copied = fetched
    .flatMap((f) => f.nodes ?? [])
    .filter((n) => n.status === 'copied')
    .map((n) => ({ node: n.node, ...(n.had ? { had: n.had } : {}), bytes: n.bytes }));
  // read back on every node by the node's own runtime: one ID everywhere, the one here (a refusal now names the tags
  // the copy replaced)
  const id = await tagsNamed(copied, c0.cli, ref, async () => {
    const id = await oneIdOn(pc, files, `--image ${ref}`, fix);
    const local = await localImage({ cli: c0.cli, cliArgs, image: ref });
    if ('error' in local || local.id !== id)
      throw new LaunchError(
        `--image ${ref}: every node holds ${id.slice(0, 12)}, but here it is ${'error' in local ? `not readable (${local.error})` : local.id.slice(0, 12)} (it moved during the copy?); nothing was stopped`,
        [`upgrade again (the copy is by ID: the nodes then get what is here)`],
      );
    return id;
  });
  return {
    image: { ref, id: id! },
    imageSteps: [
      ...(fetched[0]?.state === 'pulled' ? [`pulled here (${c0.cli} pull ${ref})`] : []),
      copied.length
        ? `copied to ${copied.map((x) => `${x.node}${x.had ? ` (it held another build ${x.had.slice(0, 12)} under ${ref}: replaced by the candidate's)` : ''}`).join(', ')}; every node now holds ${id!.slice(0, 12)}`
        : `every node (${all.length}) holds it already`,
    ],
    copied,
  };
}

/**
 * `f`, after the candidate was copied over the nodes' tag: a refusal (any SparkError) it throws names
 * the nodes whose tag was replaced and how to put each back (tagsReplacedLines), then goes on.
 */
export async function tagsNamed<T>(
  copied: NodesCandidate['copied'],
  cli: string,
  ref: string | undefined,
  f: () => Promise<T>,
): Promise<T> {
  try {
    return await f();
  } catch (e) {
    if (e instanceof SparkError && ref !== undefined) e.details.push(...tagsReplacedLines(copied, cli, ref));
    throw e;
  }
}

/**
 * The candidate pulled here where it is not, then copied to every node of each file (the server's, then the canary's:
 * each with its own ssh settings).
 */
async function copyToNodes(
  opts: NodesUpgradeOptions,
  cli: ContainerCli,
  cliArgs: string[],
  ref: string,
  files: NodesFile[],
): Promise<CandidateImage[]> {
  const { candidateImage } = await import('../../upgrade/candidate-image.js');
  const { ofCli } = await import('../../engine/runtime/index.js');
  const ac = interrupts();
  const fetched: CandidateImage[] = [];
  try {
    // the server's nodes, then the canary's (each with its own file's ssh settings); the pull here happens once
    for (const nodes of files)
      fetched.push(
        await candidateImage({
          cli,
          cliArgs,
          images: ofCli(cli).images!,
          ref,
          pull: opts.pull,
          dryRun: false,
          nodes,
          signal: ac.signal,
          onProgress: opts.json ? undefined : (l) => note(l),
        }),
      );
  } catch (e) {
    if (e instanceof SparkError && !(e instanceof ExitWith))
      throw new SparkError(`${e.message}; nothing was stopped`, e.exitCode, e.details);
    throw e;
  } finally {
    ac.off();
  }
  return fetched;
}

/**
 * The plan's container steps, one per node of another nodes file (the same image and runtime): what readImageIds asks
 * each node.
 */
function stepsOn(pc: PlannedCluster, nf: NodesFile): PlannedCluster['steps'] {
  const s0 = pc.steps.find((s) => s.container)!;
  return allNodes(nf).map((n) => ({ ...s0, node: n.name, address: n.address }));
}

async function candidateOf(
  name: string,
  opts: NodesUpgradeOptions,
  l: ClusterLaunch,
  nf: NodesFile,
  file: string,
  dir: string,
  canaryNf?: NodesFile,
): Promise<NodesCandidate> {
  if (opts.vllmBin)
    throw new UsageError(
      `--vllm-bin: ${name} is served over nodes: each node's own vLLM install is not read by upgrade`,
      ['over nodes the candidate is an image: --image REF (engine.runtime container)'],
    );
  if (opts.canaryGpus)
    throw new UsageError(
      `--canary-gpus: ${name} is served over nodes: a canary over nodes runs on spare nodes (--canary-nodes FILE), not on GPUs of the server's`,
      ['leave --canary-gpus out; --canary-nodes FILE for a canary beside the running server'],
    );
  if (opts.rollback) {
    const pins = readPins(dir, name);
    const back = pins ? rollbackPins(pins) : undefined;
    if (!back)
      throw new UsageError(`${name}: no earlier pin to roll back to`, [
        'sparkctl upgrade keeps one per upgrade; without one, serve the version you want with --set',
      ]);
    return {
      sets: back.to.sets,
      ...(back.to.imageId ? { image: { ref: back.to.image, id: back.to.imageId } } : {}),
      rollback: back,
    };
  }
  if (opts.image) {
    const pc = await planSide(l, nf, file, [`container.image=${opts.image}`]);
    const c0 = imageOnNodes(pc);
    if (!c0)
      throw new UsageError(`--image: ${name} runs on the nodes' hosts (engine.runtime host), not in containers`, [
        `serve it over the nodes with --runtime container to upgrade by image`,
      ]);
    const got = await candidateOnNodes(name, opts, pc, canaryNf ? [nf, canaryNf] : [nf], file);
    return { sets: [`container.image=${got.image?.id ?? opts.image}`, ...opts.candidateSet], ...got };
  }
  if (l.engine !== 'sim')
    throw new UsageError(
      `--vllm ${opts.vllm}: ${name} is served over nodes: each node's own vLLM install is not read by upgrade`,
      [`over nodes the candidate is an image with that vLLM: --image REF (the same image ID on every node)`],
    );
  // the simulator plays the version it is given: the stand-in for another vLLM on every node
  return { sets: [`engine.vllmVersion=${opts.vllm}`, ...opts.candidateSet] };
}

function thresholdsOf(pc: PlannedCluster): Thresholds {
  const u = pc.resolved.profile.upgrade;
  return {
    ttftRatio: u.ttftRatio,
    tpotRatio: u.tpotRatio,
    throughputRatio: u.throughputRatio,
    goldenSameVersion: u.goldenSameVersion,
    goldenOtherVersion: u.goldenOtherVersion,
  };
}

/**
 * serve --nodes' own path, quiet; what it came to (a refusal before launch, a failed launch, an unhealthy probe,
 * Ctrl-C).
 */
async function serveSide(
  l: ClusterLaunch,
  file: string,
  extra: string[],
  prewarm = l.prewarm,
): Promise<{ served: NodesServed; why?: string; refusal?: UsageError }> {
  const { serveNodes } = await import('../serve/nodes.js');
  try {
    const out = await serveNodes(l.asked, serveOpts(l, file, extra, prewarm), { quiet: true });
    if (!out) return { served: 'launch-failed', why: 'nothing served' };
    if (out.status === 'healthy') return { served: 'healthy' };
    if (out.status === 'interrupted') return { served: 'interrupted' };
    // one failure shape for both placements (engine/diagnose.ts): its one-line detail
    const f = out.replicas[0]?.failure ?? out.nodes?.failure;
    const why =
      out.status === 'unhealthy'
        ? `deep probe ${out.replicas[0]?.probe?.state ?? 'failed'}`
        : (f?.detail ?? out.status);
    return { served: out.status === 'unhealthy' ? 'unhealthy' : 'launch-failed', why };
  } catch (e) {
    if (e instanceof UsageError) return { served: 'refused', why: e.message, refusal: e };
    if (e instanceof LaunchError || e instanceof ProblemsFound)
      return { served: 'launch-failed', why: (e as Error).message };
    // anything else still ends in the decision (the previous pin served again, or said loudly): never a bare exit 70
    // with the nodes empty
    return { served: 'launch-failed', why: `serve --nodes failed: ${(e as Error).message ?? String(e)}` };
  }
}

/**
 * Stop the profile's cluster as recorded now (undefined: nothing left; a string: what was left, named).
 * `served`: how this run served it, where it did: served and no readable record is left, never "stopped".
 */
async function stopSide(
  dir: string,
  name: string,
  nf: NodesFile,
  signal: AbortSignal,
  served?: NodesServed,
): Promise<{ left?: string }> {
  const reg = new Registry(dir);
  const rec = reg.clusters().find((x) => x.profile === name);
  if (!rec) {
    const corrupt = reg.corrupt.find((x) => basename(x.file) === `${name}.json`)?.reason;
    const left = recordMissingLeft(name, served, corrupt);
    return left === undefined ? {} : { left };
  }
  const out = await stopCluster(nf, dir, rec, graceMsOf({}) / 1000, signal);
  const bad = (s: string) => s === 'failed' || s === 'unproven';
  const left = [
    ...(bad(out.engine.state)
      ? [`vLLM on ${out.engine.node}: ${out.engine.state}${out.engine.detail ? ` (${out.engine.detail})` : ''}`]
      : []),
    ...(out.ranks ?? [])
      .filter((r) => bad(r.state) && r.rank > 0)
      .map((r) => `rank ${r.rank} on ${r.node}: ${r.state}${r.detail ? ` (${r.detail})` : ''}`),
    ...out.ray.filter((r) => !r.ok).map((r) => `ray on ${r.node}: ${r.detail}`),
  ];
  return left.length ? { left: left.join('; ') } : {};
}

/**
 * The image ID every rank's container runs now, each asked on its node by its recorded ID (undefined: not in
 * containers, not read, or the ranks differ).
 */
async function runningImageId(rec: ClusterRecord, nf: NodesFile): Promise<{ id?: string; why?: string }> {
  const refs = (rec.ranks ?? []).map((r) => refOf(r)).filter((x) => x !== undefined);
  if (!refs.length) return {};
  const { ssh } = await import('../../engine/cluster/ssh.js');
  const ids = await Promise.all(
    refs.map(async (ref) => {
      const node = allNodes(nf).find((n) => n.name === ref.node);
      const r = node ? await ssh(nf, node, imageLine(ref), { timeoutMs: 15_000 }) : undefined;
      return { node: ref.node, id: r && r.exitCode === 0 ? imageIdOf(r.stdout) : undefined };
    }),
  );
  const one = [...new Set(ids.map((x) => x.id))];
  if (one.length === 1 && one[0]) return { id: one[0] };
  return { why: ids.map((x) => `${x.node} ${x.id?.slice(0, 12) ?? 'not read'}`).join(', ') };
}

/** What the head says it runs (GET /version, 5 s, 4 KiB, read as hostile), or undefined. */
async function versionAt(rec: ClusterRecord, secrets: Record<string, string>): Promise<string | undefined> {
  const t = targetOf(rec, secrets);
  const r = await http(`${t.url}/version`, { timeoutMs: 5000, apiKey: t.apiKey, maxBytes: 4096 });
  return r.ok && r.status === 200 ? versionAnswer(r.json) : undefined;
}

/** The comparison's target: the head's endpoint as the cluster's record names it, with the profile's key. */
function targetOf(rec: ClusterRecord, secrets: Record<string, string>) {
  const t = targetFromUrl(rec.url, rec.servedName);
  return { ...t, name: `${rec.profile} (${rec.head})`, apiKey: secrets.VLLM_API_KEY ?? t.apiKey };
}

/** What an upgrade over nodes read and planned: both sides, the candidate, what runs now. */
interface NodesUpgrade {
  rec0: ClusterRecord;
  opts: NodesUpgradeOptions;
  dir: string;
  name: string;
  l: ClusterLaunch;
  file: string;
  nf: NodesFile;
  nodes: string[];
  cur: PlannedCluster;
  cand: PlannedCluster;
  cand0: NodesCandidate;
  /** the image every rank runs now, by ID (the previous pin a failure serves again) */
  currentId?: string;
  from: string;
  to: string;
  thresholds: Thresholds;
  secrets: Record<string, string>;
  /** --canary-nodes: the spare nodes, the canary's name and its plan there */
  canary?: NodesCanary;
  /** both sides' own vLLM tables compared (serve --help=all), or why not read */
  flags: FlagsRead;
}

interface NodesCanary {
  name: string;
  file: string;
  nf: NodesFile;
  nodes: string[];
  /** the --set that serve the candidate there as the canary (its own name: its own record, containers, caches) */
  sets: string[];
}

/** What the in-place steps came to. */
interface NodesDone {
  run: NodesRun;
  to: string;
  current?: Measured;
  candidate?: Measured;
  verdict?: Verdict;
  why: string[];
  timings: Record<string, number>;
  noServiceMs?: number;
  /** the canary on spare nodes: what it measured and its verdict (the in-place step's are candidate/verdict) */
  canary?: { candidate?: Measured; verdict?: Verdict; url?: string };
}

/**
 * read: the record, the nodes, both sides planned, the candidate's image on every node, what runs now (undefined:
 * nothing to upgrade, said).
 */
async function readUpgrade(rec0: ClusterRecord, opts: NodesUpgradeOptions): Promise<NodesUpgrade | undefined> {
  const dir = stateDir();
  const name = rec0.profile;
  const l = launchOrRefuse(rec0);
  // the nodes it runs on: its record's file, or --nodes naming the same nodes (as stop checks it)
  const file = opts.nodes ?? rec0.nodesFile;
  const nf = loadNodesFile(file);
  const missing = nodesMissing(rec0, nf);
  if (missing.length)
    throw new UsageError(
      `${name} runs on ${missing.join(', ')}, which ${file} does not name (its record names ${rec0.nodesFile})`,
      [`sparkctl upgrade ${name} --nodes ${rec0.nodesFile}`],
    );
  const nodes = allNodes(nf).map((n) => n.name);
  // read: both sides planned over the nodes as serve --nodes plans them; the canary's spare nodes checked
  // before anything is copied; the candidate on every node (the canary's too)
  const cur = await planSide(l, nf, file, []);
  const canaryNf = opts.canaryNodes ? canaryNodesOf(name, opts.canaryNodes, nf, cur) : undefined;
  // the canary planned there before anything is pulled or copied (the candidate as given); again below with its image
  // ID
  if (canaryNf)
    await canaryPlan(name, opts, l, canaryNf, [
      ...(opts.image ? [`container.image=${opts.image}`] : []),
      ...(opts.vllm ? [`engine.vllmVersion=${opts.vllm}`] : []),
      ...opts.candidateSet,
    ]);
  // the candidate planned over the server's nodes as it will serve (by the reference; its key read) before
  // anything is copied: a refusal here leaves every node's tag as it was
  if (opts.image && opts.pull && !opts.dryRun)
    readSecrets(
      (await planSide(l, nf, file, [...opts.set, `container.image=${opts.image}`, ...opts.candidateSet])).resolved
        .profile,
    );
  const cand0 = await candidateOf(name, opts, l, nf, file, dir, canaryNf);
  // after the copy: a refusal names the nodes whose tag it replaced, with the command that puts each back
  return tagsNamed(cand0.copied, imageOnNodes(cur)?.cli ?? 'podman', cand0.image?.ref, () =>
    afterCopy(rec0, opts, { dir, name, l, file, nf, nodes, cur, canaryNf, cand0 }),
  );
}

/**
 * The candidate's image ID read on every node (the canary's too) where nothing here read it, or a rollback's previous
 * pin checked there: every node must hold the one ID the plan names.
 */
async function ensureCandidateIdOnNodes(
  cand: PlannedCluster,
  cand0: NodesCandidate,
  every: NodesFile[],
  name: string,
  file: string,
): Promise<void> {
  const candImage = imageOnNodes(cand);
  if (!cand0.image && candImage && !cand0.wouldPull)
    cand0.image = {
      id: await oneIdOn(
        cand,
        every,
        `the candidate's image ${candImage.image}`,
        `load it on every node (${candImage.cli} save IMAGE | ssh NODE ${candImage.cli} load, or sparkctl pull ${name} --nodes ${file} with it as the profile's container.image)`,
      ),
    };
  else if (cand0.rollback && cand0.image && candImage)
    await oneIdOn(
      cand,
      every,
      `the previous pin ${cand0.image.id}`,
      `load it on every node (${candImage.cli} save ${cand0.image.id} | ssh NODE ${candImage.cli} load)`,
    );
}

/**
 * What runs now (the previous pin a failure serves again), as one image ID, warned about where the ranks do not run
 * one image (undefined: not one ID).
 */
async function currentImageId(
  rec0: ClusterRecord,
  opts: NodesUpgradeOptions,
  nf: NodesFile,
  cur: PlannedCluster,
): Promise<string | undefined> {
  // what runs now (the previous pin a failure serves again): the image every rank's container runs, as
  // its node's runtime says; where that is not one ID, what serve would run for the profile (its pin)
  const running = await runningImageId(rec0, nf);
  const curId = running.id
    ? [running.id]
    : imageOnNodes(cur)
      ? (await readImageIds(nf, cur.steps)).map((x) => x.id)
      : [];
  const currentId = curId.length && curId.every((x) => x && x === curId[0]) ? curId[0] : undefined;
  if (running.why && !opts.json)
    note(
      `${c.yellow('warning')}: the ranks do not run one image (${running.why}): the previous pin served again on a failure is ${currentId ?? 'the profile as served'}`,
    );
  return currentId;
}

/** Says every node already runs the candidate (nothing to upgrade), with any tag the copy replaced and its way back. */
function sayUnchanged(
  name: string,
  opts: NodesUpgradeOptions,
  cand0: NodesCandidate,
  cur: PlannedCluster,
  currentId: string,
): void {
  // the canary's spare nodes may have been given the candidate over another build: said, with the way back
  const replaced = tagsReplacedLines(cand0.copied, imageOnNodes(cur)?.cli ?? 'podman', opts.image ?? currentId);
  if (opts.json)
    say(
      envelope('upgrade', {
        profile: name,
        action: 'upgrade',
        status: 'unchanged',
        where: 'nodes',
        image: currentId,
        ...(replaced.length ? { tagsReplaced: replaced } : {}),
        exitCode: 0,
      }),
    );
  else
    say(
      [
        `${name}: every node already runs ${opts.image} (image ${currentId.slice(0, 12)}): nothing to upgrade, nothing stopped`,
        ...replaced,
      ].join('\n  '),
    );
}

/**
 * read, once the candidate is on every node: its plan, the canary's with its ID, what runs now, the flags (undefined:
 * unchanged, said).
 */
async function afterCopy(
  rec0: ClusterRecord,
  opts: NodesUpgradeOptions,
  r: Pick<NodesUpgrade, 'dir' | 'name' | 'l' | 'file' | 'nf' | 'nodes' | 'cur' | 'cand0'> & { canaryNf?: NodesFile },
): Promise<NodesUpgrade | undefined> {
  const { dir, name, l, file, nf, nodes, cur, canaryNf, cand0 } = r;
  const cand = await planSide(l, nf, file, [...opts.set, ...cand0.sets]);
  const canary = canaryNf ? await canaryPlan(name, opts, l, canaryNf, cand0.sets) : undefined;
  await ensureCandidateIdOnNodes(cand, cand0, canaryNf ? [nf, canaryNf] : [nf], name, file);
  const currentId = await currentImageId(rec0, opts, nf, cur);
  if (cand0.image && currentId === cand0.image.id && !opts.candidateSet.length && !opts.rollback) {
    sayUnchanged(name, opts, cand0, cur, currentId);
    return undefined;
  }
  const secrets = readSecrets(cand.resolved.profile);
  // auto: the version the running head says it runs (the candidate's is read once it serves)
  const from = sideVersion(
    cur.resolved.profile.engine.vllmVersion,
    await versionAt(rec0, readSecrets(cur.resolved.profile)),
  );
  const to = cand.resolved.profile.engine.vllmVersion;
  const flags = await nodesFlags(dir, l.engine, cur, cand, cand0, currentId, from, to);
  return {
    rec0,
    opts,
    dir,
    name,
    l,
    file,
    nf,
    nodes,
    cur,
    cand,
    cand0,
    currentId,
    from,
    to,
    thresholds: thresholdsOf(cand),
    secrets,
    flags,
    ...(canary ? { canary } : {}),
  };
}

/**
 * One side's own `vllm serve --help=all` over nodes, asked where the one-host upgrade asks it: an
 * image HERE by its ID (every node holds that ID: checked above, oneIdOn / the ranks' own answer),
 * the simulator playing the version for native ranks; undefined with why where nothing can be asked.
 */
export function nodesHelpSide(
  pc: PlannedCluster,
  engine: 'vllm' | 'sim',
  version: string,
  id: string | undefined,
  what: string,
): { side?: HelpSide; why?: string } {
  const img = imageOnNodes(pc);
  if (img)
    return id
      ? { side: { kind: 'image', cli: img.cli, cliArgs: containerCliArgs(pc.resolved.profile), image: id, id } }
      : {
          why: `the ${what} image's ID is not known here (${what === 'candidate' ? 'not pulled: --dry-run pulls nothing' : 'the ranks do not run one image'})`,
        };
  if (engine === 'sim') return { side: { kind: 'sim', version, argv0: executableFor({ engine: 'sim', vllmBin: '' }) } };
  return { why: `the ${what} vLLM runs on each node's host: its install is not read by upgrade` };
}

/** Both sides' tables compared, as the one-host plan does (the same vLLM on both sides: not read, the same tables). */
async function nodesFlags(
  dir: string,
  engine: 'vllm' | 'sim',
  cur: PlannedCluster,
  cand: PlannedCluster,
  cand0: NodesCandidate,
  currentId: string | undefined,
  from: string,
  to: string,
): Promise<FlagsRead> {
  if (from === to) return { why: `the same vLLM (${from}) on both sides: the same tables` };
  const a = nodesHelpSide(cur, engine, from, currentId, 'current');
  const b = nodesHelpSide(cand, engine, to, cand0.image?.id, 'candidate');
  if (!a.side || !b.side) return { why: (a.why ?? b.why)! };
  return compareSides(dir, a.side, b.side, cand.replica.argv, cand.resolved.profile);
}

/**
 * --canary-nodes FILE: spare nodes that share none with the server and hold its shape (TP x PP), else bad input
 * (nothing read from them yet).
 */
function canaryNodesOf(name: string, canaryFile: string, nf: NodesFile, cur: PlannedCluster): NodesFile {
  const cnf = loadNodesFile(canaryFile);
  const p = cur.resolved.profile.parallel;
  const bad = canaryNodesProblem(allNodes(nf), allNodes(cnf), { tensor: p.tensor, pipeline: p.pipeline }, canaryFile);
  if (bad) throw new UsageError(`${bad.message} (${name}'s canary)`, [bad.fix]);
  return cnf;
}

/**
 * The candidate planned over the spare nodes as NAME-canary, as serve --nodes would plan it there (its refusals named
 * as --canary-nodes').
 */
async function canaryPlan(
  name: string,
  opts: NodesUpgradeOptions,
  l: ClusterLaunch,
  cnf: NodesFile,
  candSets: string[],
): Promise<NodesCanary> {
  const file = opts.canaryNodes!;
  const cname = `${name}-canary`;
  const sets = [...opts.set, ...candSets, `name=${cname}`];
  try {
    await planSide(l, cnf, file, sets);
  } catch (e) {
    if (e instanceof UsageError)
      throw new UsageError(`--canary-nodes ${file}: the candidate cannot be planned there: ${e.message}`, e.details);
    throw e;
  }
  if (new Registry(stateDir()).clusters().some((x) => x.profile === cname))
    throw new UsageError(`--canary-nodes ${file}: ${cname} is already served (a canary an earlier upgrade left?)`, [
      `sparkctl status ${cname}; sparkctl stop ${cname} --nodes FILE, then upgrade again`,
    ]);
  return { name: cname, file, nf: cnf, nodes: allNodes(cnf).map((n) => n.name), sets };
}

/**
 * plan: the in-place plan and the version diff, said (on stderr before the act; on stdout for --dry-run); whether it
 * was a dry run.
 */
function showPlan(u: NodesUpgrade): boolean {
  const { opts, name, cand0, from, to } = u;
  const diff = versionDiff(from, to, u.cand.replica.argv);
  const plan = nodesPlanLines({
    profile: name,
    nodesFile: u.file,
    nodes: u.nodes,
    from,
    to,
    rollback: !!opts.rollback,
    image: cand0.image,
    ...(cand0.imageSteps ? { imageSteps: cand0.imageSteps } : {}),
    previousImage: u.currentId,
    sets: cand0.sets.filter((s) => !s.startsWith('container.image=')),
    thresholds: u.thresholds,
    sameVersion: sameVllmVersion(from, to),
    ...(u.canary ? { canary: { name: u.canary.name, nodes: u.canary.nodes, nodesFile: u.canary.file } } : {}),
    flags: u.flags,
  });
  const lines = [plan[0]!, ...diffLines(diff).map((x) => `  ${x}`), ...plan.slice(1)];
  if (!opts.dryRun) {
    if (!opts.json) for (const x of lines) note(x);
    return false;
  }
  if (opts.json)
    say(
      envelope('upgrade-plan', {
        profile: name,
        from,
        to,
        where: 'nodes',
        inPlace: true,
        nodes: u.nodes,
        nodesFile: u.file,
        image: cand0.image?.id ?? null,
        previousImage: u.currentId ?? null,
        sets: cand0.sets,
        imageSteps: cand0.imageSteps ?? [],
        ...(cand0.wouldPull ? { pull: { state: 'would-pull' } } : {}),
        canary: u.canary ? { name: u.canary.name, nodes: u.canary.nodes, nodesFile: u.canary.file } : null,
        diff,
        ...flagsFields(u.flags),
        thresholds: u.thresholds,
      }),
    );
  else for (const x of lines) say(x);
  return true;
}

/** What the comparison sends on both sides: the probe, the golden prompts, a short bench. */
function measureSettings(u: NodesUpgrade) {
  const probe = u.cand.resolved.profile.probe;
  const up = u.cand.resolved.profile.upgrade;
  return {
    probe: { ...probe, gpuMemoryUtilization: u.cand.resolved.profile.engine.gpuMemoryUtilization, gpus: false },
    golden: up.goldenPrompts ?? defaultGolden(u.cur.resolved.profile),
    bench: { requests: up.benchRequests, outputTokens: up.benchOutputTokens, concurrency: 2 },
    timeoutMs: Math.max(probe.timeoutMs, 60_000),
  };
}

/**
 * act, in place: measure the running cluster, stop it, serve the candidate over every node, measure it
 * with the same requests; on a failure (or --no-roll) stop it and serve the previous pin again, even
 * after Ctrl-C (never the nodes left without a server unasked). Each step timed; the window without service measured.
 */
/** Each step's time, kept in the outcome. */
const timer =
  (d: NodesDone) =>
  async <T>(step: string, f: () => Promise<T>): Promise<T> => {
    const t = Date.now();
    try {
      return await f();
    } finally {
      d.timings[step] = Date.now() - t;
    }
  };

/**
 * The running cluster measured (the comparison's current side); one that cannot be compared against stops the upgrade
 * before anything starts or stops.
 */
async function measureCurrent(u: NodesUpgrade, d: NodesDone, signal: AbortSignal): Promise<Measured> {
  if (!u.opts.json)
    note(`measuring the running cluster at ${u.rec0.url} (probe, golden prompts, chat template, short bench)`);
  const current = await timer(d)('measureCurrent', () =>
    measure(targetOf(u.rec0, u.secrets), u.from, { ...measureSettings(u), signal }),
  );
  d.current = current;
  const unfit = signal.aborted ? undefined : currentUnfit(current);
  if (unfit)
    throw new ProblemsFound(
      `${u.name}: the running cluster cannot be compared against: ${unfit}; nothing was stopped${u.canary ? ' or started' : ''} (sparkctl probe ${u.name}; an upgrade without a comparison: sparkctl stop ${u.name} --nodes ${u.file}, then serve --nodes with the candidate)`,
    );
  return current;
}

/**
 * The canary on spare nodes (--canary-nodes), beside the running server: measure the server, serve the
 * candidate over the spare nodes as NAME-canary (prewarmed, probed), measure it with the same
 * requests, judge, stop it whatever the verdict. The running server is not touched here.
 */
async function onCanary(u: NodesUpgrade, d: NodesDone, signal: AbortSignal): Promise<Measured | undefined> {
  const k = u.canary!;
  const say2 = (s: string) => {
    if (!u.opts.json) note(s);
  };
  const timed = timer(d);
  const current = await measureCurrent(u, d, signal);
  const cr: NonNullable<NodesRun['canary']> = { name: k.name, nodesFile: k.file };
  d.run.canary = cr;
  d.canary = {};
  if (signal.aborted) {
    d.run.interrupted = true;
    return current;
  }
  say2(
    `serving the candidate as ${k.name} over the ${k.nodes.length} spare nodes (${k.nodes.join(', ')}), beside ${u.name}`,
  );
  const s = await timed('serveCanary', () => serveSide(u.l, k.file, k.sets, true));
  cr.served = s.served;
  if (s.why) d.why.push(`the canary did not serve healthy: ${s.why}`);
  const crec = new Registry(u.dir).clusters().find((x) => x.profile === k.name);
  if (s.served === 'healthy' && crec && !signal.aborted) {
    say2(`  canary ready at ${crec.url}; comparing with ${u.name} at ${u.rec0.url} on the same requests`);
    d.to = sideVersion(d.to, await versionAt(crec, u.secrets));
    // both run now: the canary's answers, then the bench of both in turns (the running server's bench read
    // again beside the canary's, for this verdict; the in-place step after it compares with the one read alone,
    // as its candidate is measured alone)
    const both = await timed('measureCanary', () =>
      measureBeside(targetOf(u.rec0, u.secrets), current, targetOf(crec, u.secrets), d.to, {
        ...measureSettings(u),
        signal,
      }),
    );
    const candidate = both.candidate;
    const verdict = judge(both.current, candidate, u.thresholds);
    d.canary = { candidate, verdict, url: crec.url };
    cr.pass = verdict.pass;
    d.why.push(...verdict.why.map((x) => `canary: ${x}`));
    if (!u.opts.json)
      for (const x of verdict.comparisons)
        note(
          `  ${x.ok ? c.green('ok  ') : c.red('FAIL')} ${x.check}: canary ${x.canary}; current ${x.current}; limit ${x.limit}`,
        );
  }
  if (signal.aborted) d.run.interrupted = true;
  // the canary is stopped whatever came of it (also after Ctrl-C: its own deadline)
  say2(`stopping the canary ${k.name} on ${k.nodes.join(', ')}`);
  cr.stop = await timed('stopCanary', () =>
    stopSide(u.dir, k.name, k.nf, AbortSignal.timeout(graceMsOf({}) * 2 + 60_000), s.served),
  );
  // refused as bad input there (nothing started): exit 2, as every other --canary-nodes refusal
  const refused = canaryRefusal(cr, s.refusal, signal.aborted, u.name, u.nodes);
  if (refused) throw refused;
  return current;
}

async function inPlace(
  u: NodesUpgrade,
  d: NodesDone = { run: { noRoll: !u.opts.roll }, to: u.to, why: [], timings: {} },
  measured?: Measured,
): Promise<NodesDone> {
  const { opts, dir, name, nf, nodes, file, l, cand0, secrets } = u;
  const settings = measureSettings(u);
  // the previous pin, served again on a failure: the image every node ran, by ID (else as it was served)
  const previousSets =
    u.currentId && !isPinnedRef(imageOnNodes(u.cur)?.image ?? '') ? [`container.image=${u.currentId}`] : [];
  const run = d.run;
  const timed = timer(d);
  const at: { stoppedAt?: number; candReadyAt?: number; stopCandAt?: number; prevReadyAt?: number } = {};
  const say2 = (s: string) => {
    if (!opts.json) note(s);
  };
  const ac = interrupts();
  try {
    // with a canary first, the running cluster's measure is the one the canary was judged against
    const current = measured ?? (await measureCurrent(u, d, ac.signal));
    if (!ac.signal.aborted) {
      say2(`stopping ${name} on ${nodes.join(', ')}: ${c.yellow('no service until the candidate is ready')}`);
      at.stoppedAt = Date.now();
      run.stopCurrent = await timed('stopCurrent', () => stopSide(dir, name, nf, ac.signal));
    } else run.interrupted = true;
    if (run.stopCurrent && run.stopCurrent.left === undefined && !ac.signal.aborted) {
      say2(`serving the candidate over ${nodes.length} nodes`);
      const t0 = Date.now();
      const s = await timed('serveCandidate', () => serveSide(l, file, [...opts.set, ...cand0.sets]));
      if (s.served === 'healthy') at.candReadyAt = Date.now();
      run.candidate = s.served;
      if (s.why) d.why.push(`the candidate did not serve healthy: ${s.why}`);
      const crec = new Registry(dir).clusters().find((x) => x.profile === name);
      if (s.served === 'healthy' && crec) {
        say2(
          `  candidate ready over ${nodes.length} nodes in ${formatDuration(Date.now() - t0)}; comparing at ${crec.url}`,
        );
        d.to = sideVersion(d.to, await versionAt(crec, secrets));
        const candidate = await timed('measureCandidate', () =>
          measure(targetOf(crec, secrets), d.to, { ...settings, signal: ac.signal }),
        );
        d.candidate = candidate;
        d.verdict = judge(current, candidate, u.thresholds);
        run.pass = d.verdict.pass;
        d.why.push(...d.verdict.why);
        if (!opts.json)
          for (const x of d.verdict.comparisons)
            note(
              `  ${x.ok ? c.green('ok  ') : c.red('FAIL')} ${x.check}: canary ${x.canary}; current ${x.current}; limit ${x.limit}`,
            );
      }
      if (ac.signal.aborted) run.interrupted = true;
      if (afterCandidate(run.candidate, run.pass, run.noRoll) === 'back') {
        say2(`back to the previous pin: stopping the candidate, serving the previous over ${nodes.length} nodes`);
        at.stopCandAt = Date.now();
        run.stopCandidate = await timed('stopCandidate', () =>
          stopSide(dir, name, nf, AbortSignal.timeout(graceMsOf({}) * 2 + 60_000), run.candidate),
        );
        // the previous pin is served again even after Ctrl-C: never leave the nodes without a server unasked
        if (run.stopCandidate.left === undefined) {
          const b = await timed('servePrevious', () => serveSide(l, file, previousSets));
          if (b.served === 'healthy') at.prevReadyAt = Date.now();
          run.previous = b.served;
          if (b.why) d.why.push(`the previous pin did not serve again: ${b.why}`);
        }
      }
    }
  } finally {
    ac.off();
  }
  d.noServiceMs = noService(at);
  return d;
}

/**
 * --canary-nodes: the canary beside the running server first; only a passing one (and not --no-roll) upgrades the
 * server in place.
 */
async function canaryThenInPlace(u: NodesUpgrade): Promise<NodesDone> {
  const d: NodesDone = { run: { noRoll: !u.opts.roll }, to: u.to, why: [], timings: {} };
  const ac = interrupts();
  let current: Measured | undefined;
  try {
    current = await onCanary(u, d, ac.signal);
  } finally {
    ac.off();
  }
  if (d.run.interrupted || afterCanary(d.run.canary!, d.run.noRoll) === 'stop') return d;
  if (!u.opts.json) note(`the canary passed: upgrading ${u.name} in place over ${u.nodes.join(', ')}`);
  return inPlace(u, d, current);
}

/**
 * record: the pin a roll leaves (the first upgrade keeps what ran before it, so --rollback knows where to go) and the
 * history entry.
 */
function recordUpgrade(
  u: NodesUpgrade,
  d: NodesDone,
  status: UpgradeStatus,
  pinsBefore: ReturnType<typeof readPins>,
  ms: number,
): void {
  const { dir, name, cand0, cur, currentId, from } = u;
  if (status === 'rolled') {
    if (cand0.rollback?.next) writePinFile(dir, cand0.rollback.next);
    else {
      if (!pinsBefore) {
        const firstPin: Pin = {
          at: new Date().toISOString(),
          vllmVersion: from,
          ...(currentId
            ? { image: cur.resolved.profile.container?.image, imagePinned: currentId, imageId: currentId }
            : {}),
          sets: [`engine.vllmVersion=${from}`, ...(currentId ? [`container.image=${currentId}`] : [])],
        };
        writePin(dir, name, firstPin);
      }
      writePin(dir, name, {
        at: new Date().toISOString(),
        vllmVersion: d.to,
        ...(cand0.image
          ? {
              image: cand0.image.ref ?? cur.resolved.profile.container?.image,
              imagePinned: cand0.image.id,
              imageId: cand0.image.id,
            }
          : {}),
        sets: [`engine.vllmVersion=${d.to}`, ...cand0.sets.filter((s) => !s.startsWith('engine.vllmVersion='))],
      });
    }
  }
  appendUpgrade(dir, {
    at: new Date().toISOString(),
    profile: name,
    kind: u.opts.rollback ? 'rollback' : 'upgrade',
    from: { vllmVersion: from, ...(currentId ? { image: currentId } : {}) },
    to: { vllmVersion: d.to, ...(cand0.image ? { image: cand0.image.id } : {}) },
    status,
    failed: d.why.slice(0, 50).map((x) => x.slice(0, 2000)),
    where: 'nodes',
    ms,
    by: whoAmI(),
  });
}

/** What came of it: the envelope, or the lines (what serves now; loud where nothing healthy does). */
function printUpgrade(
  u: NodesUpgrade,
  d: NodesDone,
  end: ReturnType<typeof nodesEnd>,
  ms: number,
  code: ExitCode,
): void {
  const { opts, name, nodes, cand0, currentId, from } = u;
  if (opts.json) {
    say(
      envelope('upgrade', {
        profile: name,
        action: opts.rollback ? 'rollback' : 'upgrade',
        from,
        to: d.to,
        status: end.status,
        where: 'nodes',
        inPlace: true,
        nodes,
        image: cand0.image?.id ?? null,
        previousImage: currentId ?? null,
        serving: end.serving,
        steps: d.run,
        timings: d.timings,
        noServiceMs: d.noServiceMs ?? null,
        failed: d.why,
        current: d.current ?? null,
        candidate: d.candidate ?? null,
        verdict: d.verdict ?? null,
        canary: u.canary
          ? {
              name: u.canary.name,
              nodes: u.canary.nodes,
              nodesFile: u.canary.file,
              url: d.canary?.url ?? null,
              served: d.run.canary?.served ?? null,
              pass: d.run.canary?.pass ?? null,
              stopped: d.run.canary?.stop ? d.run.canary.stop.left === undefined : false,
              candidate: d.canary?.candidate ?? null,
              verdict: d.canary?.verdict ?? null,
            }
          : null,
        copied: cand0.copied ?? [],
        ...(end.loud ? { warning: end.loud } : {}),
        ms,
        exitCode: code,
      }),
    );
    return;
  }
  const what = opts.rollback ? 'rolled back' : 'upgraded';
  const k = u.canary;
  if (k && d.run.stopCurrent === undefined) {
    // the canary decided: the running server was never touched
    if (end.status === 'compared')
      say(
        `${name}: the canary ${k.name} passed every comparison (--no-roll): stopped; ${name} serves as before over ${nodes.join(', ')}`,
      );
    else
      say(
        `${c.red('not ' + what)} ${name}: ${d.why.join('\n  ') || end.status}\nthe canary ${k.name} on ${k.nodes.join(', ')} ${d.run.canary?.stop?.left === undefined && d.run.canary?.stop ? 'was stopped' : 'was NOT stopped'}; ${name} serves as before over ${nodes.join(', ')} (nothing of it was touched)`,
      );
  } else if (end.status === 'rolled')
    say(
      `${c.green(what)} ${name}: vLLM ${from} -> ${d.to}${cand0.image ? ` (image ${cand0.image.id.slice(0, 12)})` : ''} on ${nodes.join(', ')} in ${formatDuration(ms)}; it passed every comparison`,
    );
  else if (end.status === 'compared')
    say(`${name}: the candidate passed every comparison (--no-roll: the previous pin serves again over every node)`);
  else if (end.serving === 'previous')
    say(
      `${c.red('not ' + what)} ${name}: ${d.why.join('\n  ') || end.status}\nthe previous pin serves again over ${nodes.join(', ')} (vLLM ${from})`,
    );
  if (d.noServiceMs !== undefined && d.noServiceMs > 0)
    say(
      `no service over the nodes for ${formatDuration(d.noServiceMs)} in all (in place: ${Object.entries(d.timings)
        .map(([k, v]) => `${k} ${formatDuration(v)}`)
        .join(', ')})`,
    );
  if (end.loud) note(`${c.red('WARNING')}: ${end.loud}${d.why.length ? `\n  ${d.why.join('\n  ')}` : ''}`);
}

/** upgrade PROFILE over the nodes it is served on: read, plan (--dry-run ends there), act in place, record, say. */
export async function upgradeNodes(rec0: ClusterRecord, opts: NodesUpgradeOptions): Promise<void> {
  const u = await readUpgrade(rec0, opts);
  if (!u || showPlan(u)) return;
  const pinsBefore = readPins(u.dir, u.name);
  const started = Date.now();
  const d = u.canary ? await canaryThenInPlace(u) : await inPlace(u);
  const end = nodesEnd(d.run, u.name, u.file);
  const ms = Date.now() - started;
  recordUpgrade(u, d, end.status, pinsBefore, ms);
  const code = EXIT[end.status];
  printUpgrade(u, d, end, ms, code);
  if (code !== 0) throw new ExitWith(code);
}
