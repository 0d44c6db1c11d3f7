// Cross-field rules over a parsed profile and the host it is meant for. Every problem at once.
import { SPARK_MAX_SHARE } from './colocate.js';
import { SHIPPED_PLATFORMS } from './shipped-platforms.js';
import { CONTROL } from '../util/control.js';
import { optionStatus } from './vllm-flags.js';
import type { Platform, Profile } from './schema.js';
import { isSecretName } from '../util/redact.js';
import type { Problem } from './problem.js';
import { planMemory, GIB } from './planner.js';
// the memory rules read the flags of extraArgs too (the share, the KV bytes), as the plan and vLLM do
import { memorySettings } from './serve-args.js';
import { compareVersions } from './versions.js';
import type { ModelFacts } from '../model/facts.js';
import { factsFromProfile } from '../model/merge.js';
import { commandLine, formatBytes } from '../output/format.js';

export interface HostShape {
  gpus: number;
  /** flag: --gpus; detected: read from the host; platform: assumed from the baseline */
  gpusSource: 'flag' | 'detected' | 'platform' | 'nodes';
  gpuMemoryBytes: number;
  /** the least free memory of any GPU, when read from the host (another process may hold some) */
  gpuMemoryFreeBytes?: number;
  computeCapability?: string;
  gpuName?: string;
  /** the GPUs' model and memory were read from this host (nvidia-smi), whatever --gpus says of the count */
  read?: boolean;
  /** the per-GPU memory is --gpu-memory's, not the one read */
  memoryFlag?: boolean;
  /** true when a nodes file drives a multi-node launch */
  multiNode?: boolean;
  nodes?: number;
  gpusPerNode?: number;
}

const divisors = (n: number) => Array.from({ length: n }, (_, i) => i + 1).filter((d) => n % d === 0);

export function resolveReplicas(p: Profile, host: HostShape): number {
  if (p.parallel.replicas !== 'auto') return p.parallel.replicas;
  if (p.parallel.nodes > 1 || p.parallel.executor === 'ray') return 1;
  const per = p.parallel.tensor * p.parallel.pipeline;
  return Math.max(1, Math.floor((host.gpus - p.parallel.firstGpu) / per));
}

/**
 * Cross-field rules. With a host: every rule. Without one (the profile alone, e.g. while its
 * schema problems are being reported): only the rules that do not depend on the host, so one
 * report can hold unknown keys, bad values and cross-field problems together.
 */
export function validateProfile(p: Profile, host?: HostShape, facts?: ModelFacts): Problem[] {
  const out: Problem[] = textProblems(p);
  const err = (path: string, message: string, fix?: string) => out.push({ path, message, severity: 'error', fix });
  const warn = (path: string, message: string, fix?: string) => out.push({ path, message, severity: 'warning', fix });
  // The model's facts (config.json with the profile's overrides); without any, the rules that need them wait.
  const m = facts ?? factsFromProfile(p.model);
  if (m) modelRules(p, m, err, warn);
  hostFreeRules(p, err);
  hostRules(p, host, err, warn, m);
  // Memory: only meaningful for a parallel layout that is valid.
  if (
    m &&
    host &&
    !out.some(
      (x) => x.severity === 'error' && (x.path.startsWith('parallel') || x.path === 'engine.gpuMemoryUtilization'),
    )
  )
    memoryRules(memorySettings(p).profile, host, m, err, warn);
  return out;
}

type Say = (path: string, message: string, fix?: string) => void;

function modelRules(p: Profile, m: ModelFacts, err: Say, warn: Say): void {
  const { tensor: tp, pipeline: pp } = p.parallel;
  if (m.attentionHeads % tp !== 0) {
    err(
      'parallel.tensor',
      `${tp} does not divide ${m.attentionHeads} attention heads`,
      `use one of ${divisors(m.attentionHeads).join(', ')}`,
    );
  } else if (m.mla) {
    // MLA keeps one latent per token that every TP rank holds whole: no KV-head rule applies.
  } else if (tp > m.kvHeads) {
    if (tp % m.kvHeads !== 0)
      err(
        'parallel.tensor',
        `${tp} is not a multiple of the ${m.kvHeads} KV heads`,
        `use one of ${divisors(m.attentionHeads)
          .filter((d) => d <= m.kvHeads || d % m.kvHeads === 0)
          .join(', ')}`,
      );
    else
      warn(
        'parallel.tensor',
        `${tp} is above the ${m.kvHeads} KV heads: vLLM replicates each KV head on ${tp / m.kvHeads} GPUs, so the KV cache per token does not shrink past TP ${m.kvHeads}`,
      );
  } else if (m.kvHeads % tp !== 0) {
    err(
      'parallel.tensor',
      `${tp} does not divide ${m.kvHeads} KV heads`,
      `use one of ${divisors(m.kvHeads).join(', ')}`,
    );
  }
  if (pp > m.layers) err('parallel.pipeline', `${pp} stages for ${m.layers} layers`, `at most ${m.layers}`);

  const maxLen = p.engine.maxModelLen;
  if (maxLen !== undefined && maxLen > m.maxContext) {
    err(
      'engine.maxModelLen',
      `${maxLen} is above the model's context of ${m.maxContext}`,
      `--set engine.maxModelLen=${m.maxContext}`,
    );
  }
}

function hostFreeRules(p: Profile, err: Say): void {
  const u = p.engine.gpuMemoryUtilization;
  if (!(u > 0 && u <= 1)) err('engine.gpuMemoryUtilization', `${u} is not in (0, 1]`, 'a share such as 0.9');

  for (const k of Object.keys(p.env)) {
    if (isSecretName(k))
      err(
        `env.${k}`,
        'looks like a secret; a profile is not the place for one',
        `remove it; put the API key's variable name in server.apiKeyEnv and set the variable in the environment or a systemd EnvironmentFile`,
      );
  }
  if (p.engine.kvCacheMemoryBytes !== undefined && p.env.VLLM_CPU_KVCACHE_SPACE !== undefined) {
    err(
      'env.VLLM_CPU_KVCACHE_SPACE',
      'on the CPU backend this variable silently overrides engine.kvCacheMemoryBytes',
      'keep one: engine.kvCacheMemoryBytes (bytes) is the one sparkctl renders',
    );
  }
  if (p.server.sleepMode) {
    const st = optionStatus(p.engine.vllmVersion, '--enable-sleep-mode');
    if (st === 'no' || st === 'unknown')
      err(
        'server.sleepMode',
        `vLLM ${p.engine.vllmVersion} has no --enable-sleep-mode (its table ${st === 'no' ? 'lacks it' : 'does not reach that version'})`,
        'set engine.vllmVersion to 0.9.0 or later, or server.sleepMode: false',
      );
  }
  if (p.engine.extraArgs.some((a) => a === '--api-key' || a.startsWith('--api-key='))) {
    err(
      'engine.extraArgs',
      '--api-key would put the key in argv, visible to every user in ps',
      'set server.apiKeyEnv to the name of the variable that holds the key',
    );
  }
  // vLLM's other secret-valued option: the Hub token would be in argv (ps), the registry entry's argv (state) and
  // restart's diff
  if (p.engine.extraArgs.some((a) => a === '--hf-token' || a.startsWith('--hf-token='))) {
    err(
      'engine.extraArgs',
      "--hf-token would put the Hub token in argv, visible to every user in ps, and in sparkctl's state",
      'remove it; set HF_TOKEN in the environment (or a systemd EnvironmentFile): vLLM and huggingface_hub read it there',
    );
  }
}

/** On a host with fewer GPUs than one replica needs, the largest TP that fits it and the heads (pipeline 1). */
function smallerTp(p: Profile, gpus: number, m?: ModelFacts): string | undefined {
  if (!m || p.parallel.pipeline > 1) return undefined;
  const tp = divisors(m.attentionHeads)
    .filter((d) => d <= gpus && (m.mla || m.kvHeads % d === 0 || d % m.kvHeads === 0))
    .pop();
  return tp
    ? `--set parallel.tensor=${tp}, or keep TP ${p.parallel.tensor} over nodes: sparkctl plan ${p.name} --nodes FILE`
    : undefined;
}

/**
 * On unified memory (a DGX Spark: the profile's platform says so, or the host's GPU is a GB10) the servers
 * together may take at most SPARK_MAX_SHARE of the pool: the OS, the page cache holding the model's files and
 * every other process live in the rest. One server asking more is refused here, before anything starts,
 * instead of passing alone and then refusing every neighbour (the co-location rule) or stalling the box.
 */
function unifiedShareRule(p: Profile, host: HostShape | undefined, err: Say): void {
  const byPlatform =
    p.platform !== undefined && SHIPPED_PLATFORMS.find((pl) => pl.name === p.platform)?.gpu.unifiedMemory === true;
  const byHost = /GB10/i.test(host?.gpuName ?? '');
  if (!byPlatform && !byHost) return;
  const mem = memorySettings(p);
  const u = mem.profile.engine.gpuMemoryUtilization;
  if (!(u > SPARK_MAX_SHARE && u <= 1)) return;
  const where = mem.setBy['engine.gpuMemoryUtilization'];
  const why = byPlatform
    ? `platform ${p.platform}`
    : host?.read
      ? `this host's ${host.gpuName}`
      : `the ${host?.gpuName} planned for`;
  err(
    where ?? 'engine.gpuMemoryUtilization',
    `${u} is more than the ${SPARK_MAX_SHARE} of unified memory (${why}) sparkctl lets its servers take: the OS, the page cache and every other process share the same memory${p.platform === undefined && byHost ? " (the schema's default 0.9 is a data-centre GPU's)" : ''}`,
    `--set engine.gpuMemoryUtilization=${SPARK_MAX_SHARE} (or lower), or write engine.gpuMemoryUtilization: ${SPARK_MAX_SHARE} in the profile${p.platform === undefined ? ` (platform: dgx-spark-gb10 there makes ${SPARK_MAX_SHARE} its default)` : ''}`,
  );
}

/** A multi-node engine's rules: one replica, and GPUs enough for TP x PP in the nodes the profile and the host give. */
function multiNodeRules(p: Profile, host: HostShape | undefined, err: Say): void {
  const { tensor: tp, pipeline: pp } = p.parallel;
  const perReplica = tp * pp;
  if (p.parallel.replicas !== 'auto' && p.parallel.replicas > 1)
    err(
      'parallel.replicas',
      `${p.parallel.replicas} replicas with a multi-node engine`,
      'one Ray cluster serves one replica; use replicas: 1',
    );
  const clusterGpus = p.parallel.nodes * (p.parallel.gpusPerNode ?? 8);
  if (perReplica > clusterGpus)
    err(
      'parallel.nodes',
      `${p.parallel.nodes} nodes x ${p.parallel.gpusPerNode ?? 8} GPUs = ${clusterGpus} GPUs, but TP ${tp} x PP ${pp} needs ${perReplica}`,
      `nodes: ${Math.ceil(perReplica / (p.parallel.gpusPerNode ?? 8))}`,
    );
  if (!host) {
    /* the rest needs the host's shape */
  } else if (host.multiNode) {
    const have = (host.nodes ?? 1) * (host.gpusPerNode ?? host.gpus);
    if (have < perReplica)
      err(
        'nodes',
        `the nodes file has ${host.nodes} node(s) with ${have} GPUs in all; TP ${tp} x PP ${pp} needs ${perReplica}`,
        `list ${Math.ceil(perReplica / (host.gpusPerNode ?? 8))} nodes in the nodes file`,
      );
  } else if (perReplica > host.gpus) {
    const nodesNeeded = Math.ceil(perReplica / host.gpus);
    err(
      'parallel',
      `needs ${perReplica} GPUs (TP ${tp} x PP ${pp}); this host has ${host.gpus}; it runs over ${nodesNeeded} nodes (a nodes file: sparkctl plan ${p.name} --nodes FILE plans it there)`,
      `${commandLine('sparkctl', 'serve', p.name, '--nodes', 'FILE')} (FILE lists the nodes: docs/two-sparks.md, docs/multi-node.md)`,
    );
  }
}

/** One host's rules: the replicas' GPUs (from parallel.firstGpu) fit the host, and their ports stay under 65536. */
function oneHostRules(p: Profile, host: HostShape, err: Say, m?: ModelFacts): void {
  const { tensor: tp, pipeline: pp } = p.parallel;
  const perReplica = tp * pp;
  const replicas = resolveReplicas(p, host);
  const need = p.parallel.firstGpu + perReplica * replicas;
  if (need > host.gpus) {
    const fitReplicas = Math.floor((host.gpus - p.parallel.firstGpu) / perReplica);
    const nodesNeeded = Math.ceil(perReplica / host.gpus);
    err(
      perReplica > host.gpus ? 'parallel' : 'parallel.replicas',
      perReplica > host.gpus
        ? `needs ${perReplica} GPUs (TP ${tp} x PP ${pp}); this host has ${host.gpus}; it runs over ${nodesNeeded} nodes (a nodes file: sparkctl plan ${p.name} --nodes FILE plans it there)`
        : `${replicas} replica(s) x ${perReplica} GPUs${p.parallel.firstGpu ? ` from GPU ${p.parallel.firstGpu}` : ''} need ${need} GPUs; this host has ${host.gpus}`,
      perReplica > host.gpus
        ? (smallerTp(p, host.gpus, m) ??
            `set parallel.executor: ray and parallel.nodes: ${nodesNeeded}, then serve with --nodes nodes.yaml`)
        : fitReplicas > 0
          ? `--set parallel.replicas=${fitReplicas}`
          : 'a smaller TP x PP',
    );
  }
  const lastPort = p.server.port + replicas - 1;
  if (lastPort > 65535)
    err('server.port', `${p.server.port} + ${replicas - 1} replicas runs past 65535`, 'a lower port');
}

function hostRules(p: Profile, host: HostShape | undefined, err: Say, warn: Say, m?: ModelFacts): void {
  unifiedShareRule(p, host, err);
  // Where it runs: one host, or several with Ray.
  const wantsNodes = p.parallel.nodes > 1 || p.parallel.executor === 'ray';
  if (wantsNodes) multiNodeRules(p, host, err);
  else if (host) oneHostRules(p, host, err, m);

  // FP8 on GPUs without FP8 tensor cores: vLLM accepts it but it is not what the documents promise.
  const cc = host?.computeCapability;
  const fp8Weights = p.engine.quantization?.toLowerCase() === 'fp8';
  const fp8Kv = p.engine.kvCacheDtype.startsWith('fp8');
  if (cc && compareVersions(cc, '8.9') < 0 && (fp8Weights || fp8Kv)) {
    const parts: string[] = [];
    if (fp8Weights)
      parts.push(
        '--quantization fp8 runs weight-only (W8A16 through the Marlin kernel): weights take half the memory, the matrix maths stays 16-bit',
      );
    if (fp8Kv)
      parts.push('an fp8 KV cache is storage only (FlashAttention-2 cannot read it, so attention dequantizes it)');
    warn(
      fp8Weights ? 'engine.quantization' : 'engine.kvCacheDtype',
      `compute capability ${cc}${host?.gpuName ? ` (${host.gpuName})` : ''} has no FP8 tensor cores (FP8 W8A8 needs >= 8.9): ${parts.join('; ')}`,
    );
  }

  if (
    p.engine.reasoningParser &&
    p.engine.vllmVersion !== 'auto' &&
    compareVersions(p.engine.vllmVersion, '0.10.0') < 0
  ) {
    warn(
      'engine.reasoningParser',
      `vLLM ${p.engine.vllmVersion} also needs --enable-reasoning; it is rendered for that version`,
    );
  }
}

/**
 * What can make room for a KV cache when the weights leave none, and only what can: a higher share
 * only where weights and reserve fit under the most a GPU may give (a Spark's servers: 0.8 of its
 * unified memory; elsewhere 0.95, the driver and CUDA context keep the rest); more GPUs per replica
 * where the host has them, else over nodes; a quantized checkpoint. "Raise the share" to a share that
 * cannot hold the weights was a fix that fixes nothing (issue 48 item 7).
 */
export function noRoomFixes(p: Profile, host: HostShape, needBytesPerGpu: number): string {
  const maxShare = /GB10/i.test(host.gpuName ?? '') ? SPARK_MAX_SHARE : 0.95;
  const fixes: string[] = [];
  const needShare = needBytesPerGpu / host.gpuMemoryBytes;
  // room for the weights and the reserve, and some KV cache (at least 2 % of the GPU)
  const share = Math.min(maxShare, Math.ceil((needShare + 0.02) * 100) / 100);
  if (needShare < maxShare) {
    if (share > p.engine.gpuMemoryUtilization) fixes.push(`--set engine.gpuMemoryUtilization=${share}`);
  } else
    fixes.push(
      `a higher share cannot help: weights and reserve need ${(needBytesPerGpu / GIB).toFixed(1)} GiB per GPU, more than ${maxShare} x ${(host.gpuMemoryBytes / GIB).toFixed(0)} GiB`,
    );
  const world = p.parallel.tensor * p.parallel.pipeline;
  const gpus = host.multiNode && host.gpusPerNode && host.nodes ? host.gpusPerNode * host.nodes : host.gpus;
  fixes.push(
    gpus > world
      ? `more GPUs per replica: parallel.tensor x parallel.pipeline (now ${world}; this host has ${gpus})`
      : `more GPUs than ${host.multiNode ? 'these nodes have' : 'this host has'}: serve over nodes (parallel.nodes, --nodes nodes.yaml)`,
  );
  fixes.push('or a quantized checkpoint of the model (FP8, NVFP4, MXFP4)');
  return fixes.join('; ');
}

function memoryRules(p: Profile, host: HostShape, m: ModelFacts, err: Say, warn: Say): void {
  const u = p.engine.gpuMemoryUtilization;
  // vLLM budgets u x total and refuses to start when less than that is free ("Free memory on device ...").
  if (
    host.gpuMemoryFreeBytes !== undefined &&
    p.engine.kvCacheMemoryBytes === undefined &&
    host.gpuMemoryFreeBytes < u * host.gpuMemoryBytes
  ) {
    warn(
      'engine.gpuMemoryUtilization',
      `${u} x ${(host.gpuMemoryBytes / GIB).toFixed(1)} GiB = ${((u * host.gpuMemoryBytes) / GIB).toFixed(1)} GiB per GPU, but a GPU has only ${(host.gpuMemoryFreeBytes / GIB).toFixed(1)} GiB free: another process holds GPU memory and vLLM would refuse to start`,
      `stop what holds it (nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv), or --set engine.gpuMemoryUtilization=${Math.floor((host.gpuMemoryFreeBytes / host.gpuMemoryBytes) * 100) / 100}`,
    );
  }
  {
    const plan = planMemory(p, host.gpuMemoryBytes, m);
    if (plan.notModelled) {
      const msg = `not modelled: ${plan.notModelled.field} (${plan.notModelled.why}): the KV cache and concurrency vLLM will have are not stated`;
      if (p.engine.kvCacheMemoryBytes === undefined)
        err('model', msg, 'fix the KV cache size yourself: --set engine.kvCacheMemoryBytes=BYTES');
      else warn('model', msg);
    } else if (plan.availableKvBytes <= 0) {
      err(
        'engine.gpuMemoryUtilization',
        `${u} of ${(host.gpuMemoryBytes / GIB).toFixed(0)} GiB leaves no room for the KV cache after ${(plan.weightsPerGpuBytes / GIB).toFixed(1)} GiB of weights per GPU`,
        noRoomFixes(p, host, plan.weightsPerGpuBytes + plan.reserveBytes),
      );
    } else if (!plan.fits) {
      err(
        'engine.maxModelLen',
        `${plan.maxModelLen} tokens need ${formatBytes(plan.maxModelLen * plan.kvBytesPerToken)} of KV cache per GPU; ${formatBytes(plan.availableKvBytes)} ${p.engine.kvCacheMemoryBytes !== undefined ? 'is set by engine.kvCacheMemoryBytes' : 'is left after weights'}`,
        `--set engine.maxModelLen=${plan.largestMaxModelLen}`,
      );
    }
  }
}

/**
 * Every number of a profile is finite, and every string is one line of plain text: a control character (a newline, ESC,
 * NEL, U+2028) in a name, path, argument or variable would start a new line, setting or document in the text sparkctl
 * generates from it (shell, YAML, unit files, textfiles), so it is refused here, where the field can still be named.
 * Walks the whole parsed profile, so a new field is covered too.
 */
export function textProblems(p: unknown): Problem[] {
  const out: Problem[] = [];
  const walk = (v: unknown, path: string) => {
    if (typeof v === 'string') {
      const m = CONTROL.exec(v);
      if (m)
        out.push({
          path,
          severity: 'error',
          message: `${JSON.stringify(v)} contains the control character U+${m[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`,
          fix: 'keep it to one line of printable text (no newline, tab, escape or line separator)',
        });
    } else if (typeof v === 'number' && !Number.isFinite(v)) {
      // YAML's .inf and .nan pass zod's positive()/min(); no field of a profile means them.
      out.push({ path, severity: 'error', message: `${v} is not a finite number`, fix: 'a plain number' });
    } else if (Array.isArray(v)) {
      for (const [i, x] of v.entries()) walk(x, `${path}[${i}]`);
    } else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, path ? `${path}.${k}` : k);
  };
  walk(p, '');
  return out;
}

/** RFC 1123 label (namespaces) and RFC 1035 label (Service names): what Kubernetes accepts as a name. */
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/**
 * What Kubernetes needs of the names `sparkctl k8s` derives: the Deployment/Service/LeaderWorkerSet
 * name (vllm-PROFILE, dots and underscores as dashes) is a DNS-1035 label of at most 63 characters,
 * the namespace a DNS-1123 label, the image one word. Problems name the field, the value and the fix.
 */
export function k8sProblems(p: Profile, opts: { name: string; namespace: string; image: string }): Problem[] {
  const out: Problem[] = [];
  if (!(DNS1035_LABEL.test(opts.name) && opts.name.length <= 63))
    out.push({
      path: 'name',
      severity: 'error',
      message: `${JSON.stringify(p.name)} gives the Kubernetes name ${JSON.stringify(opts.name)}, which is not a DNS label (at most 63 lower-case letters, digits and '-', ending in a letter or digit)`,
      fix: `a profile name of at most ${63 - 'vllm-'.length} characters that ends in a letter or digit`,
    });
  if (!(DNS1123_LABEL.test(opts.namespace) && opts.namespace.length <= 63))
    out.push({
      path: '--namespace',
      severity: 'error',
      message: `${JSON.stringify(opts.namespace)} is not a namespace (a DNS label: at most 63 lower-case letters, digits and '-', starting and ending in a letter or digit)`,
      fix: '--namespace llm',
    });
  if (!/^\S+$/.test(opts.image) || CONTROL.test(opts.image))
    out.push({
      path: '--image',
      severity: 'error',
      message: `${JSON.stringify(opts.image)} is not an image reference (one word, no spaces or control characters)`,
      fix: '--image vllm/vllm-openai:v0.17.0',
    });
  // A pod's hostPath must be absolute (the API server refuses a relative one), and a relative argument
  // would mean the image's working folder: there is no "sparkctl's folder" on a cluster node.
  if (p.model.path && !p.model.path.startsWith('/'))
    out.push({
      path: 'model.path',
      severity: 'error',
      message: `${JSON.stringify(p.model.path)} is relative: a pod's hostPath must be an absolute path on the node`,
      fix: 'the absolute path of the model folder on each node: --set model.path=/models/NAME',
    });
  return out;
}

/** The host shape a profile is checked against when nothing is read from a real host. */
export function hostFromPlatform(pl: Platform, gpusFlag?: number): HostShape {
  return {
    gpus: gpusFlag ?? pl.gpu.count,
    gpusSource: gpusFlag !== undefined ? 'flag' : 'platform',
    gpuMemoryBytes: pl.gpu.memoryGiB * GIB,
    computeCapability: pl.gpu.computeCapability,
    gpuName: pl.gpu.displayName,
  };
}
