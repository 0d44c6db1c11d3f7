import { requireValid } from '../common.js';
import { loadProfile } from '../../profiles/load.js';
import { resolveWithModel } from '../../profiles/resolve.js';
import { say, note } from '../../output/log.js';
import { systemdUnits, type SystemdOptions } from '../../engine/systemd.js';

export async function run(profileName: string, opts: SystemdOptions) {
  const r = await resolveWithModel(loadProfile(profileName, { profilesDir: opts.profiles, sets: opts.set }), { gpus: opts.gpus });
  requireValid(r);
  await systemdUnits(r, opts, { unit: say, note });
}
