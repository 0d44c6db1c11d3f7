// upgrade: read (the running replicas and how they were served, the pin, the candidate resolved: an
// image to its digest, a vLLM to its version) -> plan (the current and candidate serve plans, the
// version diff, where the canary goes; refused flags are exit 2 before anything starts) -> act (the
// canary, the comparison, the roll or the undo: upgrade/upgrade.ts) -> pin, record, render.
import { shownAddress } from '../../util/socket-url.js';
import { interrupts } from '../../util/interrupt.js';
import { Registry, type Entry } from '../../engine/registry.js';
import { relaunchPlan, type Relaunch } from '../../engine/relaunch-plan.js';
import { registeredServers, registeredCluster } from '../registered.js';
import { recordOf } from '../../engine/relaunch.js';
import { readSecrets } from '../../engine/plan.js';
import { runtimeFor } from '../../engine/runtime/index.js';
import { planMemory } from '../../profiles/planner.js';
import { stateDir } from '../common.js';
import { envelope, c, formatDuration } from '../../output/format.js';
import { say, note } from '../../output/log.js';
import { UsageError, ExitWith, ExitCode } from '../../errors.js';
import { versionDiff, diffLines, type VersionDiff } from '../../upgrade/diff.js';
import { flagsPlanLines, flagsFields, type FlagsRead } from '../../upgrade/flag-defaults.js';
import type { HelpSide } from '../../upgrade/help-read.js';
import { compareSides, fieldOfFlag } from './help-tables.js';
import { executableFor } from '../../engine/plan.js';
import {
  readPins,
  writePin,
  rollbackPins,
  writePinFile,
  resolveImagePin,
  isPinnedRef,
  lockFileOf,
  lockFix,
  lockNotWritable,
  type Pin,
} from '../../engine/pins.js';
import { candidateImage, type CandidateImage } from '../../upgrade/candidate-image.js';
import type { RuntimeImages } from '../../engine/runtime/runtime.js';
import type { ContainerCli } from '../../engine/runtime/container.js';
import { appendUpgrade, whoAmI } from '../../upgrade/record.js';
import { defaultGolden } from '../../upgrade/measure.js';
import type { UpgradeEvent, UpgradeOutcome, UpgradeStatus } from '../../upgrade/upgrade.js';
import type { Thresholds } from '../../upgrade/judge.js';
import type { UpgradeOptions } from './options.js';
import { checkRecordedExec } from '../../engine/record-exec.js';
import { containerCliArgs } from '../../engine/runtime/container.js';

/**
 * --canary-gpus: a comma list of GPU indices, contiguous and ascending (a replica's GPUs are a run from
 * parallel.firstGpu).
 */
function canaryGpusOf(text: string | undefined): number[] | undefined {
  if (text === undefined) return undefined;
  const ids = /^\d{1,3}(,\d{1,3})*$/.test(text.trim()) ? text.trim().split(',').map(Number) : undefined;
  if (!ids)
    throw new UsageError(`--canary-gpus: "${text.slice(0, 40)}" is not a list of GPU indices`, [
      'a comma list such as 4,5 (the GPUs the canary runs on)',
    ]);
  if (ids.some((g, i) => i > 0 && g !== ids[i - 1]! + 1))
    throw new UsageError(`--canary-gpus: ${text} is not a contiguous run of GPUs`, [
      `a replica runs on consecutive GPUs from its first: e.g. ${ids[0]},${ids[0]! + 1}`,
    ]);
  return ids;
}

function checkInputs(opts: UpgradeOptions): void {
  const given = [opts.image && '--image', opts.vllm && '--vllm', opts.rollback && '--rollback'].filter(Boolean);
  if (given.length > 1 || (opts.rollback && opts.vllmBin))
    throw new UsageError(
      `${[...given, opts.vllmBin && '--vllm-bin'].filter(Boolean).join(' and ')}: one candidate at a time`,
      ['--image REF, or --vllm VERSION (with --vllm-bin PATH on a host), or --vllm-bin PATH, or --rollback'],
    );
  if (!given.length && !opts.vllmBin)
    throw new UsageError('upgrade: no candidate given', [
      '--image REF (a container), --vllm VERSION, --vllm-bin PATH (another vllm install), or --rollback',
    ]);
}

/**
 * The vLLM version the replicas run, as the comparison judges it: on a host, the version read from the
 * install they started on (the launch's fingerprint), not the one the profile states. A profile saying
 * 0.27.2 over an install whose dist-info says 0.27.2.dev0+g6adad0876.cpu made the same install, offered
 * as the candidate (read: the long form), "another vLLM version": greedy answers and the chat template
 * were then judged by similarity, and a changed chat template passed (found by the real host run).
 */
export function runningVersion(
  rec: { vllm: { resolved: string }; fingerprint?: { version: string } } | undefined,
): string | undefined {
  return rec?.fingerprint?.version ?? rec?.vllm.resolved;
}

/** What the replicas run now, as a pin: explicit --set, so returning to it undoes whatever came after. */
async function currentPin(cur: Relaunch, entries: Entry[]): Promise<Pin> {
  const rec = recordOf(entries.filter((e) => e.inst.role !== 'router'));
  const p = cur.plan.profile;
  const sets = [`engine.vllmVersion=${rec?.vllm.asked ?? p.engine.vllmVersion}`];
  let imagePinned: string | undefined;
  let imageId: string | undefined;
  // the reference the profile names (serve's pin decision keeps it), else what the record ran
  const image = cur.prepared.imagePin?.ref ?? rec?.image;
  const images = runtimeFor(cur.plan).images;
  if (images && rec?.image) {
    const r = await resolveImagePin(images, containerCliArgs(p), rec.image);
    imagePinned = r.pinned;
    imageId = r.id;
    sets.push(`container.image=${imagePinned}`);
  }
  return {
    at: new Date().toISOString(),
    vllmVersion: runningVersion(rec) ?? p.engine.vllmVersion,
    image,
    imagePinned,
    imageId,
    vllmBin: cur.plan.engine === 'vllm' ? cur.started.vllmBin : undefined,
    ...(rec?.fingerprint ? { fingerprint: rec.fingerprint } : {}),
    sets,
  };
}

interface Candidate {
  sets: string[];
  vllmBin?: string;
  image?: string;
  imagePinned?: string;
  imageId?: string;
  /** --rollback: the pin file as it will be once the rollback is done */
  rollback?: ReturnType<typeof rollbackPins>;
  /** the image: here, pulled now, or (--dry-run) would be pulled */
  fetched?: CandidateImage;
}

/** The candidate image here (pulled when it is not, unless --no-pull; --dry-run pulls nothing); progress on stderr. */
async function fetchCandidate(
  opts: UpgradeOptions,
  cur: Relaunch,
  images: RuntimeImages,
  ref: string,
): Promise<CandidateImage> {
  const rt = runtimeFor(cur.plan);
  const ac = interrupts();
  try {
    return await candidateImage({
      cli: rt.kind as ContainerCli,
      cliArgs: containerCliArgs(cur.plan.profile),
      images,
      ref,
      pull: opts.pull,
      dryRun: Boolean(opts.dryRun),
      signal: ac.signal,
      onProgress: opts.json ? undefined : (l) => note(l),
    });
  } finally {
    ac.off();
  }
}

/** The lock file beside the profile where the operator keeps the pin there (pinnedIn: lockfile). */
const lockOf = (r: Relaunch) => lockFileOf(r.plan.profile, r.plan.file);

async function candidateOf(name: string, opts: UpgradeOptions, cur: Relaunch, dir: string): Promise<Candidate> {
  if (opts.rollback) {
    const pins = readPins(dir, name, lockOf(cur));
    const back = pins ? rollbackPins(pins) : undefined;
    if (!back)
      throw new UsageError(`${name}: no earlier pin to roll back to`, [
        'sparkctl upgrade keeps one per upgrade; without one, serve the version you want with --set',
      ]);
    // the pin file's executable runs again as root: only a file no one else could have replaced
    if (back.to.vllmBin) checkRecordedExec(back.to.vllmBin, `${name}: rollback`);
    const images = runtimeFor(cur.plan).images;
    // a pin by digest that is no longer here (pruned) is pulled by that digest: it cannot have moved
    const fetched =
      images && back.to.imagePinned && isPinnedRef(back.to.imagePinned) && !/^[a-f0-9]{64}$/.test(back.to.imagePinned)
        ? await fetchCandidate(opts, cur, images, back.to.imagePinned)
        : undefined;
    return {
      sets: back.to.sets,
      vllmBin: back.to.vllmBin,
      image: back.to.image,
      imagePinned: back.to.imagePinned,
      imageId: back.to.imageId,
      rollback: back,
      ...(fetched ? { fetched } : {}),
    };
  }
  if (opts.image) {
    const images = runtimeFor(cur.plan).images;
    if (!images)
      throw new UsageError(`--image: ${name} runs on the host (engine.runtime host), not in a container`, [
        `--vllm-bin PATH for another vLLM install on the host, or serve it with --runtime container`,
      ]);
    const fetched = await fetchCandidate(opts, cur, images, opts.image);
    if (fetched.state === 'would-pull')
      return { sets: ['engine.vllmVersion=auto', ...opts.candidateSet], image: opts.image, fetched };
    const pin = await resolveImagePin(images, containerCliArgs(cur.plan.profile), opts.image);
    // auto: the image's own vLLM decides the flags (read from the image, as serve reads it)
    return {
      sets: [`container.image=${pin.pinned}`, 'engine.vllmVersion=auto', ...opts.candidateSet],
      image: opts.image,
      imagePinned: pin.pinned,
      imageId: pin.id,
      fetched,
    };
  }
  return { sets: [`engine.vllmVersion=${opts.vllm ?? 'auto'}`, ...opts.candidateSet], vllmBin: opts.vllmBin };
}

function thresholdsOf(r: Relaunch): Thresholds {
  const u = r.plan.profile.upgrade;
  return {
    ttftRatio: u.ttftRatio,
    tpotRatio: u.tpotRatio,
    throughputRatio: u.throughputRatio,
    goldenSameVersion: u.goldenSameVersion,
    goldenOtherVersion: u.goldenOtherVersion,
  };
}

function memoryLine(r: Relaunch): string {
  try {
    const m = planMemory(r.plan.profile, r.plan.host.gpuMemoryBytes, r.plan.modelFacts);
    return `${m.fits ? 'fits' : 'DOES NOT FIT'}: KV cache ${m.kvTokens.toLocaleString('en-US')} tokens, max concurrency ${m.maxConcurrency.toFixed(1)}x at ${m.maxModelLen} tokens (vLLM ${m.vllmRules} rules)`;
  } catch (e) {
    return `not planned: ${(e as Error).message}`;
  }
}

function planLines(
  name: string,
  diff: VersionDiff,
  cur: Relaunch,
  cand: Relaunch,
  where: string,
  c0: Candidate,
  flags: FlagsRead,
): string[] {
  const out = [`${name}: ${c0.rollback ? 'rollback' : 'upgrade'} plan`];
  if (c0.image || c0.imagePinned)
    out.push(
      `  image: ${c0.image ?? '(pinned)'} -> ${c0.imagePinned} (pinned: serve and every restart use this, never a moved tag)`,
    );
  if (c0.fetched?.state === 'pulled')
    out.push(`  pulled: ${c0.imagePinned ?? c0.image} (in ${formatDuration(c0.fetched.pullMs ?? 0)})`);
  if (c0.vllmBin) out.push(`  vllm: ${cur.started.vllmBin} -> ${c0.vllmBin}`);
  out.push(...diffLines(diff).map((l) => `  ${l}`));
  out.push(...flagsPlanLines(flags, diff.from, diff.to).map((l) => `  ${l}`));
  out.push(`  memory now: ${memoryLine(cur)}`, `  memory on the candidate: ${memoryLine(cand)}`);
  out.push(`  canary: ${where}`);
  const t = thresholdsOf(cand);
  out.push(
    `  passes when: probe healthy; TTFT p50 <= ${t.ttftRatio}x, TPOT p50 <= ${t.tpotRatio}x, output tokens/s >= ${t.throughputRatio}x the current's; golden prompts ${diff.sameVersion ? (t.goldenSameVersion >= 1 ? 'identical' : `similarity >= ${t.goldenSameVersion}`) : `similarity >= ${t.goldenOtherVersion} (another vLLM version)`}`,
  );
  return out;
}

/** Where a side's own `vllm serve --help=all` is asked: the simulator, the host's vllm, or its image. */
async function helpSideOf(
  r: Relaunch,
  version: string,
  image: { ref?: string; id?: string } | undefined,
): Promise<HelpSide | undefined> {
  const rt = runtimeFor(r.plan);
  // the simulator in the host's place answers for itself; in an image, the image's own vllm is asked (as the runtime
  // says where vLLM comes from)
  if (r.plan.engine === 'sim' && rt.vllmFrom === 'host')
    return { kind: 'sim', version, argv0: executableFor({ engine: 'sim', vllmBin: '' }) };
  if (rt.images) {
    const ref = image?.id ?? image?.ref;
    return ref
      ? {
          kind: 'image',
          cli: rt.kind as ContainerCli,
          cliArgs: containerCliArgs(r.plan.profile),
          image: ref,
          id: image?.id,
        }
      : undefined;
  }
  return r.started.vllmBin ? { kind: 'host', vllmBin: r.started.vllmBin, version } : undefined;
}

/**
 * Both sides' own tables (read where they run, cached by what identifies them) and what changes for
 * the options the candidate's argv renders and the ones it leaves to vLLM's defaults. The same
 * vLLM version on both sides has the same tables: not read.
 */
async function flagsRead(
  dir: string,
  cur: Relaunch,
  cand: Relaunch,
  from: string,
  to: string,
  replicas: Entry[],
  c0: Candidate,
): Promise<FlagsRead> {
  if (from === to) return { why: `the same vLLM (${from}) on both sides: the same tables` };
  const images = runtimeFor(cur.plan).images;
  const ran = recordOf(replicas)?.image;
  const curImage =
    images && ran
      ? {
          ref: ran,
          id: (await resolveImagePin(images, containerCliArgs(cur.plan.profile), ran).catch(() => undefined))?.id,
        }
      : undefined;
  const [a, b] = await Promise.all([
    helpSideOf(cur, from, curImage),
    helpSideOf(cand, to, { ref: c0.imagePinned ?? c0.image, id: c0.imageId }),
  ]);
  return compareSides(dir, a, b, cand.plan.replicas[0]?.argv ?? [], cand.plan.profile);
}

function renderer(json: boolean | undefined): (e: UpgradeEvent) => void {
  if (json) return () => {};
  return (e) => {
    switch (e.type) {
      case 'canary':
        note(
          `canary: ${e.where === 'in-place' ? `${e.replica} (drained and restarted on the candidate; the other replicas serve)` : `${e.replica} beside the replicas${e.url ? ` at ${shownAddress(e.url)}` : ''}${e.gpus?.length ? ` on GPU ${e.gpus.join(',')}` : ''}`}`,
        );
        break;
      case 'rolling':
        if (e.event.type === 'ready') note(`  ${e.event.replica}: ready in ${formatDuration(e.event.ms)}`);
        else if (e.event.type === 'back') note(`  ${e.event.replica}: back in rotation`);
        else if (e.event.type === 'aborted') note(`  ${e.event.replica}: ${c.red('stopped')}: ${e.event.cause}`);
        else if (e.event.type === 'started')
          note(`  ${e.event.replica}: started${e.event.changes.length ? ` (${e.event.changes.join('; ')})` : ''}`);
        break;
      case 'measuring':
        note(`comparing: ${e.side} at ${shownAddress(e.url)} (probe, golden prompts, short bench)`);
        break;
      case 'verdict':
        for (const x of e.verdict.comparisons)
          note(
            `  ${x.ok ? c.green('ok  ') : c.red('FAIL')} ${x.check}: canary ${x.canary}; current ${x.current}; limit ${x.limit}`,
          );
        break;
      case 'roll':
        note(`rolling the candidate to ${e.replicas.join(', ')}, one at a time`);
        break;
      case 'undo':
        note(`canary ${e.replica}: back to what it ran`);
        break;
    }
  };
}

const EXIT: Record<UpgradeStatus, ExitCode> = {
  rolled: ExitCode.ok,
  compared: ExitCode.ok,
  'canary-failed': ExitCode.problems,
  'roll-failed': ExitCode.launchFailed,
  interrupted: ExitCode.launchFailed,
};

/**
 * --canary-gpus, checked against where the canary runs (behind the router: in a replica's place, on its GPUs) and one
 * replica's GPU count.
 */
function canaryGpusFor(
  opts: UpgradeOptions,
  name: string,
  routed: boolean,
  cur: Relaunch,
  cand: Relaunch,
): number[] | undefined {
  const canaryGpus = canaryGpusOf(opts.canaryGpus);
  if (canaryGpus && routed)
    throw new UsageError(
      `--canary-gpus: behind the router the canary runs in place of ${cur.plan.replicas[cur.plan.replicas.length - 1]!.name}, on its GPUs`,
      [`leave --canary-gpus out (the other replicas serve while it is the canary)`],
    );
  const perReplica = cand.plan.replicas[0]?.gpus.length ?? 0;
  if (canaryGpus && canaryGpus.length !== perReplica)
    throw new UsageError(
      `--canary-gpus: ${canaryGpus.join(',')} is ${canaryGpus.length} GPU(s); one replica of ${name} uses ${perReplica}`,
      [`--canary-gpus ${Array.from({ length: perReplica }, (_, i) => canaryGpus[0]! + i).join(',')}`],
    );
  return canaryGpus;
}

/**
 * After a roll: what runs now is what the pin says (the first upgrade also keeps what ran before it; a rollback
 * restores the pin it names).
 */
function pinRolled(
  dir: string,
  name: string,
  cand: Relaunch,
  cand0: Awaited<ReturnType<typeof candidateOf>>,
  to: string,
  first: Pin | undefined,
  lock: string | undefined,
) {
  if (cand0.rollback?.next) return writePinFile(dir, cand0.rollback.next, lock);
  const fp = cand.plan.launch?.fingerprint;
  const candPin: Pin = {
    at: new Date().toISOString(),
    vllmVersion: to,
    image: cand0.image,
    imagePinned: cand0.imagePinned,
    imageId: cand0.imageId,
    vllmBin: cand0.vllmBin,
    ...(fp ? { fingerprint: fp } : {}),
    sets: cand0.sets,
  };
  if (first) writePin(dir, name, first, lock);
  writePin(dir, name, candPin, lock);
}

/**
 * --image naming the very image the replicas run (another tag of it, or the tag they were served from):
 * nothing would change, so nothing starts (a canary and a restart of every replica for nothing). Said,
 * exit 0, nothing recorded. With --candidate-set the candidate differs, and it goes on as any other.
 */
async function alreadyRuns(
  name: string,
  opts: UpgradeOptions,
  cur: Relaunch,
  cand0: Candidate,
  replicas: Entry[],
): Promise<boolean> {
  const images = runtimeFor(cur.plan).images;
  if (!opts.image || opts.candidateSet.length || !cand0.imageId || !images) return false;
  const ran = recordOf(replicas)?.image;
  if (!ran) return false;
  const now = await resolveImagePin(images, containerCliArgs(cur.plan.profile), ran).catch(() => undefined);
  if (now?.id !== cand0.imageId) return false;
  const version = runningVersion(recordOf(replicas)) ?? cur.prepared.vllm.version;
  if (opts.json)
    say(
      envelope('upgrade', {
        profile: name,
        action: 'upgrade',
        status: 'unchanged',
        from: version,
        to: version,
        image: cand0.imagePinned ?? null,
        exitCode: 0,
      }),
    );
  else
    say(
      `${name}: already runs ${opts.image} (image ${cand0.imageId.slice(0, 12)}, what ${ran} names): nothing to upgrade, nothing started`,
    );
  return true;
}

/**
 * --dry-run with an --image that is not here: what the upgrade would pull, and nothing pulled. What
 * changes (the image's vLLM, its flags) is read from the image, so it is not shown until it is here.
 */
function wouldPull(name: string, opts: UpgradeOptions, cur: Relaunch, replicas: Entry[], c0: Candidate): void {
  const ref = c0.imagePinned ?? c0.image!;
  const command = runtimeFor(cur.plan).images!.pullCommand(ref);
  const from = runningVersion(recordOf(replicas)) ?? cur.prepared.vllm.version;
  if (opts.json) {
    say(
      envelope('upgrade-plan', {
        profile: name,
        from,
        to: null,
        image: ref,
        vllmBin: null,
        sets: c0.sets,
        pull: { state: 'would-pull', command },
        diff: null,
      }),
    );
    return;
  }
  say(`${name}: ${c0.rollback ? 'rollback' : 'upgrade'} plan`);
  say(
    `  image: ${ref} is not here: the upgrade would pull it (${command}), pin it to its digest, then read its vLLM; nothing pulled (--dry-run)`,
  );
  say(
    `  what changes (flags, metrics, the memory plan) is read from the image once it is here: ${command}, then upgrade ${name} --image ${ref} --dry-run again`,
  );
}

/** The flags only a server over nodes takes, refused for one that is not. */
function refuseNodesFlags(profileName: string, opts: UpgradeOptions): void {
  if (opts.nodes)
    throw new UsageError(`--nodes ${opts.nodes}: ${profileName} is not served over nodes`, [
      `sparkctl status (what runs); sparkctl upgrade ${profileName} without --nodes for one host`,
    ]);
  if (opts.canaryNodes)
    throw new UsageError(
      `--canary-nodes ${opts.canaryNodes}: ${profileName} is not served over nodes (a canary on spare nodes is for a multi-node server)`,
      [
        `on one host the canary runs beside the replicas (--canary-gpus LIST) or in place of one behind the router: leave --canary-nodes out`,
      ],
    );
}

export { fieldOfFlag };

/**
 * What upgrade read before it acts: both sides planned, the versions and their diff, where the canary goes, each
 * side's flags.
 */
interface UpgradePlanRead {
  name: string;
  opts: UpgradeOptions;
  cur: Relaunch;
  cand: Relaunch;
  cand0: Candidate;
  from: string;
  to: string;
  diff: VersionDiff;
  routed: boolean;
  where: string;
  flags: FlagsRead;
}

/** --dry-run: the plan said (the upgrade-plan envelope, or its lines), and nothing started. */
function sayDryRun(p: UpgradePlanRead): void {
  const { name, opts, cur, cand, cand0, from, to, diff, routed, where, flags } = p;
  if (opts.json)
    say(
      envelope('upgrade-plan', {
        profile: name,
        from,
        to,
        image: cand0.imagePinned ?? null,
        vllmBin: cand0.vllmBin ?? null,
        sets: cand0.sets,
        canary: routed ? 'in-place' : 'beside',
        pull: cand0.fetched ? { state: cand0.fetched.state } : null,
        diff,
        ...flagsFields(flags),
        thresholds: thresholdsOf(cand),
      }),
    );
  else for (const l of planLines(name, diff, cur, cand, where, cand0, flags)) say(l);
}

/** The upgrade appended to the profile's record: both sides, what came of it, and who ran it. */
function recordInHistory(dir: string, p: UpgradePlanRead, replicas: Entry[], outcome: UpgradeOutcome): void {
  const { name, opts, cur, cand0, from, to } = p;
  appendUpgrade(dir, {
    at: new Date().toISOString(),
    profile: name,
    kind: opts.rollback ? 'rollback' : 'upgrade',
    from: {
      vllmVersion: from,
      image: recordOf(replicas)?.image,
      vllmBin: cur.plan.engine === 'vllm' ? cur.started.vllmBin : undefined,
    },
    to: { vllmVersion: to, image: cand0.imagePinned ?? cand0.image, vllmBin: cand0.vllmBin },
    status: outcome.status,
    failed: outcome.verdict?.why ?? (outcome.canary.failure ? [outcome.canary.failure] : []),
    where: outcome.where,
    ms: outcome.ms,
    by: whoAmI(),
  });
}

export async function run(profileName: string, opts: UpgradeOptions) {
  checkInputs(opts);
  const dir = stateDir();
  const reg = new Registry(dir);
  // a server over nodes: a canary on spare nodes (--canary-nodes) where given, then in place over every node
  const cluster = registeredCluster(reg, profileName, opts);
  if (cluster) return (await import('./nodes.js')).upgradeNodes(cluster, opts);
  refuseNodesFlags(profileName, opts);
  const { name, entries } = registeredServers(
    reg,
    profileName,
    opts,
    'upgrade',
    (n) =>
      `sparkctl serve ${n} with the new image or version (--set container.image=REF or --set engine.vllmVersion=V) starts it as it should be`,
  );
  const replicas = entries.filter((e) => e.inst.role !== 'router');
  const router = entries.find((e) => e.inst.role === 'router' && e.alive)?.inst;
  // read: the plan as it runs now (serve's inputs kept), and the candidate's on top of it
  const cur = await relaunchPlan(profileName, entries, {
    set: opts.set,
    profiles: opts.profiles,
    gpus: opts.gpus,
    prewarm: true,
  });
  const cand0 = await candidateOf(name, opts, cur, dir);
  if (cand0.fetched?.state === 'would-pull') return wouldPull(name, opts, cur, replicas, cand0);
  if (await alreadyRuns(name, opts, cur, cand0, replicas)) return;
  const cand = await relaunchPlan(profileName, entries, {
    set: [...opts.set, ...cand0.sets],
    profiles: opts.profiles,
    gpus: opts.gpus,
    prewarm: true,
    vllmBin: cand0.vllmBin,
  });
  const from = runningVersion(recordOf(replicas)) ?? cur.prepared.vllm.version;
  const to = cand.prepared.vllm.version;
  const diff = versionDiff(from, to, cand.plan.replicas[0]?.argv ?? []);
  const routed = Boolean(router?.router) && cur.plan.replicas.length >= 2;
  const canaryGpus = canaryGpusFor(opts, name, routed, cur, cand);
  // each side's own table: read once the cheap refusals are past (an import of vLLM costs 20-35 s)
  const flags = await flagsRead(dir, cur, cand, from, to, replicas, cand0);
  const where = routed
    ? `in place of ${cur.plan.replicas[cur.plan.replicas.length - 1]!.name} behind the router, compared with ${cur.plan.replicas[0]!.name}`
    : `beside the replicas as ${name}-canary on a free port${canaryGpus ? `, on GPU ${canaryGpus.join(',')}` : ''} (no router: a passing canary is followed by a restart of every replica at once)`;
  const read: UpgradePlanRead = { name, opts, cur, cand, cand0, from, to, diff, routed, where, flags };
  if (opts.dryRun) return sayDryRun(read);
  if (!opts.json) for (const l of planLines(name, diff, cur, cand, where, cand0, flags)) note(l);
  const lock = lockOf(cur);
  // a lock file sparkctl may not write over: refused before the canary, not after the roll
  const notOurs = lockNotWritable(dir, lock);
  if (notOurs) throw new UsageError(notOurs, [lockFix(lock!)]);
  const pinsBefore = readPins(dir, name, lock);
  const first = pinsBefore ? undefined : await currentPin(cur, entries);
  const outcome = await act(name, dir, opts, cur, cand, entries, router, from, to, canaryGpus);
  if (outcome.status === 'rolled') pinRolled(dir, name, cand, cand0, to, first, lock);
  recordInHistory(dir, read, replicas, outcome);
  render(name, opts, outcome, from, to);
  const code = EXIT[outcome.status];
  if (code !== 0) throw new ExitWith(code);
}

async function act(
  name: string,
  dir: string,
  opts: UpgradeOptions,
  cur: Relaunch,
  cand: Relaunch,
  entries: Entry[],
  router: Entry['inst'] | undefined,
  from: string,
  to: string,
  canaryGpus?: number[],
): Promise<UpgradeOutcome> {
  const { upgrade } = await import('../../upgrade/upgrade.js');
  const secrets = readSecrets(cand.plan.profile);
  const u = cand.plan.profile.upgrade;
  const probe = cand.plan.profile.probe;
  const ac = interrupts();
  try {
    return await upgrade({
      profile: name,
      stateDir: dir,
      current: { plan: cur.plan, version: from, entries, router },
      candidate: { plan: cand.plan, version: to },
      besidePlan: async (port) => {
        const canary = await relaunchPlan(name, entries, {
          set: [
            ...opts.set,
            ...cand.as.set.slice(cur.as.set.length),
            `name=${name}-canary`,
            `server.port=${port}`,
            'parallel.replicas=1',
            ...(canaryGpus ? [`parallel.firstGpu=${canaryGpus[0]}`] : []),
          ],
          profiles: opts.profiles,
          gpus: opts.gpus,
          prewarm: true,
          vllmBin: cand.started.vllmBin,
        });
        return { ...canary.plan, router: undefined };
      },
      secrets,
      thresholds: thresholdsOf(cand),
      measure: {
        probe: {
          ...probe,
          gpuMemoryUtilization: cand.plan.profile.engine.gpuMemoryUtilization,
          gpus: cand.plan.engine !== 'sim',
        },
        // the current's profile decides the default tool call: its running server must parse tool calls
        golden: u.goldenPrompts ?? defaultGolden(cur.plan.profile),
        bench: { requests: u.benchRequests, outputTokens: u.benchOutputTokens, concurrency: 2 },
        timeoutMs: Math.max(probe.timeoutMs, 60_000),
      },
      noRoll: !opts.roll,
      drainTimeoutMs: opts.drainTimeout,
      signal: ac.signal,
      onEvent: renderer(opts.json),
    });
  } finally {
    ac.off();
  }
}

function render(name: string, opts: UpgradeOptions, o: UpgradeOutcome, from: string, to: string) {
  if (opts.json) {
    say(
      envelope('upgrade', {
        profile: name,
        action: opts.rollback ? 'rollback' : 'upgrade',
        from,
        to,
        ...o,
        exitCode: EXIT[o.status],
      }),
    );
    return;
  }
  const what = opts.rollback ? 'rolled back' : 'upgraded';
  switch (o.status) {
    case 'rolled':
      say(
        `${c.green(what)} ${name}: vLLM ${from} -> ${to} on ${o.onCandidate.join(', ')} in ${formatDuration(o.ms)}; the canary passed every comparison`,
      );
      break;
    case 'compared':
      say(`${name}: the canary passed every comparison (--no-roll: it is back on vLLM ${from}; nothing else changed)`);
      break;
    case 'canary-failed':
      say(
        `${c.red('not ' + what)} ${name}: ${o.canary.failure ?? 'the canary failed its comparison'}${o.verdict ? `\n  ${o.verdict.why.join('\n  ')}` : ''}`,
      );
      say(
        o.onCandidate.length
          ? `${o.onCandidate.join(', ')} did not return to what it ran: sparkctl restart ${name} --rolling`
          : `everything runs as it did before (vLLM ${from})`,
      );
      break;
    case 'roll-failed':
      say(
        `${c.red('roll stopped')} ${name}: on the candidate ${o.onCandidate.join(', ') || 'none'}; the rest as before (sparkctl status ${name}; sparkctl upgrade ${name} --rollback)`,
      );
      break;
    case 'interrupted':
      say(
        `${name}: upgrade interrupted; on the candidate: ${o.onCandidate.join(', ') || 'none'} (sparkctl status ${name})`,
      );
      break;
  }
}
