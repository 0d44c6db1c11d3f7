// preflight --nodes: every node's own preflight over ssh (sparkctl preflight --json there), the
// checks across nodes (preflight/nodes.ts: GPUs, Ray, the model path, one image by ID; preflight/
// fabric.ts), as one preflight report (output/check.ts ChecksReport: each check what it saw, what it
// expected, the fix, a node's with its node), rendered by the one-host report's renderer
// (preflight/report.ts renderChecks, summaryLine) around a node x check matrix, or the
// preflight-nodes envelope (its checks in the preflight envelope's shape).
import { resolve } from 'node:path';
import { withInterrupts as withCancel } from '../../util/interrupt.js';
import { loadNodesFile } from '../../profiles/load.js';
import type { NodesFile } from '../../profiles/schema.js';
import { traitsOfProfile } from '../../engine/runtime/traits.js';
import { allNodes, exportLine, resolveForNodes, fabricEnvs, nodeEnvOf } from '../../engine/cluster/index.js';
import { gatherNodes, runNodesChecks, sameImageCheck, type NodeReport } from '../../preflight/nodes.js';
import { gatherFabric, runFabricChecks } from '../../preflight/fabric.js';
import { checkJson, countChecks, renderChecks, summaryLine } from '../../preflight/report.js';
import { envelope, c, table, statusMark } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { shownEscaped as shown } from '../../util/control.js';
import type { CheckOutcome, ChecksReport } from '../../output/check.js';
import { ExitWith, ExitCode } from '../../errors.js';

/** The nodes' report: the checks (each node's, with its node, then those across the nodes) and what only nodes have. */
interface NodesPreflightReport extends ChecksReport {
  nodes: NodeReport[];
  /** the checks across the nodes (also in checks, without a node) */
  cross: CheckOutcome[];
  /** each node's fabric reading and the variables serve --nodes renders from it */
  fabric: Record<string, { reading: unknown; env: Record<string, string> | null }>;
}

/** A node's own checks as report checks: its name on each (its answer is kept as read: no area, no time of its own). */
export function nodeChecks(r: NodeReport): CheckOutcome[] {
  return (r.checks ?? []).map((k) => ({
    id: k.id,
    area: 'each node',
    title: k.id,
    status: k.status,
    observed: k.observed,
    expected: k.expected ?? '',
    ...(k.fix ? { fix: k.fix } : {}),
    // a node's answer does not say whether a check blocks: its failures fail the nodes' preflight all the same
    blocking: false,
    durationMs: 0,
    node: r.node,
  }));
}

/** The report of the nodes' answers and the checks across them (pure). */
export function nodesReport(
  reports: NodeReport[],
  cross: CheckOutcome[],
  fabric: NodesPreflightReport['fabric'],
  wallMs: number,
): NodesPreflightReport {
  const checks = [...reports.flatMap(nodeChecks), ...cross];
  return { checks, summary: countChecks(checks), wallMs, nodes: reports, cross, fabric };
}

/** Text from the nodes, as the terminal shows it: every field escaped (a node's answer is hostile). */
const escaped = (x: CheckOutcome): CheckOutcome => ({
  ...x,
  id: shown(x.id),
  observed: shown(x.observed),
  expected: shown(x.expected),
  ...(x.fix ? { fix: shown(x.fix) } : {}),
  ...(x.node !== undefined ? { node: shown(x.node) } : {}),
});

/**
 * The nodes' report as text: the matrix, the nodes not reached, then the one renderer of preflight's
 * checks over each node's failures and warnings (the matrix shows the rest) and the checks across
 * the nodes, the fabric variables, and the summary line of every preflight.
 */
export function renderNodesReport(r: NodesPreflightReport, title: string, fabricLines: string[]): string {
  const lines = [c.bold(title), nodeMatrix(r.nodes)];
  for (const x of r.nodes.filter((x) => !x.reached))
    lines.push(c.red(`${x.node} unreachable: ${shown(x.error ?? '')}`));
  const shownChecks = r.checks
    .filter((x) => x.node === undefined || x.status === 'fail' || x.status === 'warn')
    .map(escaped);
  lines.push(...renderChecks(shownChecks));
  lines.push(
    '',
    c.bold('fabric variables, as serve --nodes renders them from what each node shows now'),
    ...fabricLines,
  );
  lines.push('', summaryLine(r));
  return lines.join('\n');
}

/** The node x check matrix: one column per node, so the odd node stands out. */
export function nodeMatrix(reports: NodeReport[]): string {
  const ids: string[] = [];
  for (const r of reports) for (const k of r.checks ?? []) if (!ids.includes(k.id)) ids.push(k.id);
  // Checks that pass on every node say little: the rows that differ or fail come first.
  const cell = (r: NodeReport, id: string) => (!r.reached ? '-' : (r.checks?.find((k) => k.id === id)?.status ?? '-'));
  const interesting = (id: string) =>
    new Set(reports.map((r) => cell(r, id))).size > 1 || reports.some((r) => ['fail', 'warn'].includes(cell(r, id)));
  const sorted = [...ids.filter(interesting), ...ids.filter((id) => !interesting(id))];
  const rows = sorted.map((id) => [
    shown(id),
    ...reports.map((r) => {
      const s = cell(r, id);
      return s === '-' ? c.dim('-') : statusMark(s);
    }),
  ]);
  rows.push([
    '(summary)',
    ...reports.map((r) =>
      r.reached ? `${r.summary!.fail}F ${r.summary!.warn}W ${r.summary!.pass}P` : c.red('unreachable'),
    ),
  ]);
  return table(rows, ['CHECK', ...reports.map((r) => r.node)]);
}

/** preflight --nodes' options, as its helpers read them. */
type PreflightNodesOptions = Parameters<typeof preflightNodes>[0];

/**
 * The profile the nodes are checked against, resolved over them as serve --nodes resolves it (none without --profile).
 */
async function profileOverNodes(opts: PreflightNodesOptions, nf: NodesFile) {
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
    ? resolveForNodes(
        opts.profile,
        {
          profiles: opts.profiles,
          set: opts.set ?? [],
          platform: platform ?? target?.platform,
          loaded: target?.loaded,
          modelRead: target?.modelRead,
        },
        nf,
      )
    : undefined;
  return { target, r };
}

/**
 * The argv of each node's own preflight (--json): the platform, and the profile by name unless it is generated here.
 */
function nodeArgs(opts: PreflightNodesOptions, generated: boolean, targetPlatform: string | undefined): string[] {
  // a profiles folder of one's own is named to the nodes too (the same path on every node, as the model's)
  return [
    'preflight',
    '--json',
    '--platform',
    generated ? (targetPlatform ?? opts.platform) : opts.platform,
    ...(opts.profile && !generated ? ['--profile', opts.profile] : []),
    ...(opts.profiles ? ['--profiles', opts.profiles] : []),
    ...(generated ? [] : (opts.set ?? []).flatMap((s) => ['--set', s])),
  ];
}

/** The nodes' report said: the preflight-nodes envelope, or the text with each node's fabric variables. */
function sayNodesReport(
  report: NodesPreflightReport,
  opts: PreflightNodesOptions,
  nf: NodesFile,
  envs: Record<string, Record<string, string>>,
): void {
  if (opts.json) say(nodesJson(report));
  else
    say(
      renderNodesReport(
        report,
        `preflight over ${allNodes(nf).length} nodes (${opts.nodes})`,
        allNodes(nf).map(
          (n) => `  ${n.name}  ${envs[n.name] ? exportLine({ ...nodeEnvOf(n), ...envs[n.name] }) : c.dim('not read')}`,
        ),
      ),
    );
}

export async function preflightNodes(opts: {
  nodes?: string;
  profile?: string;
  platform: string;
  json?: boolean;
  strict?: boolean;
  set?: string[];
  profiles?: string;
}): Promise<void> {
  const nf = loadNodesFile(opts.nodes!);
  const { target, r } = await profileOverNodes(opts, nf);
  // the folder as serve --nodes renders it for every rank: by its absolute path here (engine/cluster/model-env.ts)
  const modelPath = r?.profile.model.path !== undefined ? resolve(r.profile.model.path) : undefined;
  // A model id's profile is generated here, from the config.json in this host's cache: a node's own
  // preflight knows profiles by name only (given the id, every node answered "unknown profile", exit 2,
  // shown as unreachable). The nodes check themselves against the platform the plan assumed; the
  // generated profile's GPUs and model files are judged across the nodes below.
  const generated = Boolean(target?.generated);
  if (generated && !opts.json)
    note(
      `each node's own preflight runs for platform ${target!.platform ?? opts.platform}, without a profile: ${opts.profile} has none of its own (its profile is generated here; its GPUs and model files are checked across the nodes)`,
    );
  const args = nodeArgs(opts, generated, target?.platform);
  const started = Date.now();
  const [{ reports, ray }, fabric] = await withCancel((signal) =>
    Promise.all([gatherNodes(nf, { sparkctlArgs: args, modelPath, signal }), gatherFabric(nf, signal)]),
  );
  const cross = [
    ...runNodesChecks({
      nf,
      reports,
      modelPath,
      gpusNeeded: r ? r.profile.parallel.tensor * r.profile.parallel.pipeline : undefined,
      ray,
    }),
    ...runFabricChecks(fabric).map((x) => ({ ...x, area: 'fabric', durationMs: 0 })),
    ...(r && traitsOfProfile(r.profile).vllmFrom === 'image'
      ? [await sameImageCheck(opts.profile!, nf, opts, { profile: r.profile, file: r.file })]
      : []),
  ];
  const envs = fabricEnvs(nf, fabric.readings);
  const report = nodesReport(
    reports,
    cross,
    Object.fromEntries(
      allNodes(nf).map((n) => [n.name, { reading: fabric.readings.get(n.name) ?? null, env: envs[n.name] ?? null }]),
    ),
    Date.now() - started,
  );
  const anyFail =
    reports.some((x) => !x.reached || (x.summary?.fail ?? 0) > 0) || cross.some((x) => x.status === 'fail');
  const anyWarn =
    reports.some((x) => x.reached && (x.summary?.warn ?? 0) > 0) || cross.some((x) => x.status === 'warn');
  sayNodesReport(report, opts, nf, envs);
  if (anyFail || (opts.strict && anyWarn)) throw new ExitWith(ExitCode.problems);
}

/**
 * The preflight-nodes envelope: each node's answer and the checks across the nodes as before
 * (nodes, cross, fabric), and, as the preflight envelope has them, every check (a node's with its
 * node) and their summary.
 */
export function nodesJson(r: NodesPreflightReport): string {
  return envelope('preflight-nodes', {
    nodes: r.nodes.map((x) => ({
      node: x.node,
      reached: x.reached,
      error: x.error ?? null,
      platform: x.platform ?? null,
      summary: x.summary ?? null,
      versions: x.versions ?? null,
      checks: Object.fromEntries((x.checks ?? []).map((k) => [k.id, k.status])),
      failed: (x.checks ?? [])
        .filter((k) => k.status === 'fail')
        .map((k) => ({ id: k.id, observed: k.observed, fix: k.fix })),
    })),
    cross: r.cross.map((x) => ({
      id: x.id,
      status: x.status,
      observed: x.observed,
      expected: x.expected,
      fix: x.fix ?? null,
      blocking: x.blocking,
    })),
    fabric: r.fabric,
    checks: r.checks.map(checkJson),
    summary: r.summary,
    wallMs: r.wallMs,
  });
}
