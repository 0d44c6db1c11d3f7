import { resolveProfile, requireValid, sparkctlBin } from './common.js';
import { say, note } from '../output/log.js';

export async function run(profileName: string, opts: { set: string[]; profiles?: string; gpus?: number; user?: string; envFile: string }) {
  const r = resolveProfile(profileName, { profilesDir: opts.profiles, sets: opts.set, gpus: opts.gpus });
  requireValid(r);
  const p = r.profile;
  const sparkctl = `${process.execPath} ${sparkctlBin()}`;
  const sets = opts.set.map((s) => ` --set '${s.replace(/'/g, "'\\''")}'`).join('');
  const profArg = opts.profiles ? ` --profiles ${opts.profiles}` : '';
  const startBudget = p.server.readyTimeoutSeconds + p.prewarm.timeoutSeconds + 60;
  const unit = `# sparkctl systemd ${p.name}: ${p.description}
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
EnvironmentFile=-${opts.envFile}
Environment=SPARKCTL_STATE_DIR=/var/lib/sparkctl
Environment=NO_COLOR=1
# serve --foreground: preflight, launch, wait until really ready; SIGTERM is forwarded to vLLM's process group.
ExecStart=${sparkctl} serve ${p.name}${profArg}${sets} --foreground --no-prewarm
# Once started, take it from cold to warm (waits for readiness itself).
ExecStartPost=${sparkctl} prewarm ${p.name} --timeout ${p.server.readyTimeoutSeconds + p.prewarm.timeoutSeconds}
TimeoutStartSec=${startBudget}
# vLLM drains running requests on SIGTERM; sparkctl escalates to SIGKILL after its own timeout.
KillMode=mixed
TimeoutStopSec=90
Restart=on-failure
RestartSec=15
LimitNOFILE=${Math.max(65536, r.platform.host.nofileMin)}
LimitMEMLOCK=infinity

[Install]
WantedBy=multi-user.target
`;
  say(unit);
  note(`install: sparkctl systemd ${p.name} > /etc/systemd/system/sparkctl-${p.name}.service && systemctl daemon-reload && systemctl enable --now sparkctl-${p.name}`);
  if (p.server.apiKeyEnv) note(`put ${p.server.apiKeyEnv}=<key> in ${opts.envFile} (chmod 600)`);
}
