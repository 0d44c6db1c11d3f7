// Preflight across nodes: every node's own preflight (`sparkctl preflight --json` over ssh), then
// cross-node checks that are real Checks (id, area, title, a pure run over the per-node reports,
// each result observed/expected/fix) so they render, count and block like the per-host ones.
import type { NodesFile, NodeEntry } from '../profiles/schema.js';
import type { CheckResult, CheckOutcome, Status } from '../output/check.js';
import { shellQuote } from '../output/format.js';
import { ssh, remoteWhy, printable } from '../engine/cluster/ssh.js';
import { shownEscaped } from '../util/control.js';
import { couldNotCheck } from './fabric.js';
import { withInterrupts as withCancel } from '../util/interrupt.js';
import { stateDir } from '../util/paths.js';
import { imagePinOfNodes } from '../engine/pins.js';
import { planCluster, imageMismatch, readImageIds, type ClusterInputs } from '../engine/cluster/index.js';
import { imageOnNodes } from '../engine/cluster/node-runtime.js';
import {
  allNodes,
  fabricAddress,
  compareCluster,
  parseRayStatus,
  parseRayNodes,
  rayPython,
  RAY_NODES_PY,
  describeShortfall,
  type ClusterView,
} from '../engine/cluster/ray-plan.js';

/** What one node answered: its preflight report (validated shape), its NIC and model folder. */
export interface NodeReport {
  node: string;
  address: string;
  reached: boolean;
  error?: string;
  platform?: string;
  summary?: Record<Status, number>;
  versions?: Record<string, string | number | undefined>;
  checks?: Array<{ id: string; status: Status; observed: string; expected?: string; fix?: string | null }>;
  iface?: string;
  ifaceName: string;
  model?: 'present' | 'missing';
  /** why the NIC or the model folder could not be read (the ssh step failed): "could not check", never "missing" */
  ifaceWhy?: string;
  modelWhy?: string;
}

interface NodesCtx {
  nf: NodesFile;
  reports: NodeReport[];
  modelPath?: string;
  gpusNeeded?: number;
  /** Ray's view when a cluster runs (undefined: none running) */
  ray?: ClusterView;
}

interface NodesCheck {
  id: string;
  area: 'nodes' | 'ray';
  title: string;
  blocking: boolean;
  run(ctx: NodesCtx): CheckResult;
}

const STATUSES: Status[] = ['pass', 'warn', 'fail', 'skip'];

/** A node's `preflight --json` is 30-60 KiB; an answer past this is no report (ssh is ended there). */
const NODE_REPORT_MAX = 4 * 1024 * 1024;
/**
 * The catalog has a few dozen checks: a node that lists more is not answering (and every printer of the matrix is
 * quadratic in them).
 */
export const NODE_CHECKS_MAX = 500;
/** One observed value or fix, as kept: longer is cut and says so. */
const NODE_TEXT_MAX = 2000;
const CHECK_ID = /^[A-Za-z0-9_.-]{1,100}$/;
/** The versions a cross-node check compares, each a short string (or the GPU count, a small integer). */
const VERSION_KEYS = ['driver', 'cuda', 'nccl', 'torch', 'vllm', 'gpu'] as const;
const VERSION_MAX = 200;
const GPUS_MAX = 1024;
/** The check that stands for a node's answer itself: what of it could not be read is a failure, never passed over. */
export const NODE_ANSWER_CHECK = 'node.answer';

const cut = (s: string, n = NODE_TEXT_MAX) => (s.length > n ? `${s.slice(0, n)}... (${s.length} characters)` : s);
/**
 * A node's value as it is quoted in a finding: short, its control characters escaped, a number that is none said in
 * words.
 */
const quoted = (v: unknown): string => {
  if (typeof v === 'number')
    return Number.isFinite(v)
      ? String(v)
      : Number.isNaN(v)
        ? 'not a number'
        : `one past the largest a double holds (${v > 0 ? '' : '-'}1.8e308)`;
  if (typeof v === 'string') return `"${shownEscaped(v.slice(0, 60))}${v.length > 60 ? '...' : ''}"`;
  let t: string;
  try {
    t = JSON.stringify(v) ?? String(v);
  } catch {
    t = String(v);
  }
  return printable(t.slice(0, 60));
};

/**
 * A node's JSON answer is hostile: keep only what has the expected shape, bounded; the summary is
 * counted from the checks kept (never the node's own counts); whatever could not be read (an entry
 * of no known shape, checks past the bound, a version that is no version, a GPU count that is no
 * count, an answer with no check at all) becomes one failing check of its own, node.answer, so a
 * bad answer is a finding, never a pass.
 */
export function parseNodeReport(
  text: string,
): Pick<NodeReport, 'platform' | 'summary' | 'versions' | 'checks'> | undefined {
  let j: any;
  try {
    j = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!j || typeof j !== 'object' || !Array.isArray(j.checks) || typeof j.summary !== 'object' || !j.summary)
    return undefined;
  const problems: string[] = [];
  const checks: NonNullable<NodeReport['checks']> = [];
  let unreadable = 0;
  for (const k of j.checks.slice(0, NODE_CHECKS_MAX)) {
    const ok =
      k &&
      typeof k === 'object' &&
      typeof k.id === 'string' &&
      CHECK_ID.test(k.id) &&
      k.id !== NODE_ANSWER_CHECK &&
      STATUSES.includes(k.status);
    if (
      !ok ||
      (k.observed != null && typeof k.observed !== 'string') ||
      (k.expected != null && typeof k.expected !== 'string') ||
      (k.fix != null && typeof k.fix !== 'string')
    ) {
      unreadable++;
      continue;
    }
    checks.push({
      id: k.id,
      status: k.status as Status,
      observed: cut(k.observed ?? ''),
      ...(typeof k.expected === 'string' ? { expected: cut(k.expected) } : {}),
      fix: typeof k.fix === 'string' ? cut(k.fix) : null,
    });
  }
  if (unreadable)
    problems.push(
      `${unreadable} check(s) of no known shape (an id of letters, digits, . _ -; a status pass/warn/fail/skip; text observed, expected and fix)`,
    );
  if (j.checks.length > NODE_CHECKS_MAX)
    problems.push(`${j.checks.length} checks listed, past the ${NODE_CHECKS_MAX} read (the catalog has a few dozen)`);
  if (!checks.length) problems.push('no check it ran could be read');
  const said = j.summary as Record<string, unknown>;
  const counted = Object.fromEntries(STATUSES.map((s) => [s, checks.filter((k) => k.status === s).length])) as Record<
    Status,
    number
  >;
  const disagree = STATUSES.filter((s) => said[s] !== counted[s]);
  if (!unreadable && j.checks.length <= NODE_CHECKS_MAX && disagree.length)
    problems.push(
      `its summary says ${disagree.map((s) => `${s} ${quoted(said[s])}`).join(', ')} where its checks count ${disagree.map((s) => `${s} ${counted[s]}`).join(', ')}`,
    );
  const versions = readVersions(j.versions, problems);
  if (problems.length)
    checks.unshift({
      id: NODE_ANSWER_CHECK,
      status: 'fail',
      observed: `its preflight answer was not all readable: ${problems.join('; ')}`,
      fix: 'run sparkctl preflight --json on that node and read its output; install the same sparkctl on every node (nodes file: sparkctl)',
    });
  const summary = Object.fromEntries(STATUSES.map((s) => [s, checks.filter((k) => k.status === s).length])) as Record<
    Status,
    number
  >;
  const platform = typeof j.platform === 'string' && j.platform.length <= VERSION_MAX ? j.platform : undefined;
  return { platform, summary, versions, checks };
}

/** A node's versions, each kept only where it is one (the GPU count a whole number); the rest goes to `problems`. */
function readVersions(raw: unknown, problems: string[]): Record<string, string | number | undefined> {
  const versions: Record<string, string | number | undefined> = {};
  const v = raw && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  for (const key of VERSION_KEYS) {
    const x = v[key];
    if (x === undefined || x === null) continue;
    if ((typeof x === 'string' && x.length <= VERSION_MAX && x.trim()) || (typeof x === 'number' && Number.isFinite(x)))
      versions[key] = x;
    else problems.push(`versions.${key} ${quoted(x)} is no version`);
  }
  if (v.gpus !== undefined) {
    if (typeof v.gpus === 'number' && Number.isInteger(v.gpus) && v.gpus >= 0 && v.gpus <= GPUS_MAX)
      versions.gpus = v.gpus;
    else problems.push(`versions.gpus ${quoted(v.gpus)} is no GPU count (a whole number 0-${GPUS_MAX})`);
  }
  return versions;
}

const reached = (ctx: NodesCtx) => ctx.reports.filter((r) => r.reached);
/** Nodes whose report is missing: a cross-node check cannot say "on every node" past them. */
const unreachedWhy = (ctx: NodesCtx) =>
  ctx.reports.filter((r) => !r.reached).map((r) => `${r.node} not reached (${r.error ?? 'no report'})`);

function sameVersion(key: 'driver' | 'cuda' | 'nccl' | 'torch' | 'vllm'): NodesCheck {
  return {
    id: `nodes.same-${key}`,
    area: 'nodes',
    title: `one ${key} version on every node`,
    blocking: true,
    run(ctx) {
      const r = reached(ctx);
      if (!r.length) return couldNotCheck(true, unreachedWhy(ctx), 'the same on every node');
      const vals = new Map<string, string[]>();
      for (const x of r) {
        const v = String(x.versions?.[key] ?? 'none');
        vals.set(v, [...(vals.get(v) ?? []), x.node]);
      }
      if (vals.size <= 1) {
        const missing = unreachedWhy(ctx);
        if (missing.length)
          return couldNotCheck(
            true,
            [`${[...vals.keys()][0]} on ${r.map((x) => x.node).join(', ')}`, ...missing],
            'the same on every node',
          );
        return { status: 'pass', observed: `${[...vals.keys()][0]} on every node`, expected: 'the same on every node' };
      }
      const majority = [...vals.entries()].sort((a, b) => b[1].length - a[1].length)[0]!;
      const odd = [...vals.entries()].filter(([v]) => v !== majority[0]).map(([v, ns]) => `${ns.join(', ')} has ${v}`);
      return {
        status: 'fail',
        observed: `${odd.join('; ')} (others: ${majority[0]})`,
        expected: 'the same on every node',
        fix: `install the same ${key} on every node: NCCL and Ray fail in odd ways across versions`,
      };
    },
  };
}

export const NODES_CHECKS: NodesCheck[] = [
  {
    id: 'nodes.reachable',
    area: 'nodes',
    title: 'every node answers over ssh with sparkctl',
    blocking: true,
    run(ctx) {
      const bad = ctx.reports.filter((r) => !r.reached);
      return bad.length
        ? {
            status: 'fail',
            observed: bad.map((r) => `${r.node}: ${r.error}`).join('; '),
            expected: 'every node reached',
            fix: 'check ssh (BatchMode, key, user) and that sparkctl is installed on every node (nodes file: sparkctl)',
          }
        : {
            status: 'pass',
            observed: `${ctx.reports.length} of ${ctx.reports.length} nodes`,
            expected: 'every node reached',
          };
    },
  },
  ...(['driver', 'cuda', 'nccl', 'torch', 'vllm'] as const).map(sameVersion),
  {
    id: 'nodes.same-model',
    area: 'nodes',
    title: 'one model revision on every node',
    blocking: true,
    run(ctx) {
      // Each node's model.files names the commit of the snapshot it found (a Hub model); an
      // incomplete snapshot is a revision of its own. Nodes that report none (a folder) are left out.
      const r = reached(ctx)
        .map((x) => ({ node: x.node, mf: x.checks?.find((k) => k.id === 'model.files') }))
        .filter((x) => x.mf && x.mf.status !== 'skip');
      const revOf = (mf: { status: Status; observed: string }) =>
        /commit ([0-9a-f]{40})/.exec(mf.observed)?.[1] ?? (mf.status === 'pass' ? undefined : 'missing or incomplete');
      const vals = new Map<string, string[]>();
      for (const x of r) {
        const v = revOf(x.mf!);
        if (v) vals.set(v, [...(vals.get(v) ?? []), x.node]);
      }
      if (!vals.size)
        return {
          status: 'skip',
          observed: 'no node reports a Hub snapshot (model.path, or no profile)',
          expected: 'the same commit on every node',
        };
      if (vals.size === 1)
        return {
          status: 'pass',
          observed: `${[...vals.keys()][0]} on ${[...vals.values()][0]!.length} node(s)`,
          expected: 'the same commit on every node',
        };
      const majority = [...vals.entries()].sort((a, b) => b[1].length - a[1].length)[0]!;
      const odd = [...vals.entries()].filter(([v]) => v !== majority[0]).map(([v, ns]) => `${ns.join(', ')} has ${v}`);
      return {
        status: 'fail',
        observed: `${odd.join('; ')} (others: ${majority[0]})`,
        expected: 'the same commit on every node',
        fix: 'sparkctl pull MODEL --nodes NODES_FILE: pulled once here, the same snapshot copied to every node',
      };
    },
  },
  {
    id: 'nodes.interface',
    area: 'nodes',
    title: 'the named NIC is up on every node',
    blocking: true,
    run(ctx) {
      const r = reached(ctx);
      if (!r.length) return { status: 'skip', observed: 'no node reached', expected: 'up' };
      const bad = r.filter((x) => !x.ifaceWhy && x.iface !== 'up' && x.iface !== 'unknown');
      const unknown = [...r.filter((x) => x.ifaceWhy).map((x) => `${x.node}: ${x.ifaceWhy}`), ...unreachedWhy(ctx)];
      if (!bad.length && unknown.length) return couldNotCheck(true, unknown, 'up');
      return bad.length
        ? {
            status: 'fail',
            observed: bad.map((x) => `${x.node}: ${x.ifaceName} ${x.iface ?? 'does not exist'}`).join('; '),
            expected: 'up',
            fix: 'set interface: in the nodes file to the NIC that carries NCCL traffic (ip -br link)',
          }
        : { status: 'pass', observed: 'the named interface is up on every node', expected: 'up' };
    },
  },
  {
    id: 'nodes.model-path',
    area: 'nodes',
    title: 'the model is at the same path on every node',
    blocking: true,
    run(ctx) {
      if (!ctx.modelPath) return { status: 'skip', observed: 'no profile with model.path', expected: '' };
      const unknown = reached(ctx).filter((x) => x.modelWhy);
      const missing = reached(ctx).filter((x) => !x.modelWhy && x.model !== 'present');
      if (!missing.length && unknown.length)
        return couldNotCheck(
          true,
          unknown.map((x) => `${x.node}: ${x.modelWhy}`),
          'present on every node',
        );
      return missing.length
        ? {
            status: 'fail',
            observed: `${ctx.modelPath}/config.json missing on ${missing.map((x) => x.node).join(', ')}`,
            expected: 'present on every node',
            fix: `copy the model to ${ctx.modelPath} on every node (same path everywhere)`,
          }
        : { status: 'pass', observed: `${ctx.modelPath} on every node`, expected: 'present on every node' };
    },
  },
  {
    id: 'nodes.gpus',
    area: 'nodes',
    title: 'the nodes have the GPUs TP x PP needs',
    blocking: true,
    run(ctx) {
      if (!ctx.gpusNeeded) return { status: 'skip', observed: 'no profile', expected: '' };
      const r = reached(ctx);
      // parseNodeReport kept only a whole count: a node without one counts none, and says so
      const count = (x: NodeReport) => (typeof x.versions?.gpus === 'number' ? x.versions.gpus : undefined);
      const total = r.reduce((a, x) => a + (count(x) ?? 0), 0);
      const short = r.filter((x) => count(x) !== allNodes(ctx.nf).find((n) => n.name === x.node)!.gpus);
      if (total < ctx.gpusNeeded)
        return {
          status: 'fail',
          observed: `${total} GPUs over ${r.length} reachable nodes${short.length ? ` (${short.map((x) => (count(x) === undefined ? `${x.node}'s count was not read` : `${x.node} has ${count(x)}`)).join(', ')})` : ''}`,
          expected: `${ctx.gpusNeeded}`,
          fix: 'add nodes, or fix the ones whose GPUs are missing',
        };
      return {
        status: 'pass',
        observed: `${total} GPUs over ${r.length} nodes (needs ${ctx.gpusNeeded})`,
        expected: `${ctx.gpusNeeded}`,
      };
    },
  },
  {
    id: 'ray.cluster',
    area: 'ray',
    title: 'a running Ray cluster lists exactly the nodes and GPUs of the file',
    blocking: false,
    run(ctx) {
      if (!ctx.ray)
        return { status: 'skip', observed: 'no Ray cluster running yet (serve --nodes starts it)', expected: '' };
      return ctx.ray.complete
        ? {
            status: 'pass',
            observed: `${ctx.ray.nodes} nodes, ${ctx.ray.gpus} GPUs`,
            expected: 'every node of the file',
          }
        : {
            status: 'fail',
            observed: describeShortfall(ctx.nf, ctx.ray),
            expected: 'every node of the file',
            fix: 'ray stop on every node, then sparkctl serve --nodes again',
          };
    },
  },
];

export function runNodesChecks(ctx: NodesCtx): CheckOutcome[] {
  return NODES_CHECKS.map((c) => {
    const t = performance.now();
    const r = c.run(ctx);
    return {
      ...r,
      id: c.id,
      area: c.area,
      title: c.title,
      blocking: c.blocking,
      durationMs: Math.round(performance.now() - t),
    };
  });
}

/**
 * operstate's words (Documentation/ABI/testing/sysfs-class-net): up, down, unknown, dormant, lowerlayerdown,
 * notpresent, testing
 */
const OPERSTATE = /^[a-z]{1,20}$/;
/** a one-word answer (an operstate, present/missing) */
const SHORT_ANSWER_MAX = 4096;

/** One node's report over ssh: its preflight, its NIC's operstate and the model folder, asked at once. */
async function gatherNode(
  nf: NodesFile,
  n: NodeEntry,
  opts: { sparkctlArgs: string[]; modelPath?: string; signal?: AbortSignal },
): Promise<NodeReport> {
  const base = { node: n.name, address: n.address, ifaceName: n.interface };
  const [pf, iface, model] = await Promise.all([
    ssh(nf, n, `${nf.sparkctl} ${opts.sparkctlArgs.map(shellQuote).join(' ')}`, {
      timeoutMs: 60_000,
      signal: opts.signal,
      maxBytes: NODE_REPORT_MAX,
    }),
    ssh(nf, n, `cat /sys/class/net/${shellQuote(n.interface)}/operstate`, {
      timeoutMs: 30_000,
      signal: opts.signal,
      maxBytes: SHORT_ANSWER_MAX,
    }),
    opts.modelPath
      ? ssh(nf, n, `test -f ${shellQuote(opts.modelPath + '/config.json')} && echo present || echo missing`, {
          timeoutMs: 30_000,
          signal: opts.signal,
          maxBytes: SHORT_ANSWER_MAX,
        })
      : Promise.resolve(undefined),
  ]);
  if (pf.exitCode === null || pf.exitCode === 255)
    return { ...base, reached: false, error: `ssh ${n.sshUser}@${n.address}: ${remoteWhy(pf, 1)}` };
  const rep = parseNodeReport(pf.stdout);
  if (!rep) {
    // exit 2 is sparkctl's own "bad input": it runs there and said why (its first line), not "is it installed?"
    const first = printable(pf.stderr ?? '')
      .split('\n')
      .find((l) => l.trim());
    if (pf.exitCode === 2 && first)
      return {
        ...base,
        reached: false,
        error: `sparkctl on ${n.name} refused the preflight (exit 2): ${first.trim()}`,
      };
    return {
      ...base,
      reached: false,
      error: `sparkctl on ${n.name} did not answer a preflight report (is it installed there? nodes file: sparkctl: ${nf.sparkctl}): ${remoteWhy(pf, 1)}`,
    };
  }
  const m = model?.stdout.trim();
  // an ssh that failed (no exit code, or ssh's own 255) read nothing: could not check, never "missing"
  const failed = (x: { exitCode: number | null } | undefined) =>
    x !== undefined && (x.exitCode === null || x.exitCode === 255);
  // what the node said is hostile: only an operstate word is an operstate, only present/missing an answer
  const state = iface.exitCode === 0 ? iface.stdout.trim() : undefined;
  const stateOk = state === undefined || OPERSTATE.test(state);
  const modelOk = m === undefined || m === 'present' || m === 'missing';
  const ifaceWhy = failed(iface)
    ? `reading /sys/class/net/${n.interface}/operstate over ssh failed: ${remoteWhy(iface, 1)}`
    : !stateOk
      ? `its answer for /sys/class/net/${n.interface}/operstate is no operstate: ${quoted(state)}`
      : undefined;
  const modelWhy = failed(model)
    ? `looking for ${opts.modelPath}/config.json over ssh failed: ${remoteWhy(model!, 1)}`
    : !modelOk
      ? `its answer to a test -f of ${opts.modelPath}/config.json is neither present nor missing: ${quoted(m)}`
      : undefined;
  return {
    ...base,
    reached: true,
    ...rep,
    iface: stateOk ? state : undefined,
    model: m === 'present' ? 'present' : m === 'missing' ? 'missing' : undefined,
    ...(ifaceWhy ? { ifaceWhy } : {}),
    ...(modelWhy ? { modelWhy } : {}),
  };
}

/** Gathers every node's report over ssh, concurrently, and Ray's view from the head. */
export async function gatherNodes(
  nf: NodesFile,
  opts: { sparkctlArgs: string[]; modelPath?: string; signal?: AbortSignal },
): Promise<{ reports: NodeReport[]; ray?: ClusterView }> {
  const reports = await Promise.all(allNodes(nf).map((n) => gatherNode(nf, n, opts)));
  const [st, js] = await Promise.all([
    ssh(nf, nf.head, 'ray status', { timeoutMs: 30_000, signal: opts.signal, maxBytes: 1024 * 1024 }),
    ssh(nf, nf.head, rayPython(RAY_NODES_PY, [`${fabricAddress(nf.head)}:${nf.rayPort}`]), {
      timeoutMs: 30_000,
      signal: opts.signal,
      maxBytes: 1024 * 1024,
    }),
  ]);
  const counts = st.exitCode === 0 ? parseRayStatus(st.stdout) : undefined;
  const nodes = js.exitCode === 0 ? parseRayNodes(js.stdout) : undefined;
  return { reports, ray: counts || nodes ? compareCluster(nf, counts, nodes) : undefined };
}

/** engine.runtime container: the image each node's runtime holds under the profile's name, by ID. */
export async function sameImageCheck(
  profile: string,
  nf: NodesFile,
  opts: { profiles?: string; set?: string[]; platform: string },
  loaded?: PinnableProfile,
): Promise<CheckOutcome> {
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
  // the image the nodes' runtime runs, and its CLI (the caller asks only where vLLM comes from an image)
  const { image, cli } = imageOnNodes(pc)!;
  const ids = await withCancel((signal) => readImageIds(nf, pc.steps, signal));
  const bad = imageMismatch(image, ids);
  const base = {
    id: 'nodes.same-image',
    area: 'nodes',
    title: 'the same container image (by ID) on every node',
    blocking: true,
    durationMs: 0,
    expected: 'one image ID everywhere',
  };
  const asPinned = pin.pinned ? ` (the pin of ${pin.ref}, ${pin.pinned.pin.at})` : '';
  return bad
    ? {
        ...base,
        status: 'fail' as const,
        observed: `${bad}${asPinned}`,
        fix: pin.pinned
          ? `load the pinned image on those nodes (${cli} save ${image} | ssh NODE ${cli} load), or take another image for every node: sparkctl serve ${profile} --nodes FILE --set container.image=REPO@sha256:...`
          : `load the same image on every node, or pin it by digest (container.image: REPO@sha256:...)`,
      }
    : {
        ...base,
        status: 'pass' as const,
        observed: `${image} ${ids[0]!.id!.slice(0, 12)} on ${ids.length} nodes${asPinned}`,
      };
}

type PinnableProfile = {
  profile: {
    name: string;
    engine: { runtime: 'host' | 'container' };
    container?: { image?: string };
    pinnedIn?: 'state' | 'lockfile';
  };
  file?: string;
};
