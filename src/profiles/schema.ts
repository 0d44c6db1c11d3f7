// The zod schemas are the types: Profile, Platform (baseline) and the multi-node inventory.
import { z } from 'zod';
import { hasControl } from '../util/control.js';
import { IMAGE_REF, IMAGE_REF_WORDS } from '../util/image-ref.js';
import { ProbeBlock } from './probe-block.js';
import { WatchBlock } from './watch-block.js';
import { isPep440 } from './versions.js';

const positiveInt = z.number().int().positive();
const port = z.number().int().min(1).max(65535);

/** Variables whose names look like secrets: never written to a profile, argv, a log or a bundle. */

/**
 * model.id goes into vLLM's positional argument: a Hugging Face repo id as huggingface_hub's
 * validate_repo_id accepts it (at most one "/", parts of [A-Za-z0-9_.-] up to 96, no "--" or "..",
 * not ending in .git), or an absolute path. Anything starting with "-" would be read as a flag.
 */
export function isModelId(id: string): boolean {
  if (id.startsWith('/')) return !hasControl(id);
  return (
    /^(?:[A-Za-z0-9_.-]{1,96}\/)?[A-Za-z0-9_.-]{1,96}$/.test(id) &&
    !/^[-.]|[-.]$|\/[-.]|[-.]\/|--|\.\./.test(id) &&
    !id.endsWith('.git')
  );
}

export const ModelBlock = z
  .strictObject({
    id: z
      .string()
      .min(1)
      // an empty id is said once, by min(1) (kept: the JSON Schema's minLength)
      .refine(
        (v) => v === '' || isModelId(v),
        'a Hugging Face repo id (ORG/NAME or NAME: letters, digits, "-", "_", "."; no "--" or "..") or an absolute path; never a flag ("-..." or "--x=y" would reach vLLM as one)',
      )
      .optional()
      .describe('Hub id, e.g. Qwen/Qwen3.5-9B'),
    path: z
      .string()
      .min(1)
      .refine(
        (p) => !p.startsWith('-'),
        'a folder, not a flag (a path starting with "-" would reach vLLM as one; write ./-name)',
      )
      .optional()
      .describe('Local folder with config.json and the weights; used instead of id when set'),
    revision: z
      .string()
      .regex(/^[\w.-]+(\/[\w.-]+)*$/, 'a branch, tag or commit name (letters, digits, "-", "_", ".", "/")')
      .max(200)
      .refine((r) => !r.split('/').some((s) => s === '.' || s === '..'), 'no "." or ".." segment')
      .optional()
      .describe(
        'Hub revision of model.id: a branch, tag or 40-hex commit (pinned by sparkctl pull; serve passes --revision)',
      ),
    servedName: z
      .string()
      .min(1)
      .refine((n) => !n.startsWith('-'), 'a name, not a flag (it must not start with "-")')
      .optional()
      .describe('--served-model-name; defaults to the id or path'),
    parameters: z
      .number()
      .positive()
      .optional()
      .describe('Total parameter count, e.g. 9.0e9 (read from the model; set to override)'),
    layers: positiveInt
      .optional()
      .describe('Decoder layers (num_hidden_layers; read from config.json, set to override)'),
    kvLayers: positiveInt
      .optional()
      .describe('Layers that keep a KV cache (hybrid models keep fewer); defaults to layers'),
    attentionHeads: positiveInt.optional().describe('Query heads of a full-attention layer (num_attention_heads)'),
    kvHeads: positiveInt.optional().describe('KV heads (num_key_value_heads, GQA)'),
    headDim: positiveInt.optional().describe('head_dim'),
    hiddenSize: positiveInt.optional(),
    maxContext: positiveInt.optional().describe('Native context length (max_position_embeddings)'),
    weightBytesPerParam: z
      .number()
      .positive()
      .optional()
      .describe('2 for bf16/fp16 checkpoints (from the safetensors index when read)'),
    sha256Manifest: z
      .string()
      .optional()
      .describe('File of "<sha256>  <relative path>" lines for model.files --verify'),
  })
  .refine((m) => m.id !== undefined || m.path !== undefined, {
    message: 'model needs an id (hub id) or a path (local folder)',
    path: ['id'],
  });

export const EngineBlock = z.strictObject({
  vllmVersion: z
    .string()
    .regex(
      /^(auto|\d[0-9A-Za-z.+!_-]{0,95})$/,
      'a PEP 440 version such as 0.17.0 (0.10.1rc1, 0.27.2.dev0+g6adad0876), or auto',
    )
    // what the regex (kept: the JSON Schema's pattern) lets through, checked further; what it refused is said once
    .refine(
      (v) => !/^\d[0-9A-Za-z.+!_-]{0,95}$/.test(v) || isPep440(v),
      'a PEP 440 version such as 0.17.0 (0.10.1rc1, 0.27.2.dev0+g6adad0876), or auto',
    )
    .default('auto')
    .describe("The vLLM the flags are rendered for; auto: the installed one (--vllm-bin's), read at plan time"),
  dtype: z.enum(['auto', 'bfloat16', 'float16', 'half', 'float32']).default('auto'),
  quantization: z.string().nullable().default(null).describe('fp8, awq, gptq, ... (null: as the checkpoint is)'),
  kvCacheDtype: z.enum(['auto', 'fp8', 'fp8_e4m3', 'fp8_e5m2', 'bfloat16']).default('auto'),
  maxModelLen: positiveInt.optional(),
  kvCacheMemoryBytes: positiveInt
    .optional()
    .describe(
      '--kv-cache-memory-bytes (vLLM >= 0.11): the KV cache in bytes instead of a share of memory. On the CPU backend the legacy VLLM_CPU_KVCACHE_SPACE (whole GiB) silently overrides it, so sparkctl removes that variable from the server environment',
    ),
  gpuMemoryUtilization: z.number().default(0.9).describe('Share of each GPU vLLM pre-allocates, (0, 1]'),
  enforceEager: z.boolean().default(false).describe('Disables CUDA graphs only (not flash-attention)'),
  enableChunkedPrefill: z.boolean().optional(),
  enablePrefixCaching: z.boolean().optional(),
  maxNumSeqs: positiveInt.optional(),
  maxNumBatchedTokens: positiveInt.optional(),
  // which sizes a vLLM takes is its version's (8-128 to 0.11, 256 too from 0.12, any integer in the
  // 0.25+ tables): the rendered --block-size is checked against the target version's table (checkRendered)
  blockSize: positiveInt
    .optional()
    .describe("KV cache block size in tokens; the target vLLM's flag table decides which it takes"),
  logRequests: z.boolean().default(false).describe('Per-request logging; rendered for the target vLLM version'),
  reasoningParser: z.string().optional(),
  toolCallParser: z.string().optional().describe('Enables --enable-auto-tool-choice (needed by Claude Code)'),
  extraArgs: z.array(z.string()).default([]).describe('Appended verbatim after the rendered flags'),
  runtime: z
    .enum(['host', 'container'])
    .default('host')
    .describe(
      'host: the vllm executable on this machine; container: vLLM in an image run by docker or podman (container: block)',
    ),
  startCaches: z
    .boolean()
    .default(true)
    .describe(
      "Keep vLLM's start caches (torch.compile, P2P, Triton, FlashInfer, CUDA JIT) in sparkctl's folder per profile and vLLM version (and image), mounted into containers; false: vLLM's own defaults (a container then starts cold every time). sparkctl cache ls|rm",
    ),
  loadFormat: z
    .string()
    .regex(
      /^(auto|[a-z][a-z0-9_]{0,40})$/,
      'a vLLM --load-format name such as safetensors, fastsafetensors, runai_streamer, or auto',
    )
    .default('auto')
    .describe(
      "--load-format: auto picks from what is installed (fastsafetensors on a GPU where its package is there, else vLLM's default) and says the choice; a name pins it",
    ),
  readAhead: z
    .enum(['auto', 'off'])
    .default('auto')
    .describe(
      "Read the model's weight files into the page cache while vLLM starts (auto: where the free memory holds them; never on unified memory, a DGX Spark, where the page cache takes from the GPU's share)",
    ),
});

const ParallelBlock = z.strictObject({
  tensor: positiveInt.default(1),
  pipeline: positiveInt.default(1),
  replicas: z
    .union([positiveInt, z.literal('auto')])
    .default(1)
    .describe("Independent copies on one host, each on its own GPUs and port; 'auto' = as many as the GPUs allow"),
  firstGpu: z
    .number()
    .int()
    .min(0)
    .default(0)
    .describe('Index of the first GPU this profile uses (tenants on disjoint GPUs)'),
  executor: z.enum(['mp', 'ray']).default('mp'),
  nodes: positiveInt.default(1),
  gpusPerNode: positiveInt.optional(),
});

const ServerBlock = z.strictObject({
  host: z
    .string()
    .default('127.0.0.1')
    .describe(
      'Where clients reach the server (or its router): 127.0.0.1 by default, this host only. Beyond loopback (0.0.0.0) needs server.apiKeyEnv or serve --allow-unauthenticated (warned at every start); multi-node: the head listens on 0.0.0.0 (reached over the nodes network; warned without a key); k8s pods listen on 0.0.0.0 (the pod network is the boundary)',
    ),
  port: port.default(8000).describe('Replica i listens on port + i'),
  apiKeyEnv: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name')
    .optional()
    .describe('The NAME of the variable holding the API key; the key itself never enters a profile'),
  readyTimeoutSeconds: positiveInt.default(900).describe('How long a load may take before serve gives up'),
  stallTimeoutSeconds: positiveInt.default(300).describe('Give up when the server logs nothing for this long'),
  shutdownTimeoutSeconds: z
    .number()
    .int()
    .min(0)
    .max(3600)
    .default(30)
    .describe(
      "On SIGTERM vLLM finishes its in-flight requests for up to this long (--shutdown-timeout, where the target vLLM has it); 0: it aborts them. stop waits this plus 15 s before SIGKILL; systemd's TimeoutStopSec and k8s' terminationGracePeriodSeconds follow it",
    ),
  sleepMode: z
    .boolean()
    .default(false)
    .describe(
      "vLLM's sleep mode: --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1 (which exposes /sleep, /wake_up, /is_sleeping and vLLM's other development routes, without auth: keep the port off untrusted networks); sparkctl sleep/wake and the gateway's idle sleep use it. Needs CUDA (the CPU build has none)",
    ),
});

export const PrewarmBlock = z.strictObject({
  promptTokens: z.array(positiveInt).default([128, 1024, 4096]),
  maxRounds: positiveInt.default(5),
  settleMargin: z
    .number()
    .min(0)
    .max(1)
    .default(0.2)
    .describe('Warm when a round is within this share of the round before'),
  decodeTokens: positiveInt.default(32),
  timeoutSeconds: positiveInt.default(300),
});

export { ProbeBlock };

/**
 * vLLM's latency histogram bounds (v1/metrics/loggers.py): an SLO target must be one, or its burn rate cannot be read
 * from the buckets.
 */
const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
];
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const sloBound = (what: string, bounds: number[]) =>
  z
    .number()
    .positive()
    .refine((v) => bounds.includes(v), {
      message: `must be a bucket bound of vLLM's ${what} histogram: ${bounds.join(', ')}`,
    });

const SloBlock = z.strictObject({
  objective: z
    .number()
    .gt(0)
    .lt(1)
    .default(0.99)
    .describe('Share of requests that must meet each latency target (monitoring rules: burn rates)'),
  ttftSeconds: sloBound('time-to-first-token', TTFT_BUCKETS)
    .default(2.5)
    .describe('Time to first token target, seconds'),
  itlSeconds: sloBound('inter-token latency', ITL_BUCKETS).default(0.1).describe('Inter-token latency target, seconds'),
});

// HAProxy refuses a timer past 2147483647 ms (~24.8 days: "timer overflow"); bounded here so that
// such a value is bad input naming the field, not a router that cannot start after the model loaded.
const haproxySeconds = positiveInt.max(2_147_483);

export const RouterBlock = z.strictObject({
  enabled: z
    .boolean()
    .default(true)
    .describe('serve starts HAProxy on server.port, with the replicas on loopback ports behind it'),
  replicaPort: port
    .optional()
    .describe('Loopback port of replica 0 behind the router (replica i on replicaPort + i); default server.port + 1'),
  statsPort: port
    .optional()
    .describe(
      "HAProxy's stats page and Prometheus exporter (/metrics), on 127.0.0.1 only; default the port after the last replica's",
    ),
  replicaSocket: z
    .boolean()
    .default(true)
    .describe(
      "The replicas listen on a Unix socket (vLLM --uds, 0.11 and later) in a 0700 folder of the state folder, which only sparkctl's user can open, instead of a loopback port any local user can reach past the router's key; false: loopback ports (router.replicaPort). Older vLLM, containers on the host network and multi-node replicas keep ports, said by serve",
    ),
  bin: z.string().min(1).default('haproxy').describe('The haproxy executable (found on PATH, then /usr/sbin)'),
  checkIntervalMs: positiveInt
    .max(2_147_483_647)
    .default(2000)
    .describe('Active /health check every this many ms (fall 2 / rise 2)'),
  connectTimeoutSeconds: haproxySeconds.default(5),
  clientTimeoutSeconds: haproxySeconds
    .default(300)
    .describe('Client inactivity (a client that stops reading a stream)'),
  serverTimeoutSeconds: haproxySeconds
    .default(1800)
    .describe(
      'Server inactivity: a non-streamed generation sends nothing until it is done, so this bounds the longest answer',
    ),
  tunnelTimeoutSeconds: haproxySeconds.default(3600),
  queueTimeoutSeconds: haproxySeconds
    .default(60)
    .describe('How long a request may wait for a free replica slot before a 503'),
  maxConnPerReplica: positiveInt
    .optional()
    .describe('Requests in flight per replica before HAProxy queues (default: no limit, vLLM queues itself)'),
  balance: z
    .enum(['prefix', 'leastconn'])
    .default('prefix')
    .describe(
      "prefix: a request goes to the replica its prompt's first router.prefixBytes hash to (HAProxy's bounded-load consistent hash), so a shared system prompt, document or conversation meets the replica whose prefix cache holds it; leastconn: the replica with the fewest requests",
    ),
  prefixBytes: positiveInt
    .min(16)
    .max(65536)
    .default(1024)
    .describe('balance prefix: how many bytes of the prompt (from "messages", "prompt" or "input" on) are hashed'),
  hashBalanceFactor: positiveInt
    .min(101)
    .max(1000)
    .default(150)
    .describe(
      'balance prefix: a replica takes at most this % of the average load before its prefixes spill to the next one (HAProxy hash-balance-factor)',
    ),
  drainTimeoutSeconds: positiveInt
    .max(3600)
    .optional()
    .describe(
      "stop: after HAProxy's soft stop, how long its open requests may run before the hard stop cuts them; default server.shutdownTimeoutSeconds (30 s when that is 0)",
    ),
});

// registry/name[:tag][@sha256:<64 hex>], as docker and podman accept them (the rule records are read back with too)
const imageRef = z.string().max(512).regex(IMAGE_REF, IMAGE_REF_WORDS);

export const ContainerBlock = z.strictObject({
  cli: z
    .enum(['docker', 'podman'])
    .optional()
    .describe('Which container CLI runs the server; default: podman, else docker, whichever is on PATH'),
  image: imageRef
    .optional()
    .describe(
      'default: nvcr.io/nvidia/vllm:<NGC tag>-py3 on DGX baselines, vllm/vllm-openai:v<engine.vllmVersion> elsewhere',
    ),
  cliArgs: z
    .array(z.string().regex(/^--[a-z][a-z-]*(=.*)?$|^[^-].*$/, 'a global option of the CLI, such as --runtime or runc'))
    .default([])
    .describe(
      'Global options before "run" (podman --runtime runc --cgroup-manager=cgroupfs); also used for inspect, logs, stop and rm',
    ),
  gpus: z
    .enum(['auto', 'none'])
    .default('auto')
    .describe(
      "auto: each replica's GPUs as devices (docker --gpus, podman CDI nvidia.com/gpu=N); none: no GPU device at all (a CPU build of vLLM; preflight skips the NVIDIA Container Toolkit checks)",
    ),
  network: z
    .enum(['publish', 'host'])
    .default('publish')
    .describe('publish: -p HOST:PORT:PORT on server.host; host: --network host (always for Ray)'),
  shmSize: z
    .string()
    .regex(/^\d+[kmg]?$/i, 'a size such as 16g')
    .optional()
    .describe('--shm-size instead of --ipc=host'),
  ulimits: z
    .record(z.string().regex(/^[a-z]+$/), z.string().regex(/^-?\d+(:-?\d+)?$/))
    .default({ memlock: '-1', stack: '67108864' })
    .describe("--ulimit NAME=VALUE each (NVIDIA's playbooks: memlock=-1, stack=67108864); {} for none"),
  hfCache: z
    .string()
    .optional()
    .describe('The Hugging Face cache mounted read-only (default $HF_HOME, else ~/.cache/huggingface)'),
  mounts: z
    .array(
      z.strictObject({
        source: z.string().regex(/^\/[^,:]*$/, 'an absolute path without , or :'),
        target: z.string().regex(/^\/[^,:]*$/, 'an absolute path without , or :'),
        readOnly: z.boolean().default(true),
      }),
    )
    .default([])
    .describe('More bind mounts (read-only unless readOnly: false)'),
});
export type ContainerBlock = z.infer<typeof ContainerBlock>;

const UpgradeBlock = z.strictObject({
  ttftRatio: z
    .number()
    .min(1)
    .max(100)
    .default(1.5)
    .describe("upgrade: the canary's TTFT p50 may be at most this many times the current replica's"),
  tpotRatio: z
    .number()
    .min(1)
    .max(100)
    .default(1.5)
    .describe(
      "upgrade: the canary's time per output token (after the first) p50, at most this many times the current's (a current below 0.5 ms is judged against 0.5 ms)",
    ),
  throughputRatio: z
    .number()
    .min(0)
    .max(1)
    .default(0.67)
    .describe("upgrade: the canary's output tokens/s, at least this share of the current's"),
  goldenSameVersion: z
    .number()
    .min(0)
    .max(1)
    .default(1)
    .describe(
      'upgrade within one vLLM version (another image or environment): greedy answers match at least this well (1: identical)',
    ),
  goldenOtherVersion: z
    .number()
    .min(0)
    .max(1)
    .default(0.6)
    .describe(
      'upgrade to another vLLM version: greedy answers may legitimately differ (kernels, scheduling); word-level similarity at least this',
    ),
  goldenPrompts: z
    .array(
      z.strictObject({
        name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/),
        prompt: z.string().min(1).max(65536),
        maxTokens: z.number().int().min(1).max(4096).default(32),
        chat: z
          .boolean()
          .default(false)
          .describe(
            'sent as one user message to /v1/chat/completions, through the chat template (else a raw completion)',
          ),
        tools: z
          .boolean()
          .default(false)
          .describe(
            'sent to /v1/chat/completions with one tool (read_file, a path), tool_choice auto: the tool calls the server parses are compared with the text (needs engine.toolCallParser)',
          ),
      }),
    )
    .max(32)
    .optional()
    .describe(
      'Prompts answered greedily (temperature 0) by current and canary and compared; default: three short completions and one chat turn, and a tool call where engine.toolCallParser is set. The chat template is also compared on its own, token for token',
    ),
  benchRequests: z
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(8)
    .describe('upgrade: requests of the short bench on each side'),
  benchOutputTokens: z.number().int().min(1).max(4096).default(32),
});
type UpgradeBlock = z.infer<typeof UpgradeBlock>;

/**
 * The longest profile name: every name made from it (NAME-canary, NAME-rN, a unit or container name) stays within what
 * its records and hosts take.
 */
export const PROFILE_NAME_MAX = 64;

export const Profile = z.strictObject({
  // capped so every name made from it fits where it is kept (NAME-canary, a cluster record's profile: at most 200)
  name: z
    .string()
    .max(
      PROFILE_NAME_MAX,
      `at most ${PROFILE_NAME_MAX} characters (names made from it, such as NAME-canary, must fit the state records): a shorter name: in the file or --set name=SHORTER`,
    )
    .regex(/^[a-z0-9][a-z0-9._-]*$/, 'lower-case letters, digits, . _ -'),
  description: z.string().default(''),
  model: ModelBlock,
  engine: EngineBlock.default(EngineBlock.parse({})),
  parallel: ParallelBlock.default(ParallelBlock.parse({})),
  server: ServerBlock.default(ServerBlock.parse({})),
  platform: z.string().optional().describe('The baseline this profile expects (profiles/platforms/NAME.yaml)'),
  prewarm: PrewarmBlock.default(PrewarmBlock.parse({})),
  probe: ProbeBlock.default(ProbeBlock.parse({})),
  watch: WatchBlock.default(WatchBlock.parse({})).describe(
    'How sparkctl watch judges and acts on these servers (its flags override)',
  ),
  slo: SloBlock.default(SloBlock.parse({})).describe(
    'Latency objectives the monitoring rules alert on (sparkctl monitoring rules)',
  ),
  router: RouterBlock.optional().describe('HAProxy in front of the replicas (one endpoint; rolling restarts)'),
  container: ContainerBlock.optional().describe('How engine.runtime container runs vLLM (docker or podman)'),
  upgrade: UpgradeBlock.default(UpgradeBlock.parse({})).describe(
    'How sparkctl upgrade judges a canary against the current replicas',
  ),
  pinnedIn: z
    .enum(['state', 'lockfile'])
    .default('state')
    .describe(
      "Where the digest (image) and vLLM this profile runs are recorded: state = sparkctl's state folder only (pins/NAME.json); lockfile = also NAME.lock.json beside this profile's file (commit it, copy it to the next host: serve, restart and serve --nodes run what it pins; one that disagrees with the state folder is said, with the fix)",
    ),
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string()).default({}),
});
export type Profile = z.infer<typeof Profile>;

// ---- platform baselines ----

const VersionRuleSchema = z.union([
  z.strictObject({ exact: z.string() }),
  z.strictObject({ min: z.string(), max: z.string().optional() }),
  z.strictObject({ oneOf: z.array(z.string()).min(1) }),
  z.strictObject({ sameMajor: z.string() }),
]);

export const Platform = z.strictObject({
  name: z.string(),
  description: z.string().default(''),
  source: z
    .enum(['documents', 'real'])
    .describe('documents: the numbers of the source write-ups; real: checked against hardware'),
  arch: z.enum(['x86_64', 'aarch64']),
  os: z.string().optional(),
  gpu: z.strictObject({
    namePattern: z.string().describe('Regular expression matched against nvidia-smi name'),
    displayName: z.string(),
    count: positiveInt,
    memoryGiB: z.number().positive(),
    computeCapability: z.string(),
    hbmBandwidthGBs: z
      .number()
      .positive()
      .describe('Memory bandwidth per GPU, GB/s (the simulator derives decode speed from it)'),
    bf16Tflops: z.number().positive(),
    minPowerLimitW: z.number().positive().optional(),
    nvswitch: z.boolean().default(false),
    unifiedMemory: z.boolean().default(false),
  }),
  driver: VersionRuleSchema,
  cuda: VersionRuleSchema,
  cudnn: VersionRuleSchema.optional(),
  nccl: VersionRuleSchema.optional(),
  torch: VersionRuleSchema.optional(),
  vllm: VersionRuleSchema.optional(),
  firmware: z.strictObject({ vbiosMin: z.string().optional(), inforomMin: z.string().optional() }).default({}),
  host: z
    .strictObject({
      shmMinGiB: z.number().default(16),
      nofileMin: z.number().int().default(65536),
      conntrackMaxUsePct: z.number().default(80),
      memoryGiB: z.number().optional(),
    })
    .default({ shmMinGiB: 16, nofileMin: 65536, conntrackMaxUsePct: 80 }),
});
export type Platform = z.infer<typeof Platform>;

// ---- multi-node inventory (nodes.yaml) ----

// A node's address and user reach ssh's argv (a leading '-' would be read as an option, such as
// -oProxyCommand=..., a command run here), rsync's target (user@host:path) and the nodes' shells.
// An IPv6 literal is refused here, with the fix: it needs brackets in rsync's user@[addr]:path and in
// URLs, none in ssh's user@addr, a zone (%iface) when link-local, and vLLM's and Ray's rendezvous
// are IPv4 in every recipe; a host name that resolves to it (an /etc/hosts line) goes through all.
const nodeAddress = z
  .string()
  .refine((v) => !v.includes(':'), {
    message:
      'an IPv6 literal is not accepted (rsync, ssh and the rendezvous each want it written differently): give an IPv4 address, or a host name that resolves to it (e.g. a line in /etc/hosts)',
  })
  .pipe(
    z
      .string()
      .regex(
        /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})$/,
        'an IPv4 address or a host name (letters, digits, . -; not starting with -)',
      ),
  );
const ifName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._@:-]{0,14}$/, 'a network interface name (at most 15 of letters, digits, . _ @ : -)');

export const NodeEntry = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9._-]+$/),
  address: nodeAddress.describe('IP or host name reachable over ssh; also the Ray node address'),
  sshUser: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9._-]{0,31}$/, 'a user name (letters, digits, _ . -; not starting with - or a digit)')
    .default('root'),
  sshPort: port.default(22),
  interface: ifName.describe(
    'Network interface for NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME (unless fabric.interface names another)',
  ),
  gpus: positiveInt.default(8),
  fabric: z
    .strictObject({
      address: nodeAddress.describe(
        "This node's address on the fabric (a DGX Spark's ConnectX-7 port, RoCE): vLLM's rendezvous, VLLM_HOST_IP, and model copies go over it",
      ),
      interface: ifName.describe(
        'The fabric netdev (e.g. enp1s0f1np1): NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, UCX_NET_DEVICES; its RDMA device and RoCE v2 GID index are read from the node',
      ),
    })
    .optional()
    .describe(
      'The high-speed link between the nodes, when it is not the ssh address; without it everything goes over address/interface',
    ),
});
export const NodesFile = z.strictObject({
  head: NodeEntry,
  workers: z.array(NodeEntry).default([]),
  ssh: z
    .strictObject({
      identityFile: z.string().optional(),
      connectTimeoutSeconds: haproxySeconds.default(5),
      options: z.array(z.string()).default([]),
    })
    .default({ connectTimeoutSeconds: 5, options: [] }),
  rayPort: port.default(6379),
  masterPort: port
    .default(29501)
    .describe(
      "vLLM's native multi-node rendezvous (--master-port on every node; torch.distributed's store on the head); vLLM's own default",
    ),
  sparkctl: z.string().default('sparkctl').describe('How to run sparkctl on the nodes'),
});
export type NodesFile = z.infer<typeof NodesFile>;
export type NodeEntry = z.infer<typeof NodeEntry>;
