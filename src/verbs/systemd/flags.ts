import { Option } from 'commander';
import { createCommand, lazy } from '../define.js';
import { PROFILE_OPTIONS } from '../args.js';

export default createCommand({
  name: 'systemd',
  args: [['[profile]', 'the profile (none with --watch)']],
  options: [
    ['--user <user>', 'User= of the unit'],
    ['--environment-file <path>', 'EnvironmentFile= with the API key', '/etc/sparkctl/env'],
    new Option(
      '--runtime <runtime>',
      "host (serve --foreground) or container (a unit per replica running docker/podman run); default the profile's engine.runtime",
    ).choices(['host', 'container']),
    [
      '--quadlet',
      'with --runtime container and podman: a Podman Quadlet .container file per replica instead of a podman run unit (its header names the podman it needs, 4.6 or later; the key is a podman secret)',
    ],
    [
      '--allow-unauthenticated',
      "as serve's: a unit listening beyond loopback (server.host 0.0.0.0) without server.apiKeyEnv; warned; refused otherwise",
    ],
    [
      '--watch',
      "the host's watcher instead of a profile: one unit that runs sparkctl watch --all (KillMode=process: the servers it restarted outlive it)",
    ],
    ['--prometheus <file>', "with --watch: the watcher's own textfile (node_exporter's textfile directory)"],
    ...PROFILE_OPTIONS,
  ],
  description: 'print a systemd unit that runs serve --foreground, with prewarm and restart back-off',
  help: '\nExamples:\n  sparkctl systemd qwen3.5-9b > /etc/systemd/system/sparkctl-qwen3.5-9b.service\n  sparkctl systemd --watch --prometheus /var/lib/node_exporter/textfile_collector/sparkctl-watch.prom > /etc/systemd/system/sparkctl-watch.service',
  handler: lazy(() => import('./run.js')),
});
