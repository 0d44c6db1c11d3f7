// A sparkrun recipe (sparkrun's RECIPES.md; eugr's spark-vllm-docker recipes are its v1) -> the
// fields of a sparkctl profile. Pure: the caller reads the text and parses the YAML.
//
// Every key of the recipe ends in exactly one of two lists: `mapped` (the profile field it became,
// or what it was read for) or `unmapped` (why it has no place in a profile, and what to do instead).
// Nothing is dropped without a line. The vLLM arguments of `command:` are mapped one by one: to a
// typed field where the profile has one (so the planner and validation see it), else to
// engine.extraArgs when the target vLLM's flag table accepts the option, else reported.
//
// A recipe is hostile input: a value with a control character is refused naming its key; a secret
// (an env entry named like one, an --api-key) is never written or shown, only the NAME of the
// variable that should hold it; the command is split into words without a shell (command.ts).
import { CONTROL } from '../../util/control.js';
import { isLoopback } from '../../util/exposure.js';
import { UsageError } from '../../errors.js';
import { isSecretName } from '../../util/redact.js';
import { isModelId, PROFILE_NAME_MAX } from '../schema.js';
import { checkArgv, resolveOption, takesValue, formatFlagProblem } from '../vllm-flags.js';
import { renderCommand, templateValue } from './command.js';
import { own } from '../../util/own.js';

interface MappedKey {
  /** where in the recipe: `defaults.port`, `command --max-model-len`, `container` */
  key: string;
  value: string;
  /** the profile field it became, or what it was read for in parentheses */
  field: string;
}

interface UnmappedKey {
  key: string;
  /** the value, shortened; a secret's never */
  value: string;
  why: string;
  fix?: string;
}

export interface RecipeImport {
  /** the profile as written: only what the recipe says (defaults are the schema's) */
  profile: Record<string, unknown>;
  mapped: MappedKey[];
  unmapped: UnmappedKey[];
  notes: string[];
}

interface ImportOptions {
  /** the profile's name */
  name: string;
  /** the vLLM whose flag table decides which extra arguments are accepted */
  vllmVersion: string;
  /**
   * --allow NAME: settings that run code or move trust, imported because the operator read them (a flag, a variable, a
   * JSON key)
   */
  allow?: string[];
}

/** The DGX Spark baseline: sparkrun recipes are written for it (one GB10 GPU per node). */
const SPARK_PLATFORM = 'dgx-spark-gb10';

const CONTROLS = new RegExp(CONTROL.source, 'g');
/** A recipe key as a report shows it: one line, no escape sequences, bounded. */
const oneLine = (k: string) => (k.length > 100 ? `${k.slice(0, 97)}...` : k).replace(CONTROLS, '?');
const HIDDEN = '(hidden: a secret)';
const VLLM_RUNTIMES = ['', 'vllm', 'vllm-distributed', 'vllm-ray', 'eugr-vllm'];

/**
 * A value shown in a report: one line, at most 80 characters, and bounded work (an alias bomb is a small graph but a
 * huge string).
 */
export function preview(v: unknown, max = 80): string {
  let budget = max + 1;
  const walk = (x: unknown, depth: number): string => {
    if (budget <= 0) return '';
    let s: string;
    if (x === null || x === undefined) s = String(x);
    else if (typeof x === 'string') s = JSON.stringify(x.length > max ? x.slice(0, max) : x);
    else if (typeof x !== 'object') s = String(x);
    else if (depth > 3) s = '...';
    else if (Array.isArray(x)) {
      const parts: string[] = [];
      for (const e of x) {
        if (budget <= 0) break;
        parts.push(walk(e, depth + 1));
      }
      s = `[${parts.join(', ')}]`;
    } else {
      const parts: string[] = [];
      for (const [k, e] of Object.entries(x)) {
        if (budget <= 0) break;
        parts.push(`${JSON.stringify(k.slice(0, max))}: ${isSecretName(k) ? HIDDEN : walk(e, depth + 1)}`);
      }
      s = `{${parts.join(', ')}}`;
    }
    budget -= s.length;
    return s;
  };
  const s = walk(v, 0).replace(CONTROLS, ' ');
  return s.length > max ? `${s.slice(0, max - 3)}...` : s;
}

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The image a recipe names under `container:` when it is text: read before the recipe is checked, to choose the flag
 * table.
 */
export function recipeImage(raw: unknown): string | undefined {
  const image = isMap(raw) ? raw.container : undefined;
  return typeof image === 'string' ? image : undefined;
}

/** Refuse a value that would reach a profile with a control character in it, naming the recipe key. */
function clean(key: string, v: string): string {
  const m = CONTROL.exec(v);
  if (m)
    throw new UsageError(
      `recipe ${key}: ${preview(v)} contains the control character U+${m[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`,
      [`keep ${key} to one line of printable text`],
    );
  return v;
}

/** A profile name from the recipe's file or URL name: lower-case letters, digits, . _ - */
export function profileNameFor(source: string): string {
  const base = source
    .split(/[\\/]/)
    .pop()!
    .split(/[?#]/)[0]!
    .replace(/\.ya?ml$/i, '');
  return (
    base
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, '-')
      .replace(/^[^a-z0-9]+/, '')
      .slice(0, PROFILE_NAME_MAX) || 'imported'
  );
}

/** Top-level keys that are not the serve itself, each with why sparkctl has no place for it. */
const NOT_A_PROFILE: Record<string, { why: string; fix?: string }> = {
  runtime_version: {
    why: "informational in sparkrun; the vLLM the flags are rendered for is the image's own (engine.vllmVersion: auto reads it)",
    fix: 'pin engine.vllmVersion if you must',
  },
  runtime_config: {
    why: "runtime-specific settings of sparkrun's own runtimes; no vLLM flag or profile field stands for them",
  },
  benchmark: {
    why: "a sparkrun/llama-benchy benchmark definition; sparkctl's benchmark takes its own flags",
    fix: 'sparkctl bench PROFILE (see sparkctl bench --help)',
  },
  pre_exec: {
    why: 'shell commands or file copies run inside the container before serve; sparkctl runs no commands from a profile',
    fix: 'bake them into the image and set container.image',
  },
  post_exec: {
    why: 'shell commands run inside the container after it is healthy; sparkctl runs no commands from a profile',
    fix: 'run them yourself after sparkctl serve (sparkctl probe checks health)',
  },
  post_commands: {
    why: 'shell commands run on the control machine; sparkctl runs no commands from a profile',
    fix: 'run them yourself after sparkctl serve',
  },
  stop_after_post: {
    why: 'stops the workload after its post hooks; sparkctl has no post hooks',
    fix: 'sparkctl stop PROFILE',
  },
  mods: {
    why: 'patches sparkrun/eugr apply inside the container before serve (most replace a chat template or patch a tool/reasoning parser); sparkctl never patches an image',
    fix: 'a chat-template fix: put the template file on this host and add --chat-template FILE to engine.extraArgs (a file you read); a patched parser or vLLM: build the image with the mods applied (eugr/spark-vllm-docker) and pin it by digest in container.image (sparkctl serve never pulls it)',
  },
  build_args: {
    why: "arguments of eugr's image build; sparkctl does not build images",
    fix: "build the image with eugr/spark-vllm-docker's build-and-copy.sh; container.image then names it",
  },
  builder: {
    why: 'how sparkrun builds the image; sparkctl does not build images',
    fix: 'build or pull the image first; container.image names it',
  },
  builder_config: { why: "settings of sparkrun's image builder; sparkctl does not build images" },
  distribution_config: {
    why: 'how sparkrun copies the model and image to the nodes',
    fix: 'sparkctl pull MODEL on each node (or the model sync of a multi-node serve)',
  },
};

/** sparkrun's structured defaults -> the vLLM flag each renders (its VLLM_FLAG_MAP), for a recipe without a command. */
const DEFAULT_FLAGS: Record<string, string> = {
  port: '--port',
  host: '--host',
  tensor_parallel: '--tensor-parallel-size',
  pipeline_parallel: '--pipeline-parallel-size',
  data_parallel: '--data-parallel-size',
  gpu_memory_utilization: '--gpu-memory-utilization',
  max_model_len: '--max-model-len',
  max_num_batched_tokens: '--max-num-batched-tokens',
  max_num_seqs: '--max-num-seqs',
  served_model_name: '--served-model-name',
  dtype: '--dtype',
  quantization: '--quantization',
  kv_cache_dtype: '--kv-cache-dtype',
  distributed_executor_backend: '--distributed-executor-backend',
  otlp_traces_endpoint: '--otlp-traces-endpoint',
  api_key: '--api-key',
  enforce_eager: '--enforce-eager',
  enable_prefix_caching: '--enable-prefix-caching',
  trust_remote_code: '--trust-remote-code',
  enable_auto_tool_choice: '--enable-auto-tool-choice',
};
const DEFAULT_SWITCHES = new Set([
  'enforce_eager',
  'enable_prefix_caching',
  'trust_remote_code',
  'enable_auto_tool_choice',
]);

/** sets the field; returns why it cannot, or nothing when set */
type Setter = (value: string) => unknown;

interface Ctx {
  out: RecipeImport;
  p: {
    model: Record<string, unknown>;
    engine: Record<string, unknown>;
    parallel: Record<string, unknown>;
    server: Record<string, unknown>;
  };
  version: string;
  extra: string[];
  /** every secret value met (flag values, env, defaults): no report line may show one */
  secrets: Set<string>;
  /** --allow's names, without leading dashes */
  allow: Set<string>;
  /** the names --allow let through */
  allowed: Set<string>;
  /** the model the recipe names (model:), to tell a tokenizer of another repository */
  model?: string;
}

const intOf = (v: string) => (/^\d{1,15}$/.test(v) ? Number(v) : undefined);
const numOf = (v: string) => (/^\d+(\.\d+)?$/.test(v) ? Number(v) : undefined);
const secretRef = (v: string) => /^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$/.exec(v)?.[1];

/** The vLLM options that have a typed field, each with its setter. */
function typedFields(c: Ctx): Record<string, { field: string; set: Setter }> {
  const { model, engine, parallel, server } = c.p;
  // a number read from the text, set when the field takes it
  const num =
    (
      o: Record<string, unknown>,
      k: string,
      read: (v: string) => number | undefined,
      takes: (n: number) => boolean,
      why: string,
    ) =>
    (v: string) => {
      const n = read(v);
      if (n === undefined || !takes(n)) return why;
      o[k] = n;
    };
  const int = (o: Record<string, unknown>, k: string) => num(o, k, intOf, (n) => n >= 1, 'not a positive whole number');
  const str = (o: Record<string, unknown>, k: string) => (v: string) => {
    o[k] = v;
  };
  const oneOf = (o: Record<string, unknown>, k: string, allowed: string[]) => (v: string) => {
    if (!allowed.includes(v)) return `not one of the values the profile field takes (${allowed.join(', ')})`;
    o[k] = v;
  };
  return {
    '--served-model-name': { field: 'model.servedName', set: str(model, 'servedName') },
    '--revision': { field: 'model.revision', set: str(model, 'revision') },
    '--tensor-parallel-size': { field: 'parallel.tensor', set: int(parallel, 'tensor') },
    '--pipeline-parallel-size': { field: 'parallel.pipeline', set: int(parallel, 'pipeline') },
    '--distributed-executor-backend': { field: 'parallel.executor', set: oneOf(parallel, 'executor', ['mp', 'ray']) },
    '--dtype': {
      field: 'engine.dtype',
      set: oneOf(engine, 'dtype', ['auto', 'bfloat16', 'float16', 'half', 'float32']),
    },
    '--quantization': { field: 'engine.quantization', set: str(engine, 'quantization') },
    '--kv-cache-dtype': {
      field: 'engine.kvCacheDtype',
      set: oneOf(engine, 'kvCacheDtype', ['auto', 'fp8', 'fp8_e4m3', 'fp8_e5m2', 'bfloat16']),
    },
    '--max-model-len': { field: 'engine.maxModelLen', set: int(engine, 'maxModelLen') },
    '--kv-cache-memory-bytes': { field: 'engine.kvCacheMemoryBytes', set: int(engine, 'kvCacheMemoryBytes') },
    '--gpu-memory-utilization': {
      field: 'engine.gpuMemoryUtilization',
      set: num(engine, 'gpuMemoryUtilization', numOf, () => true, 'not a number'),
    },
    '--max-num-seqs': { field: 'engine.maxNumSeqs', set: int(engine, 'maxNumSeqs') },
    '--max-num-batched-tokens': { field: 'engine.maxNumBatchedTokens', set: int(engine, 'maxNumBatchedTokens') },
    // the sizes the target vLLM takes are its flag table's: checked with the rendered flags (checkRendered)
    '--block-size': {
      field: 'engine.blockSize',
      set: num(engine, 'blockSize', intOf, (n) => n >= 1, 'not a positive integer'),
    },
    '--reasoning-parser': { field: 'engine.reasoningParser', set: str(engine, 'reasoningParser') },
    '--tool-call-parser': { field: 'engine.toolCallParser', set: str(engine, 'toolCallParser') },
    '--port': {
      field: 'server.port',
      set: num(server, 'port', intOf, (n) => n >= 1 && n <= 65535, 'not a port (1-65535)'),
    },
    '--host': { field: 'server.host', set: str(server, 'host') },
    '--shutdown-timeout': {
      field: 'server.shutdownTimeoutSeconds',
      set: num(server, 'shutdownTimeoutSeconds', intOf, (n) => n <= 3600, 'not a whole number of seconds up to 3600'),
    },
  };
}

/** Switches with a typed field: option -> [field, object, key, value]. */
function typedSwitches(c: Ctx): Record<string, [string, Record<string, unknown>, string, boolean]> {
  const { engine, server } = c.p;
  return {
    '--enforce-eager': ['engine.enforceEager', engine, 'enforceEager', true],
    '--enable-prefix-caching': ['engine.enablePrefixCaching', engine, 'enablePrefixCaching', true],
    '--no-enable-prefix-caching': ['engine.enablePrefixCaching', engine, 'enablePrefixCaching', false],
    '--enable-chunked-prefill': ['engine.enableChunkedPrefill', engine, 'enableChunkedPrefill', true],
    '--no-enable-chunked-prefill': ['engine.enableChunkedPrefill', engine, 'enableChunkedPrefill', false],
    '--enable-log-requests': ['engine.logRequests', engine, 'logRequests', true],
    '--disable-log-requests': ['engine.logRequests', engine, 'logRequests', false],
    '--enable-sleep-mode': ['server.sleepMode', server, 'sleepMode', true],
  };
}

/** Options sparkctl renders itself for each node or replica: a recipe's value would fight it. */
/**
 * vLLM options a recipe must not hand a root-run server unreviewed: they load Python code by name or
 * path (a plugin, a middleware, a worker extension), or open the serving host's files to clients or
 * to vLLM (a media root API clients may read from, a chat template or TLS key read from a path). The
 * recipe's author, not the operator, chose the path; each is reported, never imported.
 */
const REVIEW_FLAGS: Record<string, string> = {
  '--allowed-local-media-path':
    'lets API clients read files under that folder of the serving host (file:// media URLs)',
  '--allowed-media-domains': 'decides which hosts the server fetches media from for its clients',
  '--middleware': 'imports and runs Python code named by the recipe inside the API server',
  '--tool-parser-plugin': 'imports and runs a Python file named by the recipe',
  '--reasoning-parser-plugin': 'imports and runs a Python file named by the recipe',
  '--worker-extension-cls': 'imports and runs a Python class named by the recipe in every worker',
  '--logits-processors': 'imports and runs Python classes named by the recipe in the engine',
  '--chat-template':
    'reads a file named by the recipe (of the host, or one a mod put in the image) into every prompt, or takes template text the recipe wrote',
  '--ssl-keyfile': 'reads a private key from a path of the serving host named by the recipe',
  '--ssl-certfile': 'reads a certificate from a path of the serving host named by the recipe',
  '--ssl-ca-certs': 'reads a CA bundle from a path of the serving host named by the recipe',
  '--download-dir': 'writes the model to a folder of the serving host named by the recipe',
};

/**
 * Options beyond REVIEW_FLAGS that run code or move trust (issue 42 item 10): each is imported only
 * with --allow NAME. A function decides from the value where only some values do.
 */
const TRUST_FLAGS: Record<string, string | ((v: string | undefined, c: Ctx) => string | undefined)> = {
  '--trust-remote-code':
    "runs the Python files of the model's repository (its modeling and tokenizer code) inside the server",
  '--tokenizer': (v, c) =>
    v !== undefined && v !== c.model
      ? `loads the tokenizer from ${preview(v, 60)}, not the model's repository (its files, and with --trust-remote-code its code)`
      : undefined,
  '--hf-config-path': "reads the model's configuration from another repository or path the recipe names",
  '--speculative-config': (v) =>
    v !== undefined && /(^|[{,\s])["']?model["']?\s*:/.test(v)
      ? 'loads a draft model from the repository or path the recipe names (its code too with --trust-remote-code)'
      : undefined,
  '--kv-transfer-config': (v) =>
    v !== undefined && /kv_connector_module_path/.test(v)
      ? 'imports a Python module named by the recipe (kv_connector_module_path) as the KV connector'
      : undefined,
  '--hf-overrides': (v) =>
    v !== undefined && /auto_map|architectures/.test(v)
      ? 'changes which model class (and with --trust-remote-code whose code) loads'
      : undefined,
  '--lora-modules': 'loads LoRA adapters from the repositories or paths the recipe names',
  '--model-loader-extra-config': 'configures the weight loader with paths or URLs the recipe wrote',
  '--otlp-traces-endpoint': "sends every request's traces to a host the recipe names",
  '--allowed-origins': "lets web pages of the origins the recipe names call the server from a user's browser (CORS)",
  '--allow-credentials': "lets other origins' pages call the server with the user's credentials (CORS)",
};

/** The --allow name of a JSON key inside an option's value, where the key (not the option) is the risk. */
const TRUST_KEY_NAMES: Record<string, string> = { '--kv-transfer-config': 'kv_connector_module_path' };

// Variables that move trust: where models and code come from (a mirror, a cache, a proxy, the CAs that
// vouch for them), Python code run at start (a logging config's factories, a warnings filter imports
// its category's module), and vLLM's switches that open development or unsafe routes.
const TRUST_ENV: Array<[RegExp, string]> = [
  [
    /^VLLM_LOGGING_CONFIG_PATH$/,
    "vLLM's logging config: logging.config.dictConfig builds the objects it names ('()' factories), so it runs Python code chosen by the recipe",
  ],
  [/^PYTHONWARNINGS$/, "a warnings filter imports the module of the category it names, at Python's start"],
  [
    /^(HF_ENDPOINT|HF_MIRROR|HUGGINGFACE_CO_URL_HOME|VLLM_USE_MODELSCOPE|MODELSCOPE_[A-Z_]+)$/,
    'downloads the model (its weights, config and code) from a host the recipe names instead of the Hub',
  ],
  [
    /^(HF_HOME|HF_HUB_CACHE|HUGGINGFACE_HUB_CACHE|TRANSFORMERS_CACHE|HF_MODULES_CACHE|VLLM_CACHE_ROOT|VLLM_CONFIG_ROOT|TORCHINDUCTOR_CACHE_DIR|TRITON_CACHE_DIR|VLLM_RPC_BASE_PATH)$/,
    'reads models, compiled kernels or code from (and writes them to) a folder the recipe names',
  ],
  [
    /^(https?_proxy|HTTPS?_PROXY|all_proxy|ALL_PROXY|no_proxy|NO_PROXY|ftp_proxy|FTP_PROXY)$/,
    "sends the server's downloads through (or around) a proxy the recipe names",
  ],
  [
    /^(REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|SSL_CERT_FILE|SSL_CERT_DIR|NODE_EXTRA_CA_CERTS|GRPC_DEFAULT_SSL_ROOTS_FILE_PATH)$/,
    'replaces the certificate authorities that vouch for every host the server downloads from',
  ],
  [
    /^VLLM_SERVER_DEV_MODE$/,
    "opens vLLM's development routes (/sleep, /wake_up, /collective_rpc, /reset_prefix_cache...), which take no API key",
  ],
  [/^VLLM_ALLOW_INSECURE_SERIALIZATION$/, 'lets vLLM unpickle messages, which runs code they carry'],
  [/^VLLM_ALLOW_RUNTIME_LORA_UPDATING$/, 'lets any client load a LoRA adapter from a path or repository it names'],
  [/^(TRANSFORMERS_TRUST_REMOTE_CODE|HF_HUB_TRUST_REMOTE_CODE)$/, "runs the Python files of a model's repository"],
  // a program the server executes to build kernels at run time: DeepGEMM's JIT compiler (eugr's
  // deepseek-v4-flash.yaml sets DG_JIT_NVCC_COMPILER), Triton's CUDA tools, torch's and inductor's C/C++ compilers
  [
    /^(DG_JIT_NVCC_COMPILER|TRITON_PTXAS_PATH|TRITON_CUOBJDUMP_PATH|TRITON_NVDISASM_PATH|CC|CXX|NVCC|CUDAHOSTCXX)$/,
    'names a program (a compiler or CUDA tool) the server runs to build kernels',
  ],
];

const RENDERED_PER_NODE = new Set([
  '--nnodes',
  '--node-rank',
  '--master-addr',
  '--master-port',
  '--headless',
  '--data-parallel-address',
  '--data-parallel-rpc-port',
  '--data-parallel-start-rank',
]);

/** One option of the command as vLLM's argparse reads it. */
interface Option {
  /** the word as written */
  tok: string;
  /** the option as spelled, before any `=` */
  spelled: string;
  /** the option the target vLLM's table resolves it to (an alias or abbreviation spelled out) */
  flag: string;
  value?: string;
  /** the value is written in the same word (`--flag=value`) */
  joined: boolean;
  /** how many words it takes */
  width: number;
  /** the option with its value, as a report shows it */
  shown: string;
  /** `--json-opt.key value`: one key of a JSON option (vllm-flags.ts dottedOption), and the JSON it stands for */
  dotted?: { path: string; json: string };
}

interface Fields {
  typed: ReturnType<typeof typedFields>;
  switches: ReturnType<typeof typedSwitches>;
}

/** The option at words[i]: its flag, and its value from `--flag=value` or the next word. */
function readOption(version: string, words: string[], i: number): Option {
  const tok = words[i]!;
  const eq = tok.startsWith('--') ? tok.indexOf('=') : -1;
  const spelled = eq > 0 ? tok.slice(0, eq) : tok;
  const r = resolveOption(version, spelled);
  const flag = r.flag ?? spelled;
  const tv = flag === '--model' ? true : (takesValue(version, flag) ?? (r.alias ? true : undefined));
  let value: string | undefined = eq > 0 ? tok.slice(eq + 1) : undefined;
  let width = 1;
  if (value === undefined && tv !== false) {
    const next = words[i + 1];
    // an option the tables do not know takes the next word when it is not an option itself (argparse's reading)
    if (next !== undefined && (!next.startsWith('-') || /^-\d/.test(next))) {
      value = next;
      width = 2;
    }
  }
  const dotted = r.dotted !== undefined ? { path: r.dotted, json: dottedJson(r.dotted, value) } : undefined;
  return {
    tok,
    spelled,
    flag,
    value,
    joined: eq > 0,
    width,
    shown: value === undefined ? tok : `${spelled} ${value}`,
    dotted,
  };
}

/**
 * `key.sub value` as the JSON object vLLM builds from it: what a trust rule reads (a key is the risk, not its
 * spelling).
 */
function dottedJson(path: string, value: string | undefined): string {
  const keys = path.replace(/\+$/, '').split('.');
  let v: unknown = value ?? true;
  for (const k of keys.reverse()) v = { [k]: v };
  return JSON.stringify(v);
}

/** The words of `vllm serve ...` -> fields, extra arguments and report lines. */
function mapArgs(c: Ctx, words: string[], where: (i: number) => string, recipeModel: string | undefined): void {
  const fields: Fields = { typed: typedFields(c), switches: typedSwitches(c) };
  let autoToolChoice: string | undefined;
  let i = 0;
  const positional: string[] = [];
  while (i < words.length) {
    const tok = words[i]!;
    const key = where(i);
    if (!tok.startsWith('-') || tok === '-') {
      positional.push(tok);
      i++;
      continue;
    }
    const o = readOption(c.version, words, i);
    i += o.width;
    if (unfilledPlaceholder(c, o, key)) continue;
    // --model is the positional model spelled as an option; --enable-auto-tool-choice is judged once every option is
    // read
    if (o.flag === '--model') positional.unshift(o.value ?? '');
    else if (o.flag === '--enable-auto-tool-choice' && o.value === undefined) autoToolChoice = key;
    else mapOption(c, o, key, fields);
  }
  if (autoToolChoice) mapAutoToolChoice(c, autoToolChoice);
  mapModel(c, positional, recipeModel);
}

/** A value with a placeholder the recipe's defaults do not fill: reported, never passed to vLLM as "{x}". */
function unfilledPlaceholder(c: Ctx, o: Option, key: string): boolean {
  if (o.value === undefined || !/\{[A-Za-z_][A-Za-z0-9_]*\}/.test(o.value)) return false;
  c.out.unmapped.push({
    key,
    value: preview(o.shown),
    why: `the placeholder in ${preview(o.value)} has no value in the recipe's defaults`,
    fix: 'give it a value under defaults: in the recipe, or set the field after import',
  });
  return true;
}

/** One option: a secret (never kept, never shown), one a recipe may not set, a typed field, else engine.extraArgs. */
function mapOption(c: Ctx, o: Option, key: string, fields: Fields): void {
  if (o.flag === '--api-key') mapApiKey(c, o.value, key);
  else if (o.value !== undefined && isSecretName(o.flag, { lastWord: true }) && !/^\d+$/.test(o.value))
    refuseSecretFlag(c, o.flag, o.value, key);
  else {
    if (o.value !== undefined) clean(key, o.value);
    if (!refusedFlag(c, o, key) && !mapTyped(c, o, key, fields)) mapExtraArg(c, o, key);
  }
}

/** --api-key: the variable that holds the key becomes server.apiKeyEnv; a literal key is neither kept nor shown. */
function mapApiKey(c: Ctx, value: string | undefined, key: string): void {
  const ref = value !== undefined ? secretRef(value) : undefined;
  if (value !== undefined && !ref) c.secrets.add(value);
  c.p.server.apiKeyEnv = ref ?? 'VLLM_API_KEY';
  c.out.mapped.push({ key, value: HIDDEN, field: 'server.apiKeyEnv' });
  c.out.notes.push(
    ref
      ? `the API key is read from the variable ${ref} (server.apiKeyEnv); it never enters the profile`
      : 'the recipe carries an API key in its command: it was NOT imported (a key in argv is visible to every user in ps); set VLLM_API_KEY in the environment sparkctl serve runs in (server.apiKeyEnv names it)',
  );
}

/** --hf-token and its kind: a secret in argv is visible to every user in ps; never written, never shown. */
function refuseSecretFlag(c: Ctx, flag: string, value: string, key: string): void {
  c.secrets.add(value);
  c.out.unmapped.push({
    key,
    value: HIDDEN,
    why: `${flag} puts a secret in the command line (every user sees it in ps); a profile never holds one`,
    fix: `set ${flag === '--hf-token' ? 'HF_TOKEN' : 'the variable vLLM reads for it'} in the environment sparkctl serve runs in`,
  });
}

/**
 * A setting that runs code or moves trust: imported only when --allow names it (said in the notes);
 * otherwise reported with the --allow that would import it. true: not imported.
 */
function gated(c: Ctx, name: string, key: string, shown: string, why: string): boolean {
  if (c.allow.has(name.replace(/^--/, ''))) {
    c.allowed.add(name.replace(/^--/, ''));
    c.out.notes.push(`${oneLine(key)}: imported because --allow ${name.replace(/^--/, '')} was given: it ${why}`);
    return false;
  }
  c.out.unmapped.push({
    key,
    value: preview(shown),
    why: `it ${why}: a stranger's recipe does not get that without your say`,
    fix: `read what it does; to import it, run the import again with --allow ${name.replace(/^--/, '')}`,
  });
  return true;
}

/** The --allow name and the reason, where an option runs code or moves trust. */
function trustOfOption(c: Ctx, o: Option): { name: string; why: string } | undefined {
  const review = own(REVIEW_FLAGS, o.flag);
  if (review) return { name: o.flag, why: review };
  const t = own(TRUST_FLAGS, o.flag);
  // one key of a JSON option is judged as the JSON it stands for (--speculative-config.model X loads X)
  const why = typeof t === 'function' ? t(o.dotted?.json ?? o.value, c) : t;
  return why ? { name: own(TRUST_KEY_NAMES, o.flag) ?? o.flag, why } : undefined;
}

/** An option a recipe never sets (what sparkctl renders per node): reported. */
function refusedFlag(c: Ctx, o: Option, key: string): boolean {
  const trust = trustOfOption(c, o);
  if (trust) return gated(c, trust.name, key, o.shown, trust.why);
  if (RENDERED_PER_NODE.has(o.flag))
    c.out.unmapped.push({
      key,
      value: preview(o.shown),
      why: `${o.flag} is rendered by sparkctl for each node of a multi-node serve (from the nodes file)`,
      fix: 'sparkctl serve PROFILE --nodes nodes.yaml',
    });
  else return false;
  return true;
}

/** A switch or an option with a typed field -> that field, or the report of a value the field cannot take. */
function mapTyped(c: Ctx, o: Option, key: string, fields: Fields): boolean {
  const sw = fields.switches[o.flag];
  if (sw && o.value === undefined) {
    sw[1][sw[2]] = sw[3];
    c.out.mapped.push({ key, value: o.tok, field: sw[0] });
    return true;
  }
  const t = fields.typed[o.flag];
  // one key of a JSON option is not the whole value a typed field reads: it stays an extra argument as written
  if (!t || o.value === undefined || o.dotted) return false;
  const why = t.set(o.value);
  if (typeof why === 'string')
    c.out.unmapped.push({
      key,
      value: preview(o.shown),
      why: `${preview(o.value)} for ${t.field}: ${why}`,
      fix: `set ${t.field} after import`,
    });
  else c.out.mapped.push({ key, value: preview(o.value), field: t.field });
  return true;
}

/** No typed field: the target vLLM's table decides whether it may go verbatim to engine.extraArgs. */
function mapExtraArg(c: Ctx, o: Option, key: string): void {
  const argv = o.value === undefined || o.joined ? [o.tok] : [o.tok, o.value];
  const problems = checkArgv(argv, c.version);
  const errors = problems.filter((p) => p.severity === 'error');
  if (errors.length) {
    // the option's own verdict (a refused option makes its value "unexpected" too: one line says it)
    const first = errors.find((p) => p.flag === o.flag || p.flag === o.spelled) ?? errors[0]!;
    c.out.unmapped.push({
      key,
      value: preview(o.shown),
      why: first.message,
      fix: /not (an option|accepted)/.test(first.message)
        ? 'a mod or a patched image may add it (eugr mods do); once the image you serve accepts it, add it to engine.extraArgs yourself'
        : first.fix,
    });
    return;
  }
  c.extra.push(...argv);
  c.out.mapped.push({ key, value: preview(o.shown), field: 'engine.extraArgs' });
  for (const w of problems) c.out.notes.push(`${key}: ${formatFlagProblem(w)}`);
}

/** --enable-auto-tool-choice: rendered with engine.toolCallParser, which vLLM needs beside it. */
function mapAutoToolChoice(c: Ctx, key: string): void {
  if (c.p.engine.toolCallParser !== undefined)
    c.out.mapped.push({ key, value: '--enable-auto-tool-choice', field: 'engine.toolCallParser (rendered with it)' });
  else
    c.out.unmapped.push({
      key,
      value: '--enable-auto-tool-choice',
      why: 'vLLM needs a --tool-call-parser with it, and the recipe gives none',
      fix: 'set engine.toolCallParser',
    });
}

/** The served model: the command's positional (what runs) or else the recipe's model. */
function mapModel(c: Ctx, positional: string[], recipeModel: string | undefined): void {
  const [first, ...rest] = positional;
  for (const r of rest)
    c.out.unmapped.push({
      key: 'command',
      value: preview(r),
      why: 'a second positional argument: vllm serve takes the model only',
    });
  const id = first ?? recipeModel;
  if (id === undefined)
    throw new UsageError('the recipe names no model', [
      'a sparkrun recipe has model: ORG/NAME (and its command may name it after vllm serve)',
    ]);
  if (first !== undefined && recipeModel !== undefined && first !== recipeModel)
    c.out.notes.push(
      `the command serves ${preview(first)} while model: says ${preview(recipeModel)}; the command's is what runs, so model.id is it`,
    );
  clean('model', id);
  // the model's source first, then what the flags set (servedName, revision)
  const rest2 = { ...c.p.model };
  for (const k of Object.keys(c.p.model)) delete c.p.model[k];
  if (id.startsWith('/')) c.p.model.path = id;
  else if (isModelId(id)) c.p.model.id = id;
  Object.assign(c.p.model, rest2);
  if (!id.startsWith('/') && !isModelId(id))
    throw new UsageError(`recipe model: ${preview(id)} is not a Hugging Face repo id`, [
      'a repo id such as Qwen/Qwen3-8B (a GGUF "repo:quant" is for llama.cpp, which sparkctl does not serve)',
    ]);
  c.out.mapped.push({
    key: first !== undefined ? 'command (model)' : 'model',
    value: preview(id),
    field: id.startsWith('/') ? 'model.path' : 'model.id',
  });
  if (first !== undefined && recipeModel !== undefined)
    c.out.mapped.push({
      key: 'model',
      value: preview(recipeModel),
      field: first === recipeModel ? 'model.id (the same)' : '(overridden by the command)',
    });
}

/** defaults -> the words sparkrun's runtime would generate when the recipe has no command, each word with its key. */
function commandFromDefaults(defaults: Record<string, unknown>, out: RecipeImport): { words: string[]; at: string[] } {
  const words: string[] = [];
  const at: string[] = [];
  for (const [k, v] of Object.entries(defaults)) {
    const flag = own(DEFAULT_FLAGS, k);
    const key = `defaults.${k}`;
    if (!flag) {
      out.unmapped.push({
        key,
        value: preview(v),
        why: 'without a command, sparkrun renders only the keys of its flag map; this one is used by nothing',
        fix: 'set the matching profile field or engine.extraArgs',
      });
      continue;
    }
    if (DEFAULT_SWITCHES.has(k)) {
      if (v === true) {
        words.push(flag);
        at.push(key);
      } else out.mapped.push({ key, value: preview(v), field: '(off: nothing rendered)' });
      continue;
    }
    const s = templateValue(v);
    if (s === undefined) {
      out.unmapped.push({ key, value: preview(v), why: 'not a single value' });
      continue;
    }
    words.push(flag, s);
    at.push(key, key);
  }
  return { words, at };
}

/** The serve command's words after `vllm serve`, refusing anything that is not a vLLM serve. */
function serveWords(
  c: Ctx,
  raw: Record<string, unknown>,
  defaults: Record<string, unknown>,
  model: string | undefined,
): { words: string[]; where: (i: number) => string } {
  if (raw.command === undefined || raw.command === null) {
    const { words, at } = commandFromDefaults(defaults, c.out);
    return { words, where: (i) => at[i] ?? 'defaults' };
  }
  if (typeof raw.command !== 'string')
    throw new UsageError(`recipe command: ${preview(raw.command)} is not text`, [
      'command: | followed by the vllm serve command',
    ]);
  const values: Record<string, unknown> = { ...defaults, ...(model !== undefined ? { model } : {}) };
  const r = renderCommand(raw.command, values);
  for (const k of Object.keys(defaults)) {
    if (r.used.includes(k))
      c.out.mapped.push({ key: `defaults.${k}`, value: preview(defaults[k]), field: '(filled into the command)' });
    else
      c.out.unmapped.push({
        key: `defaults.${k}`,
        value: preview(defaults[k]),
        why: 'the command has no {' + k + '} placeholder, so sparkrun uses it nowhere',
        fix: 'nothing to do, or add the flag it stands for',
      });
  }
  const [w0, w1, ...rest] = r.words;
  if (w0 !== 'vllm' || w1 !== 'serve')
    throw new UsageError(`recipe command: starts with ${preview(r.words.slice(0, 2).join(' '))}, not "vllm serve"`, [
      'sparkctl imports vLLM recipes only: the command must be vllm serve MODEL --flags (SGLang, llama.cpp, TensorRT-LLM and Atlas recipes have no sparkctl profile)',
    ]);
  // each word's recipe key: the option it belongs to
  let last = 'command';
  const at = rest.map((w) =>
    w.startsWith('-') ? (last = `command ${w.split('=')[0]}`) : last === 'command' ? 'command (model)' : last,
  );
  return { words: rest, where: (i) => at[i] ?? 'command' };
}

/** Reads a key of the recipe, marking it accounted for. */
type Take = <T>(k: string) => T | undefined;

/** Map the parsed YAML of a sparkrun recipe. Throws UsageError (exit 2) where the recipe cannot be a profile at all. */
export function importRecipe(raw: unknown, o: ImportOptions): RecipeImport {
  if (!isMap(raw))
    throw new UsageError(`the recipe is ${preview(raw)}, not a YAML mapping`, [
      'a sparkrun recipe is a mapping with model:, container:, defaults: and command:',
    ]);
  const out: RecipeImport = { profile: {}, mapped: [], unmapped: [], notes: [] };
  const allow = new Set((o.allow ?? []).map((a) => a.replace(/^--/, '')));
  const model = typeof raw.model === 'string' ? raw.model : undefined;
  const c: Ctx = {
    out,
    p: { model: {}, engine: {}, parallel: {}, server: {} },
    version: o.vllmVersion,
    extra: [],
    secrets: new Set(),
    allow,
    allowed: new Set(),
    model,
  };
  const seen = new Set<string>();
  const take: Take = <T>(k: string): T | undefined => {
    seen.add(k);
    return raw[k] as T | undefined;
  };
  // map each kind of key: the format, the serve command, the profile's other sources, then the rest
  mapFormat(c, raw, take);
  mapCommand(c, raw, take);
  mapRevision(c, take);
  mapDescription(c, raw, take);
  mapContainer(c, take<unknown>('container'), take<unknown>('executor_config'), raw);
  mapTopology(c, take);
  mapEnv(c, take<unknown>('env'));
  mapMetadata(c, take<unknown>('metadata'));
  reportOtherKeys(c, raw, seen);
  gateSleepBeyondLoopback(c);
  for (const a of allow)
    if (!c.allowed.has(a))
      c.out.notes.push(`--allow ${oneLine(a)}: the recipe has no such setting that needs it (nothing more imported)`);
  // report no secret, then build the profile
  hideSecrets(c);
  out.profile = buildProfile(c, o.name);
  onlyWhatWasCarried(out);
  return out;
}

/**
 * vLLM's sleep mode on an address beyond loopback: its /sleep and /wake_up answer without the key
 * (vLLM guards /v1, /v2, /inference and /cohere only). Imported only with --allow enable-sleep-mode.
 */
function gateSleepBeyondLoopback(c: Ctx): void {
  const host = c.p.server.host;
  if (typeof host === 'string' && !isLoopback(host) && !c.p.server.apiKeyEnv)
    c.out.notes.push(
      `server.host ${oneLine(host)} (beyond this host) without a key: sparkctl serve refuses it unless the profile names server.apiKeyEnv or you pass --allow-unauthenticated (then warned at every start); --set server.host=127.0.0.1 keeps it on this host`,
    );
  if (c.p.server.sleepMode !== true || typeof host !== 'string' || isLoopback(host)) return;
  const at = c.out.mapped.findIndex((m) => m.field === 'server.sleepMode');
  const key = at >= 0 ? c.out.mapped[at]!.key : 'command --enable-sleep-mode';
  if (
    !gated(
      c,
      '--enable-sleep-mode',
      key,
      `--enable-sleep-mode with --host ${host}`,
      `opens /sleep, /wake_up and vLLM's other development routes, which take no API key, on ${host} (beyond this host)`,
    )
  )
    return;
  delete c.p.server.sleepMode;
  if (at >= 0) c.out.mapped.splice(at, 1);
}

/** The profile's value at a field path such as env.X or engine.maxModelLen (own keys only). */
function fieldIn(profile: Record<string, unknown>, field: string): boolean {
  const parts = field.split('.');
  let o: unknown = profile;
  for (const p of parts) {
    if (!isMap(o) || !Object.hasOwn(o, p)) return false;
    o = o[p];
  }
  return o !== undefined;
}

/**
 * The report never claims what the profile does not carry: a line that names a profile field
 * (`env.X`, `engine.maxModelLen`, ...) whose field is not in the built profile moves to "not imported".
 */
function onlyWhatWasCarried(out: RecipeImport): void {
  const kept: MappedKey[] = [];
  for (const m of out.mapped) {
    const field = /^((?:model|engine|parallel|server|env|container)\.[A-Za-z0-9_]+)/.exec(m.field)?.[1];
    if (field && !fieldIn(out.profile, field))
      out.unmapped.push({
        key: m.key,
        value: m.value,
        why: `it was read for ${field}, which the profile does not carry`,
      });
    else kept.push(m);
  }
  out.mapped = kept;
}

/** runtime: (vLLM only) and the recipe format's versions. */
function mapFormat(c: Ctx, raw: Record<string, unknown>, take: Take): void {
  const runtime = take<unknown>('runtime') ?? '';
  if (typeof runtime !== 'string' || !VLLM_RUNTIMES.includes(runtime))
    throw new UsageError(`recipe runtime: ${preview(runtime)} is not vLLM`, [
      `sparkctl serves vLLM; it imports recipes whose runtime is one of: ${VLLM_RUNTIMES.filter(Boolean).join(', ')} (or none)`,
    ]);
  if (raw.runtime !== undefined)
    c.out.mapped.push({ key: 'runtime', value: preview(runtime), field: '(vLLM: sparkctl serves it)' });
  for (const k of ['recipe_version', 'sparkrun_version']) {
    const v = take<unknown>(k);
    if (v !== undefined) c.out.mapped.push({ key: k, value: preview(v), field: '(the recipe format: read)' });
  }
}

/** model:, defaults: and command: -> the words of the serve command, each mapped. */
function mapCommand(c: Ctx, raw: Record<string, unknown>, take: Take): void {
  const modelRaw = take<unknown>('model');
  if (modelRaw !== undefined && typeof modelRaw !== 'string')
    throw new UsageError(`recipe model: ${preview(modelRaw)} is not text`, ['model: ORG/NAME']);
  if (raw.defaults === null)
    c.out.mapped.push({ key: 'defaults', value: 'null', field: '(empty: nothing to fill in)' });
  const defaultsRaw = take<unknown>('defaults') ?? {};
  if (!isMap(defaultsRaw))
    throw new UsageError(`recipe defaults: ${preview(defaultsRaw)} is not a mapping`, [
      'defaults: a mapping of KEY: value',
    ]);
  take('command');
  // secrets known before the command is read: a refusal quoting the command must not show them
  for (const [k, v] of Object.entries(defaultsRaw))
    if (isSecretName(k, { lastWord: true }) && typeof v === 'string' && !secretRef(v)) c.secrets.add(v);
  if (isMap(raw.env))
    for (const [k, v] of Object.entries(raw.env))
      if (isSecretName(k) && typeof v === 'string' && !secretRef(v)) c.secrets.add(v);
  const { words, where } = hidingSecrets(c, () => serveWords(c, raw, defaultsRaw, modelRaw));
  mapArgs(c, words, where, modelRaw);
}

/** What f returns; a refusal it throws is thrown again with every secret known so far hidden. */
function hidingSecrets<T>(c: Ctx, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof UsageError) {
      let m = e.message;
      for (const x of c.secrets) if (x.length >= 4) m = m.split(x).join(HIDDEN);
      if (m !== e.message) throw new UsageError(m, e.details);
    }
    throw e;
  }
}

/** model_revision -> model.revision. */
function mapRevision(c: Ctx, take: Take): void {
  const revision = take<unknown>('model_revision');
  if (revision === null) c.out.mapped.push({ key: 'model_revision', value: 'null', field: '(empty: nothing to set)' });
  if (revision !== undefined && revision !== null) {
    c.p.model.revision = clean('model_revision', String(revision));
    c.out.mapped.push({ key: 'model_revision', value: preview(revision), field: 'model.revision' });
  }
}

/** Every top-level key not read above: a sparkrun key with no place in a profile, or no recipe key at all. */
function reportOtherKeys(c: Ctx, raw: Record<string, unknown>, seen: Set<string>): void {
  for (const [k, v] of Object.entries(raw)) {
    if (seen.has(k)) continue;
    const known = own(NOT_A_PROFILE, k);
    // an empty list or block (eugr's `mods: []`) asks for nothing: said so, not reported as lost
    if (known && (v === null || (Array.isArray(v) && v.length === 0) || (isMap(v) && Object.keys(v).length === 0)))
      c.out.mapped.push({ key: k, value: preview(v), field: '(empty: nothing to carry)' });
    else if (known) c.out.unmapped.push({ key: k, value: preview(v), why: known.why, fix: known.fix });
    else
      c.out.unmapped.push({
        key: k,
        value: preview(v),
        why: 'not a key of the sparkrun recipe format (sparkrun sweeps it into runtime_config, where no vLLM runtime reads it)',
      });
  }
}

/** Whether a text shows a secret value met in the recipe. */
const leaks = (c: Ctx, t: string) => [...c.secrets].some((x) => x.length >= 4 && t.includes(x));

/** The report's notes and lines with no secret in them, and each key on one line. */
function hideSecrets(c: Ctx): void {
  c.out.notes = c.out.notes.map((n) => (leaks(c, n) ? '(a note that would show a secret, left out)' : n));
  for (const m of [...c.out.mapped, ...c.out.unmapped]) {
    if (leaks(c, m.value)) m.value = HIDDEN;
    // a key named like a secret shows no text value (a count such as max_num_batched_tokens is no secret)
    const last = m.key.split(/[ .]/).pop()!;
    if (isSecretName(last, { lastWord: true }) && !/^"?-?\d+(\.\d+)?"?$/.test(m.value)) m.value = HIDDEN;
    m.key = oneLine(m.key);
  }
}

/** The profile as written: its fields in the schema's order, only the sections the recipe set. */
function buildProfile(c: Ctx, name: string): Record<string, unknown> {
  if (c.extra.length) c.p.engine.extraArgs = c.extra;
  const profile: Record<string, unknown> = { name };
  if (c.out.profile.description !== undefined) profile.description = c.out.profile.description;
  profile.platform = SPARK_PLATFORM;
  profile.model = c.p.model;
  if (Object.keys(c.p.engine).length) profile.engine = c.p.engine;
  if (Object.keys(c.p.parallel).length) profile.parallel = c.p.parallel;
  if (Object.keys(c.p.server).length) profile.server = c.p.server;
  for (const k of ['container', 'env'] as const) if (c.out.profile[k] !== undefined) profile[k] = c.out.profile[k];
  // by construction no secret reaches the profile; should a mapping ever let one through, nothing is written
  if (leaks(c, JSON.stringify(profile))) throw new Error('internal: a secret value reached the imported profile');
  return profile;
}

function mapDescription(c: Ctx, raw: Record<string, unknown>, take: Take): void {
  const name = take<unknown>('name');
  const description = take<unknown>('description');
  const meta = isMap(raw.metadata) ? raw.metadata.description : undefined;
  const text = [description, meta, name].find((v): v is string => typeof v === 'string' && v.trim() !== '');
  if (text !== undefined) {
    // a description may be a YAML block: one line in the profile
    c.out.profile.description = text.replace(/\s+/g, ' ').trim().replace(CONTROLS, ' ').slice(0, 300);
  }
  for (const [k, v] of [
    ['name', name],
    ['description', description],
  ] as const) {
    if (v === undefined) continue;
    c.out.mapped.push({
      key: k,
      value: preview(v),
      field: v === text ? 'description' : '(shown in the report; description is taken from another key)',
    });
  }
}

const IMAGE =
  /^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;

function mapContainer(c: Ctx, image: unknown, executor: unknown, raw: Record<string, unknown>): void {
  const container: Record<string, unknown> = {};
  if (image !== undefined && image !== null) {
    if (typeof image !== 'string' || !IMAGE.test(image))
      throw new UsageError(`recipe container: ${preview(image)} is not an image reference`, [
        'an image such as ghcr.io/ORG/NAME:TAG or nvcr.io/nvidia/vllm:26.03-py3',
      ]);
    container.image = image;
    c.out.mapped.push({
      key: 'container',
      value: preview(image),
      field: 'container.image (engine.runtime: container)',
    });
    if (!image.includes('/') || raw.build_args !== undefined)
      c.out.notes.push(
        `container ${image} is an image the recipe's tooling builds locally (eugr's build-and-copy.sh); build it on this host before sparkctl serve`,
      );
  } else {
    if (image === null) c.out.mapped.push({ key: 'container', value: 'null', field: '(empty: the default image)' });
    c.out.notes.push(
      'the recipe names no container: sparkctl uses the default image of the DGX Spark baseline (NGC vLLM)',
    );
  }
  if (executor === null) c.out.mapped.push({ key: 'executor_config', value: 'null', field: '(empty: nothing to set)' });
  if (executor !== undefined && executor !== null) {
    if (!isMap(executor))
      c.out.unmapped.push({ key: 'executor_config', value: preview(executor), why: 'not a mapping' });
    else
      for (const [k, v] of Object.entries(executor)) {
        const key = `executor_config.${k}`;
        if (k === 'shm_size') {
          const m = typeof v === 'string' ? /^(\d+)\s*([kmg])b?$/i.exec(v) : null;
          if (m) {
            container.shmSize = `${m[1]}${m[2]!.toLowerCase()}`;
            c.out.mapped.push({ key, value: preview(v), field: 'container.shmSize' });
          } else
            c.out.unmapped.push({
              key,
              value: preview(v),
              why: 'not a whole size in k, m or g',
              fix: 'set container.shmSize, e.g. 16g',
            });
        } else if (k === 'network' && v === 'host') {
          container.network = 'host';
          c.out.mapped.push({ key, value: preview(v), field: 'container.network' });
        } else if (k === 'privileged') {
          c.out.unmapped.push({
            key,
            value: preview(v),
            why: 'sparkctl never runs a privileged container: the GPUs are passed as devices (container.gpus)',
          });
        } else if (k === 'gpus' || k === 'ipc') {
          c.out.unmapped.push({
            key,
            value: preview(v),
            why: `sparkctl sets ${k === 'gpus' ? 'the GPU devices from the profile (container.gpus, parallel)' : '--ipc=host itself (or --shm-size with container.shmSize)'}`,
          });
        } else {
          c.out.unmapped.push({
            key,
            value: preview(v),
            why: "a container setting sparkctl decides itself (it removes, restarts and names its containers; a unit's restart policy is sparkctl systemd's)",
          });
        }
      }
  }
  c.out.profile.container = container;
  c.p.engine.runtime = 'container';
}

function mapTopology(c: Ctx, take: Take): void {
  const tp = (c.p.parallel.tensor as number | undefined) ?? 1;
  const pp = (c.p.parallel.pipeline as number | undefined) ?? 1;
  // DGX Spark: one GPU per node, so a replica of TP x PP GPUs spans that many nodes
  const nodes = tp * pp;
  if (nodes > 1) {
    c.p.parallel.nodes = nodes;
    c.p.parallel.gpusPerNode = 1;
    c.out.notes.push(
      `TP ${tp} x PP ${pp} on DGX Sparks (one GPU each) is ${nodes} nodes: parallel.nodes ${nodes}, gpusPerNode 1; serve it with --nodes nodes.yaml`,
    );
  }
  const min = take<unknown>('min_nodes');
  const max = take<unknown>('max_nodes');
  const soloOnly = take<unknown>('solo_only');
  const clusterOnly = take<unknown>('cluster_only');
  const mode = take<unknown>('mode');
  const check = (key: string, v: unknown, ok: boolean, why: string) => {
    if (v === undefined || v === null) return;
    if (ok) c.out.mapped.push({ key, value: preview(v), field: `(checked against parallel.nodes ${nodes})` });
    else
      c.out.unmapped.push({
        key,
        value: preview(v),
        why,
        fix: 'set parallel.tensor (one GPU per DGX Spark node) to the node count the recipe means',
      });
  };
  check(
    'min_nodes',
    min,
    typeof min === 'number' && min <= nodes,
    `asks for at least ${preview(min)} nodes, but TP ${tp} x PP ${pp} uses ${nodes}`,
  );
  check(
    'max_nodes',
    max,
    typeof max === 'number' && max >= nodes,
    `allows at most ${preview(max)} nodes, but TP ${tp} x PP ${pp} uses ${nodes}`,
  );
  check(
    'solo_only',
    soloOnly,
    soloOnly !== true || nodes === 1,
    `says one node only, but TP ${tp} x PP ${pp} uses ${nodes}`,
  );
  check(
    'cluster_only',
    clusterOnly,
    clusterOnly !== true || nodes > 1,
    'says a cluster only, but the command uses one GPU (one node)',
  );
  check(
    'mode',
    mode,
    mode === 'auto' || (mode === 'solo' && nodes === 1) || (mode === 'cluster' && nodes > 1),
    `mode ${preview(mode)} does not match the ${nodes} node(s) of the command`,
  );
}

/**
 * A top-level section that must be a mapping: the mapping, else nothing (absent; null, reported empty; another value,
 * reported).
 */
function sectionOf(c: Ctx, key: string, v: unknown, notMapping: string): Record<string, unknown> | undefined {
  if (isMap(v)) return v;
  if (v === null) c.out.mapped.push({ key, value: 'null', field: '(empty: nothing to set)' });
  else if (v !== undefined) c.out.unmapped.push({ key, value: preview(v), why: notMapping });
  return undefined;
}

// Variables that change what code runs in the server's process (the dynamic linker's preload and
// search paths, Python's and Node's search paths and start-up hooks, shells' start files, vLLM's
// plugins): imported from a recipe, a served profile would run the recipe author's code as root.
const CODE_LOADING_ENV =
  /^(?:LD_[A-Z_]+|DYLD_[A-Z_]+|PATH|PYTHONPATH|PYTHONHOME|PYTHONSTARTUP|PYTHONUSERBASE|PYTHONINSPECT|PYTHONEXECUTABLE|PYTHONPLATLIBDIR|NODE_OPTIONS|NODE_PATH|BASH_ENV|ENV|PERL5LIB|PERL5OPT|PERLLIB|RUBYOPT|RUBYLIB|VLLM_PLUGINS|VLLM_NCCL_SO_PATH|NCCL_NET_PLUGIN|NCCL_TUNER_PLUGIN|NCCL_PROFILER_PLUGIN|CUDA_INJECTION64_PATH|GCONV_PATH|LOCPATH|HOSTALIASES|MALLOC_[A-Z_]+|GLIBC_TUNABLES)$/;

const RESERVED_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

function mapEnv(c: Ctx, raw: unknown): void {
  const env = sectionOf(c, 'env', raw, 'not a mapping of NAME: value');
  if (!env) return;
  const out: Record<string, string> = Object.create(null);
  for (const [k, v] of Object.entries(env)) {
    const key = `env.${k}`;
    if (isSecretName(k)) {
      const ref = typeof v === 'string' ? secretRef(v) : undefined;
      if (typeof v === 'string' && !ref) c.secrets.add(v);
      if (k === 'VLLM_API_KEY') {
        c.p.server.apiKeyEnv = ref ?? 'VLLM_API_KEY';
        c.out.mapped.push({ key, value: HIDDEN, field: 'server.apiKeyEnv' });
        if (!ref)
          c.out.notes.push(
            'env.VLLM_API_KEY holds a key: it was NOT imported; set VLLM_API_KEY in the environment sparkctl serve runs in (server.apiKeyEnv names it)',
          );
      } else
        c.out.unmapped.push({
          key,
          value: HIDDEN,
          why: 'looks like a secret: a profile never holds one (nor is it printed)',
          fix: `set ${ref ?? k} in the environment sparkctl serve runs in (a systemd EnvironmentFile, or your shell)`,
        });
      continue;
    }
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) {
      c.out.unmapped.push({ key: preview(key), value: preview(v), why: 'not an environment variable name' });
      continue;
    }
    // a name JavaScript objects reserve: `out.__proto__ = v` would set no variable (and say it did)
    if (RESERVED_KEYS.has(k)) {
      c.out.unmapped.push({
        key,
        value: preview(v),
        why: 'a name JavaScript objects reserve (__proto__, constructor, prototype): refused, never a variable',
        fix: 'remove it from the recipe',
      });
      continue;
    }
    const trust = CODE_LOADING_ENV.test(k)
      ? 'decides what code the server loads (a library preloaded, a search path, a plugin), as root'
      : TRUST_ENV.find(([re]) => re.test(k))?.[1];
    if (trust && gated(c, k, key, String(preview(v)), trust)) continue;
    const s = templateValue(v);
    if (s === undefined || typeof v === 'boolean') {
      c.out.unmapped.push({
        key,
        value: preview(v),
        why: 'not a text or number value',
        fix: `write env.${k} as a quoted string`,
      });
      continue;
    }
    if (s.includes('$')) {
      c.out.unmapped.push({
        key,
        value: preview(v),
        why: "sparkrun expands $VAR from the control machine's environment; a profile's env is literal",
        fix: `write the value itself under env.${k}`,
      });
      continue;
    }
    out[k] = clean(key, s);
    c.out.mapped.push({ key, value: preview(v), field: `env.${k}` });
  }
  if (Object.keys(out).length) c.out.profile.env = out;
}

/** sparkrun's metadata: the model facts sparkctl reads from config.json are overrides when given. */
function mapMetadata(c: Ctx, raw: unknown): void {
  const meta = sectionOf(c, 'metadata', raw, 'not a mapping');
  if (!meta) return;
  const facts: Record<string, string> = { num_layers: 'layers', num_kv_heads: 'kvHeads', head_dim: 'headDim' };
  for (const [k, v] of Object.entries(meta)) {
    const key = `metadata.${k}`;
    if (k === 'description') {
      c.out.mapped.push({
        key,
        value: preview(v),
        field:
          c.out.profile.description ===
          (typeof v === 'string' ? v.replace(/\s+/g, ' ').trim().slice(0, 300) : undefined)
            ? 'description'
            : '(a description: another key gave it)',
      });
      continue;
    }
    if (facts[k] && typeof v === 'number' && Number.isInteger(v) && v > 0) {
      c.p.model[facts[k]!] = v;
      c.out.mapped.push({ key, value: preview(v), field: `model.${facts[k]}` });
      continue;
    }
    if (k === 'model_params') {
      const n = typeof v === 'number' ? v : typeof v === 'string' ? paramsOf(v) : undefined;
      if (n !== undefined && n > 0) {
        c.p.model.parameters = n;
        c.out.mapped.push({ key, value: preview(v), field: 'model.parameters' });
        continue;
      }
    }
    c.out.unmapped.push({
      key,
      value: preview(v),
      why: "informational in sparkrun (display, its VRAM estimate); sparkctl reads the model's facts from its config.json and safetensors index",
    });
  }
}

function paramsOf(s: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*([KMBT])$/i.exec(s.trim());
  if (!m) return undefined;
  return Number(m[1]) * { K: 1e3, M: 1e6, B: 1e9, T: 1e12 }[m[2]!.toUpperCase() as 'K' | 'M' | 'B' | 'T'];
}
