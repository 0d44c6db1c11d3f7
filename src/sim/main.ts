// `sparkctl sim serve MODEL [vllm flags]`: start-up like vLLM (log lines, load time, refused until
// ready), then the HTTP surface, the timing model and the faults of SPARKCTL_SIM_FAULT / --sim-fault.
import { SimTrace, RequestLog } from './trace.js';
import { createServer as createNetServer } from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { parseVllmArgs, ArgError, num, str } from './args.js';
import { Engine, createMetrics, type Timing } from './engine.js';
import { SimServer, stamp } from './server.js';
import { listProfiles, loadProfileFile, loadPlatform, DEFAULT_PLATFORM } from '../profiles/load.js';
import { Profile } from '../profiles/schema.js';
import { planMemory, GIB } from '../profiles/planner.js';
import { acceptedBy, metricsOf, targetVersion } from '../profiles/vllm-flags.js';
import { SimSleep } from './sleep.js';
import { parseModelConfig, type ModelFacts } from '../model/facts.js';
import { hfCacheRoots, hubFolder, isHubId } from '../model/read.js';
import { factsFromProfile } from '../model/merge.js';
import { basename, join } from 'node:path';
import { versionLines, modelLoadingLine, kvCacheLines, startingLine, compileLines } from './lines.js';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { pause } from '../util/pause.js';
import { onSignals } from '../util/interrupt.js';
import { readTextSync, READ_LIMITS } from '../util/read.js';
import {
  hostStore,
  joinStore,
  rendezvousProblem,
  TORCH_DEFAULT_TIMEOUT_MS,
  type Joined,
  type RendezvousArgs,
} from './rendezvous.js';

interface Faults {
  oomAtStart?: boolean;
  kvTooSmall?: boolean;
  portInUse?: boolean;
  hangAtLoad?: boolean;
  engineDeadAfter?: number;
  zombieAfter?: number;
  /** wedge when this file exists as a request is scheduled (a test's switch, one server at a time) */
  zombieIf?: string;
  longPrefillS?: number;
  crashMidStream?: number;
  saturateAt?: number;
  slowMs?: number;
  exitAfterS?: number;
}

function parseFaults(spec: string): Faults {
  const f: Faults = {};
  for (const item of spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [name, arg] = item.split(':') as [string, string | undefined];
    const n = () => {
      const v = Number(arg);
      if (arg === undefined || !Number.isFinite(v) || v < 0)
        throw new ArgError(`fault ${name} needs a number: ${name}:N`);
      return v;
    };
    switch (name) {
      case 'oom-at-start':
        f.oomAtStart = true;
        break;
      case 'kv-too-small':
        f.kvTooSmall = true;
        break;
      case 'port-in-use':
        f.portInUse = true;
        break;
      case 'hang-at-load':
        f.hangAtLoad = true;
        break;
      case 'engine-dead-after':
        f.engineDeadAfter = n();
        break;
      case 'zombie-after':
        f.zombieAfter = n();
        break;
      case 'zombie-if':
        if (!arg?.startsWith('/'))
          throw new ArgError('fault zombie-if needs an absolute path: zombie-if:/path/to/switch');
        f.zombieIf = arg;
        break;
      case 'long-prefill':
        f.longPrefillS = n();
        break;
      case 'crash-mid-stream':
        f.crashMidStream = n();
        break;
      case 'saturate':
        f.saturateAt = Math.max(1, n());
        break;
      case 'slow':
        f.slowMs = n();
        break;
      case 'exit-after':
        f.exitAfterS = n();
        break;
      default:
        throw new ArgError(
          `unknown fault "${name}"; known: oom-at-start, kv-too-small, port-in-use, hang-at-load, engine-dead-after:N, zombie-after:N, zombie-if:PATH, long-prefill:S, crash-mid-stream:N, saturate:N, slow:MS, exit-after:S`,
        );
    }
  }
  return f;
}

/** A rate from the environment (a positive number), or undefined when unset; anything else is bad input naming it. */
function envRate(name: string): number | undefined {
  const v = process.env[name];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!(Number.isFinite(n) && n > 0))
    throw new ArgError(`${name}: "${v}" is not a positive number (tokens per second)`);
  return n;
}

const out = (level: string, where: string, msg: string) =>
  process.stdout.write(`${level} ${stamp()} [${where}] ${msg}\n`);
const info = (where: string, msg: string) => out('INFO', where, msg);
const err = (line: string) => process.stderr.write(line + '\n');

/** The generic decoder the simulator plays when nothing tells the model's size (said in its log as a guess). */
const GENERIC = { parameters: 8e9, layers: 32, attentionHeads: 32, kvHeads: 8, headDim: 128, maxContext: 32768 };

function modelFacts(model: string, profileFile?: string): { profile: Profile; known: boolean } {
  if (profileFile) return { profile: loadProfileFile(profileFile).profile, known: true };
  for (const s of listProfiles()) {
    try {
      const p = loadProfileFile(s.file).profile;
      if (p.model.id === model || p.model.path === model) return { profile: p, known: true };
    } catch {
      /* skip invalid user profiles */
    }
  }
  // An unknown model: a generic 8B dense decoder, unless its config.json is found (archOf).
  return { profile: Profile.parse({ name: 'sim-generic', model: { id: model, ...GENERIC } }), known: false };
}

/**
 * Where a model id's config.json sits in the Hugging Face cache (refs/main -> snapshots/COMMIT), as
 * vLLM itself would find it offline; undefined when it is not there. Bounded reads; a ref that is not
 * a commit id is not followed.
 */
function cachedConfig(model: string): string | undefined {
  if (!isHubId(model)) return undefined;
  for (const root of hfCacheRoots(process.env)) {
    const repo = join(root, hubFolder(model));
    try {
      const ref = readTextSync(join(repo, 'refs', 'main'), { maxBytes: 256 }).trim();
      if (!/^[0-9a-f]{40}$/.test(ref)) continue;
      const file = join(repo, 'snapshots', ref, 'config.json');
      if (existsSync(file)) return file;
    } catch {
      /* not in this root */
    }
  }
  return undefined;
}

/**
 * The architecture the simulator plays, and where it came from: the model folder's config.json, the
 * Hugging Face cache's for a model id (what vLLM loads), the profile's facts, else a generic 8B, said
 * to be a guess. Its timings follow from it and from the platform it plays (one machine's numbers).
 */
function archOf(
  model: string,
  base: { profile: Profile; known: boolean },
): { facts: ModelFacts; from: string; guessed: boolean } {
  for (const file of [join(model, 'config.json'), cachedConfig(model)]) {
    if (!file) continue;
    try {
      return {
        facts: parseModelConfig(JSON.parse(readTextSync(file, { maxBytes: READ_LIMITS.config }))),
        from: file,
        guessed: false,
      };
    } catch {
      /* not there, or not a config: the next source */
    }
  }
  const own = base.known ? factsFromProfile(base.profile.model) : undefined;
  if (own) return { facts: own, from: `profile ${base.profile.name}`, guessed: false };
  return {
    facts: factsFromProfile(GENERIC)!,
    from: 'no config.json in the model folder or the Hugging Face cache, and no profile names it',
    guessed: true,
  };
}

function portFree(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createNetServer();
    s.once('error', () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

function exitWith(code: number, engineProc?: ChildProcess): never {
  engineProc?.kill('SIGKILL');
  process.exit(code);
}

export async function simServe(argv: string[]): Promise<void> {
  try {
    await simServeInner(argv);
  } catch (e) {
    // A refused argument (ArgError: from the parse, or a number flag given a word, read where it is used) is vLLM's
    // argparse refusal, not a bug.
    if (e instanceof ArgError) usageExit(e, currentEngine);
    // The simulator is its own program (it exits like vLLM does): never hang on a bug, never leave EngineCore.
    process.stderr.write(`sparkctl sim: internal error: ${(e as Error).stack ?? e}\n`);
    exitWith(70, currentEngine);
  }
}

let currentEngine: ChildProcess | undefined;

/** The simulator's settings from its argv: vLLM's flags (the same parser), its own --sim-* knobs, the faults. */
interface SimSetup {
  version: string;
  args: ReturnType<typeof parseVllmArgs>;
  faults: Faults;
  f: Map<string, string | true>;
  platform: ReturnType<typeof loadPlatform>;
  profile: Profile;
  plan: ReturnType<typeof planMemory>;
  tp: number;
  pp: number;
  maxModelLen: number;
  servedName: string;
  host: string;
  port: number;
  /**
   * --uds PATH (vLLM 0.11 and later): the API listens on this Unix socket only, no TCP port (api_server.py
   * setup_server)
   */
  uds?: string;
  loadMs: number;
  factor: number;
  timing: Timing;
  /** where the played architecture came from; guessed: nothing told the model's size */
  played: { from: string; guessed: boolean; parameters: number };
}

async function simServeInner(argv: string[]): Promise<void> {
  const s = readSetup(argv);
  const rdv = checkArgs(s);
  if (rdv && rdv.nodeRank > 0) return headlessRank(rdv, s);
  await beforeLoad(s);
  // The head waits for every rank before it loads (torch.distributed's init comes first).
  const world = rdv ? await hostStore(rdv, s.version) : undefined;
  // vLLM runs the engine in a child process (EngineCore): killing only the API server leaves it.
  let engineProc: ChildProcess | undefined;
  if (!s.args.sim.has('--sim-no-engine-process')) {
    engineProc = spawn(process.execPath, ['-e', "process.title='VLLM::EngineCore_0';setInterval(()=>{},1<<30)"], {
      stdio: 'ignore',
    });
    currentEngine = engineProc;
  }
  ipcSockets();
  // A signal during load ends the load, engine process included (vLLM does the same). Handlers are
  // swapped through onSignals: a SIGTERM that arrives while the server is built and bound (no turn
  // of the event loop) reaches the shutdown handler, never neither (util/interrupt.ts says why).
  const offLoad = onSignals(['SIGTERM', 'SIGINT'], () => exitWith(0, engineProc));
  await loadModel(s, engineProc, world);
  const { sim, engine, devMode } = await buildServer(s);
  // A worker rank lost after the world joined: the head's collectives fail, its engine is dead (/health 503).
  world?.onLost((rank) => {
    err(
      `ERROR ${stamp()} [multiproc_executor.py:297] Worker proc VllmWorker-${rank} died unexpectedly (exit code: None), shutting down executor.`,
    );
    engine.dead = true;
  });
  await listen(s, sim, devMode, engineProc);
  const shutdown = shutdownOf(s, sim, engine, engineProc);
  onSignals(['SIGTERM', 'SIGINT'], (sig) => void shutdown(sig));
  offLoad();
}

/**
 * vLLM's ZMQ IPC sockets, bound at ipc://$VLLM_RPC_BASE_PATH/<uuid4> as the engine starts
 * (vllm/utils/network_utils.py) and left behind at exit, a clean one included: the real vLLM 0.27.2
 * CPU build bound 7 for one replica and all 7 were still there after its SIGTERM shutdown. Played
 * only where the variable is set (sparkctl's replica folder, engine/runtime/ipc-folder.ts): unset,
 * vLLM's default is the shared temp folder, which the simulator does not litter.
 */
function ipcSockets(): void {
  const base = process.env.VLLM_RPC_BASE_PATH;
  if (!base) return;
  for (let i = 0; i < 7; i++) {
    const s = createNetServer();
    s.on('error', (e) => err(`ERROR ${stamp()} [network_utils.py:158] zmq.error.ZMQError: ${(e as Error).message}`));
    s.listen(join(base, randomUUID()));
    s.unref();
  }
}

/**
 * The version played, the arguments and faults as vLLM's parser takes them; a bad one throws ArgError, which simServe
 * refuses as vLLM's argparse does (usageExit).
 */
function parseArgv(argv: string[]): {
  version: string;
  args: ReturnType<typeof parseVllmArgs>;
  faults: Faults;
  prefillFromEnv?: number;
} {
  const asked =
    process.env.SPARKCTL_SIM_VLLM_VERSION ??
    (argv.includes('--sim-vllm-version') ? argv[argv.indexOf('--sim-vllm-version') + 1]! : '0.17.0');
  // 'auto' (a profile that lets the installed vLLM decide): the simulator is that vLLM, and plays the
  // version sparkctl renders for 'auto' (the newest table), so what was rendered is what it accepts.
  const version = asked === 'auto' ? targetVersion('auto') : asked;
  const args = parseVllmArgs(argv, version);
  const faults = parseFaults([process.env.SPARKCTL_SIM_FAULT, str(args.sim, '--sim-fault')].filter(Boolean).join(','));
  return { version, args, faults, prefillFromEnv: envRate('SPARKCTL_SIM_PREFILL_TPS') };
}

/** vLLM's argparse refusal: its usage line, the error, exit 2 (the engine process, if one started, killed). */
function usageExit(e: ArgError, engineProc?: ChildProcess): never {
  err('usage: vllm serve [model_tag] [options]');
  err(`vllm serve: error: ${e.message}`);
  exitWith(2, engineProc);
}

function readSetup(argv: string[]): SimSetup {
  const { version, args, faults, prefillFromEnv } = parseArgv(argv);
  const f = args.flags;
  const known = modelFacts(args.model, str(args.sim, '--sim-profile'));
  const base = known.profile;
  const played = archOf(args.model, known);
  const arch = played.facts;
  const platform = loadPlatform(str(args.sim, '--sim-platform') ?? DEFAULT_PLATFORM);
  const tp = num(f, '--tensor-parallel-size', 1);
  const pp = num(f, '--pipeline-parallel-size', 1);
  const maxModelLen = num(f, '--max-model-len', arch.maxContext);
  const profile: Profile = {
    ...base,
    engine: {
      ...base.engine,
      maxModelLen,
      gpuMemoryUtilization: num(f, '--gpu-memory-utilization', 0.9),
      enforceEager: f.has('--enforce-eager'),
      kvCacheDtype: (str(f, '--kv-cache-dtype') ?? 'auto') as Profile['engine']['kvCacheDtype'],
      // without --quantization vLLM takes the checkpoint's own scheme: from config.json when the played
      // facts are read from it; from the profile that records the model (engine.quantization) when they
      // come from there (a gpt-oss rank with no config.json on its node played bf16: 108.8 GiB per GPU at TP 2
      // for an MXFP4 model of about 61 GiB, and refused to start on a Spark that the plan said fits)
      quantization:
        str(f, '--quantization') ?? (played.from.startsWith('profile ') ? (base.engine.quantization ?? null) : null),
      dtype: (str(f, '--dtype') ?? base.engine.dtype) as Profile['engine']['dtype'],
    },
    parallel: { ...base.parallel, tensor: tp, pipeline: pp },
  };
  const plan = planMemory(profile, platform.gpu.memoryGiB * GIB, arch);
  const servedName = str(f, '--served-model-name') ?? args.model;
  const host = str(f, '--host') ?? '0.0.0.0';
  const port = num(f, '--port', 8000);
  const loadMs = num(args.sim, '--sim-load-seconds', Number(process.env.SPARKCTL_SIM_LOAD_SECONDS ?? 2)) * 1000;
  const factor = num(args.sim, '--sim-time-factor', Number(process.env.SPARKCTL_SIM_TIME_FACTOR ?? 1));
  const timing: Timing = {
    // SPARKCTL_SIM_PREFILL_TPS: the whole suite's servers share one (a test whose comparisons must stand
    // above a loaded host's scheduling noise), and a candidate's env can give one server a slower prefill
    prefillTps: num(
      args.sim,
      '--sim-prefill-tps',
      prefillFromEnv ?? (platform.gpu.bf16Tflops * 1e12 * tp * 0.4) / (2 * arch.parameters),
    ),
    decodeMs: num(
      args.sim,
      '--sim-decode-ms',
      (plan.weightsPerGpuBytes / (platform.gpu.hbmBandwidthGBs * 1e9 * 0.7)) *
        1000 *
        (profile.engine.enforceEager ? 1.3 : 1),
    ),
    batchSlowdown: 0.01,
    coldMs: num(args.sim, '--sim-cold-ms', Number(process.env.SPARKCTL_SIM_COLD_MS ?? 3000)),
    timeFactor: factor,
    slowMs: faults.slowMs ?? 0,
  };

  return {
    version,
    args,
    faults,
    f,
    platform,
    profile,
    plan,
    tp,
    pp,
    maxModelLen,
    servedName,
    host,
    port,
    uds: str(f, '--uds'),
    loadMs,
    factor,
    timing,
    played: { from: played.from, guessed: played.guessed, parameters: arch.parameters },
  };
}

/** vLLM's first lines and its own checks of its arguments; the rendezvous of a multi-node launch. */
function checkArgs(s: SimSetup): RendezvousArgs | undefined {
  const { f, args, version, tp, pp } = s;
  const nonDefault: Record<string, unknown> = { model_tag: args.model };
  for (const [k, v] of f) nonDefault[k.replace(/^--/, '').replace(/-/g, '_')] = v === true ? true : v;
  delete nonDefault.api_key;
  for (const [where, msg] of versionLines(version, args.model)) info(where, msg);
  info('utils.py:328', `non-default args: ${JSON.stringify(nonDefault)}`);
  // not a vLLM line: which model and which machine the simulator's timings come from (one of each)
  const gpu = `${s.platform.gpu.displayName} (${s.platform.name}: ${s.platform.gpu.hbmBandwidthGBs} GB/s, ${s.platform.gpu.bf16Tflops} bf16 TFLOPS)`;
  if (s.played.guessed)
    out(
      'WARNING',
      'sparkctl-sim',
      `the size of ${args.model} is not known (${s.played.from}): playing a generic 8B dense decoder on ${gpu}; its timings are a guess (sparkctl pull ${args.model} --config-only gives the simulator the model's own size)`,
    );
  else
    out(
      'INFO',
      'sparkctl-sim',
      `playing ${(s.played.parameters / 1e9).toFixed(1)}B parameters from ${s.played.from} on ${gpu}`,
    );
  if (f.has('--enable-auto-tool-choice') && !str(f, '--tool-call-parser')) {
    // vLLM's own check of its arguments (entrypoints/openai/cli_args.py), before anything loads.
    err('Traceback (most recent call last):');
    err('TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser');
    process.exit(1);
  }
  // vLLM's native multi-node launch (0.12+): the world split over --nnodes, rank 0 hosts the store.
  const nnodes = num(f, '--nnodes', 1);
  const headless = f.has('--headless');
  const rdv: RendezvousArgs | undefined =
    nnodes > 1
      ? {
          nnodes,
          nodeRank: num(f, '--node-rank', 0),
          masterAddr: str(f, '--master-addr') ?? '127.0.0.1',
          masterPort: num(f, '--master-port', 29501),
          headless,
          world: tp * pp,
          timeoutMs:
            num(
              args.sim,
              '--sim-rendezvous-timeout',
              Number(process.env.SPARKCTL_SIM_RENDEZVOUS_TIMEOUT_S ?? TORCH_DEFAULT_TIMEOUT_MS / 1000),
            ) * 1000,
        }
      : undefined;
  if (rdv) {
    const bad = rendezvousProblem(rdv);
    if (bad) {
      err('Traceback (most recent call last):');
      err(bad);
      process.exit(1);
    }
  }
  return rdv;
}

/** The port, the max-model-len line, the exit-after fault's timer, and Ray's placement group. */
async function beforeLoad(s: SimSetup): Promise<void> {
  const { f, faults, host, port, maxModelLen, tp, pp } = s;
  // --uds: vLLM binds the socket's path, and a path that exists (a stale socket, a file) is Errno 98 too
  const taken = async () => (s.uds ? existsSync(s.uds) : !(await portFree(port, host)));
  if (!f.has('--headless') && (faults.portInUse || (await taken()))) {
    err('Traceback (most recent call last):');
    err('  File "/usr/lib/python3.12/asyncio/base_events.py", line 1572, in create_server');
    err('    sock.bind(sa)');
    err('OSError: [Errno 98] Address already in use');
    process.exit(1);
  }
  info('config.py:1604', `Using max model len ${maxModelLen}`);
  if (faults.exitAfterS !== undefined) {
    setTimeout(() => {
      err(`ERROR ${stamp()} [core.py:708] EngineCore encountered a fatal error.`);
      err(
        `torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3`,
      );
      err('ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.');
      err('ncclInternalError: Internal check failed.');
      exitWith(1, currentEngine);
    }, faults.exitAfterS * 1000).unref();
  }
  // With Ray as the executor, ask the cluster for TP x PP GPUs and wait as vLLM does (src/sim/ray.ts).
  if (str(f, '--distributed-executor-backend') === 'ray') {
    const { rayPython, reservePlacement } = await import('./ray.js');
    const py = rayPython();
    if (py) {
      const pl = reservePlacement(
        py,
        tp * pp,
        (level, where, msg) => out(level, where, msg),
        (text) => {
          err(`ERROR ${stamp()} [ray_utils.py:250] ${text}`);
          process.exit(1);
        },
      );
      await pl.ready;
    }
  }
}

/** The load, logged as vLLM logs it, and the start-up failures it can end in (OOM, a KV cache too small). */
async function loadModel(s: SimSetup, engineProc: ChildProcess | undefined, world?: Joined): Promise<void> {
  const { args, faults, platform, plan, maxModelLen, loadMs, version, profile } = s;
  const at = (share: number) => pause(loadMs * share);
  info('gpu_model_runner.py:1770', `Starting to load model ${args.model}...`);
  const shards = 4;
  for (let i = 0; i <= shards; i++) {
    const pct = Math.round((i / shards) * 100);
    info(
      'default_loader.py:262',
      `Loading safetensors checkpoint shards: ${String(pct).padStart(3)}% Completed | ${i}/${shards}`,
    );
    if (faults.hangAtLoad && i === 2) {
      // Alive, silent, never ready: what a stuck NFS read or a wedged GPU looks like.
      await new Promise(() => {});
    }
    if (faults.oomAtStart && i === 3) {
      err('Traceback (most recent call last):');
      err('  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 80, in __init__');
      err('    self.model_executor = executor_class(vllm_config)');
      err(
        `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of ${platform.gpu.memoryGiB.toFixed(2)} GiB of which 1.19 GiB is free. Including non-PyTorch memory, this process has ${(platform.gpu.memoryGiB - 1.2).toFixed(2)} GiB memory in use.`,
      );
      err(`ERROR ${stamp()} [core.py:708] EngineCore failed to start.`);
      err('RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}');
      exitWith(1, engineProc);
    }
    if (i < shards) await at(0.5 / shards);
  }
  const weightsGiB = plan.weightsPerGpuBytes / GIB;
  info(...modelLoadingLine(version, weightsGiB, (loadMs * 0.5) / 1000));
  await at(0.1);
  if (plan.availableKvBytes <= 0) {
    err(`ERROR ${stamp()} [core.py:708] EngineCore failed to start.`);
    err(
      'ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.',
    );
    err('RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}');
    exitWith(1, engineProc);
  }
  if (faults.kvTooSmall || plan.kvTokens < maxModelLen) {
    // The fault shrinks the cache to about a third of what one full-length request needs.
    const available = faults.kvTooSmall
      ? Math.max(0.1, Math.min(plan.availableKvBytes / GIB, ((maxModelLen * plan.kvBytesPerToken) / GIB) * 0.37))
      : plan.availableKvBytes / GIB;
    const needed = (maxModelLen * plan.kvBytesPerToken) / GIB;
    const est = Math.floor((available * GIB) / plan.kvBytesPerToken / 16) * 16;
    err(`ERROR ${stamp()} [core.py:708] EngineCore failed to start.`);
    err(
      `ValueError: To serve at least one request with the models's max seq len (${maxModelLen}), (${needed.toFixed(2)} GiB KV cache is needed, which is larger than the available KV cache memory (${available.toFixed(2)} GiB). Based on the available memory, the estimated maximum model length is ${est}. Try increasing \`gpu_memory_utilization\` or decreasing \`max_model_len\` when initializing the engine.`,
    );
    err('RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}');
    exitWith(1, engineProc);
  }
  if (!profile.engine.enforceEager) await simCompile(s);
  // over nodes: the KV profile is a collective over every node's workers
  await world?.allLoaded();
  info('gpu_worker.py:276', `Available KV cache memory: ${(plan.availableKvBytes / GIB).toFixed(2)} GiB`);
  for (const [where, msg] of kvCacheLines(version, plan.kvTokens, maxModelLen, plan.maxConcurrency)) info(where, msg);
  if (!profile.engine.enforceEager) {
    for (const pct of [0, 25, 50, 75, 100]) {
      info(
        'gpu_model_runner.py:2567',
        `Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): ${String(pct).padStart(3)}%`,
      );
      await at(0.05);
    }
    info(
      'gpu_model_runner.py:2625',
      `Graph capturing finished in ${((loadMs * 0.25) / 1000).toFixed(0)} secs, took 0.52 GiB`,
    );
  } else {
    await at(0.2);
  }
  info(
    'core.py:218',
    `init engine (profile, create kv cache, warmup model) took ${((loadMs * 0.45) / 1000).toFixed(2)} seconds`,
  );
}

/**
 * torch.compile as vLLM does it: its graph kept under VLLM_CACHE_ROOT (sparkctl points it into its
 * own folder), so a restart with the same folder loads it (a hit, a fifth of the time) where a first
 * start compiles and stores it (a miss). Without VLLM_CACHE_ROOT nothing is kept: always a miss.
 */
async function simCompile(s: SimSetup): Promise<void> {
  const root = process.env.VLLM_CACHE_ROOT;
  const dir = root ? join(root, 'torch_compile_cache', `sim-${s.version}`, 'rank_0_0', 'backbone') : '';
  const hit = Boolean(dir && existsSync(join(dir, 'graph')));
  const seconds = (s.loadMs * 0.3) / 1000;
  if (!hit) await pause(s.loadMs * 0.3);
  else await pause(s.loadMs * 0.06);
  for (const [where, msg] of compileLines(s.version, hit, seconds, dir || '(none)')) info(where, msg);
  if (dir && !hit) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'graph'), 'sim');
  }
}

/** The engine, its metrics, sleep mode and the HTTP server, not yet listening. */
async function buildServer(s: SimSetup) {
  const { f, args, version, plan, maxModelLen, timing, faults, servedName, loadMs, factor } = s;
  const metrics = await createMetrics(servedName, { sleepGauge: 'vllm:engine_sleep_state' in metricsOf(version) });
  const engine = new Engine(
    { maxNumSeqs: num(f, '--max-num-seqs', 256), kvTokens: plan.kvTokens, maxModelLen },
    timing,
    metrics,
    {
      deadAfter: faults.engineDeadAfter,
      zombieAfter: faults.zombieAfter,
      // {port} in the path: each replica of a profile its own switch (one wedged, the others serving); on
      // --uds (no port) the socket's file name without .sock (a router's replica: its instance name)
      zombieIf: faults.zombieIf?.replaceAll(
        '{port}',
        str(f, '--uds') ? basename(str(f, '--uds')!, '.sock') : String(num(f, '--port', 8000)),
      ),
      longPrefillS: faults.longPrefillS,
      crashMidStream: faults.crashMidStream,
      saturateAt: faults.saturateAt,
    },
  );
  // crash-mid-stream: the engine core dies while a stream is open; vLLM's API server then exits
  engine.onCrash = () => {
    err(`ERROR ${stamp()} [core.py:708] EngineCore encountered a fatal error.`);
    err('RuntimeError: CUDA error: an illegal memory access was encountered');
    exitWith(1, currentEngine);
  };
  // vllm/envs.py: VLLM_SERVER_DEV_MODE is bool(int(os.getenv("VLLM_SERVER_DEV_MODE", "0")))
  const devMode =
    /^\d+$/.test(process.env.VLLM_SERVER_DEV_MODE ?? '0') && Number(process.env.VLLM_SERVER_DEV_MODE ?? '0') !== 0;
  const sleep = new SimSleep(
    {
      enabled: f.has('--enable-sleep-mode'),
      devMode,
      weightsBytes: plan.weightsPerGpuBytes,
      kvBytes: Math.max(0, plan.availableKvBytes),
      linkGBs: num(args.sim, '--sim-wake-gbs', 20),
      reloadMs: loadMs * 0.5,
      timeFactor: factor,
      log: info,
    },
    engine,
    metrics,
  );
  const sim = new SimServer(
    {
      model: args.model,
      servedName,
      maxModelLen,
      vllmVersion: version,
      apiKey: process.env.VLLM_API_KEY || str(f, '--api-key'),
      seed: num(args.sim, '--sim-seed', 0),
      errorRate: num(args.sim, '--sim-error-rate', 0),
      errorTypes: (str(args.sim, '--sim-error-types') ?? 'rate_limit,server_error,context_length').split(','),
      log: (line) => process.stderr.write(line + '\n'),
      trace: process.env.SPARKCTL_SIM_TRACE ? new SimTrace(process.env.SPARKCTL_SIM_TRACE) : undefined,
      requestLog: process.env.SPARKCTL_SIM_REQUEST_LOG
        ? new RequestLog(process.env.SPARKCTL_SIM_REQUEST_LOG)
        : undefined,
      autoToolChoice: f.has('--enable-auto-tool-choice'),
      toolCallParser: str(f, '--tool-call-parser'),
      sleep,
      numerics: process.env.SPARKCTL_SIM_NUMERICS,
    },
    engine,
    metrics,
  );
  return { sim, engine, devMode };
}

async function listen(
  s: SimSetup,
  sim: SimServer,
  devMode: boolean,
  engineProc: ChildProcess | undefined,
): Promise<void> {
  const { version, host, port, uds } = s;
  // as vLLM: `Starting vLLM server on unix:PATH`, the socket bound where it is named (a path that exists: Errno 98)
  info(...startingLine(version, host, port, uds));
  sim.server.once('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EADDRINUSE') err('OSError: [Errno 98] Address already in use');
    else err(`OSError: ${e.message}`);
    exitWith(1, engineProc);
  });
  await new Promise<void>((resolve) =>
    uds ? sim.server.listen(uds, resolve) : sim.server.listen(port, host, resolve),
  );
  info(
    'launcher.py:37',
    `Available routes are: /health, /ping, /version, /metrics, /tokenize, /v1/models, /v1/completions, /v1/chat/completions, /v1/messages${devMode ? ', /sleep, /wake_up, /is_sleeping, /collective_rpc, /reset_prefix_cache' : ''}`,
  );
  process.stdout.write(
    'INFO:     Started server process [' +
      process.pid +
      ']\nINFO:     Waiting for application startup.\nINFO:     Application startup complete.\n',
  );
}

// vLLM's shutdown (0.27.2: entrypoints/launcher.py, v1/engine/core.py): SIGTERM aborts every
// unfinished request unless --shutdown-timeout N > 0, which lets them finish for up to N s; each
// step logged under [shutdown]. A version without the flag logs none of it here (its lines are
// not known), and aborts.
function shutdownOf(
  s: SimSetup,
  sim: SimServer,
  engine: Engine,
  engineProc: ChildProcess | undefined,
): (sig: string) => Promise<void> {
  const { f, version } = s;
  const shutdownS = Number(str(f, '--shutdown-timeout') ?? 0) || 0;
  const logsShutdown = acceptedBy(version, '--shutdown-timeout');
  const sd = (where: string, msg: string) => logsShutdown && info(where, `[shutdown] ${msg}`);
  let stopping = false;
  const shutdown = async (sig: string) => {
    if (stopping) return;
    stopping = true;
    sim.shuttingDown = true;
    sd('launcher.py:114', 'API server: shutdown triggered');
    const mode = shutdownS > 0 ? 'drain' : 'abort';
    sd('launcher.py:131', `API server: stopping engine client mode=${mode} timeout=${shutdownS}s`);
    sd('core.py:1328', `EngineCore: trigger received signal=${sig}`);
    sd('core.py:1464', `EngineCore: start mode=${mode} timeout=${shutdownS}s`);
    const n = engine.unfinished;
    let finished = true;
    if (mode === 'abort') {
      if (n > 0) sd('core.py:1473', `EngineCore: aborting in-flight requests count=${n}`);
      engine.abortAll();
    } else {
      if (n > 0) sd('core.py:1484', `EngineCore: draining in-flight requests count=${n} timeout=${shutdownS}s`);
      finished = await engine.drain(shutdownS * 1000);
      // past the timeout vLLM's client tears the engine down with what is left
      if (!finished) engine.abortAll();
    }
    if (finished) sd('core.py:1495', 'EngineCore: request processing complete; starting resource teardown');
    sd('launcher.py:139', 'API server: engine client stopped');
    sd('launcher.py:142', 'API server: signalling HTTP server shutdown');
    process.stdout.write(`INFO:     Shutting down\n`);
    sim.server.close();
    // the aborted streams' last bytes go out before their connections close
    await pause(20);
    sim.server.closeAllConnections();
    engineProc?.kill('SIGTERM');
    process.stdout.write('INFO:     Application shutdown complete.\n');
    process.exit(0);
  };
  return shutdown;
}

/**
 * A headless rank (vLLM's run_headless, node_rank > 0): no API server; join the head's store, load
 * this node's share of the model, then run the workers until a signal (or the head goes away). Its
 * workers log what a worker logs (gpu_model_runner.py, gpu_worker.py, compilation/): the shards,
 * "Model loading took", their own compile, the KV memory they profiled, their CUDA graphs; the engine's
 * "GPU KV cache size" and "init engine" lines are the head's (EngineCore runs there).
 */
async function headlessRank(rdv: RendezvousArgs, s: SimSetup): Promise<void> {
  const { version, loadMs, plan, profile } = s;
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    info('serve.py:206', 'Received 15 signal.');
    process.exit(0);
  };
  onSignals(['SIGTERM', 'SIGINT'], stop);
  const joined = await joinStore(rdv, version);
  info('gpu_model_runner.py:1770', `Starting to load model ${s.args.model}...`);
  const shards = 4;
  for (let i = 0; i <= shards; i++) {
    info(
      'default_loader.py:262',
      `Loading safetensors checkpoint shards: ${String(Math.round((i / shards) * 100)).padStart(3)}% Completed | ${i}/${shards}`,
    );
    if (i < shards) await pause((loadMs * 0.5) / shards);
  }
  info(...modelLoadingLine(version, plan.weightsPerGpuBytes / GIB, (loadMs * 0.5) / 1000));
  if (!profile.engine.enforceEager) await simCompile(s);
  joined.loaded();
  info('gpu_worker.py:276', `Available KV cache memory: ${(plan.availableKvBytes / GIB).toFixed(2)} GiB`);
  if (!profile.engine.enforceEager) {
    await pause(loadMs * 0.1);
    info(
      'gpu_model_runner.py:2625',
      `Graph capturing finished in ${((loadMs * 0.25) / 1000).toFixed(0)} secs, took 0.52 GiB`,
    );
  }
  // alive until a signal: the executor's workers wait for the head's next step
  setInterval(() => {}, 1 << 30);
}
