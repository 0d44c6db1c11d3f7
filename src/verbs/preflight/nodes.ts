// preflight --nodes: every node's own preflight over ssh (sparkctl preflight --json there), the
// checks across nodes (engine/cluster's facts: GPUs, Ray, the model path, the fabric, one image by
// ID), rendered as a node x check matrix or the preflight-nodes envelope.
import { withInterrupts as withCancel } from '../../util/interrupt.js';
import { stateDir } from '../../util/paths.js';
import { imagePinOfNodes } from '../../engine/pins.js';
import { loadNodesFile } from '../../profiles/load.js';
import type { NodesFile } from '../../profiles/schema.js';
import { traitsOfProfile } from '../../engine/runtime/traits.js';
import { allNodes, exportLine, planCluster, resolveForNodes, fabricEnvs, nodeEnvOf, type ClusterInputs, imageMismatch, readImageIds } from '../../engine/cluster/index.js';
import { gatherNodes, runNodesChecks, type NodeReport } from '../../preflight/nodes.js';
import { gatherFabric, runFabricChecks } from '../../preflight/fabric.js';
import { envelope, c, table, statusMark } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { shownEscaped as shown } from '../../util/control.js';
import type { CheckOutcome } from '../../output/check.js';
import { ExitWith, ExitCode } from '../../errors.js';

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
    ? await (await import('../../engine/inputs.js')).readForNodes(
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
  const pin = loaded ? imagePinOfNodes(loaded, stateDir()) : {};
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

type PinnableProfile = { profile: { name: string; engine: { runtime: 'host' | 'container' }; container?: { image?: string } } };
