// Preflight: facts (concurrently, from a Host) -> checks (pure) -> a report.
import { dirname } from 'node:path';
import type { Host } from '../host/host.js';
import { gatherFacts, gatherContainerFacts, type Facts } from './facts.js';
import { gpuFacts, type GpuFact } from '../host/gpu-facts.js';
import type { Check } from './checks.js';
import type { CheckResult, CheckOutcome, ChecksReport } from '../output/check.js';
import { probesFor, selectChecks, type CheckMeta } from './catalog.js';
import { takeEarlyFacts } from './early.js';
import type { Profile } from '../profiles/schema.js';
import { log } from '../output/logger.js';

/**
 * One host's report: the checks every preflight report holds (output/check.ts ChecksReport), with what this host is.
 */
export interface PreflightReport extends ChecksReport {
  host: string;
  hostKind: string;
  platform: string;
  platformReason: string;
  checks: CheckOutcome[];
  /** typed per-GPU facts (memory, compute capability, holders) for serve's plan */
  gpus: GpuFact[];
  /** systeminformation's host inventory, the parts the selected checks read */
  system: Omit<Facts['system'], 'why'>;
  summary: { pass: number; warn: number; fail: number; skip: number };
  /** what must match across the nodes of a multi-node cluster */
  versions: {
    driver?: string;
    cuda?: string;
    nccl?: string;
    torch?: string;
    vllm?: string;
    gpu?: string;
    gpus: number;
  };
  wallMs: number;
  factsMs: number;
}

export { probesFor, selectChecks };

interface PreflightOptions {
  profile?: Profile;
  platform?: string;
  only?: string;
  skip?: string;
  timeoutMs?: number;
  verify?: boolean;
  /** only the checks whose metadata says they block a launch (what serve runs) */
  blocking?: boolean;
  /** sparkctl's own running servers by port (serve reads its registry): a taken port names its holder */
  holders?: Record<number, string>;
}

export async function runPreflight(host: Host, opts: PreflightOptions): Promise<PreflightReport> {
  let started = performance.now();
  const selected = selectChecks(opts.only, opts.skip, { blocking: opts.blocking });
  // Spawn the probes first (or take over the ones a plain preflight started before the CLI's parser
  // loaded: early.ts), then load the checks' code, the baselines and (with a profile) the profile's
  // planning while they run.
  const gather = { profile: opts.profile, timeoutMs: opts.timeoutMs, probes: probesFor(selected, opts) };
  const early = takeEarlyFacts(host, gather);
  if (early) started = early.startedAt;
  const pending = early?.facts ?? gatherFacts(host, gather);
  const [{ CHECKS, driverPresent }, { detectPlatform, baseCtx }, withProfile, facts] = await Promise.all([
    import('./checks.js'),
    import('./verdict.js'),
    opts.profile ? import('./profile-ctx.js') : undefined,
    pending,
  ]);
  const { platform, reason } = detectPlatform(facts, opts.platform, opts.profile);
  // the profile's runtime: the checks of the other one are skipped, its own facts gathered (a container CLI's answers)
  const rt = opts.profile ? (await import('../engine/runtime/traits.js')).traitsOfProfile(opts.profile) : undefined;
  const probe = rt?.probe;
  const asked =
    probe && opts.profile && selected.some((c) => c.probes.includes(probe) && c.runsOn === rt.runtime)
      ? await gatherContainerFacts(host, opts.profile, platform, opts.timeoutMs ?? 20_000, facts.notCollected)
      : undefined;
  if (asked) facts.container = asked;
  const ctx =
    opts.profile && withProfile ? withProfile.buildCtx(facts, platform, opts.profile) : baseCtx(facts, platform);
  if (opts.holders) ctx.holders = opts.holders;
  if (asked && 'answers' in asked) ctx.container = await judgeAnswers(asked.answers, ctx.groups, opts.profile);
  await modelFiles(host, opts, selected, facts, ctx, withProfile);
  const noDriver = !driverPresent(facts);
  // what the profile's runtime does not use of this host: its GPUs (a CPU build in a container)
  const noHostGpu = opts.profile ? rt?.noHostGpu(opts.profile) : undefined;
  const checks = runChecks(selected, CHECKS, ctx, facts, { rt, noHostGpu, noDriver });
  const summary = { pass: 0, warn: 0, fail: 0, skip: 0 };
  for (const c of checks) summary[c.status]++;
  (await log())?.debug(
    { probeMs: facts.probeMs, factsMs: facts.wallMs, platform: platform.name, reason },
    'preflight facts',
  );
  const versions = {
    driver: facts.driver.module?.version ?? facts.gpus[0]?.driver_version,
    cuda: facts.cuda.nvcc,
    nccl: facts.nccl.vllmUses,
    torch: facts.torch.version,
    vllm: facts.vllm.version,
    gpu: facts.gpus[0]?.name,
    gpus: facts.gpus.length,
  };
  return {
    host: facts.host,
    hostKind: facts.hostKind,
    platform: platform.name,
    platformReason: reason,
    checks,
    gpus: gpuFacts(facts),
    system: (({ why: _why, ...rest }) => rest)(facts.system),
    summary,
    versions,
    wallMs: Math.round(performance.now() - started),
    factsMs: facts.wallMs,
  };
}

type Ctx = ReturnType<Awaited<typeof import('./verdict.js')>['baseCtx']>;
type Traits = import('../engine/runtime/traits.js').RuntimeTraits;

/** The container CLI's answers judged for the GPUs the profile's groups use. */
async function judgeAnswers(
  answers: import('../engine/runtime/preflight.js').ContainerAnswers,
  groups: number[][],
  profile: Profile | undefined,
) {
  const [{ judgeContainer }, { containerGpuUse }] = await Promise.all([
    import('../engine/runtime/preflight.js'),
    import('../engine/runtime/container.js'),
  ]);
  const gpus = [...new Set(groups.flat())].sort((a, b) => a - b);
  const use = containerGpuUse(profile ?? {}, 'vllm');
  return judgeContainer(answers, { pull: false, gpu: use.gpu, gpus, noGpu: use.gpu ? undefined : use.why });
}

/**
 * model.files on a real host: a Hub model's snapshot file by file (with --verify, each blob against its name), or a
 * local folder verified.
 */
async function modelFiles(
  host: Host,
  opts: PreflightOptions,
  selected: readonly CheckMeta[],
  facts: Facts,
  ctx: Ctx,
  withProfile: typeof import('./profile-ctx.js') | undefined,
): Promise<void> {
  if (host.kind !== 'real' || !opts.profile || !facts.model || !selected.some((c) => c.id === 'model.files')) return;
  if (opts.profile.model.id && facts.model.kind === 'hub') {
    const { inspectSnapshot } = await import('../model/snapshot.js');
    ctx.snapshot = await inspectSnapshot(
      dirname(facts.model.where),
      opts.profile.model.id,
      opts.profile.model.revision ?? 'main',
      { verify: opts.verify },
    );
    ctx.snapshotVerified = Boolean(opts.verify);
  }
  if (opts.verify && withProfile && facts.model.kind !== 'hub')
    ctx.verify = await withProfile.verifyModel(opts.profile, facts.model.where);
}

/**
 * Each selected check run on the context, or skipped with why: a GPU the runtime does not use, no driver, not in the
 * bundle, the other runtime's.
 */
function runChecks(
  selected: readonly CheckMeta[],
  all: readonly Check[],
  ctx: Ctx,
  facts: Facts,
  o: { rt?: Traits; noHostGpu?: string; noDriver: boolean },
): CheckOutcome[] {
  const { rt, noHostGpu, noDriver } = o;
  const byId = new Map(all.map((c) => [c.id, c]));
  return selected.map((m) => {
    const c = byId.get(m.id) as Check;
    let r: CheckResult;
    if (noHostGpu && (c.needsGpu || ['driver', 'gpu', 'cuda', 'firmware'].includes(c.area)))
      r = { status: 'skip', observed: noHostGpu, expected: '' };
    else if (c.needsGpu && noDriver) r = { status: 'skip', observed: 'no NVIDIA driver is loaded', expected: '' };
    else if (c.probes.every((p) => facts.notCollected.has(p)))
      r = { status: 'skip', observed: `not in the bundle (${c.probes.join(', ')} not collected)`, expected: '' };
    else if (rt && c.runsOn && c.runsOn !== rt.runtime) r = { status: 'skip', observed: rt.why, expected: '' };
    else {
      try {
        r = c.run(ctx);
      } catch (e) {
        r = {
          status: 'fail',
          observed: `check crashed: ${(e as Error).message}`,
          expected: '',
          fix: 'report this as a sparkctl bug, with `sparkctl collect --out DIR`',
        };
      }
    }
    const durationMs = Math.max(0, ...c.probes.map((p) => facts.probeMs[p] ?? 0));
    return { id: c.id, area: c.area, title: c.title, blocking: Boolean(c.blocking), durationMs, ...r };
  });
}
