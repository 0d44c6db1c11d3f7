// serve --nodes: read and validate every input, plan the cluster over the nodes file, hand the plan
// to the engine's executor, render its events and outcome with serve's one renderer (render.ts),
// and pick the exit code from errors.ts.
import { resolve } from 'node:path';
import { existsSync } from 'node:fs';
import type { ClusterLaunch } from '../../engine/registry.js';
import { readSecrets } from '../../engine/plan.js';
import type { ServeOptions } from './options.js';
import type { ServeOutcome } from '../../engine/events.js';
import { stateDir } from '../../util/paths.js';
import { loadNodesFile, type LoadedProfile } from '../../profiles/load.js';
import { servedName } from '../../profiles/render.js';
import { HOST_TRAITS, traitsOf } from '../../engine/runtime/traits.js';
import {
  allNodes,
  gpusDeclared,
  exportLine,
  fabricAddress,
  planCluster,
  toClusterPlan,
  readFabric,
  fabricEnvs,
  rdmaNodes,
  type PlannedCluster,
  imageMismatch,
  readImageIds,
  NODE_CACHE_ROOT,
} from '../../engine/cluster/index.js';
import { shellQuote, envelope, c } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { UsageError, LaunchError, ProblemsFound, exitCodeOf } from '../../errors.js';
import { withInterrupts as withCancel } from '../../util/interrupt.js';
import { imagePinOfNodes, lockFileOf, writePin } from '../../engine/pins.js';
import type { NodesFile, Profile } from '../../profiles/schema.js';
import { withContainerImage } from '../../engine/runtime/container.js';

/**
 * quiet: nothing said while it runs and no pin written (an upgrade over nodes serves the candidate,
 * or the previous pin again, through here: it says and pins itself); the outcome is returned.
 */
export async function serveNodes(
  profileName: string,
  opts: ServeOptions,
  how: { quiet?: boolean } = {},
): Promise<ServeOutcome | undefined> {
  const quiet = how.quiet === true;
  const nf = loadNodesFile(opts.nodes!);
  // the record names the file by its whole path: stop without --nodes reads it from any folder
  // --runtime is the profile's engine.runtime for this run, with --nodes as without
  const sets = [...(opts.set ?? []), ...(opts.runtime ? [`engine.runtime=${opts.runtime}`] : [])];
  // a profile, or a model id whose config.json pull fetched (its profile generated for these nodes); the model's files
  // feed the plan
  const { readForNodes } = await import('../../engine/inputs.js');
  const target = await readForNodes(
    profileName,
    { nodes: allNodes(nf).length, gpusPerNode: Math.min(...allNodes(nf).map((n) => n.gpus)) },
    { ...opts, set: sets },
  );
  const { pin, loaded } = asPinned(target.loaded, opts, quiet);
  // the model whole in this host's cache (where pull --nodes copies it from, to the same path on every node): the ranks
  // run offline
  const gate = await nodesModelGate(loaded.profile, opts);
  const inputs = {
    ...opts,
    set: sets,
    platform: opts.platform ?? target.platform,
    nodesFile: resolve(opts.nodes!),
    loaded,
    modelRead: target.modelRead,
    offline: gate.offline,
  };
  if (target.platformNote && !opts.json && !quiet) note(target.platformNote);
  if (target.generated && !opts.json && !quiet) for (const w of target.generated.why) note(c.dim(`# ${w}`));
  // Every input is read before anything starts.
  // The plan is checked before anything is read from the nodes; --dry-run never connects to them.
  const planned = planCluster(profileName, nf, inputs);
  planned.warnings.push(...gate.warnings);
  if (opts.dryRun) {
    printClusterPlan(planned, opts.json);
    return undefined;
  }
  for (const w of gate.warnings) if (!quiet) note(`${c.yellow('warning')}: ${w}`);
  // NCCL_IB_HCA / NCCL_IB_GID_INDEX / UCX_NET_DEVICES from what each node's fabric shows now (the GID index moves after
  // a reboot).
  const fabric = await withCancel((signal) => readFabric(nf, signal));
  const pc = planCluster(profileName, nf, inputs, fabricEnvs(nf, fabric), rdmaNodes(fabric));
  // the head reached beyond loopback without a key: said at every start, --json or not (stderr)
  for (const w of pc.warnings.filter((x) => x.startsWith('WARNING: '))) note(w);
  const r = pc.resolved;
  // The same lookup (and fix line) as one-node serve: the key from the variable the profile names.
  const secrets = readSecrets(r.profile);
  const joinTimeoutS = rayJoinTimeoutS();
  // serve's own inputs, kept in the record: an upgrade serves the candidate (and the previous pin) the same way
  const plan = {
    ...toClusterPlan(pc, { ...inputs, stateDir: stateDir(), joinTimeoutS }),
    launch: launchOf(profileName, opts, sets),
  };
  // the one renderer as on one host (--json: nothing while it runs, one envelope at the end)
  const { textRenderer, jsonRenderer } = await import('./render.js');
  const render = quiet
    ? { event: () => {}, outcome: () => {} }
    : opts.json
      ? jsonRenderer(codeOf, opts.nodes)
      : textRenderer({ profile: r.profile.name, simulated: opts.engine === 'sim', nodes: opts.nodes });
  const { serve } = await import('../../engine/serve.js');
  const out = await withCancel((signal) => serve(plan, { onEvent: (e) => render.event(e), signal, secrets }));
  render.outcome(out);
  if (quiet) return out;
  if (out.status === 'launch-failed') throw new LaunchError('', []);
  // the first healthy serve over the nodes pins the image ID every node agreed on (checked before the start)
  if (out.status === 'healthy' && pin.ref && !pin.pinned)
    await pinNodesImage(nf, pc, pin.ref, r.profile.engine.vllmVersion, opts.json);
  if (out.status !== 'healthy') throw new ProblemsFound('the deep probe failed');
  return out;
}

/** The profile as the nodes run it, and its image's pin (imagePinOfNodes); the pin said unless quiet or --json. */
function asPinned(given: LoadedProfile, opts: ServeOptions, quiet: boolean) {
  // the image as pinned: every node runs the pin's image ID, never its own copy of a tag
  const pin = imagePinOfNodes(given, stateDir(), opts.repin);
  const loaded = pin.pinned ? { ...given, profile: withContainerImage(given.profile, pin.pinned.run) } : given;
  if (pin.pinned && !opts.json && !quiet)
    note(
      c.dim(
        `image ${pin.ref}: every node runs the pin ${pin.pinned.run} (pinned ${pin.pinned.pin.at}${pin.pinned.pin.image ? ` from ${pin.pinned.pin.image}` : ''}); a node without that very image is refused`,
      ),
    );
  return { pin, loaded };
}

/**
 * How long each node's `ray start` may take before its process group is ended (a worker that cannot
 * reach the head otherwise retries for minutes and joins late): SPARKCTL_RAY_JOIN_TIMEOUT_S, else 90.
 */
function rayJoinTimeoutS(): number {
  const joinEnv = process.env.SPARKCTL_RAY_JOIN_TIMEOUT_S;
  const joinTimeoutS = joinEnv === undefined ? 90 : Number(joinEnv);
  if (!(Number.isInteger(joinTimeoutS) && joinTimeoutS > 0))
    throw new UsageError(`SPARKCTL_RAY_JOIN_TIMEOUT_S: "${joinEnv}" is not a whole number of seconds`, [
      'unset it for the default (90)',
    ]);
  return joinTimeoutS;
}

/**
 * What the cluster's record keeps of serve's inputs (a profile file and the profiles folder by their whole path:
 * upgrade may run from another folder).
 */
function launchOf(profileName: string, opts: ServeOptions, sets: string[]): ClusterLaunch {
  const asked = /[/\\]|\.ya?ml$/.test(profileName) && existsSync(profileName) ? resolve(profileName) : profileName;
  return {
    asked,
    sets,
    ...(opts.profiles ? { profilesDir: resolve(opts.profiles) } : {}),
    ...(opts.platform ? { platform: opts.platform } : {}),
    engine: opts.engine === 'sim' ? 'sim' : 'vllm',
    ...(opts.engine !== 'sim' && opts.vllmBin ? { vllmBin: opts.vllmBin } : {}),
    ...(opts.simLoadSeconds !== undefined ? { simLoadSeconds: opts.simLoadSeconds } : {}),
    prewarm: opts.prewarm,
    ...(opts.readyTimeout !== undefined ? { readyTimeoutMs: opts.readyTimeout } : {}),
    ...(opts.skipPreflight ? { skipPreflight: true } : {}),
  };
}

const codeOf = (o: ServeOutcome) => exitCodeOf(o.status);

/**
 * serve's model gate over nodes: the Hub model whole in this host's cache (the one `pull --nodes`
 * copies to every node, at the same path) before anything starts, else the pull commands; whole:
 * every rank runs with HF_HUB_OFFLINE=1. --skip-preflight makes it a warning, --dry-run says it.
 */
async function nodesModelGate(p: Profile, opts: ServeOptions): Promise<{ offline: boolean; warnings: string[] }> {
  if (opts.engine === 'sim' || !p.model.id || p.model.path) return { offline: false, warnings: [] };
  const { checkModelCache, missingLine } = await import('../../engine/model-cache.js');

  const m = await checkModelCache(p, HOST_TRAITS);
  if (m.state?.complete) return { offline: true, warnings: [] };
  const line = missingLine(m);
  const fix = `fetch it here and copy it to every node first: ${m.pull} --nodes ${opts.nodes}`;
  if (opts.dryRun) return { offline: false, warnings: [`serve would refuse: ${line}; ${fix}`] };
  if (opts.skipPreflight)
    return {
      offline: false,
      warnings: [`${line}; with --skip-preflight each node's vLLM will try to download it itself (${fix})`],
    };
  throw new UsageError(line, [fix]);
}

/** serve --nodes --dry-run: every node's command, in start order (--json: the multinode-plan envelope). */
function printClusterPlan(pc: PlannedCluster, json?: boolean) {
  const { nf, steps, resolved: r } = pc;
  const p = r.profile;
  if (json) {
    say(
      envelope('multinode-plan', {
        profile: p.name,
        servedName: servedName(p),
        executor: pc.executor,
        gpusNeeded: pc.gpusNeeded,
        gpusInCluster: gpusDeclared(nf),
        url: pc.url,
        model: { env: pc.model.env, modelPath: pc.model.modelPath, mounts: pc.model.mounts, notes: pc.model.notes },
        steps,
        // vLLM's start caches on each node: the folder under the node user's cache root, the variables pointed there
        caches: pc.caches
          ? {
              root: NODE_CACHE_ROOT,
              dir: pc.caches.rel,
              key: pc.caches.key,
              vars: pc.caches.vars.map(([n]) => n),
              kept: pc.caches.kept,
            }
          : null,
        warnings: pc.warnings,
      }),
    );
    return;
  }
  for (const w of pc.warnings) note(`${c.yellow('warning')}: ${w}`);
  const how =
    pc.executor === 'ray'
      ? 'with Ray'
      : `with vLLM's own multi-node launch (--nnodes ${steps.length}, rendezvous ${fabricAddress(nf.head)}:${nf.masterPort})`;
  say(
    c.dim(
      `# ${p.name}: TP ${p.parallel.tensor} x PP ${p.parallel.pipeline} = ${pc.gpusNeeded} GPUs over ${allNodes(nf).length} nodes ${how}`,
    ),
  );
  say(
    c.dim(
      '# NCCL_IB_HCA, NCCL_IB_GID_INDEX and UCX_NET_DEVICES are read from each node at launch (sparkctl preflight --nodes shows them)',
    ),
  );
  for (const m of pc.model.notes) say(c.dim(`# ${m}`));
  if (pc.caches)
    say(
      c.dim(
        `# start caches on each node: ${NODE_CACHE_ROOT}/${pc.caches.rel} (made 0700 by the launch, ${pc.caches.vars.map(([n]) => n).join(', ')} pointed there${pc.caches.kept.length ? `; the profile sets ${pc.caches.kept.join(', ')} itself` : ''})`,
      ),
    );
  const keyed = (a: string[]) =>
    `${p.server.apiKeyEnv ? `VLLM_API_KEY="$${p.server.apiKeyEnv}" ` : ''}${a.map(shellQuote).join(' ')}`;
  steps.forEach((s, i) => {
    say(
      c.dim(`# ${i + 1}. ${s.node} (${s.role}${pc.executor === 'native' ? `, rank ${i}` : ''}, ${s.address}) over ssh`),
    );
    const inLine = traitsOf(s).carriesEnv;
    if (!inLine) say(exportLine(s.env));
    for (const a of s.argv)
      say(a[0] === 'ray' || inLine || (pc.executor === 'native' && i > 0) ? a.map(shellQuote).join(' ') : keyed(a));
    say();
  });
  say(
    c.dim(
      pc.executor === 'ray'
        ? `# then: wait until Ray on ${nf.head.name} lists exactly these ${allNodes(nf).length} nodes and ${gpusDeclared(nf)} GPUs; readiness at ${pc.url}`
        : `# the head serves only once all ${steps.length} ranks have joined; readiness at ${pc.url}, every rank's process watched on its node`,
    ),
  );
}

/** The first healthy serve over the nodes pins the image ID every node agreed on (read again on each node). */
async function pinNodesImage(
  nf: NodesFile,
  pc: PlannedCluster,
  ref: string,
  vllmVersion: string,
  json?: boolean,
): Promise<void> {
  // only where the nodes' vLLM comes from an image (the host's install has no image to pin)
  const first = pc.steps[0];
  if (!first || traitsOf(first).vllmFrom !== 'image') return;
  const ids = await withCancel((signal) => readImageIds(nf, pc.steps, signal));
  const one = [...new Set(ids.map((x) => x.id))];
  if (one.length !== 1 || !one[0]) {
    if (!json)
      note(
        `${c.yellow('warning')}: image ${ref} not pinned: ${imageMismatch(ref, ids) ?? 'its ID was not read on every node'}`,
      );
    return;
  }
  const pin = {
    at: new Date().toISOString(),
    vllmVersion,
    image: ref,
    imagePinned: one[0],
    imageId: one[0],
    sets: [`container.image=${one[0]}`],
  };
  writePin(stateDir(), pc.resolved.profile.name, pin, lockFileOf(pc.resolved.profile, pc.resolved.file));
  if (!json)
    note(
      c.dim(
        `image ${ref}: pinned to its image ID ${one[0]} (the same on every node); serve --nodes runs it from now on, never the tag`,
      ),
    );
}
