// Past one machine: vLLM's own multi-node engine, Ray. sparkctl plans the Ray cluster, checks every
// node over ssh, starts Ray, launches `vllm serve --distributed-executor-backend ray` on the head,
// and then the same readiness, prewarm and probe as on one node. Nothing home-made in the data path.
import yaml from 'js-yaml';
import { execa } from 'execa';
import type { ServeOptions } from '../commands/serve.js';
import { buildPlan, executableFor, simTail } from '../commands/serve.js';
import { resolveProfile, stateDir, type Resolved } from '../commands/common.js';
import { loadNodesFile } from '../profiles/load.js';
import type { NodesFile, NodeEntry } from '../profiles/schema.js';
import { servedName, renderReplicas } from '../profiles/render.js';
import { GIB } from '../profiles/planner.js';
import type { HostShape } from '../profiles/validate.js';
import { parseRayStatus } from '../nvidia/ray.js';
import { classifyLog } from './classify.js';
import { Registry, type ClusterRecord } from './registry.js';
import { http } from '../client/http.js';
import { servedModels } from '../client/shapes.js';
import { prewarm } from '../health/prewarm.js';
import { probe } from '../health/probe.js';
import { targetFromUrl } from '../health/target.js';
import { shellQuote, envelope, c, table, statusMark, formatDuration } from '../output/format.js';
import { say, note } from '../output/log.js';
import { UsageError, LaunchError, ProblemsFound, ExitWith, ExitCode } from '../errors.js';

export interface Remote {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  error?: string;
}

export const allNodes = (nf: NodesFile) => [nf.head, ...nf.workers];

export function sshArgv(nf: NodesFile, node: NodeEntry, command: string): string[] {
  const argv = [
    process.env.SPARKCTL_SSH ?? 'ssh',
    '-o', 'BatchMode=yes',
    '-o', `ConnectTimeout=${nf.ssh.connectTimeoutSeconds}`,
    '-o', 'StrictHostKeyChecking=accept-new',
    '-p', String(node.sshPort),
  ];
  if (nf.ssh.identityFile) argv.push('-i', nf.ssh.identityFile);
  for (const o of nf.ssh.options) argv.push('-o', o);
  argv.push(`${node.sshUser}@${node.address}`, command);
  return argv;
}

/** Runs a shell command on a node over ssh (BatchMode: never a password prompt at 3 a.m.). */
export async function ssh(nf: NodesFile, node: NodeEntry, command: string, opts: { timeoutMs?: number; input?: string } = {}): Promise<Remote> {
  const argv = sshArgv(nf, node, command);
  const r = await execa(argv[0]!, argv.slice(1), { reject: false, timeout: opts.timeoutMs ?? 30_000, input: opts.input, stdin: opts.input === undefined ? 'ignore' : undefined });
  if (r.timedOut) return { exitCode: null, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? ''), error: 'timeout' };
  if (r.exitCode === undefined) return { exitCode: null, stdout: '', stderr: String(r.stderr ?? ''), error: (r as { shortMessage?: string }).shortMessage ?? 'ssh failed' };
  return { exitCode: r.exitCode, stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? '') };
}

export function nodeEnv(node: NodeEntry): Record<string, string> {
  return { VLLM_HOST_IP: node.address, NCCL_SOCKET_IFNAME: node.interface, GLOO_SOCKET_IFNAME: node.interface };
}
const exportLine = (env: Record<string, string>) => `export ${Object.entries(env).map(([k, v]) => `${k}=${shellQuote(v)}`).join(' ')}`;

export interface NodeStep {
  node: string;
  role: 'head' | 'worker';
  address: string;
  env: Record<string, string>;
  argv: string[][];
}

export function hostShapeOf(nf: NodesFile): HostShape {
  return { gpus: nf.head.gpus, gpusSource: 'nodes', gpuMemoryBytes: 0, multiNode: true, nodes: allNodes(nf).length, gpusPerNode: Math.min(...allNodes(nf).map((n) => n.gpus)) };
}

/** The plan, node by node, in the order it runs: Ray head, Ray workers, then vLLM on the head. */
export function planNodes(r: Resolved, nf: NodesFile, vllmArgv: string[]): NodeStep[] {
  const head = nf.head;
  const steps: NodeStep[] = [
    { node: head.name, role: 'head', address: head.address, env: nodeEnv(head), argv: [['ray', 'start', '--head', '--port', String(nf.rayPort), '--node-ip-address', head.address, '--num-gpus', String(head.gpus)]] },
  ];
  for (const w of nf.workers) {
    steps.push({ node: w.name, role: 'worker', address: w.address, env: nodeEnv(w), argv: [['ray', 'start', '--address', `${head.address}:${nf.rayPort}`, '--node-ip-address', w.address, '--num-gpus', String(w.gpus)]] });
  }
  steps[0]!.argv.push(vllmArgv);
  return steps;
}

function resolveForNodes(profileName: string, opts: Pick<ServeOptions, 'profiles' | 'set' | 'platform'>, nf: NodesFile): Resolved {
  const shape = hostShapeOf(nf);
  const r = resolveProfile(profileName, { profilesDir: opts.profiles, sets: opts.set, platform: opts.platform, host: shape });
  // The memory budget is per GPU of the platform the nodes are.
  const host = { ...r.host, gpuMemoryBytes: r.platform.gpu.memoryGiB * GIB, computeCapability: r.platform.gpu.computeCapability, gpuName: r.platform.gpu.displayName };
  const again = resolveProfile(profileName, { profilesDir: opts.profiles, sets: opts.set, platform: opts.platform, host });
  if (again.profile.parallel.executor !== 'ray' && again.profile.parallel.nodes <= 1) {
    throw new UsageError(`${again.profile.name} is a single-host profile`, ['--nodes is for profiles with parallel.executor: ray (e.g. qwen3-200b); serve it without --nodes']);
  }
  return again;
}

export async function serveNodes(profileName: string, opts: ServeOptions): Promise<void> {
  const nf = loadNodesFile(opts.nodes!);
  const r = resolveForNodes(profileName, opts, nf);
  // On the head, vLLM runs under the name the nodes file gives sparkctl/vllm: the same rendering as one node.
  const exe = opts.engine === 'sim' ? [...nf.sparkctl.split(/\s+/), 'sim'] : executableFor(opts);
  const rep = renderReplicas(r.profile, r.host, { executable: exe, stateDir: '$HOME/.local/state/sparkctl', tail: opts.engine === 'sim' ? simTail(r, opts).filter((x, i, a) => !(x === '--sim-profile' || a[i - 1] === '--sim-profile')) : [] })[0]!;
  const { warnings } = buildPlan(r, { ...opts, engine: opts.engine });
  const steps = planNodes(r, nf, rep.argv);
  const perReplica = r.profile.parallel.tensor * r.profile.parallel.pipeline;
  if (opts.dryRun) {
    if (opts.json) {
      say(envelope('multinode-plan', { profile: r.profile.name, servedName: servedName(r.profile), gpusNeeded: perReplica, gpusInCluster: allNodes(nf).reduce((a, n) => a + n.gpus, 0), url: `http://${nf.head.address}:${rep.port}`, steps, warnings }));
      return;
    }
    for (const w of warnings) note(`${c.yellow('warning')}: ${w}`);
    say(c.dim(`# ${r.profile.name}: TP ${r.profile.parallel.tensor} x PP ${r.profile.parallel.pipeline} = ${perReplica} GPUs over ${allNodes(nf).length} nodes with Ray`));
    steps.forEach((s, i) => {
      say(c.dim(`# ${i + 1}. ${s.node} (${s.role}, ${s.address}) over ssh`));
      say(exportLine(s.env));
      for (const a of s.argv) say(a[0] === 'ray' ? a.map(shellQuote).join(' ') : `${r.profile.server.apiKeyEnv ? `VLLM_API_KEY="$${r.profile.server.apiKeyEnv}" ` : ''}${a.map(shellQuote).join(' ')}`);
      say();
    });
    say(c.dim(`# then: wait until \`ray status\` on ${nf.head.name} shows ${allNodes(nf).length} nodes and >= ${perReplica} GPUs; readiness at http://${nf.head.address}:${rep.port}`));
    return;
  }

  const key = r.profile.server.apiKeyEnv ? process.env[r.profile.server.apiKeyEnv] : undefined;
  if (r.profile.server.apiKeyEnv && !key) throw new UsageError(`server.apiKeyEnv names ${r.profile.server.apiKeyEnv}, which is not set`);
  const started = Date.now();
  const rayStopAll = () => Promise.all(allNodes(nf).map((n) => ssh(nf, n, 'ray stop --force', { timeoutMs: 30_000 })));

  // 1. Ray head, then every worker (concurrently): a node that cannot join is named.
  const headStep = steps[0]!;
  const h = await ssh(nf, nf.head, `${exportLine(headStep.env)}; ${headStep.argv[0]!.map(shellQuote).join(' ')}`);
  if (h.exitCode !== 0) {
    note(`${c.red('launch failed')}: Ray head on ${nf.head.name} (${nf.head.address}) did not start: ${(h.stderr || h.stdout || h.error || '').trim().split('\n').slice(-3).join(' | ')}`);
    await rayStopAll();
    throw new LaunchError('', []);
  }
  note(`ray head started on ${nf.head.name}`);
  const joins = await Promise.all(steps.slice(1).map(async (s) => ({ s, r: await ssh(nf, allNodes(nf).find((n) => n.name === s.node)!, `${exportLine(s.env)}; ${s.argv[0]!.map(shellQuote).join(' ')}`) })));
  const failedJoins = joins.filter((j) => j.r.exitCode !== 0);
  if (failedJoins.length) {
    for (const j of failedJoins) note(`${c.red('launch failed')}: node ${j.s.node} (${j.s.address}) failed to join the Ray cluster: ${(j.r.stderr || j.r.stdout || j.r.error || '').trim().split('\n').slice(-2).join(' | ')}`);
    note('fix: check ssh, the network interface and the Ray version on that node: sparkctl preflight --nodes ' + opts.nodes);
    await rayStopAll();
    throw new LaunchError('', []);
  }
  note(`ray workers joined: ${nf.workers.map((w) => w.name).join(', ') || '(none)'}`);

  // 2. Wait until Ray sees every node and enough GPUs.
  const rayDeadline = Date.now() + 120_000;
  let status: ReturnType<typeof parseRayStatus>;
  for (;;) {
    const st = await ssh(nf, nf.head, 'ray status', { timeoutMs: 20_000 });
    status = st.exitCode === 0 ? parseRayStatus(st.stdout) : undefined;
    if (status && status.nodes >= allNodes(nf).length && status.gpus >= perReplica) break;
    if (Date.now() > rayDeadline || (status && status.nodes >= allNodes(nf).length && status.gpus < perReplica)) {
      note(`${c.red('launch failed')}: the Ray cluster has ${status?.gpus ?? 0} GPUs on ${status?.nodes ?? 0} node(s); TP ${r.profile.parallel.tensor} x PP ${r.profile.parallel.pipeline} needs ${perReplica}`);
      note(`fix: check every node's GPUs (nvidia-smi) and its ray start --num-gpus; sparkctl preflight --nodes ${opts.nodes}`);
      await rayStopAll();
      throw new LaunchError('', []);
    }
    await new Promise((res) => setTimeout(res, 500));
  }
  note(`ray cluster: ${status.nodes} nodes, ${status.gpus} GPUs`);

  // 3. vLLM on the head, in its own session; the key goes through stdin, never argv.
  const logFile = `$HOME/.local/state/sparkctl/logs/${rep.name}.log`;
  const launch = [
    'mkdir -p "$HOME/.local/state/sparkctl/logs"',
    exportLine(headStep.env),
    ...Object.entries(rep.env).map(([k, v]) => `export ${k}=${shellQuote(v)}`),
    key ? 'IFS= read -r VLLM_API_KEY; export VLLM_API_KEY' : ':',
    `setsid nohup ${rep.argv.map(shellQuote).join(' ')} > "${logFile}" 2>&1 < /dev/null & echo $!`,
  ].join('; ');
  const l = await ssh(nf, nf.head, launch, { input: key ? `${key}\n` : undefined });
  const pid = Number(l.stdout.trim().split('\n').pop());
  if (l.exitCode !== 0 || !Number.isInteger(pid)) {
    note(`${c.red('launch failed')}: vLLM did not start on ${nf.head.name}: ${(l.stderr || l.error || '').trim()}`);
    await rayStopAll();
    throw new LaunchError('', []);
  }
  const record: ClusterRecord = { version: 1, profile: r.profile.name, nodesFile: opts.nodes!, head: nf.head.name, pid, port: rep.port, url: `http://${nf.head.address}:${rep.port}`, servedName: servedName(r.profile), logFile, startedAt: new Date().toISOString() };
  const registry = new Registry(stateDir());
  registry.writeCluster(record);

  // 4. The same readiness as on one node: /health and /v1/models, racing the process and the deadline.
  const readyMs = opts.readyTimeout ?? r.profile.server.readyTimeoutSeconds * 1000;
  const t0 = Date.now();
  let lastAliveCheck = 0;
  for (;;) {
    const hh = await http(`${record.url}/health`, { timeoutMs: 2000 });
    if (hh.ok && hh.status === 200) {
      const m = await http(`${record.url}/v1/models`, { timeoutMs: 3000, apiKey: key });
      const listed = m.ok ? servedModels(m.json, m.body) : undefined;
      if (listed?.ok && listed.models.some((d) => d.id === record.servedName)) break;
    }
    let gone = false;
    if (Date.now() - lastAliveCheck > 1000) {
      lastAliveCheck = Date.now();
      gone = (await ssh(nf, nf.head, `kill -0 ${pid}`, { timeoutMs: 10_000 })).exitCode !== 0;
    }
    if (gone || Date.now() - t0 > readyMs) {
      const tail = await ssh(nf, nf.head, `tail -n 40 "${logFile}"`, { timeoutMs: 10_000 });
      const cause = classifyLog(tail.stdout);
      note(`${c.red('launch failed')}: vLLM on ${nf.head.name} ${gone ? 'exited before it was ready' : `was not ready after ${Math.round((Date.now() - t0) / 1000)} s`}`);
      if (cause) note(`  cause: ${cause.cause}\n  fix:   ${cause.fix}`);
      for (const x of tail.stdout.trim().split('\n').slice(-20)) note(c.dim(`  | ${x}`));
      await stopNodes(r.profile.name, { timeout: 10, nodes: opts.nodes });
      throw new LaunchError('', []);
    }
    await new Promise((res) => setTimeout(res, 100));
  }
  say(`${c.green('ready')}: ${r.profile.name} over ${allNodes(nf).length} nodes (${status.gpus} GPUs) in ${formatDuration(Date.now() - started)}: ${record.url}/v1`);
  const target = { ...targetFromUrl(record.url, record.servedName), name: `${r.profile.name} (${nf.head.name})`, apiKey: key, apiKeyEnv: r.profile.server.apiKeyEnv };
  if (opts.prewarm) {
    const w = await prewarm(target, r.profile.prewarm);
    say(`prewarm: ${w.error ?? `warm after ${w.rounds} round(s)`}; ${Object.keys(w.cold).map((n) => `${n} tok ${w.cold[Number(n)]} -> ${w.warm[Number(n)]} ms`).join(', ')}`);
  }
  const p = await probe(target, { ...r.profile.probe, gpuMemoryUtilization: r.profile.engine.gpuMemoryUtilization, gpus: false });
  say(`probe: ${p.state === 'healthy' ? c.green('healthy') : c.red(p.state)} (${p.steps.map((s) => `${s.step} ${s.status}`).join(', ')})`);
  say(`stop with: sparkctl stop ${r.profile.name} --nodes ${opts.nodes}`);
  if (p.state !== 'healthy') throw new ProblemsFound('the deep probe failed');
}

export async function stopNodes(name: string | undefined, opts: { timeout: number; nodes?: string; json?: boolean; all?: boolean }): Promise<void> {
  const nf = loadNodesFile(opts.nodes!);
  const registry = new Registry(stateDir());
  // Nothing recorded under that name: Ray is still stopped on every node.
  const record = name ? registry.clusters().find((x) => x.profile === name) : undefined;
  const out: string[] = [];
  if (record) {
    // setsid made vLLM a session and group leader: signal the whole group, wait, escalate.
    const t = opts.timeout;
    const r = await ssh(nf, nf.head, `kill -TERM -- -${record.pid} 2>/dev/null; for i in $(seq 1 ${t * 10}); do kill -0 -- -${record.pid} 2>/dev/null || exit 0; sleep 0.1; done; kill -KILL -- -${record.pid} 2>/dev/null; exit 3`, { timeoutMs: (t + 15) * 1000 });
    out.push(`vLLM on ${nf.head.name}: ${r.exitCode === 0 ? 'stopped (SIGTERM, drained)' : r.exitCode === 3 ? `killed after ${t} s` : `could not be signalled (${(r.stderr || r.error || '').trim()})`}`);
  } else out.push(`vLLM: nothing recorded${name ? ` for ${name}` : ''}`);
  const stops = await Promise.all(allNodes(nf).map(async (n) => ({ n, r: await ssh(nf, n, 'ray stop', { timeoutMs: 60_000 }) })));
  for (const { n, r } of stops) out.push(`ray on ${n.name}: ${r.exitCode === 0 ? 'stopped' : `ray stop failed (${(r.stderr || r.error || '').trim().split('\n').pop()})`}`);
  if (name) registry.removeCluster(name);
  if (opts.json) say(envelope('stop-nodes', { steps: out }));
  else for (const l of out) say(l);
  if (stops.some((s) => s.r.exitCode !== 0)) throw new ProblemsFound('Ray did not stop on every node');
}

interface RemoteReport {
  node: string;
  ok: boolean;
  error?: string;
  report?: { platform: string; summary: Record<string, number>; versions: Record<string, string | number | undefined>; checks: Array<{ id: string; status: string; observed: string; fix: string | null }> };
  iface?: string;
  model?: string;
}

export async function preflightNodes(opts: { nodes?: string; profile?: string; platform: string; json?: boolean; strict?: boolean; set?: string[]; profiles?: string }): Promise<void> {
  const nf = loadNodesFile(opts.nodes!);
  const r = opts.profile ? resolveForNodes(opts.profile, { profiles: opts.profiles, set: opts.set ?? [], platform: opts.platform === 'auto' ? undefined : opts.platform }, nf) : undefined;
  const modelPath = r?.profile.model.path;
  const args = ['preflight', '--json', '--platform', opts.platform, ...(opts.profile ? ['--profile', opts.profile] : []), ...(opts.set ?? []).flatMap((s) => ['--set', s])];
  const started = Date.now();
  const reports: RemoteReport[] = await Promise.all(
    allNodes(nf).map(async (n): Promise<RemoteReport> => {
      const [pf, iface, model] = await Promise.all([
        ssh(nf, n, `${nf.sparkctl} ${args.map(shellQuote).join(' ')}`, { timeoutMs: 60_000 }),
        ssh(nf, n, `cat /sys/class/net/${shellQuote(n.interface)}/operstate`, { timeoutMs: 30_000 }),
        modelPath ? ssh(nf, n, `test -f ${shellQuote(modelPath + '/config.json')} && echo present || echo missing`, { timeoutMs: 30_000 }) : Promise.resolve(undefined),
      ]);
      if (pf.exitCode === null || pf.exitCode === 255) return { node: n.name, ok: false, error: `ssh ${n.sshUser}@${n.address}: ${(pf.stderr || pf.error || 'failed').trim().split('\n').pop()}` };
      let report;
      try {
        report = JSON.parse(pf.stdout);
      } catch {
        return { node: n.name, ok: false, error: `sparkctl on ${n.name} did not answer JSON (is it installed there? nodes file: sparkctl: ${nf.sparkctl}): ${(pf.stderr || pf.stdout).trim().split('\n').pop()}` };
      }
      return { node: n.name, ok: true, report, iface: iface.exitCode === 0 ? iface.stdout.trim() : undefined, model: model ? model.stdout.trim() : undefined };
    }),
  );
  // Cross-node checks: one stack everywhere; the named interface; the model on every node; Ray.
  const cross: Array<{ id: string; status: 'pass' | 'warn' | 'fail' | 'skip'; observed: string; fix?: string }> = [];
  const reached = reports.filter((x) => x.ok);
  for (const key of ['driver', 'cuda', 'nccl', 'torch', 'vllm'] as const) {
    const vals = new Map<string, string[]>();
    for (const x of reached) {
      const v = String(x.report!.versions?.[key] ?? 'none');
      vals.set(v, [...(vals.get(v) ?? []), x.node]);
    }
    if (vals.size <= 1) cross.push({ id: `nodes.same-${key}`, status: reached.length ? 'pass' : 'skip', observed: reached.length ? `${[...vals.keys()][0]} on every node` : 'no node reached' });
    else {
      const majority = [...vals.entries()].sort((a, b) => b[1].length - a[1].length)[0]!;
      const odd = [...vals.entries()].filter(([v]) => v !== majority[0]).map(([v, ns]) => `${ns.join(', ')} has ${v}`);
      cross.push({ id: `nodes.same-${key}`, status: 'fail', observed: `${odd.join('; ')} (others: ${majority[0]})`, fix: `install the same ${key} on every node: NCCL and Ray fail in odd ways across versions` });
    }
  }
  const badIface = reached.filter((x) => x.iface !== 'up' && x.iface !== 'unknown');
  cross.push(badIface.length ? { id: 'nodes.interface', status: 'fail', observed: badIface.map((x) => `${x.node}: ${allNodes(nf).find((n) => n.name === x.node)!.interface} ${x.iface ?? 'does not exist'}`).join('; '), fix: 'set interface: in the nodes file to the NIC that carries NCCL traffic (ip -br link)' } : { id: 'nodes.interface', status: reached.length ? 'pass' : 'skip', observed: 'the named interface is up on every node' });
  if (modelPath) {
    const missing = reached.filter((x) => x.model !== 'present');
    cross.push(missing.length ? { id: 'nodes.model-path', status: 'fail', observed: `${modelPath}/config.json missing on ${missing.map((x) => x.node).join(', ')}`, fix: `copy the model to ${modelPath} on every node (same path everywhere)` } : { id: 'nodes.model-path', status: 'pass', observed: `${modelPath} on every node` });
  }
  const need = r ? r.profile.parallel.tensor * r.profile.parallel.pipeline : 0;
  const total = reached.reduce((a, x) => a + Number(x.report!.versions?.gpus ?? 0), 0);
  if (need) cross.push(total >= need ? { id: 'nodes.gpus', status: 'pass', observed: `${total} GPUs over ${reached.length} nodes (needs ${need})` } : { id: 'nodes.gpus', status: 'fail', observed: `${total} GPUs over ${reached.length} reachable nodes; TP x PP needs ${need}`, fix: 'add nodes, or fix the ones whose GPUs are missing' });
  const rs = await ssh(nf, nf.head, 'ray status', { timeoutMs: 20_000 });
  const ray = rs.exitCode === 0 ? parseRayStatus(rs.stdout) : undefined;
  cross.push(!ray ? { id: 'ray.cluster', status: 'skip', observed: 'no Ray cluster running yet (serve --nodes starts it)' } : ray.nodes >= allNodes(nf).length && ray.gpus >= need ? { id: 'ray.cluster', status: 'pass', observed: `${ray.nodes} nodes, ${ray.gpus} GPUs` } : { id: 'ray.cluster', status: 'fail', observed: `ray status shows ${ray.nodes} nodes and ${ray.gpus} GPUs; needs ${allNodes(nf).length} nodes and ${need} GPUs`, fix: 'ray stop on every node, then sparkctl serve --nodes again' });

  const anyFail = reports.some((x) => !x.ok || (x.report!.summary.fail ?? 0) > 0) || cross.some((x) => x.status === 'fail');
  const anyWarn = reports.some((x) => x.ok && (x.report!.summary.warn ?? 0) > 0) || cross.some((x) => x.status === 'warn');
  if (opts.json) {
    say(envelope('preflight-nodes', { nodes: reports.map((x) => ({ node: x.node, reached: x.ok, error: x.error ?? null, platform: x.report?.platform ?? null, summary: x.report?.summary ?? null, versions: x.report?.versions ?? null, failed: x.report?.checks.filter((k) => k.status === 'fail').map((k) => ({ id: k.id, observed: k.observed, fix: k.fix })) ?? [] })), cross, wallMs: Date.now() - started }));
  } else {
    say(c.bold(`preflight over ${allNodes(nf).length} nodes (${opts.nodes})`));
    say(table(reports.map((x) => [x.node, x.ok ? `${x.report!.summary.fail} failed, ${x.report!.summary.warn} warnings, ${x.report!.summary.pass} passed` : c.red(`unreachable: ${x.error}`), x.ok ? x.report!.checks.filter((k) => k.status === 'fail').map((k) => k.id).join(', ') : ''])));
    say('');
    say(c.bold('across nodes'));
    for (const x of cross) say(`  ${statusMark(x.status)}  ${x.id}  ${x.observed}${x.fix && x.status !== 'pass' ? `\n        fix: ${x.fix}` : ''}`);
    say(`\n${Date.now() - started} ms`);
  }
  if (anyFail || (opts.strict && anyWarn)) throw new ExitWith(ExitCode.problems);
}

/** LeaderWorkerSet (as llm-d and KServe deploy multi-node vLLM): leader = Ray head + vllm serve; workers = ray start --block. */
export function leaderWorkerSet(r: Resolved, opts: { image: string; nodes: number; namespace: string }): string {
  const p = r.profile;
  const perNode = p.parallel.gpusPerNode ?? 8;
  const need = p.parallel.tensor * p.parallel.pipeline;
  if (opts.nodes * perNode < need) throw new UsageError(`--nodes ${opts.nodes} x ${perNode} GPUs = ${opts.nodes * perNode}; TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} needs ${need}`, [`--nodes ${Math.ceil(need / perNode)}`]);
  const shape: HostShape = { gpus: perNode, gpusSource: 'nodes', gpuMemoryBytes: r.platform.gpu.memoryGiB * GIB, multiNode: true, nodes: opts.nodes, gpusPerNode: perNode };
  const rep = renderReplicas(p, shape, { executable: ['vllm'], stateDir: '/tmp' })[0]!;
  const args = rep.argv.map((a, i, all) => (all[i - 1] === '--host' ? '0.0.0.0' : a));
  const name = `vllm-${p.name.replace(/[^a-z0-9-]/g, '-')}`;
  const port = p.server.port;
  const resources = { limits: { 'nvidia.com/gpu': perNode }, requests: { 'nvidia.com/gpu': perNode } };
  const shm = { name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: `${r.platform.host.shmMinGiB}Gi` } };
  const model = p.model.path ? { name: 'model', hostPath: { path: p.model.path, type: 'Directory' } } : { name: 'hf-cache', hostPath: { path: '/var/cache/huggingface', type: 'DirectoryOrCreate' } };
  const mounts = [{ name: 'dshm', mountPath: '/dev/shm' }, p.model.path ? { name: 'model', mountPath: p.model.path, readOnly: true } : { name: 'hf-cache', mountPath: '/root/.cache/huggingface' }];
  const env = [
    { name: 'NCCL_SOCKET_IFNAME', value: 'eth0' },
    { name: 'GLOO_SOCKET_IFNAME', value: 'eth0' },
    { name: 'VLLM_HOST_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
    ...(p.server.apiKeyEnv ? [{ name: 'VLLM_API_KEY', valueFrom: { secretKeyRef: { name: `${name}-api-key`, key: 'key' } } }] : []),
  ];
  const leaderCmd = [
    `ray start --head --port=6379 --node-ip-address=$(VLLM_HOST_IP) --num-gpus=${perNode}`,
    // Wait for every worker pod's GPUs before vLLM asks Ray for placement.
    `until [ "$(ray status 2>/dev/null | grep -c ' node_')" -ge "$LWS_GROUP_SIZE" ]; do echo waiting for ray workers; sleep 5; done`,
    `exec ${args.map(shellQuote).join(' ')}`,
  ].join(' && ');
  const lws = {
    apiVersion: 'leaderworkerset.x-k8s.io/v1',
    kind: 'LeaderWorkerSet',
    metadata: { name, namespace: opts.namespace, labels: { 'app.kubernetes.io/managed-by': 'sparkctl' } },
    spec: {
      replicas: 1,
      leaderWorkerTemplate: {
        size: opts.nodes,
        restartPolicy: 'RecreateGroupOnPodRestart',
        leaderTemplate: {
          metadata: { labels: { role: 'leader' } },
          spec: {
            containers: [{
              name: 'vllm-leader', image: opts.image, command: ['sh', '-c', leaderCmd], env, resources,
              ports: [{ name: 'http', containerPort: port }],
              startupProbe: { httpGet: { path: '/health', port: 'http' }, periodSeconds: 10, failureThreshold: Math.ceil(p.server.readyTimeoutSeconds / 10) },
              readinessProbe: { httpGet: { path: '/health', port: 'http' }, periodSeconds: 10 },
              livenessProbe: { httpGet: { path: '/health', port: 'http' }, periodSeconds: 10, failureThreshold: 6 },
              volumeMounts: mounts,
            }],
            volumes: [shm, model],
          },
        },
        workerTemplate: {
          spec: {
            containers: [{ name: 'vllm-worker', image: opts.image, command: ['sh', '-c', `ray start --address=$(LWS_LEADER_ADDRESS):6379 --node-ip-address=$(VLLM_HOST_IP) --num-gpus=${perNode} --block`], env, resources, volumeMounts: mounts }],
            volumes: [shm, model],
          },
        },
      },
    },
  };
  const service = { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: opts.namespace }, spec: { selector: { 'leaderworkerset.sigs.k8s.io/name': name, role: 'leader' }, ports: [{ name: 'http', port, targetPort: port }] } };
  return `# sparkctl k8s ${p.name} --nodes ${opts.nodes}: TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} = ${need} GPUs, ${opts.nodes} pods of ${perNode} GPUs (needs the LeaderWorkerSet controller)\n` + [lws, service].map((d) => yaml.dump(d, { lineWidth: 400, noRefs: true })).join('---\n');
}
