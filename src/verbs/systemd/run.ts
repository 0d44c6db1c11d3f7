import { requireValid } from '../common.js';
import { loadProfile } from '../../profiles/load.js';
import { resolveWithModel } from '../../profiles/resolve.js';
import { say, note } from '../../output/log.js';
import { UsageError } from '../../errors.js';
import { systemdUnits, type SystemdOptions } from '../../engine/systemd.js';

export async function run(
  profileName: string | undefined,
  opts: SystemdOptions & { watch?: boolean; prometheus?: string },
) {
  if (opts.watch) {
    if (profileName)
      throw new UsageError(
        `--watch renders the host's one watcher unit: no profile (got ${JSON.stringify(profileName)})`,
        ['sparkctl systemd --watch'],
      );
    if (opts.quadlet || opts.runtime)
      throw new UsageError(
        '--watch: the watcher runs on the host (it reads /proc and the state folder): no --quadlet or --runtime',
        [
          "a Quadlet unit carries the watcher's verdict as its own health check: sparkctl systemd PROFILE --runtime container --quadlet",
        ],
      );
    const { watchUnit } = await import('../../watch/unit.js');
    say(watchUnit({ user: opts.user, environmentFile: opts.environmentFile, prometheus: opts.prometheus }));
    note(
      'install: sparkctl systemd --watch > /etc/systemd/system/sparkctl-watch.service && systemctl daemon-reload && systemctl enable --now sparkctl-watch',
    );
    return;
  }
  if (!profileName)
    throw new UsageError('systemd: name a profile, or --watch for the host watcher', [
      'sparkctl systemd qwen3.5-9b',
      'sparkctl systemd --watch',
    ]);
  if (opts.prometheus) throw new UsageError('--prometheus goes with --watch');
  const r = await resolveWithModel(loadProfile(profileName, { profilesDir: opts.profiles, sets: opts.set }), {
    gpus: opts.gpus,
  });
  requireValid(r);
  await systemdUnits(r, opts, { unit: say, note });
}
