// serve's model gate (src/engine/model-cache.ts): the Hub model whole in the cache the server reads
// before a launch (checked before preflight: no GPU check matters when the weights are not here),
// HF_HUB_OFFLINE=1 for the server when it is; else the `sparkctl pull` command, or with --pull the
// pull itself, first. --skip-preflight makes an absent model a warning (vLLM would then download it
// itself); --dry-run shows what serve would do. The simulator loads no files and skips all of it.
import { checkModelCache, missingLine, type ModelCacheCheck } from '../../engine/model-cache.js';
import type { ServePlan } from '../../engine/plan.js';
import { traitsOfProfile } from '../../engine/runtime/traits.js';
import type { Profile } from '../../profiles/schema.js';
import { UsageError } from '../../errors.js';
import { checkRepoId } from '../../model/cache.js';

interface GateResult {
  check?: ModelCacheCheck;
  /** what serve should say (a warning), when it goes on anyway */
  warnings: string[];
  offline: boolean;
}

export async function modelGate(
  profile: Profile,
  opts: {
    engine: string;
    runtime?: 'host' | 'container';
    pull?: boolean;
    skipPreflight?: boolean;
    dryRun?: boolean;
    json?: boolean;
  },
): Promise<GateResult> {
  const out: GateResult = { warnings: [], offline: false };
  if (opts.engine === 'sim') return out;
  const rt = traitsOfProfile(profile, opts.runtime);
  let m = await checkModelCache(profile, rt);
  out.check = m;
  // A local model.path: a container's cache is still mounted when it exists; when it does not, say so (nothing is
  // made).
  const noCache = m.state ? undefined : rt.noCacheWarning(profile);
  if (noCache) out.warnings.push(noCache);
  if (!m.state) return out;
  if (!m.state.complete && opts.pull && !opts.dryRun) {
    const { pullInto } = await import('../pulling.js');
    await pullInto(m.id!, m.revision!, m.root!, { json: opts.json, step: true });
    m = await checkModelCache(profile, rt);
    out.check = m;
  }
  if (m.state!.complete) {
    out.offline = true;
    return out;
  }
  const line = missingLine(m);
  const fix = [`fetch it first: ${m.pull}${rt.pullNote(m.root!)}`, 'or serve --pull to fetch it before the launch'];
  if (opts.dryRun) out.warnings.push(`serve would refuse: ${line}; ${fix[0]}`);
  else if (opts.skipPreflight)
    out.warnings.push(`${line}; with --skip-preflight vLLM will try to download it itself (${fix[0]})`);
  else throw new UsageError(line, fix);
  return out;
}

/** Every file is here: the server must not reach the network for it, at this start or a restart. */
export function applyGate(plan: ServePlan, g: GateResult): void {
  if (g.offline) for (const x of plan.replicas) x.env.HF_HUB_OFFLINE = '1';
  plan.warnings.push(...g.warnings);
}

/**
 * `serve ORG/NAME --pull` with nothing of it here: the profile is generated from the model's
 * config.json, so the pull comes before it is read. A profile of that name is left to the gate.
 */
export async function pullBeforeReading(
  name: string,
  opts: {
    engine: string;
    runtime?: 'host' | 'container';
    pull?: boolean;
    dryRun?: boolean;
    json?: boolean;
    profiles?: string;
  },
): Promise<void> {
  if (!opts.pull || opts.engine === 'sim' || opts.dryRun || checkRepoId(name)) return;
  const { listProfiles, parseProfile } = await import('../../profiles/load.js');
  if (listProfiles(opts.profiles).some((p) => p.name === name)) return;
  await modelGate(parseProfile({ name: 'pull', model: { id: name } }, 'pull.yaml'), opts);
}
