// The plan a running profile starts again from: the way serve started it (each replica's launch record:
// its --set, --profiles, --gpus, --platform, --runtime, --router; the engine and executable it runs),
// with more --set on top. restart plans from it, and so does upgrade (its candidate is the same plan
// with the candidate's image or vLLM version set on top, and its rollback the previous pin's).
import { buildServePlan, launchRecord, withFingerprint, type ServePlan } from './plan.js';
import { fingerprintChange, vllmFingerprint } from './vllm-version.js';
import { prepare, versionWarnings, type Prepared } from './inputs.js';
import { howStarted, recordOf, servedAs, type ServedAs } from './relaunch.js';
import type { Entry } from './registry.js';
import { stateDir } from '../util/paths.js';
import { checkRecordedExec } from './record-exec.js';
import { relaunchRunsHostInstall } from './runtime/index.js';

interface RelaunchInputs {
  /** --set on top of serve's (kept in the new launch record) */
  set: string[];
  profiles?: string;
  gpus?: number;
  prewarm: boolean;
  /** ms */
  readyTimeout?: number;
  /** another vllm executable than the one the replicas run (an upgrade's candidate install) */
  vllmBin?: string;
  /** --allow-unauthenticated (restart): beyond loopback without a key, warned (serve's own, recorded, is kept) */
  allowUnauthenticated?: boolean;
}

export interface Relaunch {
  plan: ServePlan;
  prepared: Prepared;
  as: ServedAs;
  started: ReturnType<typeof howStarted>;
  /** what the version decision warns of (a pin the installed vLLM does not match, ...) */
  warnings: string[];
  /**
   * a host install: how the vLLM under the replicas changed since they started (undefined: the same, or not
   * fingerprinted)
   */
  vllmChange?: ReturnType<typeof fingerprintChange>;
}

/** The profile's replicas planned again as serve planned them, with `x.set` on top. */
export async function relaunchPlan(profileName: string, entries: Entry[], x: RelaunchInputs): Promise<Relaunch> {
  const replicas = entries.filter((e) => e.inst.role !== 'router');
  const hadRouter = entries.some((e) => e.inst.role === 'router');
  const started0 = howStarted(entries);
  const started = x.vllmBin ? { ...started0, vllmBin: x.vllmBin } : started0;
  const as = servedAs(recordOf(replicas), x, hadRouter);
  // the executable the record names runs again as root: only a file no one else could have replaced
  if (
    started0.engine === 'vllm' &&
    !x.vllmBin &&
    relaunchRunsHostInstall(
      as.runtime,
      replicas.map((e) => e.inst),
    )
  )
    checkRecordedExec(started0.vllmBin, profileName);
  const sim = started.engine === 'sim';
  const prepared = await prepare(profileName, {
    profiles: as.profiles,
    set: as.set,
    gpus: sim ? undefined : as.gpus,
    platform: as.platform,
    engine: started.engine,
    vllmBin: started.vllmBin,
    runtime: as.runtime,
    // the image as pinned (a moved tag is never followed by a restart)
    pin: { stateDir: stateDir() },
  });
  const warnings = versionWarnings(prepared.vllm, false);
  // a host install is fingerprinted again: what it is now, against what the replicas started on
  const hostVllm = started.engine === 'vllm' && !prepared.vllm.image;
  const fingerprint = hostVllm ? await vllmFingerprint(started.vllmBin) : undefined;
  const was = recordOf(replicas)?.fingerprint;
  const vllmChange = hostVllm && was ? fingerprintChange(was, fingerprint) : undefined;
  const launch = withFingerprint(
    launchRecord(as, prepared.vllm, prepared.image?.ref ?? prepared.vllm.image, prepared.profile),
    fingerprint,
  );
  const plan = buildServePlan(prepared, {
    ...started,
    prewarm: x.prewarm,
    readyTimeout: x.readyTimeout,
    router: as.router,
    runtime: as.runtime,
    allowUnauthenticated: as.allowUnauthenticated,
    installedVllm: prepared.vllm.installed,
    imageEntrypoint: prepared.image?.entrypoint,
    imageId: prepared.image?.id,
    launch,
  });
  return { plan, prepared, as, started, warnings, vllmChange };
}
