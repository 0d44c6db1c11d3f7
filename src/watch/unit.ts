// The host's watcher as a systemd unit (`sparkctl systemd --watch`): one per host, beside the
// profiles' own units (which share its state folder, /var/lib/sparkctl). Every ExecStart= argument
// quoted and every value with a control character refused, as the profiles' units are.
import { UsageError } from '../errors.js';
import { sparkctlBin } from '../engine/plan.js';
import { execArg, refuseControl } from '../engine/runtime/unit.js';

interface WatchUnitOptions {
  user?: string;
  environmentFile: string;
  /** the watcher's own textfile (node_exporter's textfile directory) */
  prometheus?: string;
  /** s */
  interval?: number;
}

export function watchUnit(o: WatchUnitOptions): string {
  refuseControl('--environment-file', o.environmentFile);
  if (o.prometheus !== undefined) refuseControl('--prometheus', o.prometheus);
  refuseControl('the node executable path', process.execPath);
  refuseControl("sparkctl's own path", sparkctlBin());
  if (o.user !== undefined && !/^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$/.test(o.user))
    throw new UsageError(`--user ${JSON.stringify(o.user)}: not a user name`, [
      'a user name like vllm or svc_llm (letters, digits, _ . -)',
    ]);
  const args = [
    'watch',
    '--all',
    ...(o.interval ? ['--interval', `${o.interval}s`] : []),
    ...(o.prometheus ? ['--prometheus', o.prometheus] : []),
  ];
  const cmd = [process.execPath, sparkctlBin(), ...args].map(execArg).join(' ');
  const value = (v: string) => v.replace(/%/g, '%%');
  return `# sparkctl systemd --watch: the host's watcher (sparkctl watch --all)
# Install: save as /etc/systemd/system/sparkctl-watch.service, then
#   systemctl daemon-reload && systemctl enable --now sparkctl-watch
[Unit]
Description=sparkctl watch: restarts wedged or dead vLLM servers of this host, never a busy one
After=network-online.target
Wants=network-online.target
StartLimitIntervalSec=600
StartLimitBurst=5

[Service]
Type=simple
${o.user ? `User=${o.user}\n` : ''}# SPARKCTL_ALERT_WEBHOOK=<url> (a webhook URL often carries a token) lives here, mode 0600, never in the unit.
EnvironmentFile=-${value(o.environmentFile)}
# The state folder of the profiles' units (sparkctl systemd PROFILE): one watcher per state folder.
Environment=SPARKCTL_STATE_DIR=/var/lib/sparkctl
Environment=NO_COLOR=1
ExecStart=${cmd}
# Only the watcher is signalled on stop: the servers it restarted (sparkctl restart, detached in their
# own process groups) keep serving when the watcher stops or restarts.
KillMode=process
# On SIGTERM it lets a restart under way finish (stop, serve, ready) before it exits.
TimeoutStopSec=900
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
`;
}
