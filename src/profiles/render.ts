// A profile -> the argv and environment of each `vllm serve` replica. Small pure helpers, one per section.
import { join } from 'node:path';
import type { Profile } from './schema.js';
import { compareVersions } from './versions.js';
import { resolveReplicas, type HostShape } from './validate.js';
import { checkArgv, optionStatus, targetVersion, type FlagProblem } from './vllm-flags.js';

const atLeast = (v: string, min: string) => compareVersions(v, min) >= 0;

function modelArg(p: Profile): string {
  return p.model.path ?? p.model.id!;
}

/** The name clients send as "model" and /v1/models lists. */
export function servedName(p: Profile): string {
  return p.model.servedName ?? modelArg(p);
}

export function modelArgs(p: Profile): string[] {
  const out: string[] = [];
  if (p.model.servedName && p.model.servedName !== modelArg(p)) out.push('--served-model-name', p.model.servedName);
  // A revision names a Hub commit; a local folder has none (vLLM would ignore it there).
  if (p.model.revision && !p.model.path) out.push('--revision', p.model.revision);
  return out;
}

/**
 * How a profile spreads over nodes. `ray`: Ray's cluster places the workers. `native`: vLLM's own
 * multi-node launch (`--nnodes/--node-rank/--master-addr/--master-port`, `--headless` on the ranks
 * that serve no API), added in vLLM 0.12 (arg_utils.py, ParallelConfig.nnodes): the default for a
 * multi-node profile with executor mp where the target vLLM has it; Ray before that.
 */
export function clusterExecutor(p: Profile): 'ray' | 'native' | undefined {
  if (p.parallel.executor === 'ray') return 'ray';
  if (p.parallel.nodes <= 1) return undefined;
  return nativeMultiNode(p.engine.vllmVersion) ? 'native' : 'ray';
}

const nativeMultiNode = (vllmVersion: string) => optionStatus(targetVersion(vllmVersion), '--nnodes') === 'yes';

export function parallelArgs(p: Profile): string[] {
  const out = [
    '--tensor-parallel-size',
    String(p.parallel.tensor),
    '--pipeline-parallel-size',
    String(p.parallel.pipeline),
  ];
  const ex = clusterExecutor(p);
  if (ex) out.push('--distributed-executor-backend', ex === 'ray' ? 'ray' : 'mp');
  return out;
}

/**
 * A boolean engine flag: --x, or its --no-x twin where the target vLLM has one (from vLLM's source:
 * --no-enable-prefix-caching and --no-enable-chunked-prefill exist in 0.9, prefix caching was a
 * BooleanOptionalAction from 0.7). Only where no --no- form is known (before 0.7 / before the
 * tables) a false is left to vLLM's default, which was off there.
 */
function boolFlag(version: string, flag: string, value: boolean | undefined): string[] {
  if (value === undefined) return [];
  if (value) return [flag];
  const no = flag.replace(/^--/, '--no-');
  const st = optionStatus(version, no);
  return st === 'yes' || st === 'maybe' ? [no] : [];
}

export function engineArgs(p: Profile): string[] {
  const e = p.engine;
  const v = targetVersion(e.vllmVersion);
  const out: string[] = [];
  if (e.dtype !== 'auto') out.push('--dtype', e.dtype);
  if (e.maxModelLen !== undefined) out.push('--max-model-len', String(e.maxModelLen));
  if (e.kvCacheMemoryBytes !== undefined) out.push('--kv-cache-memory-bytes', String(e.kvCacheMemoryBytes));
  if (e.enforceEager) out.push('--enforce-eager');
  out.push('--gpu-memory-utilization', String(e.gpuMemoryUtilization));
  if (e.kvCacheDtype !== 'auto') out.push('--kv-cache-dtype', e.kvCacheDtype);
  if (e.quantization) out.push('--quantization', e.quantization);
  out.push(...boolFlag(v, '--enable-chunked-prefill', e.enableChunkedPrefill));
  out.push(...boolFlag(v, '--enable-prefix-caching', e.enablePrefixCaching));
  if (e.maxNumSeqs !== undefined) out.push('--max-num-seqs', String(e.maxNumSeqs));
  if (e.maxNumBatchedTokens !== undefined) out.push('--max-num-batched-tokens', String(e.maxNumBatchedTokens));
  if (e.blockSize !== undefined) out.push('--block-size', String(e.blockSize));
  // vLLM 0.10.1 turned request logging off by default and added --enable-log-requests; before it,
  // requests were logged unless --disable-log-requests (accepted, deprecated, through 0.16; gone by 0.25).
  if (atLeast(v, '0.10.1')) {
    if (e.logRequests) out.push('--enable-log-requests');
  } else if (!e.logRequests) out.push('--disable-log-requests');
  if (e.reasoningParser) {
    // --enable-reasoning was needed before 0.9, deprecated in 0.9, removed in 0.10
    if (!atLeast(v, '0.9.0')) out.push('--enable-reasoning');
    out.push('--reasoning-parser', e.reasoningParser);
  }
  if (e.toolCallParser) out.push('--enable-auto-tool-choice', '--tool-call-parser', e.toolCallParser);
  return out;
}

/**
 * vLLM's CPU backend reads the legacy VLLM_CPU_KVCACHE_SPACE (whole GiB) after the flags and lets it
 * win over --kv-cache-memory-bytes without a word (vllm/platforms/cpu.py). With the size in the
 * profile, the variable an operator's shell or a CI image exports must not reach the server.
 */
function cpuKvOverride(p: Profile): string[] {
  return p.engine.kvCacheMemoryBytes !== undefined ? ['VLLM_CPU_KVCACHE_SPACE'] : [];
}

/** Behind the router the replicas listen on loopback only: the router owns the public port. */
export function routed(p: Profile): boolean {
  return p.router?.enabled === true;
}

/** Where replica i listens: server.port + i, or (behind the router) router.replicaPort + i on 127.0.0.1. */
export function replicaAddress(p: Profile, replica: number): { host: string; port: number } {
  if (!routed(p)) return { host: p.server.host, port: p.server.port + replica };
  return { host: '127.0.0.1', port: (p.router!.replicaPort ?? p.server.port + 1) + replica };
}

/** A Unix socket's path holds at most 107 bytes (sun_path is 108 with its NUL): a longer one cannot be bound. */
export const MAX_SOCKET_PATH = 107;

/**
 * How the router reaches its replicas. On a Unix socket (vLLM's --uds) where it can: the socket is in
 * the router's folder (<state>/router/<profile>, 0700, made and checked by sparkctl before a replica
 * starts: engine/runtime/replica-socket.ts), so only sparkctl's user can connect to a replica, where a
 * loopback port can be reached by any local user past the router's key and admission, and bound by
 * one when a replica dies and frees it. vLLM 0.11 added --uds (vllm-source-facts: absent in 0.9 and
 * 0.10; api_server.py binds the socket INSTEAD of the TCP port). Otherwise loopback TCP, with why.
 */
export type ReplicaHop = { uds: true; dir: string } | { uds: false; why: string };

export function replicaHop(
  p: Profile,
  stateDir: string,
  replicas: number,
  _runtime?: 'host' | 'container',
): ReplicaHop {
  if (!routed(p))
    return { uds: false, why: 'no router: the server listens on server.host:server.port for its clients' };
  const tcp = (why: string): ReplicaHop => ({
    uds: false,
    why: `the replicas listen on loopback ports (router.replicaPort), which any local user can connect to, past the router's key: ${why}`,
  });
  if (p.router?.replicaSocket === false) return tcp('router.replicaSocket is false in the profile');
  if (p.parallel.nodes > 1 || p.parallel.executor === 'ray')
    return tcp("a replica over nodes is reached on its head node's address");
  const v = targetVersion(p.engine.vllmVersion);
  if (optionStatus(v, '--uds') !== 'yes')
    return tcp(
      `vLLM ${v} has no --uds (added in 0.11); a newer vLLM listens on a Unix socket only sparkctl's user can open`,
    );
  const dir = join(stateDir, 'router', p.name);
  const longest = replicaSocketPath(stateDir, p, Math.max(0, replicas - 1));
  if (Buffer.byteLength(longest) > MAX_SOCKET_PATH)
    return tcp(
      `the socket's path (${longest}) is longer than the ${MAX_SOCKET_PATH} bytes a Unix socket's path holds: a shorter state folder (SPARKCTL_STATE_DIR) or profile name`,
    );
  return { uds: true, dir };
}

/** Replica i's socket behind the router: <state>/router/<profile>/<replica name>.sock. */
export function replicaSocketPath(stateDir: string, p: Pick<Profile, 'name'>, replica: number): string {
  return join(stateDir, 'router', p.name, `${p.name}-${replica}.sock`);
}

function serverArgs(p: Profile, replica: number, uds?: string): string[] {
  const a = replicaAddress(p, replica);
  const drain = shutdownTimeoutArg(p);
  // --uds: vLLM binds the socket and no TCP port (--host/--port would be ignored, so they are not written)
  const listen = uds ? ['--uds', uds] : ['--port', String(a.port), '--host', a.host];
  return [...listen, ...(drain ? ['--shutdown-timeout', String(drain)] : []), ...sleepModeArgs(p)];
}

/**
 * server.sleepMode: --enable-sleep-mode where the target vLLM's table has it (every table from 0.9;
 * validation refuses the setting elsewhere, so an unknown flag never stops a start).
 */
function sleepModeArgs(p: Profile): string[] {
  if (!p.server.sleepMode) return [];
  const st = optionStatus(p.engine.vllmVersion, '--enable-sleep-mode');
  return st === 'yes' || st === 'maybe' ? ['--enable-sleep-mode'] : [];
}

/**
 * The routes /sleep, /wake_up and /is_sleeping exist only with VLLM_SERVER_DEV_MODE=1
 * (vllm/entrypoints/serve/sleep/api_router.py, attach_router).
 */
function sleepModeEnv(p: Profile): Record<string, string> {
  return sleepModeArgs(p).length ? { VLLM_SERVER_DEV_MODE: '1' } : {};
}

/** The --shutdown-timeout an argv carries (the last one wins, as in argparse; extraArgs included); 0 when none. */
export function shutdownTimeoutOf(argv: readonly string[]): number {
  let s = 0;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!.replace(/_/g, '-');
    const v =
      a === '--shutdown-timeout'
        ? argv[i + 1]
        : a.startsWith('--shutdown-timeout=')
          ? a.slice('--shutdown-timeout='.length)
          : undefined;
    if (v !== undefined && /^\d+$/.test(v)) s = Number(v);
  }
  return s;
}

/**
 * The drain vLLM will do on SIGTERM: server.shutdownTimeoutSeconds where the target vLLM's table has
 * --shutdown-timeout for certain (0.25, 0.28 and between); 0 where it does not (vLLM then aborts
 * in-flight requests, and an unknown flag would stop it from starting at all).
 */
export function shutdownTimeoutArg(p: Profile): number {
  const s = p.server.shutdownTimeoutSeconds;
  return s > 0 && optionStatus(p.engine.vllmVersion, '--shutdown-timeout') === 'yes' ? s : 0;
}

/** The vLLM arguments of one replica (after `serve MODEL`), extraArgs included. */
export function vllmArgs(p: Profile, replica = 0, uds?: string): string[] {
  return [...modelArgs(p), ...parallelArgs(p), ...engineArgs(p), ...serverArgs(p, replica, uds), ...p.engine.extraArgs];
}

/** Every rendered flag and value checked against the target vLLM's table (vllm-flags.ts). */
export function checkRendered(p: Profile): FlagProblem[] {
  return checkArgv(vllmArgs(p, 0), targetVersion(p.engine.vllmVersion));
}

export interface ReplicaPlan {
  index: number;
  name: string;
  argv: string[];
  env: Record<string, string>;
  /** Variables taken from sparkctl's own environment at launch; shown by reference, never by value. */
  envFrom: Record<string, string>;
  /** Variables removed from the inherited environment (one that would silently override a rendered flag). */
  unsetEnv: string[];
  /** loopback/host port; behind a router on a socket (uds), the port it would have had, not listened on */
  port: number;
  /** behind a router where vLLM has --uds: the Unix socket it listens on instead of a port (replicaHop) */
  uds?: string;
  gpus: number[];
  logFile: string;
  /**
   * the folder of vLLM's start caches its env points into (engine/caches.ts); a container mounts it at the same path
   */
  cacheDir?: string;
}

interface RenderOptions {
  /** argv prefix that runs vLLM: ['vllm'] or [node, sparkctl.js, 'sim'] */
  executable: string[];
  stateDir: string;
  /** arguments appended only for the simulator (its own knobs) */
  tail?: string[];
  /** the vLLM that runs is a CPU build (cpuBuild of its version) */
  cpuBuild?: boolean;
  /** how the replicas run (host process or container): decides with the version whether they listen on a socket */
  runtime?: 'host' | 'container';
}

/** A CPU build of vLLM, by its version's local label: 0.27.2.dev0+g6adad0876.cpu, 0.11.0+cpu. */
export function cpuBuild(version: string | undefined): boolean {
  const local = version?.split('+')[1];
  return local !== undefined && local.toLowerCase().split('.').includes('cpu');
}

/**
 * vLLM's CPU backend binds each server's OpenMP threads to cores it picks by itself, the same ones
 * for every server on the host (seen: core 0 for both of two replicas on 2 cores, the second's worker
 * ran 1.4 s in 53 s). Several CPU replicas on one host share the cores by the kernel's scheduler
 * instead (nobind), unless the profile sets the binding itself.
 */
function cpuBindEnv(p: Profile, replicas: number, cpu: boolean | undefined): Record<string, string> {
  if (!cpu || replicas < 2 || p.parallel.nodes > 1 || 'VLLM_CPU_OMP_THREADS_BIND' in p.env) return {};
  return { VLLM_CPU_OMP_THREADS_BIND: 'nobind' };
}

export function instanceName(p: Profile, replica: number): string {
  return `${p.name}-${replica}`;
}

export function renderReplicas(p: Profile, host: HostShape, opts: RenderOptions): ReplicaPlan[] {
  const replicas = resolveReplicas(p, host);
  const perReplica = p.parallel.tensor * p.parallel.pipeline;
  const multiNode = p.parallel.nodes > 1 || p.parallel.executor === 'ray';
  const plans: ReplicaPlan[] = [];
  const hop = replicaHop(p, opts.stateDir, replicas, opts.runtime);
  for (let i = 0; i < replicas; i++) {
    const first = p.parallel.firstGpu + i * perReplica;
    // Multi-node: Ray places the workers; the head sees only its own GPUs.
    const gpus = Array.from(
      { length: multiNode ? Math.min(perReplica, host.gpusPerNode ?? host.gpus) : perReplica },
      (_, k) => first + k,
    );
    const env: Record<string, string> = { ...p.env, ...cpuBindEnv(p, replicas, opts.cpuBuild), ...sleepModeEnv(p) };
    if (!multiNode) env.CUDA_VISIBLE_DEVICES = gpus.join(',');
    const envFrom: Record<string, string> = {};
    const unsetEnv = cpuKvOverride(p);
    if (p.server.apiKeyEnv) envFrom.VLLM_API_KEY = p.server.apiKeyEnv;
    const name = instanceName(p, i);
    const uds = hop.uds ? replicaSocketPath(opts.stateDir, p, i) : undefined;
    plans.push({
      index: i,
      name,
      argv: [...opts.executable, 'serve', modelArg(p), ...vllmArgs(p, i, uds), ...(opts.tail ?? [])],
      env,
      envFrom,
      unsetEnv,
      port: replicaAddress(p, i).port,
      ...(uds ? { uds } : {}),
      gpus,
      logFile: join(opts.stateDir, 'logs', `${name}.log`),
    });
  }
  return plans;
}
