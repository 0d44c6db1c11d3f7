import { Option } from 'commander';
import { createCommand, lazy } from '../define.js';
import { PROFILE_OPTIONS } from '../args.js';

export default createCommand({
  name: 'systemd',
  args: [['<profile>']],
  options: [
    ['--user <user>', 'User= of the unit'],
    ['--environment-file <path>', 'EnvironmentFile= with the API key', '/etc/sparkctl/env'],
    new Option('--runtime <runtime>', "host (serve --foreground) or container (a unit per replica running docker/podman run); default the profile's engine.runtime").choices(['host', 'container']),
    [
      '--quadlet',
      'with --runtime container and podman: a Podman Quadlet .container file per replica instead of a podman run unit (its header names the podman it needs, 4.6 or later; the key is a podman secret)',
    ],
    ...PROFILE_OPTIONS,
  ],
  description: 'print a systemd unit that runs serve --foreground, with prewarm and restart back-off',
  help: '\nExample:\n  sparkctl systemd qwen3.5-9b > /etc/systemd/system/sparkctl-qwen3.5-9b.service',
  handler: lazy(() => import('./run.js')),
});
