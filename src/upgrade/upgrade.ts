// An upgrade (or a rollback), after its plan was shown: a canary on the candidate, the same requests to
// canary and current, the verdict; then the rest rolled one replica at a time, or the canary undone and
// everything left as it was. Nothing here decides what the candidate is (the verb does: --image,
// --vllm, --vllm-bin, or the previous pin) and nothing prints: progress is events, the end an outcome.
//
// Where the canary runs: behind the router (two or more replicas), IN PLACE of the last replica (the
// rolling restart's own steps: drain, stop, start, ready, prewarm, probe, back in rotation), compared
// against the first; otherwise BESIDE the replicas, as a profile of its own (PROFILE-canary, on a free
// port), where the GPUs allow it (the co-location rule of serve decides, never a guess).
import { createServer } from 'node:net';
import type { ServePlan } from '../engine/plan.js';
import { Registry, type Entry, type Instance } from '../engine/registry.js';
import { targetFromInstance } from '../engine/target.js';
import { replicaUrl, serveLocal } from '../engine/serve.js';
import { stopInstance } from '../engine/stop.js';
import type { ServeOutcome } from '../engine/events.js';
import type { RollingEvent, RollingOutcome } from '../router/rolling.js';
import type { Target } from '../health/target.js';
import { judge, type Measured, type Thresholds, type Verdict } from './judge.js';
import { measureBoth, type MeasureSettings } from './measure.js';
import { UsageError } from '../errors.js';

export type UpgradeEvent =
  | { type: 'canary'; where: 'in-place' | 'beside'; replica: string; url?: string; gpus?: number[] }
  | { type: 'rolling'; event: RollingEvent }
  | { type: 'canary-ready'; replica: string; url: string }
  | { type: 'measuring'; side: 'current' | 'canary'; url: string }
  | { type: 'verdict'; verdict: Verdict }
  | { type: 'roll'; replicas: string[] }
  | { type: 'undo'; replica: string };

interface UpgradeRun {
  profile: string;
  stateDir: string;
  current: { plan: ServePlan; version: string; entries: Entry[]; router?: Instance };
  candidate: { plan: ServePlan; version: string };
  /** the canary beside the replicas (no router): the candidate planned as PROFILE-canary on a free port */
  besidePlan?: (port: number) => Promise<ServePlan>;
  secrets: Record<string, string>;
  thresholds: Thresholds;
  measure: Omit<MeasureSettings, 'signal'>;
  /** compare and stop: never roll (the canary is undone either way) */
  noRoll?: boolean;
  drainTimeoutMs: number;
  signal: AbortSignal;
  onEvent?: (e: UpgradeEvent) => void;
}

export type UpgradeStatus = 'rolled' | 'canary-failed' | 'compared' | 'roll-failed' | 'interrupted';

export interface UpgradeOutcome {
  status: UpgradeStatus;
  where: 'in-place' | 'beside';
  canary: { replica: string; url?: string; failure?: string; gpus?: number[] };
  current?: Measured;
  candidate?: Measured;
  verdict?: Verdict;
  /** the rolling restarts this upgrade ran (the canary's, the roll's, an undo's) */
  rolls: RollingOutcome[];
  /** what was left running the candidate when it ended */
  onCandidate: string[];
  ms: number;
}

/** A free loopback port for the canary beside the replicas. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (typeof a === 'object' && a ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

const withKey = (t: Target, secrets: Record<string, string>): Target => ({
  ...t,
  apiKey: secrets.VLLM_API_KEY ?? t.apiKey,
});

async function roll(run: UpgradeRun, plan: ServePlan, only: string[]): Promise<RollingOutcome> {
  const { rollingRestart } = await import('../router/rolling.js');
  const entries = new Registry(run.stateDir)
    .find(run.profile)
    .filter((e) => e.inst.profile === run.profile && e.inst.role !== 'router');
  return rollingRestart({
    plan,
    router: run.current.router!,
    entries,
    secrets: run.secrets,
    drainTimeoutMs: run.drainTimeoutMs,
    signal: run.signal,
    only,
    onEvent: (event) => run.onEvent?.({ type: 'rolling', event }),
  });
}

/**
 * Both sides measured with the same requests: each one's answers (current first), then the bench in turns
 * (measureBoth).
 */
async function compare(
  run: UpgradeRun,
  cur: Target,
  can: Target,
): Promise<{ current: Measured; candidate: Measured; verdict: Verdict }> {
  const s = { ...run.measure, signal: run.signal };
  const { current, candidate } = await measureBoth(
    cur,
    run.current.version,
    can,
    run.candidate.version,
    s,
    (side, url) => run.onEvent?.({ type: 'measuring', side, url }),
  );
  const verdict = judge(current, candidate, run.thresholds);
  run.onEvent?.({ type: 'verdict', verdict });
  return { current, candidate, verdict };
}

/** Behind the router: the last replica is the canary; the first one is what it is compared with. */
async function inPlace(run: UpgradeRun, started: number): Promise<UpgradeOutcome> {
  const replicas = run.current.plan.replicas;
  const canaryP = replicas[replicas.length - 1]!;
  const base = replicas[0]!;
  const out: UpgradeOutcome = {
    status: 'canary-failed',
    where: 'in-place',
    canary: { replica: canaryP.name },
    rolls: [],
    onCandidate: [],
    ms: 0,
  };
  const done = (status: UpgradeStatus) => ({ ...out, status, ms: Date.now() - started });
  run.onEvent?.({ type: 'canary', where: 'in-place', replica: canaryP.name });
  const first = await roll(run, run.candidate.plan, [canaryP.name]);
  out.rolls.push(first);
  if (first.status !== 'healthy') {
    out.canary.failure = first.aborted?.cause ?? first.status;
    // the canary did not come up on the candidate: the replica goes back to what it ran
    run.onEvent?.({ type: 'undo', replica: canaryP.name });
    out.rolls.push(await roll(run, run.current.plan, [canaryP.name]));
    return done(first.status === 'interrupted' ? 'interrupted' : 'canary-failed');
  }
  out.onCandidate = [canaryP.name];
  const reg = new Registry(run.stateDir);
  const inst = (name: string) => reg.find(name).find((e) => e.inst.name === name)?.inst;
  const canUrl = replicaUrl(run.candidate.plan, canaryP);
  out.canary.url = canUrl;
  run.onEvent?.({ type: 'canary-ready', replica: canaryP.name, url: canUrl });
  const curInst = inst(base.name);
  const canInst = inst(canaryP.name);
  if (!curInst || !canInst) {
    out.canary.failure = `${!curInst ? base.name : canaryP.name} is not registered`;
    return done('canary-failed');
  }
  Object.assign(
    out,
    await compare(
      run,
      withKey(targetFromInstance(curInst), run.secrets),
      withKey(targetFromInstance(canInst), run.secrets),
    ),
  );
  if (!out.verdict!.pass || run.noRoll) {
    run.onEvent?.({ type: 'undo', replica: canaryP.name });
    const undo = await roll(run, run.current.plan, [canaryP.name]);
    out.rolls.push(undo);
    out.onCandidate = undo.status === 'healthy' ? [] : [canaryP.name];
    return done(out.verdict!.pass ? 'compared' : 'canary-failed');
  }
  const rest = replicas.slice(0, -1).map((p) => p.name);
  run.onEvent?.({ type: 'roll', replicas: rest });
  const r = await roll(run, run.candidate.plan, rest);
  out.rolls.push(r);
  out.onCandidate.push(...r.replicas.filter((x) => x.restarted && x.name !== r.aborted?.replica).map((x) => x.name));
  return done(r.status === 'healthy' ? 'rolled' : r.status === 'interrupted' ? 'interrupted' : 'roll-failed');
}

/** Stop every registered server of a profile (the canary beside, or the replicas before serving the candidate). */
async function stopProfile(stateDir: string, profile: string, signal: AbortSignal): Promise<string[]> {
  const reg = new Registry(stateDir);
  const left: string[] = [];
  const entries = reg.find(profile).filter((x) => x.inst.profile === profile);
  const router = entries.some((e) => e.inst.role === 'router')
    ? (await import('../router/stop.js')).stopRouterEntry
    : undefined;
  // the router first: no request goes to a replica that is stopping
  for (const e of [
    ...entries.filter((x) => x.inst.role === 'router'),
    ...entries.filter((x) => x.inst.role !== 'router'),
  ]) {
    const st = await stopInstance(reg, e, { signal, router });
    if (!st.removed) left.push(`${e.inst.name} (${st.result})`);
  }
  return left;
}

/**
 * No router: the canary runs beside the replicas as PROFILE-canary; a passing one is followed by a restart of every
 * replica on the candidate.
 */
async function beside(run: UpgradeRun, started: number): Promise<UpgradeOutcome> {
  const port = await freePort();
  const plan = await run.besidePlan!(port);
  const name = plan.replicas[0]?.name ?? `${run.profile}-canary`;
  const gpus = plan.replicas[0]?.gpus;
  const out: UpgradeOutcome = {
    status: 'canary-failed',
    where: 'beside',
    canary: { replica: name, gpus },
    rolls: [],
    onCandidate: [],
    ms: 0,
  };
  const done = (status: UpgradeStatus) => ({ ...out, status, ms: Date.now() - started });
  run.onEvent?.({ type: 'canary', where: 'beside', replica: name, url: replicaUrl(plan, plan.replicas[0]!), gpus });
  let served: ServeOutcome;
  try {
    served = await serveLocal(plan, { signal: run.signal, secrets: run.secrets });
  } catch (e) {
    // the co-location rule (or another check before launch) refused it: nothing started, nothing changed
    if (e instanceof UsageError)
      throw new UsageError(`no canary beside ${run.profile}'s replicas: ${e.message}`, [
        ...e.details,
        `serve ${run.profile} with --router and two or more replicas (the canary then replaces one of them, drained first), or free the GPUs it needs`,
      ]);
    throw e;
  }
  const rep = served.replicas[0];
  if (served.status !== 'healthy' || !rep) {
    out.canary.failure = rep?.failure ? `${rep.failure.cause ?? rep.failure.detail}` : served.status;
    await stopProfile(run.stateDir, plan.profile.name, run.signal);
    return done(served.status === 'interrupted' ? 'interrupted' : 'canary-failed');
  }
  out.canary.url = rep.url;
  run.onEvent?.({ type: 'canary-ready', replica: name, url: rep.url });
  const reg = new Registry(run.stateDir);
  const curInst = run.current.entries.find((e) => e.inst.role !== 'router')?.inst;
  const canInst = reg.find(name).find((e) => e.inst.name === name)?.inst;
  try {
    if (!curInst || !canInst) throw new Error(`${!curInst ? 'no current replica' : `${name} is not registered`}`);
    Object.assign(
      out,
      await compare(
        run,
        withKey(targetFromInstance(curInst), run.secrets),
        withKey(targetFromInstance(canInst), run.secrets),
      ),
    );
  } finally {
    run.onEvent?.({ type: 'undo', replica: name });
    await stopProfile(run.stateDir, plan.profile.name, run.signal);
  }
  if (!out.verdict?.pass) return done('canary-failed');
  if (run.noRoll) return done('compared');
  // every replica stops, then the candidate plan starts them all: without a router there is no rolling
  const names = run.current.plan.replicas.map((p) => p.name);
  run.onEvent?.({ type: 'roll', replicas: names });
  const left = await stopProfile(run.stateDir, run.profile, run.signal);
  if (left.length) {
    out.canary.failure = `not stopped: ${left.join(', ')}`;
    return done('roll-failed');
  }
  const driver = run.candidate.plan.router ? (await import('../router/driver.js')).haproxy : undefined;
  const again = await serveLocal(run.candidate.plan, { signal: run.signal, secrets: run.secrets, router: driver });
  out.onCandidate = again.replicas.map((r) => r.name);
  return done(again.status === 'healthy' ? 'rolled' : again.status === 'interrupted' ? 'interrupted' : 'roll-failed');
}

/** The canary, the comparison, then the roll or the undo. */
export async function upgrade(run: UpgradeRun): Promise<UpgradeOutcome> {
  const started = Date.now();
  const routed = Boolean(run.current.router?.router) && run.current.plan.replicas.length >= 2;
  return routed ? inPlace(run, started) : beside(run, started);
}
