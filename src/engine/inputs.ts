// What plan and serve read before they plan: the profile (or a model that has none), the model's own
// files, the host's GPUs (the same typed GpuFact serve's preflight hands on) and the installed vLLM's
// version. Each read is bounded; none of them downloads, launches or writes anything but a cache.
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { loadProfile, parseProfile, loadPlatform, DEFAULT_PLATFORM, type LoadedProfile } from '../profiles/load.js';
import { resolveLoaded, hostShapeFromGpus, readModelFor, readText, type Resolved } from '../profiles/resolve.js';
import { hostFromPlatform, type HostShape } from '../profiles/validate.js';
import {
  profileForModel,
  clusterProfileForModel,
  modelTarget,
  pickModelPort,
  type ModelTarget,
} from '../profiles/from-model.js';
import { parseListeningPorts } from '../host/parse.js';
import { Registry } from './registry.js';
import { readModel, type ModelRead } from '../model/read.js';
import type { ModelFacts } from '../model/facts.js';
import { familySettings } from '../profiles/families.js';
import { valueStatus } from '../profiles/vllm-flags.js';
import type { GpuFact } from '../host/gpu-facts.js';
import {
  installedVllm,
  decideVersion,
  type InstalledVllm,
  type VersionDecision,
  type VersionGuess,
  statedOnly,
} from './vllm-version.js';
import { versionGuess } from './version-guess.js';
import { isPep440 } from '../profiles/versions.js';
import type { Platform } from '../profiles/schema.js';
import { stateDir } from '../util/paths.js';
import { traitsOfProfile } from './runtime/traits.js';
import { UsageError } from '../errors.js';
import { commandLine } from '../output/format.js';
import { readTextOrNullSync } from '../util/read.js';
import {
  decideImagePin,
  inspectForPin,
  isPinnedRef,
  lockFileOf,
  lockFix,
  lockNotWritable,
  pinsAt,
  type ImagePinDecision,
} from './pins.js';

interface PlanReadOptions {
  profiles?: string;
  set?: string[];
  gpus?: number;
  platform?: string;
  gpuMemoryBytes?: number;
  /** the vLLM serve would run; its version decides the flags when engine.vllmVersion is auto */
  vllmBin?: string;
  engine?: 'vllm' | 'sim';
  /** GPUs already read (serve's preflight): not read again */
  gpuFacts?: GpuFact[];
  /** false: never read the host's GPUs (the simulator) */
  readHost?: boolean;
  gpuTimeoutMs?: number;
  /** serve --runtime: a container's vLLM is the image's, read from it (the host's is not asked) */
  runtime?: 'host' | 'container';
  /** a profile already parsed (profiles import: not on disk yet); `name` is then only its label */
  loaded?: LoadedProfile;
  /** the shape to plan for, given (plan --nodes: the nodes file's GPUs): no GPU of this host is read */
  host?: HostShape;
  /**
   * what an earlier prepare of the same name read (serve: before its preflight): planned again from it, nothing read
   * twice but the GPUs
   */
  prior?: Prepared['read'];
  /**
   * runtime container: the image runs as pinned (pins.ts decideImagePin) from this state folder's pin
   * file; only read here (serve writes a new pin once it has served). --repin: the reference pinned anew.
   */
  pin?: { stateDir: string; repin?: boolean };
  /** serve MODEL: a generated profile takes the first free port from 8000 up (pickModelPort), not always 8000 */
  pickPort?: boolean;
}

export interface Prepared extends Resolved {
  modelRead: ModelRead;
  vllm: VersionDecision;
  /** the profile was generated for a model (serve MODEL / plan MODEL) */
  generated?: { target: ModelTarget; why: string[] };
  /** one line: which host the plan is for */
  hostLine: string;
  /** runtime container: the image as read (its entrypoint decides how the command starts vLLM) */
  image?: {
    ref: string;
    entrypoint?: string[];
    /** its content id, as read (the start caches are kept per image by it) */
    id?: string;
  };
  /**
   * what was read to plan it (the profile file, the model's files, the installed vLLM, the image): a second plan starts
   * from here
   */
  read: {
    loaded?: LoadedProfile;
    target?: ModelTarget;
    modelRead: ModelRead;
    installed?: InstalledVllm;
    image?: Awaited<ReturnType<typeof imageVersion>>;
    pin?: ImagePinDecision;
  };
  /** runtime container with `pin`: what the profile's image reference runs as, and why */
  imagePin?: ImagePinDecision;
}

/** The host's GPUs through the typed GpuFact path (nvidia-smi --query-gpu, bounded); undefined when none answer. */
async function readHostGpus(timeoutMs = 1500): Promise<GpuFact[] | undefined> {
  const [{ readGpuRows }, { gpuFacts }, { RealHost }] = await Promise.all([
    import('../health/gpu.js'),
    import('../host/gpu-facts.js'),
    import('../host/real.js'),
  ]);
  const rows = await readGpuRows(new RealHost(timeoutMs), timeoutMs);
  if (!rows?.length) return undefined;
  return gpuFacts({ gpus: rows, computeApps: [] });
}

const isFolder = (p: string) => {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
};

/** A profile name or file, or else a model (a folder with config.json, or a hub id). */
function loadTarget(name: string, opts: PlanReadOptions): { loaded?: LoadedProfile; target?: ModelTarget } {
  if (opts.loaded) return { loaded: opts.loaded };
  try {
    return { loaded: loadProfile(name, { profilesDir: opts.profiles, sets: opts.set }) };
  } catch (e) {
    const looksLikeFolder = name.includes('/') && isFolder(name);
    const target =
      e instanceof UsageError && /^unknown profile/.test(e.message) ? modelTarget(name, looksLikeFolder) : undefined;
    if (!target) throw e;
    if (target.path && !existsSync(join(target.path, 'config.json')))
      throw new UsageError(`${name}: a folder without a config.json`, [
        'give the folder that holds the model (config.json and the weights), a hub id such as Qwen/Qwen3-8B, or a profile name',
      ]);
    return { target };
  }
}

function hostLine(host: HostShape, platformName: string): string {
  const gib = (host.gpuMemoryBytes / 1024 ** 3).toFixed(1);
  const name = host.gpuName ?? 'GPU';
  if (host.gpusSource === 'detected')
    return `this host: ${host.gpus} x ${name}, ${gib} GiB each (read from nvidia-smi${host.memoryFlag ? '; the memory from --gpu-memory' : ''})${host.computeCapability ? `, compute capability ${host.computeCapability}` : ''}`;
  if (host.multiNode)
    return `${host.nodes} nodes x ${host.gpusPerNode ?? host.gpus} x ${name}, ${gib} GiB each (the nodes file; platform ${platformName})`;
  if (host.gpusSource === 'flag' && host.read)
    return `this host's ${name}, ${gib} GiB each (read from nvidia-smi${host.memoryFlag ? '; the memory from --gpu-memory' : ''}), counted as ${host.gpus} (--gpus)${host.computeCapability ? `, compute capability ${host.computeCapability}` : ''}`;
  if (host.gpusSource === 'flag')
    return `${host.gpus} x ${gib} GiB GPUs (--gpus${platformName ? `, platform ${platformName}` : ''})`;
  return `platform ${platformName}: ${host.gpus} x ${name}, ${gib} GiB each (not read from this host)`;
}

/** Where the vLLM that will run comes from, by the profile's runtime: the host's install or the image. */
const vllmFromImage = (p: LoadedProfile['profile'] | undefined, runtime: PlanReadOptions['runtime']) =>
  traitsOfProfile(p ?? { engine: { runtime: 'host' } }, runtime).vllmFrom === 'image';

/**
 * The model's files, the host's GPUs and the installed vLLM, read at once: each only where it was not
 * given or read before (the installed vLLM not at all where the image's runs).
 */
function readModelGpusVllm(
  where: ModelTarget,
  loaded: LoadedProfile | undefined,
  askHost: boolean,
  opts: PlanReadOptions,
): Promise<[ModelRead, GpuFact[] | undefined, InstalledVllm | undefined]> {
  const prior = opts.prior;
  return Promise.all([
    // a model not read before (serve --pull fetches it between the two plans) is read now
    prior?.modelRead.facts
      ? prior.modelRead
      : loaded
        ? readModelFor(loaded.profile)
        : readModel({ readFile: readText, env: () => process.env }, where, { timeoutMs: 2000 }),
    opts.gpuFacts
      ? Promise.resolve(opts.gpuFacts)
      : askHost
        ? readHostGpus(opts.gpuTimeoutMs)
        : Promise.resolve(undefined),
    prior || vllmFromImage(loaded?.profile, opts.runtime)
      ? Promise.resolve(prior?.installed)
      : installedVllm(opts.vllmBin ?? 'vllm', { cacheFile: join(stateDir(), 'cache', 'vllm-versions.json') }),
  ]);
}

/**
 * The profile generated for a model that has none (profileForModel), for the host seen or else the
 * platform's, the operator's --set over it and, for serve MODEL, the first free port; refused where the
 * model's config.json is not on this host.
 */
function generateProfile(
  name: string,
  g: { target: ModelTarget; modelRead: ModelRead; host: HostShape | undefined; platform: Platform },
  opts: PlanReadOptions,
): { lp: LoadedProfile; generated: NonNullable<Prepared['generated']> } {
  const { target, modelRead, host, platform } = g;
  if (!modelRead.facts) {
    throw new UsageError(
      `${name}: not a profile, and the model's config.json is not on this host${modelRead.error ? ` (${modelRead.error})` : ''}`,
      [
        target.id
          ? `download it first: sparkctl pull ${target.id} (--config-only is enough to plan; then run this again: sparkctl reads the Hugging Face cache offline)`
          : 'give the folder that holds config.json',
        modelRead.searched.length
          ? `looked at: ${modelRead.searched.join(', ')}`
          : 'or name a profile: sparkctl profiles list',
      ],
    );
  }
  let shape = host ?? hostFromPlatform(platform, opts.gpus);
  if (opts.gpuMemoryBytes) shape = { ...shape, gpuMemoryBytes: opts.gpuMemoryBytes };
  const choice = profileForModel(target, modelRead.facts, shape, { unified: platform.gpu.unifiedMemory });
  const generated = {
    target,
    why: opts.set?.length ? [...choice.why, `then --set ${opts.set.join(' ')} (over these choices)`] : choice.why,
  };
  const file = `(generated for ${name})`;
  let lp: LoadedProfile = {
    profile: parseProfile(JSON.parse(JSON.stringify(choice.profile)), file, opts.set ?? []),
    file,
  };
  if (opts.pickPort && !(opts.set ?? []).some((x) => x.startsWith('server.port='))) {
    const replicas = typeof lp.profile.parallel.replicas === 'number' ? lp.profile.parallel.replicas : 1;
    const picked = pickModelPort(replicas, portsTaken(lp.profile.name));
    if (picked) {
      lp = { ...lp, profile: { ...lp.profile, server: { ...lp.profile.server, port: picked.port } } };
      generated.why.push(picked.why);
    }
  }
  return { lp, generated };
}

/**
 * The vLLM the flags are rendered for: the one found (the image's, else the host's), as the simulator
 * plays it, or the one guess where none was read.
 */
function decideVllm(
  profile: LoadedProfile['profile'],
  x: { platform: Platform; sim: boolean; read?: { installed: InstalledVllm }; ownVllm?: InstalledVllm },
): VersionDecision {
  const { platform, sim, read, ownVllm } = x;
  // the one guess where no vLLM is read, the same for every verb
  const guess = versionGuess(profile, platform);
  const asked = profile.engine.vllmVersion;
  const found = read?.installed ?? ownVllm!;
  const actual = sim ? simPlays(asked, read ? { bin: 'the simulator' } : found, guess) : found;
  const vllm = decideVersion(asked, actual, guess);
  if (sim && asked === 'auto') vllm.note = `the simulator plays vLLM ${vllm.version} (${actual.why})`;
  return vllm;
}

/** Read everything a plan needs, then resolve (pure) against it. */
export async function prepare(name: string, opts: PlanReadOptions): Promise<Prepared> {
  const prior = opts.prior;
  const { loaded, target } = prior ? { loaded: prior.loaded, target: prior.target } : loadTarget(name, opts);
  const sim = opts.engine === 'sim';
  // --gpus and --gpu-memory override the count and the memory only: the GPU model, its memory and
  // compute capability are still read where this host has GPUs (--platform plans for another host)
  const askHost = opts.readHost !== false && !sim && !opts.host && opts.platform === undefined;
  const where = target ?? { id: loaded!.profile.model.id, path: loaded!.profile.model.path };
  const [modelRead, gpus, installed] = await readModelGpusVllm(where, loaded, askHost, opts);
  const platform = loadPlatform(opts.platform ?? loaded?.profile.platform ?? DEFAULT_PLATFORM);
  let host = opts.host ?? (gpus?.length ? hostShapeFromGpus(gpus, platform, opts.gpus) : undefined);
  let generated: Prepared['generated'];
  let lp = loaded;
  if (!lp) ({ lp, generated } = generateProfile(name, { target: target!, modelRead, host, platform }, opts));
  // the image as pinned: the profile's reference replaced by what its pin says runs (never a moved tag)
  const pin =
    vllmFromImage(lp.profile, opts.runtime) && opts.pin
      ? (prior?.pin ?? (await imagePinFor(lp.profile, lp.file, platform, opts.pin)))
      : undefined;
  if (pin && pin.run !== pin.ref)
    lp = { ...lp, profile: (await import('./runtime/container.js')).withContainerImage(lp.profile, pin.run) };
  // a generated profile knows its runtime (--set engine.runtime) only now
  // the simulator in a container plays the version it is given: its image is read for the entrypoint only
  // (a profile generated for a model is chosen afresh for the host now seen: its image is read for it)
  const read = vllmFromImage(lp.profile, opts.runtime)
    ? prior?.image && !generated
      ? prior.image
      : await imageVersion(lp.profile, platform, sim)
    : undefined;
  const ownVllm =
    installed ??
    (read
      ? undefined
      : await installedVllm(opts.vllmBin ?? 'vllm', { cacheFile: join(stateDir(), 'cache', 'vllm-versions.json') }));
  const vllm = decideVllm(lp.profile, { platform, sim, read, ownVllm });
  let profile = { ...lp.profile, engine: { ...lp.profile.engine, vllmVersion: vllm.version } };
  // a model id gets its family's parsers, as its recipes give them, where this vLLM has them
  if (generated && modelRead.facts)
    profile = withFamily(
      profile,
      modelRead.facts,
      vllm.version,
      generated.why,
      opts.set ?? [],
      thinkTokensIn(modelRead.dir),
      toolCallTokensIn(modelRead.dir),
    );
  if (host && opts.gpuMemoryBytes) host = { ...host, gpuMemoryBytes: opts.gpuMemoryBytes, memoryFlag: true };
  const r = resolveLoaded(
    { profile, file: lp.file },
    {
      gpus: opts.gpus,
      platform: opts.platform ?? (generated ? undefined : lp.profile.platform),
      gpuMemoryBytes: opts.gpuMemoryBytes,
      host,
      modelRead,
    },
  );
  return {
    ...r,
    modelRead,
    vllm,
    generated,
    hostLine: hostLine(r.host, r.platform.name),
    image: read?.image,
    imagePin: pin,
    read: { loaded, target, modelRead, installed: ownVllm, image: read, pin },
  };
}

/**
 * The pin decision for the image a profile would run (undefined where there is no image or no CLI to read it: the plan
 * says why).
 */
async function imagePinFor(
  p: LoadedProfile['profile'],
  file: string | undefined,
  platform: { name: string },
  x: { stateDir: string; repin?: boolean },
): Promise<ImagePinDecision | undefined> {
  const { imageFor, detectCli, containerCliArgs } = await import('./runtime/container.js');
  const { ofCli } = await import('./runtime/index.js');
  let ref: string;
  let images: ReturnType<typeof ofCli>['images'];
  try {
    ref = imageFor(p, platform);
    images = ofCli(detectCli(p)).images;
  } catch {
    return undefined;
  }
  if (!images) return undefined;
  // the one reader: the lock file beside the profile where the operator keeps one (pinnedIn: lockfile)
  const lock = lockFileOf(p, file);
  const at = pinsAt(x.stateDir, p.name, lock);
  const inspected = isPinnedRef(ref)
    ? { error: 'pinned by reference' }
    : await inspectForPin(images, containerCliArgs(p), ref);
  const d = decideImagePin(ref, at.file, inspected, x.repin);
  // a pin to be written where sparkctl may not write: refused now, before anything starts
  if (d.state !== 'given' && d.state !== 'kept' && d.state !== 'unpinned') {
    const why = lockNotWritable(x.stateDir, lock);
    if (why) throw new UsageError(why, [lockFix(lock!)]);
  }
  return { ...d, ...(at.finding ? { finding: at.finding } : {}), ...(lock ? { lock } : {}) };
}

/**
 * The ports another server holds, with who holds each: every port of a live sparkctl server of another
 * profile (its replicas, the router's address) and every TCP port this host listens on (/proc/net/tcp
 * and tcp6, bounded). A server of the same profile is left out: serve says it already runs.
 */
function portsTaken(profile: string): Map<number, string> {
  const out = new Map<number, string>();
  const own = new Set<number>();
  try {
    for (const e of new Registry(stateDir()).list()) {
      if (!e.alive) continue;
      const ports = [e.inst.port, ...(e.inst.routedAt ? [e.inst.routedAt.port] : [])];
      if (e.inst.profile === profile) for (const p of ports) own.add(p);
      else for (const p of ports) out.set(p, `held by ${e.inst.name} of profile ${e.inst.profile} (sparkctl status)`);
    }
  } catch {
    /* no readable state folder: the host's sockets still say what is taken */
  }
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string | null = null;
    try {
      text = readTextOrNullSync(f, { maxBytes: 8 * 1024 * 1024 });
    } catch {
      /* refused (past the bound): what was read from the registry stands */
    }
    for (const p of parseListeningPorts(text))
      if (!out.has(p) && !own.has(p)) out.set(p, 'listened on by another process');
  }
  return out;
}

/**
 * The family's tool-call and reasoning parsers on a generated profile (familySettings), each only
 * where the target vLLM's registry has it (a name it lacks would stop vLLM at its start) and the
 * operator did not --set it; `why` says what was added, from where, and what was left out.
 */
export function withFamily<P extends LoadedProfile['profile']>(
  p: P,
  facts: ModelFacts,
  version: string,
  why: string[],
  sets: string[],
  think?: boolean,
  toolCall?: boolean,
): P {
  const fam = familySettings(facts);
  if (!fam) return p;
  const engine = { ...p.engine };
  const added: string[] = [];
  for (const [key, flag, value] of [
    ['toolCallParser', '--tool-call-parser', fam.toolCallParser],
    ['reasoningParser', '--reasoning-parser', fam.reasoningParser],
  ] as const) {
    if (!value || sets.some((x) => x.startsWith(`engine.${key}=`)) || engine[key]) continue;
    if (valueStatus(version, flag, value) === 'no') {
      why.push(
        `${fam.family}: its recipes use ${flag} ${value}, which vLLM ${version} does not have: left out (a newer vLLM has it)`,
      );
      continue;
    }
    // vLLM's <think>-splitting parsers refuse a tokenizer without those tokens (BaseThinkingReasoningParser)
    if (key === 'reasoningParser' && THINK_PARSERS.has(value) && think === false) {
      why.push(
        `${fam.family}: its recipes use ${flag} ${value}, but this checkpoint's tokenizer has no <think> and </think> tokens, which that parser splits on: left out`,
      );
      continue;
    }
    // the <tool_call> parsers (hermes, qwen3_coder) refuse at vLLM's start a tokenizer without those tokens
    if (key === 'toolCallParser' && TOOL_CALL_PARSERS.has(value) && toolCall === false) {
      why.push(
        `${fam.family}: its recipes use ${flag} ${value}, but this checkpoint's tokenizer has no <tool_call> and </tool_call> tokens, which that parser needs: left out`,
      );
      continue;
    }
    engine[key] = value;
    added.push(`${flag} ${value}`);
  }
  if (added.length) why.push(`${fam.family}: ${added.join(', ')} (as its recipes serve it: ${fam.source})`);
  if (fam.note) why.push(`${fam.family}: ${fam.note}`);
  return { ...p, engine };
}

/** The reasoning parsers that split on <think> ... </think> (vLLM's BaseThinkingReasoningParser subclasses). */
const THINK_PARSERS = new Set(['qwen3', 'nemotron_v3', 'deepseek_r1', 'minimax_m2']);

/** The tool-call parsers that look for <tool_call> ... </tool_call> tokens (vLLM refuses to start them without). */
const TOOL_CALL_PARSERS = new Set(['hermes', 'qwen3_coder', 'qwen3_xml']);

/** Whether the checkpoint's tokenizer.json has both <tool_call> and </tool_call>; undefined where none can be read. */
export const toolCallTokensIn = (dir: string | undefined): boolean | undefined =>
  tokensIn(dir, ['<tool_call>', '</tool_call>']);

/**
 * Whether the checkpoint's tokenizer.json has both <think> and </think> (as vocabulary or added
 * tokens): true or false when it was read, undefined where there is none to read (a config-only pull).
 */
export const thinkTokensIn = (dir: string | undefined): boolean | undefined => tokensIn(dir, ['<think>', '</think>']);

function tokensIn(dir: string | undefined, tokens: string[]): boolean | undefined {
  if (!dir) return undefined;
  let text: string | null;
  try {
    text = readTextOrNullSync(join(dir, 'tokenizer.json'), { maxBytes: 64 * 1024 * 1024 });
  } catch {
    return undefined; // not a regular file, too large, unreadable: not known, and the parser stays
  }
  if (text === null) return undefined;
  // the tokens appear as JSON strings, in the vocabulary or the added tokens
  return tokens.every((t) => text!.includes(JSON.stringify(t)));
}

/** The vLLM of the image the container runtime would run, as an InstalledVllm (its failure a `why`, never a throw). */
export async function imageVersion(
  p: LoadedProfile['profile'],
  platform: { name: string },
  inspectOnly: boolean,
): Promise<{ installed: InstalledVllm; image?: Prepared['image'] }> {
  const { imageFor, detectCli, containerCliArgs } = await import('./runtime/container.js');
  const { imageVllm, versionFromRef } = await import('./runtime/image-version.js');
  let image: string;
  try {
    image = imageFor(p, platform);
  } catch (e) {
    // the plan refuses the same profile with its fix; here it only means no version was read
    return {
      installed: { bin: 'the container image', image: p.container?.image ?? 'none', why: (e as Error).message },
    };
  }
  let cli: ReturnType<typeof detectCli>;
  try {
    cli = detectCli(p);
  } catch (e) {
    // no CLI to read it with (a unit or manifest written on another machine): its reference may still say
    const stated = inspectOnly ? undefined : versionFromRef(image);
    const why = (e as Error).message;
    return {
      installed: stated
        ? { bin: 'the container image', image, version: stated.version, source: stated.from, why }
        : { bin: 'the container image', image, why },
    };
  }
  const r = await imageVllm({
    cli,
    cliArgs: containerCliArgs(p),
    image,
    inspectOnly,
    cacheFile: join(stateDir(), 'cache', 'image-vllm-versions.json'),
  });
  // not read here (not pulled yet, or a unit written for another host): what its reference states, if anything
  const stated = r.version || inspectOnly ? undefined : versionFromRef(image);
  const installed: InstalledVllm = stated
    ? { bin: `${cli} image ${image}`, image, version: stated.version, source: stated.from, why: r.why }
    : { bin: `${cli} image ${image}`, image, version: r.version, source: r.source, why: r.why };
  return { installed, image: { ref: image, entrypoint: r.entrypoint, ...(r.id ? { id: r.id } : {}) } };
}

/**
 * A pinned engine.vllmVersion that is not the installed vLLM: serve refuses (exit 2), since the flags
 * would be rendered for a vLLM that is not there; --dry-run shows the same as a warning.
 */
export function versionWarnings(v: VersionDecision, dryRun: boolean): string[] {
  const out: string[] = [];
  if (v.how === 'unknown') out.push(v.note);
  if (v.mismatch && v.image && v.installedFrom && statedOnly(v.installedFrom)) {
    // Not read (the image is not here): what its reference states is a strong hint, not a measurement.
    // Serve reads the image once it is here and refuses a real difference then; until then, say it.
    const how = v.installedFrom === 'tag' ? 'as its tag states' : "by NVIDIA's release notes for its NGC release";
    out.push(
      `engine.vllmVersion is pinned to ${v.version}, but the image ${v.image} carries vLLM ${v.installed} ${how} (not read here): the flags are rendered for the pin (fix: --set engine.vllmVersion=auto, or pin ${v.installed})`,
    );
  } else if (v.mismatch && v.image) {
    const msg = `engine.vllmVersion is pinned to ${v.version}, but the image ${v.image} has vLLM ${v.installed}: the flags would be rendered for a vLLM that is not there`;
    const fix = [
      `--set engine.vllmVersion=auto (render for the image's ${v.installed})`,
      `or --set container.image=REPO:TAG of an image with vLLM ${v.version}`,
    ];
    if (!dryRun) throw new UsageError(msg, fix);
    out.push(`${msg} (serve refuses this; fix: ${fix.join(', ')})`);
  } else if (v.mismatch) {
    const msg = `engine.vllmVersion is pinned to ${v.version}, but the installed vLLM is ${v.installed}: the flags would be rendered for a vLLM that is not there`;
    const fix = [
      `--set engine.vllmVersion=auto (render for the installed ${v.installed})`,
      `or install vLLM ${v.version} (${commandLine('pip', 'install', `vllm==${v.version}`)})`,
    ];
    if (!dryRun) throw new UsageError(msg, fix);
    out.push(`${msg} (serve refuses this; fix: ${fix.join(', ')})`);
  }
  return out;
}

/**
 * The version the simulator plays: a pin is what it runs; auto, the version SPARKCTL_SIM_VLLM_VERSION
 * names, else the vLLM serve would run (installed, or the image's), else the one guess every verb makes
 * where no vLLM is read: its flags and logs are the ones plan, k8s and monitoring render for this profile.
 */
function simPlays(pinned: string, found: InstalledVllm, guess: VersionGuess): InstalledVllm {
  if (pinned !== 'auto') return { bin: 'the simulator', version: pinned, source: 'cache' };
  const env = process.env.SPARKCTL_SIM_VLLM_VERSION;
  if (env && isPep440(env))
    return {
      bin: 'the simulator',
      version: env,
      source: 'cache',
      why: 'engine.vllmVersion auto: the version SPARKCTL_SIM_VLLM_VERSION names',
    };
  if (found.version)
    return {
      bin: 'the simulator',
      version: found.version,
      source: 'cache',
      why: `engine.vllmVersion auto: the version of the vLLM serve would run, ${found.image ? `in the image ${found.image}` : found.bin}`,
    };
  return {
    bin: 'the simulator',
    version: guess.version,
    source: 'cache',
    why: `engine.vllmVersion auto and no vLLM to read: ${guess.basis}, the guess every verb makes without one`,
  };
}

export interface ClusterTarget {
  loaded: LoadedProfile;
  modelRead: ModelRead;
  /** a model id's profile, generated for the cluster's shape: why each number */
  generated?: { target: ModelTarget; why: string[] };
  /** the platform the nodes are planned as, when it was not said (--platform) */
  platformNote?: string;
  platform?: string;
}

/**
 * What serve --nodes (and plan, preflight --nodes) reads before it plans: a profile, or a model id or
 * folder with no profile, whose config.json pull already put in the Hugging Face cache; the model's
 * files feed the plan either way (a --nodes dry-run planned without them). A model id gets a profile
 * generated for every GPU of the nodes (clusterProfileForModel), as one-node serve generates one
 * for the host.
 */
export async function readForNodes(
  name: string,
  shape: { nodes: number; gpusPerNode: number },
  opts: Pick<PlanReadOptions, 'profiles' | 'set' | 'platform'>,
): Promise<ClusterTarget> {
  const { loaded, target } = loadTarget(name, { profiles: opts.profiles, set: opts.set });
  if (loaded) return { loaded, modelRead: await readModelFor(loaded.profile) };
  const modelRead = await readModel({ readFile: readText, env: () => process.env }, target!, { timeoutMs: 2000 });
  if (!modelRead.facts)
    throw new UsageError(
      `${name}: not a profile, and the model's config.json is not on this host${modelRead.error ? ` (${modelRead.error})` : ''}`,
      [
        target!.id
          ? `download it first: sparkctl pull ${target!.id} --nodes FILE (the weights to every node; --config-only is enough to plan), then run this again`
          : 'give the folder that holds config.json',
        modelRead.searched.length
          ? `looked at: ${modelRead.searched.join(', ')}`
          : 'or name a profile: sparkctl profiles list',
      ],
    );
  // one GPU per node is the Spark's shape (GB10); say which platform the plan assumed
  const platformName = opts.platform ?? (shape.gpusPerNode === 1 ? 'dgx-spark-gb10' : DEFAULT_PLATFORM);
  const platformNote = opts.platform
    ? undefined
    : `planned as platform ${platformName} (${shape.gpusPerNode} GPU per node in the nodes file; say --platform NAME otherwise)`;
  const platform = loadPlatform(platformName);
  const choice = clusterProfileForModel(
    target!,
    modelRead.facts,
    shape.nodes,
    shape.gpusPerNode,
    platform.gpu.memoryGiB * 1024 ** 3,
    { unified: platform.gpu.unifiedMemory },
  );
  const why = [...choice.why];
  // the family's parsers, judged against the vLLM the nodes' platform is guessed to run (the nodes are not asked here)
  const fam = withFamily(
    choice.profile,
    modelRead.facts,
    versionGuess(choice.profile, platform).version,
    why,
    opts.set ?? [],
  );
  const withPlatform = { ...JSON.parse(JSON.stringify(fam)), platform: platformName };
  const file = `(generated for ${name} over ${shape.nodes} nodes)`;
  return {
    loaded: { profile: parseProfile(withPlatform, file, opts.set ?? []), file },
    modelRead,
    generated: {
      target: target!,
      why: opts.set?.length ? [...why, `then --set ${opts.set.join(' ')} (over these choices)`] : why,
    },
    platformNote,
    platform: platformName,
  };
}
