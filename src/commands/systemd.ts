import { resolveProfile, requireValid, sparkctlBin } from './common.js';
import { say, note } from '../output/log.js';
import { UsageError } from '../errors.js';
import { commentValue } from '../output/format.js';
import { resolve } from 'node:path';
import { shutdownTimeoutArg } from '../profiles/render.js';
import { graceMsOf } from '../engine/stop.js';

// systemd unit syntax: one setting a line, so a newline (or any control character) in a value
// would start a new setting ([Service], ExecStartPre=...). Such values are refused; the rest is
// escaped: % (specifiers) and $ (variable expansion) doubled, and every ExecStart= argument that is
// not plain is double-quoted with C-style escapes, so a path with a space stays one argument.
const CONTROL = /[\u0000-\u001f\u007f]/;

function refuseControl(what: string, v: string) {
  if (CONTROL.test(v)) throw new UsageError(`${what}: contains a newline or another control character, which would inject lines into the systemd unit`, ['remove it']);
}

/** A value in a unit file line (Description=, a comment): specifiers escaped. */
const unitValue = (v: string) => v.replace(/%/g, '%%');

/** One ExecStart= argument, quoted per systemd.service(5) "Command lines". */
export function execArg(a: string): string {
  const v = a.replace(/%/g, '%%').replace(/\$/g, '$$$$');
  if (/^[A-Za-z0-9_@+=:,./-]+$/.test(v)) return v;
  return `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

export async function run(profileName: string, opts: { set: string[]; profiles?: string; gpus?: number; user?: string; environmentFile: string }) {
  const r = resolveProfile(profileName, { profilesDir: opts.profiles, sets: opts.set, gpus: opts.gpus });
  requireValid(r);
  const p = r.profile;
  for (const s of opts.set) refuseControl(`--set ${s.split('=')[0]}`, s);
  refuseControl('description', p.description ?? '');
  refuseControl('profile name', p.name);
  refuseControl('--environment-file', opts.environmentFile);
  if (opts.profiles !== undefined) refuseControl('--profiles', resolve(opts.profiles));
  // Where sparkctl and node live is the environment's say: a control character there would inject lines just the same.
  refuseControl('the node executable path', process.execPath);
  refuseControl("sparkctl's own path", sparkctlBin());
  if (opts.user !== undefined && !/^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$/.test(opts.user))
    throw new UsageError(`--user ${JSON.stringify(opts.user)}: not a user name`, ['a user name like vllm or svc_llm (letters, digits, _ . -)']);
  if (!/^[A-Za-z0-9._-]+$/.test(p.name)) throw new UsageError(`profile name ${JSON.stringify(p.name)}: only letters, digits, . _ - can name a unit`);
  const cmd = (...args: string[]) => [process.execPath, sparkctlBin(), ...args].map(execArg).join(' ');
  const serveArgs = ['serve', p.name, ...(opts.profiles ? ['--profiles', resolve(opts.profiles)] : []), ...opts.set.flatMap((s) => ['--set', s]), '--foreground', '--no-prewarm'];
  const startBudget = p.server.readyTimeoutSeconds + p.prewarm.timeoutSeconds + 60;
  // serve --foreground gives vLLM its drain + teardown before SIGKILL; systemd waits that and a margin
  const drain = shutdownTimeoutArg(p);
  const stopBudget = Math.ceil(graceMsOf({ shutdownTimeoutSeconds: drain }) / 1000) + 15;
  const unit = `# sparkctl systemd ${p.name}: ${commentValue(p.description ?? '')}
# Install: save as /etc/systemd/system/sparkctl-${p.name}.service, then
#   systemctl daemon-reload && systemctl enable --now sparkctl-${p.name}
[Unit]
Description=vLLM server ${p.name} (sparkctl)
Documentation=https://docs.vllm.ai/
After=network-online.target nvidia-persistenced.service nvidia-fabricmanager.service
Wants=network-online.target
# Back-off: at most 5 restarts in 10 minutes, then stay failed until someone looks.
StartLimitIntervalSec=600
StartLimitBurst=5

[Service]
Type=simple
${opts.user ? `User=${opts.user}\n` : ''}# The API key${p.server.apiKeyEnv ? ` (${p.server.apiKeyEnv}=...)` : ''} lives here, mode 0600, never in the unit or the profile.
EnvironmentFile=-${unitValue(opts.environmentFile)}
Environment=SPARKCTL_STATE_DIR=/var/lib/sparkctl
Environment=NO_COLOR=1
${routerLines(p)}# serve --foreground: preflight, launch, wait until really ready; SIGTERM is forwarded to vLLM's process group.
ExecStart=${cmd(...serveArgs)}
# Once started, take it from cold to warm (waits for readiness itself).
ExecStartPost=${cmd('prewarm', p.name, '--timeout', String(p.server.readyTimeoutSeconds + p.prewarm.timeoutSeconds))}
TimeoutStartSec=${startBudget}
# ${drain ? `vLLM drains in-flight requests for up to ${drain} s on SIGTERM (--shutdown-timeout)` : `this vLLM (${p.engine.vllmVersion}) aborts in-flight requests on SIGTERM (no --shutdown-timeout in its flag table)`}; sparkctl escalates to SIGKILL after its own grace.
KillMode=mixed
TimeoutStopSec=${stopBudget}
Restart=on-failure
RestartSec=15
LimitNOFILE=${Math.max(65536, r.platform.host.nofileMin)}
LimitMEMLOCK=infinity

[Install]
WantedBy=multi-user.target
`;
  say(unit);
  note(`install: sparkctl systemd ${p.name} > /etc/systemd/system/sparkctl-${p.name}.service && systemctl daemon-reload && systemctl enable --now sparkctl-${p.name}`);
  if (p.server.apiKeyEnv) note(`put ${p.server.apiKeyEnv}=<key> in ${opts.environmentFile} (chmod 600)`);
}

/** With a router: what runs inside the service, and how to restart it without dropping requests. */
function routerLines(p: { name: string; server: { port: number }; router?: { enabled: boolean } }): string {
  if (!p.router?.enabled) return '';
  return `# The router (HAProxy on port ${p.server.port}) runs inside this service with the replicas behind it on loopback.
# systemctl restart stops everything; SPARKCTL_STATE_DIR=/var/lib/sparkctl sparkctl restart ${p.name} --rolling replaces
# one replica at a time while the service keeps running (it stays up while any replica of the profile is registered and alive).
`;
}
