// The multi-node verbs' shared part (stop/preflight --nodes, status of clusters; serve --nodes is
// serve's own: verbs/serve/nodes.ts): read and validate every input, hand it to the library
// (src/engine/cluster/), render what comes back, and pick the exit code from errors.ts.
import { withInterrupts } from '../util/interrupt.js';
import { stateDir } from '../util/paths.js';
import { isPinnedRef, nodesImagePin, readPins, writePin } from '../engine/pins.js';
import { loadNodesFile } from '../profiles/load.js';
import type { NodesFile } from '../profiles/schema.js';
import { Registry, type ClusterRecord } from '../engine/registry.js';
import { resolve } from 'node:path';
import { traitsOfProfile } from '../engine/runtime/traits.js';
import {
  allNodes,
  exportLine,
  stopCluster,
  recordsFor,
  nodesMissing,
  clusterStatus,
  planCluster,
  resolveForNodes,
  fabricEnvs,
  nodeEnvOf,
  type ClusterStatus,
  type StopClusterOutcome,
  type ExecutorKind,
  type ClusterInputs,
  type PlannedCluster,
  imageMismatch,
  readImageIds,
} from '../engine/cluster/index.js';
import { gatherNodes, runNodesChecks, type NodeReport } from '../preflight/nodes.js';
import { gatherFabric, runFabricChecks } from '../preflight/fabric.js';
import { envelope, c, table, statusMark } from '../output/format.js';
import { say, note } from '../output/log.js';
import { shownEscaped } from '../util/control.js';

/** A node's or a server's words, one line: control characters shown escaped. */
const shown = (s: string) => shownEscaped(s);
import type { CheckOutcome } from '../output/check.js';
import { UsageError, ProblemsFound, ExitWith, ExitCode } from '../errors.js';

/** Ctrl-C / SIGTERM cancel the library's work through an AbortSignal; removed when done. */
const withCancel = withInterrupts;

/** One cluster's stop as said to the operator: a line per rank or node, and what went wrong, if anything. */
export interface ClusterStopped {
  profile?: string;
  lines: string[];
  problem?: string;
  out: StopClusterOutcome & { executor: ExecutorKind };
}

/** Stops one recorded cluster (undefined: nothing recorded on these nodes, Ray's stop on each node) and says how it went. */
async function stopOne(nf: NodesFile, rec: ClusterRecord | undefined, name: string | undefined, timeoutS: number): Promise<ClusterStopped> {
  const out = await withCancel((signal) => stopCluster(nf, stateDir(), rec, timeoutS, signal));
  const lines: string[] = [];
  const e = out.engine;
  const said = (st: string, detail: string | undefined, where: string) =>
    st === 'stopped'
      ? 'stopped (SIGTERM)'
      : st === 'killed'
        ? `killed after ${timeoutS} s`
        : st === 'unproven'
          ? `left alone: ${detail} (the record is kept; check ${where} by hand)`
          : `could not be signalled (${detail})`;
  if (e.state === 'not-recorded') lines.push(`vLLM: nothing recorded${name ? ` for ${name}` : ''}`);
  else if (out.executor === 'native') for (const x of out.ranks ?? []) lines.push(`vLLM rank ${x.rank} on ${x.node}: ${said(x.state, x.detail, x.node)}`);
  else lines.push(`vLLM on ${e.node}: ${said(e.state, e.detail, 'the head')}`);
  for (const x of out.ray) lines.push(`ray on ${x.node}: ${x.ok ? 'stopped' : `ray stop failed (${x.detail})`}`);
  const bad = (st: string) => st === 'failed' || st === 'unproven';
  const badRank = (out.ranks ?? []).find((x) => bad(x.state));
  const problem =
    out.ray.some((x) => !x.ok) || bad(e.state) || badRank
      ? e.state === 'unproven' || badRank?.state === 'unproven'
        ? `the recorded vLLM process on ${badRank?.node ?? 'the head'} is not provably ours: not signalled`
        : badRank
          ? `vLLM rank ${badRank.rank} on ${badRank.node} could not be stopped`
          : 'Ray did not stop on every node'
      : undefined;
  return { profile: rec?.profile, lines, problem, out };
}

/** A record is stopped only over the nodes it names: a nodes file without them is bad input, before anything is signalled. */
function checkNodes(rec: ClusterRecord, nf: NodesFile, file: string) {
  const missing = nodesMissing(rec, nf);
  if (missing.length)
    throw new UsageError(`${rec.profile} runs on ${missing.join(', ')}, which ${file} does not name (its record names ${rec.nodesFile})`, [`sparkctl stop ${rec.profile} --nodes ${rec.nodesFile}`]);
}

/**
 * The clusters the registry records, stopped one after another over the nodes file each record
 * names (the one-host form: stop NAME, stop --all). A record whose nodes file cannot be read is bad
 * input naming it, before anything is signalled.
 */
export async function stopRecordedClusters(records: ClusterRecord[], timeoutS: number): Promise<ClusterStopped[]> {
  const withNodes = records.map((rec) => {
    let nf: NodesFile;
    try {
      nf = loadNodesFile(rec.nodesFile);
    } catch (e) {
      throw new UsageError(`${rec.profile} is served over nodes, and the nodes file its record names cannot be read: ${(e as Error).message}`, [
        `sparkctl stop ${rec.profile} --nodes FILE (the nodes it runs on)`,
      ]);
    }
    checkNodes(rec, nf, rec.nodesFile);
    return { rec, nf };
  });
  const done: ClusterStopped[] = [];
  for (const { rec, nf } of withNodes) done.push(await stopOne(nf, rec, rec.profile, timeoutS));
  return done;
}

/** The --json form of a cluster's stop (stop-nodes, and stop's clusters). */
export const clusterStopJson = (x: ClusterStopped) => ({ profile: x.profile ?? null, executor: x.out.executor, engine: x.out.engine, ray: x.out.ray, ranks: x.out.ranks ?? [] });

/**
 * stop --nodes FILE [NAME]: what the registry records on these nodes (NAME: that profile's record),
 * each with the executor that started it; nothing recorded: Ray's stop on each node.
 */
export async function stopNodes(name: string | undefined, opts: { timeout: number; nodes?: string; json?: boolean; all?: boolean }): Promise<void> {
  const nf = loadNodesFile(opts.nodes!);
  const records = recordsFor(new Registry(stateDir()).clusters(), { name, nodes: { file: resolve(opts.nodes!), nf } });
  for (const rec of records) checkNodes(rec, nf, opts.nodes!);
  const done: ClusterStopped[] = [];
  if (!records.length) done.push(await stopOne(nf, undefined, name, opts.timeout));
  for (const rec of records) done.push(await stopOne(nf, rec, rec.profile, opts.timeout));
  const lines = done.flatMap((x) => x.lines);
  const first = done[0]!.out;
  if (opts.json)
    say(
      envelope('stop-nodes', {
        steps: lines,
        executor: first.executor,
        engine: first.engine,
        ray: first.ray,
        ranks: first.ranks ?? [],
        stopped: done.filter((x) => x.profile).map(clusterStopJson),
      }),
    );
  else for (const l of lines) say(l);
  const problem = done.find((x) => x.problem)?.problem;
  if (problem) throw new ProblemsFound(problem);
}

/** The node x check matrix: one column per node, so the odd node stands out. */
export function nodeMatrix(reports: NodeReport[]): string {
  const ids: string[] = [];
  for (const r of reports) for (const k of r.checks ?? []) if (!ids.includes(k.id)) ids.push(k.id);
  // Checks that pass on every node say little: the rows that differ or fail come first.
  const cell = (r: NodeReport, id: string) => (!r.reached ? '-' : (r.checks?.find((k) => k.id === id)?.status ?? '-'));
  const interesting = (id: string) => new Set(reports.map((r) => cell(r, id))).size > 1 || reports.some((r) => ['fail', 'warn'].includes(cell(r, id)));
  const sorted = [...ids.filter(interesting), ...ids.filter((id) => !interesting(id))];
  const rows = sorted.map((id) => [
    shown(id),
    ...reports.map((r) => {
      const s = cell(r, id);
      return s === '-' ? c.dim('-') : statusMark(s);
    }),
  ]);
  rows.push(['(summary)', ...reports.map((r) => (r.reached ? `${r.summary!.fail}F ${r.summary!.warn}W ${r.summary!.pass}P` : c.red('unreachable')))]);
  return table(rows, ['CHECK', ...reports.map((r) => r.node)]);
}

export async function preflightNodes(opts: { nodes?: string; profile?: string; platform: string; json?: boolean; strict?: boolean; set?: string[]; profiles?: string }): Promise<void> {
  const nf = loadNodesFile(opts.nodes!);
  // a profile, or a model id whose config.json pull fetched (the profile serve --nodes would generate)
  const platform = opts.platform === 'auto' ? undefined : opts.platform;
  const target = opts.profile
    ? await (await import('../engine/inputs.js')).readForNodes(
        opts.profile,
        { nodes: allNodes(nf).length, gpusPerNode: Math.min(...allNodes(nf).map((n) => n.gpus)) },
        { profiles: opts.profiles, set: opts.set, platform },
      )
    : undefined;
  const r = opts.profile
    ? resolveForNodes(opts.profile, { profiles: opts.profiles, set: opts.set ?? [], platform: platform ?? target?.platform, loaded: target?.loaded, modelRead: target?.modelRead }, nf)
    : undefined;
  const modelPath = r?.profile.model.path;
  // A model id's profile is generated here, from the config.json in this host's cache: a node's own
  // preflight knows profiles by name only (given the id, every node answered "unknown profile", exit 2,
  // shown as unreachable). The nodes check themselves against the platform the plan assumed; the
  // generated profile's GPUs and model files are judged across the nodes below.
  const generated = Boolean(target?.generated);
  if (generated && !opts.json)
    note(
      `each node's own preflight runs for platform ${target!.platform ?? opts.platform}, without a profile: ${opts.profile} has none of its own (its profile is generated here; its GPUs and model files are checked across the nodes)`,
    );
  // a profiles folder of one's own is named to the nodes too (the same path on every node, as the model's)
  const args = [
    'preflight',
    '--json',
    '--platform',
    generated ? (target!.platform ?? opts.platform) : opts.platform,
    ...(opts.profile && !generated ? ['--profile', opts.profile] : []),
    ...(opts.profiles ? ['--profiles', opts.profiles] : []),
    ...(generated ? [] : (opts.set ?? []).flatMap((s) => ['--set', s])),
  ];
  const started = Date.now();
  const [{ reports, ray }, fabric] = await withCancel((signal) => Promise.all([gatherNodes(nf, { sparkctlArgs: args, modelPath, signal }), gatherFabric(nf, signal)]));
  const cross = [
    ...runNodesChecks({ nf, reports, modelPath, gpusNeeded: r ? r.profile.parallel.tensor * r.profile.parallel.pipeline : undefined, ray }),
    ...runFabricChecks(fabric).map((x) => ({ ...x, area: 'fabric', durationMs: 0 })),
    ...(r && traitsOfProfile(r.profile).vllmFrom === 'image' ? [await sameImageCheck(opts.profile!, nf, opts, { profile: r.profile })] : []),
  ];
  const envs = fabricEnvs(nf, fabric.readings);
  const anyFail = reports.some((x) => !x.reached || (x.summary?.fail ?? 0) > 0) || cross.some((x) => x.status === 'fail');
  const anyWarn = reports.some((x) => x.reached && (x.summary?.warn ?? 0) > 0) || cross.some((x) => x.status === 'warn');
  if (opts.json) {
    say(
      envelope('preflight-nodes', {
        nodes: reports.map((x) => ({
          node: x.node,
          reached: x.reached,
          error: x.error ?? null,
          platform: x.platform ?? null,
          summary: x.summary ?? null,
          versions: x.versions ?? null,
          checks: Object.fromEntries((x.checks ?? []).map((k) => [k.id, k.status])),
          failed: (x.checks ?? []).filter((k) => k.status === 'fail').map((k) => ({ id: k.id, observed: k.observed, fix: k.fix })),
        })),
        cross: cross.map((x) => ({ id: x.id, status: x.status, observed: x.observed, expected: x.expected, fix: x.fix ?? null, blocking: x.blocking })),
        fabric: Object.fromEntries(allNodes(nf).map((n) => [n.name, { reading: fabric.readings.get(n.name) ?? null, env: envs[n.name] ?? null }])),
        wallMs: Date.now() - started,
      }),
    );
  } else {
    say(c.bold(`preflight over ${allNodes(nf).length} nodes (${opts.nodes})`));
    say(nodeMatrix(reports));
    // a node's words (its error, its checks' observed values and fixes) are shown escaped: never an escape sequence to the terminal
    for (const x of reports.filter((x) => !x.reached)) say(c.red(`${x.node} unreachable: ${shown(x.error ?? '')}`));
    for (const x of reports.filter((x) => x.reached))
      for (const k of (x.checks ?? []).filter((k) => k.status === 'fail'))
        say(`  ${statusMark('fail')}  ${x.node}  ${shown(k.id)}  ${shown(k.observed)}${k.fix ? `\n        fix: ${shown(k.fix)}` : ''}`);
    say('');
    say(c.bold('across nodes'));
    for (const x of cross) say(`  ${statusMark(x.status)}  ${x.id}  ${shown(x.observed)}${x.fix && x.status !== 'pass' ? `\n        fix: ${shown(x.fix)}` : ''}`);
    say('');
    say(c.bold('fabric variables, as serve --nodes renders them from what each node shows now'));
    for (const n of allNodes(nf)) say(`  ${n.name}  ${envs[n.name] ? exportLine({ ...nodeEnvOf(n), ...envs[n.name] }) : c.dim('not read')}`);
    say(`\n${Date.now() - started} ms`);
  }
  if (anyFail || (opts.strict && anyWarn)) throw new ExitWith(ExitCode.problems);
}

/** engine.runtime container: the image each node's runtime holds under the profile's name, by ID. */
async function sameImageCheck(profile: string, nf: NodesFile, opts: { profiles?: string; set?: string[]; platform: string }, loaded?: PinnableProfile): Promise<CheckOutcome> {
  // where the profile's image is pinned, every node must hold the pin's very image (by ID)
  const pin = loaded ? imagePinOfNodes(loaded) : {};
  const pc = planCluster(profile, nf, {
    nodesFile: '',
    profiles: opts.profiles,
    set: [...(opts.set ?? []), ...(pin.pinned ? [`container.image=${pin.pinned.run}`] : [])],
    platform: opts.platform === 'auto' ? undefined : opts.platform,
    engine: 'vllm',
    vllmBin: 'vllm',
    prewarm: false,
  } as ClusterInputs);
  const image = pc.steps[0]!.container!.image;
  const ids = await withCancel((signal) => readImageIds(nf, pc.steps, signal));
  const bad = imageMismatch(image, ids);
  const base = { id: 'nodes.same-image', area: 'nodes', title: 'the same container image (by ID) on every node', blocking: true, durationMs: 0, expected: 'one image ID everywhere' };
  const asPinned = pin.pinned ? ` (the pin of ${pin.ref}, ${pin.pinned.pin.at})` : '';
  return bad
    ? {
        ...base,
        status: 'fail' as const,
        observed: `${bad}${asPinned}`,
        fix: pin.pinned
          ? `load the pinned image on those nodes (podman save ${image} | ssh NODE podman load), or take another image for every node: sparkctl serve ${profile} --nodes FILE --set container.image=REPO@sha256:...`
          : `load the same image on every node, or pin it by digest (container.image: REPO@sha256:...)`,
      }
    : { ...base, status: 'pass' as const, observed: `${image} ${ids[0]!.id!.slice(0, 12)} on ${ids.length} nodes${asPinned}` };
}

type PinnableProfile = { profile: { name: string; engine: { runtime: string }; container?: { image?: string } } };

/** runtime container over nodes: the profile's image reference, and the pin every node runs where there is one (--repin: none, pinned anew once healthy). */
export function imagePinOfNodes(loaded: PinnableProfile, repin?: boolean): { ref?: string; pinned?: ReturnType<typeof nodesImagePin> } {
  if (loaded.profile.engine.runtime !== 'container') return {};
  const ref = loaded.profile.container?.image;
  if (!ref || isPinnedRef(ref)) return {};
  return { ref, pinned: repin ? undefined : nodesImagePin(ref, readPins(stateDir(), loaded.profile.name)) };
}

/** The first healthy serve over the nodes pins the image ID every node agreed on (read again on each node). */
export async function pinNodesImage(nf: NodesFile, pc: PlannedCluster, ref: string, vllmVersion: string, json?: boolean): Promise<void> {
  if (!pc.steps[0]?.container) return;
  const ids = await withCancel((signal) => readImageIds(nf, pc.steps, signal));
  const one = [...new Set(ids.map((x) => x.id))];
  if (one.length !== 1 || !one[0]) {
    if (!json) note(`${c.yellow('warning')}: image ${ref} not pinned: ${imageMismatch(ref, ids) ?? 'its ID was not read on every node'}`);
    return;
  }
  writePin(stateDir(), pc.resolved.profile.name, { at: new Date().toISOString(), vllmVersion, image: ref, imagePinned: one[0], imageId: one[0], sets: [`container.image=${one[0]}`] });
  if (!json) note(c.dim(`image ${ref}: pinned to its image ID ${one[0]} (the same on every node); serve --nodes runs it from now on, never the tag`));
}

/** Clusters of the registry, each with its nodes' Ray state and the head's server (for `status`). */
export async function clusterStatuses(): Promise<ClusterStatus[]> {
  const reg = new Registry(stateDir());
  return Promise.all(
    reg.clusters().map(async (rec) => {
      let nf: NodesFile | undefined;
      try {
        nf = loadNodesFile(rec.nodesFile);
      } catch {
        nf = undefined;
      }
      return clusterStatus(rec, nf);
    }),
  );
}

export function renderClusterStatus(s: ClusterStatus): string {
  const state = s.state === 'healthy' ? c.green('healthy') : s.state === 'degraded' ? c.yellow('degraded') : c.red('down');
  const lines = [
    `${c.bold(s.record.profile)}  cluster ${state}  head ${s.record.head}  server ${s.server === 'healthy' ? c.green('healthy') : c.red(`${s.server} (${shown(s.serverDetail ?? '')})`)}  ${s.record.url}  pid ${s.record.pid}  --nodes ${s.record.nodesFile}`,
  ];
  if (s.nodes.length)
    lines.push(
      table(
        s.nodes.map((n) => [
          `  ${n.node}`,
          n.role,
          n.address,
          n.rank
            ? n.rank.process === 'running'
              ? c.green(`rank ${n.rank.rank} running`)
              : n.rank.process === 'gone'
                ? c.red(`rank ${n.rank.rank} gone`)
                : c.yellow(`rank ${n.rank.rank} unknown`)
            : n.ray === 'up'
              ? c.green('ray up')
              : n.ray === 'missing'
                ? c.red('ray missing')
                : c.yellow('ray unknown'),
          n.gpus === undefined ? '-' : `${n.gpus} GPUs`,
        ]),
        ['  NODE', 'ROLE', 'ADDRESS', s.record.executor === 'native' ? 'VLLM' : 'RAY', 'GPUS'],
      ),
    );
  if (s.rayError) lines.push(c.yellow(`  Ray did not answer on ${s.record.head}: ${shown(s.rayError)}`));
  return lines.join('\n');
}
