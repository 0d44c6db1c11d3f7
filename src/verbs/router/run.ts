// router config: the HAProxy configuration of a profile, for an operator's own HAProxy.
import { loadProfile } from '../../profiles/load.js';
import { resolveWithModel } from '../../profiles/resolve.js';
import { requireValid } from '../../profiles/resolve.js';
import { resolveReplicas } from '../../profiles/validate.js';
import { withRouterFlag } from '../../engine/plan.js';
import { planRouter, renderConfig } from '../../profiles/router.js';
import { stateDir } from '../common.js';
import { say } from '../../output/log.js';

export async function run(
  profileName: string,
  opts: { set: string[]; profiles?: string; gpus?: number; socket?: string; replicas?: number },
) {
  const r = withRouterFlag(
    await resolveWithModel(loadProfile(profileName, { profilesDir: opts.profiles, sets: opts.set }), {
      gpus: opts.gpus,
    }),
    true,
  );
  requireValid(r);
  const n = opts.replicas ?? resolveReplicas(r.profile, r.host);
  // Logs go to the local syslog, as Debian's own haproxy.cfg does.
  say(renderConfig(planRouter(r.profile, n, stateDir())!, { socket: opts.socket }));
}
