// What pull and serve --pull share: the target (an id or a profile), the pull with its progress, and
// the library's failures mapped to the exit-code table.
import { interrupts } from '../util/interrupt.js';
import { pull, DiskFull, PullRefused, type PullResult } from '../model/pull.js';
import { HubError, hubEndpoint, DEFAULT_MIN_RATE } from '../model/hub.js';
import { checkRepoId, checkRevision, CacheRefused } from '../model/cache.js';
import { loadProfile } from '../profiles/load.js';
import { pullProgress } from './pull-progress.js';
import { envelope, formatBytes, formatDuration, c } from '../output/format.js';
import { say, note } from '../output/log.js';
import { SparkError, UsageError, UnreachableError, ProblemsFound, ExitCode } from '../errors.js';

export interface PullOptions {
  revision?: string;
  configOnly?: boolean;
  jobs?: number;
  profiles?: string;
  json?: boolean;
}

/** MODEL is a hub id, or a profile whose model.id (and model.revision) say what to fetch. */
export function pullTarget(
  arg: string,
  opts: Pick<PullOptions, 'revision' | 'profiles'>,
): { repo: string; revision: string } {
  let repo = arg;
  let pinned: string | undefined;
  if (checkRepoId(arg)) {
    const { profile } = loadProfile(arg, { profilesDir: opts.profiles });
    if (!profile.model.id || profile.model.path)
      throw new UsageError(
        `profile ${profile.name} serves a local folder (model.path ${profile.model.path}): there is nothing to pull`,
        ['copy the folder to this host, or give the profile a model.id'],
      );
    repo = profile.model.id;
    pinned = profile.model.revision;
    const bad = checkRepoId(repo);
    if (bad) throw new UsageError(`profile ${profile.name}: model.id ${bad}`);
  }
  const revision = opts.revision ?? pinned ?? 'main';
  const bad = checkRevision(revision);
  if (bad) throw new UsageError(`--revision: ${bad}`, ['a branch (main), a tag (v1.0) or a 40-hex commit']);
  return { repo, revision };
}

/** The library's failures, each to its row of the exit-code table, with the fix. */
function pullError(e: unknown, cmd: string): unknown {
  if (e instanceof DiskFull)
    return new UsageError(
      `not enough disk space in ${e.folder}: the pull needs ${formatBytes(e.need)} more, ${formatBytes(e.free)} are free`,
      ['free space there, or point HF_HUB_CACHE (or HF_HOME) at a larger disk'],
    );
  if (e instanceof CacheRefused) return new UsageError(e.message);
  if (e instanceof PullRefused) return new UsageError(e.message, [e.fix]);
  if (e instanceof HubError) {
    const fix = e.fix ? [e.fix] : [];
    if (e.kind === 'network' || e.kind === 'server') return new UnreachableError(e.message, [...fix, `then: ${cmd}`]);
    if (e.kind === 'checksum' || e.kind === 'protocol') return new ProblemsFound(e.message, fix);
    return new UsageError(e.message, fix);
  }
  return e;
}

/** Pull `repo`@`revision` into the hub cache `cacheRoot`, with progress on stderr (none under --json). */
export async function pullInto(
  repo: string,
  revision: string,
  cacheRoot: string,
  opts: Pick<PullOptions, 'configOnly' | 'jobs' | 'json'> & { step?: boolean } = {},
): Promise<PullResult> {
  const env = process.env;
  const hub = {
    endpoint: hubEndpointOrExit(env),
    token: env.HF_TOKEN || undefined,
    timeoutMs: 30_000,
    stallMs: 60_000,
    minRate: minRateOf(env),
  };
  const again = `sparkctl pull ${repo}${revision !== 'main' ? ` --revision ${revision}` : ''}${opts.configOnly ? ' --config-only' : ''}`;
  const ac = interrupts({ reason: () => new Error('interrupted') });
  let result: PullResult;
  try {
    result = await pull({
      repo,
      revision,
      configOnly: opts.configOnly,
      cacheRoot,
      hub,
      jobs: opts.jobs,
      signal: ac.signal,
      onEvent: pullProgress({ quiet: opts.json }),
    });
  } catch (e) {
    if (ac.signal.aborted)
      throw new SparkError(
        `interrupted: what was fetched is kept under ${cacheRoot} (not in the snapshot)`,
        ExitCode.problems,
        [`resume with: ${again}`],
      );
    throw pullError(e, again);
  } finally {
    ac.off();
  }
  // A step of another verb (serve --pull): its summary goes to stderr, the verb's own result to stdout.
  const out = opts.step ? note : say;
  if (opts.json) {
    if (!opts.step) say(envelope('pull', { ...result }));
    return result;
  }
  const fetched = result.files.filter((f) => f.status !== 'present').length;
  out(
    `${c.green('pulled')} ${repo}@${result.commit} (${revision}): ${result.files.length} files, ${fetched ? `${fetched} fetched (${formatBytes(result.bytesFetched)})` : 'all already here'} in ${formatDuration(result.ms)}`,
  );
  out(c.dim(`snapshot: ${result.snapshot}`));
  return result;
}

function hubEndpointOrExit(env: Record<string, string | undefined>): string {
  try {
    return hubEndpoint(env);
  } catch (e) {
    if (e instanceof HubError) throw new UsageError(e.message, e.fix ? [e.fix] : []);
    throw e;
  }
}

/**
 * The floor a download must keep: SPARKCTL_PULL_MIN_BYTES in every SPARKCTL_PULL_WINDOW_S (default
 * 1 MiB in 60 s). A slower body is cut off and tried once more, then the pull fails (it resumes).
 */
export function minRateOf(env: Record<string, string | undefined>): { bytes: number; windowMs: number } {
  const num = (name: string, dflt: number, max: number) => {
    const raw = env[name];
    if (raw === undefined || raw === '') return dflt;
    const v = Number(raw);
    if (!/^\d+(\.\d+)?$/.test(raw.trim()) || !(v > 0) || v > max)
      throw new UsageError(`${name}=${raw}: not a number from 1 to ${max}`, [
        `unset ${name} (default ${dflt}), or set a positive number`,
      ]);
    return v;
  };
  return {
    bytes: Math.ceil(num('SPARKCTL_PULL_MIN_BYTES', DEFAULT_MIN_RATE.bytes, 1 << 30)),
    windowMs: Math.round(num('SPARKCTL_PULL_WINDOW_S', DEFAULT_MIN_RATE.windowMs / 1000, 3600) * 1000),
  };
}
