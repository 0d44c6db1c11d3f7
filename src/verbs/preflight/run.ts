import type { Host } from '../../host/host.js';
import { runPreflight } from '../../preflight/run.js';
import { renderReport, reportJson } from '../../preflight/report.js';
import { say, note } from '../../output/log.js';
import { ExitWith, ExitCode, UsageError } from '../../errors.js';

interface PreflightCliOptions {
  profile?: string;
  set?: string[];
  platform: string;
  from?: string;
  only?: string;
  skip?: string;
  strict?: boolean;
  verify?: boolean;
  probeTimeout: number;
  nodes?: string;
  profiles?: string;
  json?: boolean;
}

export async function run(opts: PreflightCliOptions, cmd?: { parent?: { opts(): { verbose?: boolean } } }) {
  if (opts.nodes) {
    const { preflightNodes } = await import('./nodes.js');
    return preflightNodes(opts);
  }
  // A named profile is validated before anything is spawned (YAML and zod load only then).
  const profile = opts.profile ? await profileFor(opts) : undefined;
  let host: Host;
  if (opts.from) {
    const { ReplayHost } = await import('../../host/replay.js');
    host = new ReplayHost(opts.from);
  } else {
    const { RealHost } = await import('../../host/real.js');
    host = new RealHost(opts.probeTimeout);
  }
  const report = await runPreflight(host, {
    profile,
    platform: opts.platform,
    only: opts.only,
    skip: opts.skip,
    timeoutMs: opts.probeTimeout,
    verify: opts.verify,
  });
  say(opts.json ? reportJson(report) : renderReport(report, { verbose: cmd?.parent?.opts().verbose }));
  if (report.summary.fail || (opts.strict && report.summary.warn)) throw new ExitWith(ExitCode.problems);
}

/**
 * The profile preflight checks against: a profile by name, or for a model id or folder the profile
 * `plan` and `serve` would generate for it (from its config.json in this host's cache), said on stderr.
 * A model id was "unknown profile" here while plan and serve took it.
 */
async function profileFor(opts: PreflightCliOptions) {
  const name = opts.profile!;
  const { loadProfile } = await import('../../profiles/load.js');
  try {
    return loadProfile(name, { profilesDir: opts.profiles, sets: opts.set }).profile;
  } catch (e) {
    if (!(e instanceof UsageError) || !/^unknown profile/.test(e.message) || !/\//.test(name)) throw e;
    const { prepare } = await import('../../engine/inputs.js');
    const p = await prepare(name, {
      profiles: opts.profiles,
      set: opts.set,
      platform: opts.platform === 'auto' ? undefined : opts.platform,
      readHost: !opts.from,
    });
    if (!opts.json)
      note(
        `${name} has no profile of its own: checked against the profile plan and serve generate for it (${p.hostLine})`,
      );
    return p.profile;
  }
}
