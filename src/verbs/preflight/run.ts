import type { Host } from '../../host/host.js';
import { runPreflight } from '../../preflight/run.js';
import { renderReport, reportJson } from '../../preflight/report.js';
import { say } from '../../output/log.js';
import { ExitWith, ExitCode } from '../../errors.js';

export interface PreflightCliOptions {
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
  const profile = opts.profile ? (await import('../../profiles/load.js')).loadProfile(opts.profile, { profilesDir: opts.profiles, sets: opts.set }).profile : undefined;
  let host: Host;
  if (opts.from) {
    const { ReplayHost } = await import('../../host/replay.js');
    host = new ReplayHost(opts.from);
  } else {
    const { RealHost } = await import('../../host/real.js');
    host = new RealHost(opts.probeTimeout);
  }
  const report = await runPreflight(host, { profile, platform: opts.platform, only: opts.only, skip: opts.skip, timeoutMs: opts.probeTimeout, verify: opts.verify });
  say(opts.json ? reportJson(report) : renderReport(report, { verbose: cmd?.parent?.opts().verbose }));
  if (report.summary.fail || (opts.strict && report.summary.warn)) throw new ExitWith(ExitCode.problems);
}
