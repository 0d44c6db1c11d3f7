// A Podman Quadlet `.container` file for one replica: the settings of the container run line as the
// keys of podman-systemd.unit(5). Quadlet (podman >= 4.4) turns it into a .service at daemon-reload.
// Only keys the targeted podman reads are used: quadlet refuses an unknown [Container] key and
// generates nothing. Where a key came later than the release that matters here (Ubuntu 24.04 and
// DGX OS 7 ship podman 4.9), the setting goes through PodmanArgs= instead: several Ulimit= lines
// are read only from 5.0 (before, the last one wins), StopTimeout= and Entrypoint= are 5.0 keys.
// Pure: the text from the spec, every value escaped for quadlet's parser and then systemd's.
import { CONTROL } from '../../util/control.js';
import { MARKER_LABEL, NAME_LABEL, STATE_LABEL, NVIDIA_ULIMITS, type ContainerSpec } from './container.js';
import { UsageError } from '../../errors.js';
import {
  LIVENESS_PERIOD_S,
  LIVENESS_RETRIES,
  livenessShell,
  livenessTimeoutS,
  type LivenessConfig,
} from './liveness.js';
import { own } from '../../util/own.js';

/** The [Container] keys rendered here and the podman release whose quadlet first reads each. */
const QUADLET_KEY_SINCE: Record<string, string> = {
  Image: '4.4',
  ContainerName: '4.4',
  Label: '4.4',
  Exec: '4.4',
  Environment: '4.4',
  PodmanArgs: '4.4',
  AddDevice: '4.4',
  Volume: '4.4',
  PublishPort: '4.4',
  Network: '4.4',
  Secret: '4.5',
  HealthCmd: '4.5',
  HealthInterval: '4.5',
  HealthTimeout: '4.5',
  HealthRetries: '4.5',
  HealthStartPeriod: '4.5',
  HealthOnFailure: '4.5',
  Pull: '4.6',
  ShmSize: '4.7',
  GlobalArgs: '4.8',
};

function refuse(what: string, v: string): never {
  throw new UsageError(`${what} ${JSON.stringify(v)}: cannot be written into a Quadlet unit`, [
    'remove newlines, control characters and backslashes from it',
  ]);
}

/**
 * A raw value (quadlet reads Image=, ContainerName=, Volume=, ... as is and copies it into ExecStart=): specifiers and
 * variables escaped.
 */
function rawValue(what: string, v: string): string {
  if (CONTROL.test(v) || v.includes('\\') || /^\s|\s$/.test(v) || v === '') refuse(what, v);
  return v.replace(/%/g, '%%').replace(/\$/g, '$$$$');
}

/**
 * One word of Exec=, PodmanArgs=, Secret=, Environment= or Label=: quadlet splits these like a
 * systemd command line (quotes, C escapes) and writes them into ExecStart=, where systemd expands %
 * specifiers and $VARIABLES: both are doubled, and a word that is not plain is double-quoted.
 */
export function word(what: string, v: string): string {
  if (CONTROL.test(v)) refuse(what, v);
  const e = v.replace(/%/g, '%%').replace(/\$/g, '$$$$');
  if (/^[A-Za-z0-9_@+=:,./-]+$/.test(e)) return e;
  return `"${e.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

const words = (what: string, vs: readonly string[]) => vs.map((v) => word(what, v)).join(' ');

export interface QuadletInput {
  spec: ContainerSpec;
  /** the unit: <unit>.container becomes <unit>.service */
  unit: string;
  description: string;
  /** podman secret that holds each variable passed by name (VLLM_API_KEY -> its secret) */
  secrets: Record<string, string>;
  startTimeoutS: number;
  stopTimeoutS: number;
  /**
   * The watcher's verdict as the container's health check (liveness.ts): podman runs it every
   * LIVENESS_PERIOD_S; LIVENESS_RETRIES failures in a row after the start period make it unhealthy,
   * and with restart (the profile's watch.action) podman kills it, for systemd's Restart=on-failure.
   */
  liveness?: { check: LivenessConfig; startPeriodS: number; restart: boolean };
}

export interface QuadletUnit {
  text: string;
  /** the oldest podman whose quadlet reads every key of the file */
  minPodman: string;
  /** the container's name: quadlet runs it with --replace, so it is never a name sparkctl serve gives */
  containerName: string;
}

function maxVersion(vs: string[]): string {
  return vs.reduce((m, v) => {
    const [ma, mi] = m.split('.').map(Number) as [number, number];
    const [va, vi] = v.split('.').map(Number) as [number, number];
    return va > ma || (va === ma && vi > mi) ? v : m;
  }, '4.4');
}

/** The [Container] lines, in the order podman run's options read best. */
function containerLines(x: QuadletInput, name: string): Array<[string, string]> {
  const s = x.spec;
  const out: Array<[string, string]> = [];
  out.push(['Image', rawValue('the image', s.image)]);
  out.push(['ContainerName', rawValue('the container name', name)]);
  const labels: Record<string, string> = { [MARKER_LABEL]: s.marker, [NAME_LABEL]: name, ...s.labels };
  // not a state folder's container: no sparkctl status/stop may adopt it as an orphan of its own
  delete labels[STATE_LABEL];
  for (const [k, v] of Object.entries(labels)) out.push(['Label', word('a label', `${k}=${v}`)]);
  out.push(['Pull', s.pull ? 'missing' : 'never']);
  if (s.cliArgs?.length) out.push(['GlobalArgs', words('container.cliArgs', s.cliArgs)]);
  for (const g of s.gpus) out.push(['AddDevice', `nvidia.com/gpu=${g}`]);
  if (s.network.mode === 'host') out.push(['Network', 'host']);
  else if (s.network.mode === 'private') {
    /* a replica on --uds: its socket's folder is a Volume, no port published */
  } else
    out.push([
      'PublishPort',
      rawValue(
        'server.host',
        `${s.network.host === '0.0.0.0' ? '' : `${s.network.host}:`}${s.network.port}:${s.network.port}`,
      ),
    ]);
  for (const m of s.mounts)
    out.push(['Volume', rawValue('a mount', `${m.host}:${m.container}${m.readOnly ? ':ro' : ''}`)]);
  for (const [k, v] of Object.entries(s.env)) out.push(['Environment', word(`env.${k}`, `${k}=${v}`)]);
  for (const k of s.envByName) {
    const secret = x.secrets[k];
    if (!secret) throw new Error(`quadlet: no secret named for ${k}`);
    out.push(['Secret', word('a secret', `${secret},type=env,target=${k}`)]);
  }
  if (s.ipc === 'host') out.push(['PodmanArgs', '--ipc=host']);
  else out.push(['ShmSize', rawValue('container.shmSize', s.ipc.shmSize)]);
  const ulimits = Object.entries(s.ulimits ?? NVIDIA_ULIMITS);
  if (ulimits.length)
    out.push([
      'PodmanArgs',
      words(
        'container.ulimits',
        ulimits.flatMap(([k, v]) => ['--ulimit', `${k}=${v}`]),
      ),
    ]);
  // the drain: podman rm -f (quadlet's ExecStop) waits the container's stop timeout before SIGKILL
  out.push(['PodmanArgs', `--stop-timeout=${s.stopTimeoutS}`]);
  if (x.liveness) {
    const l = x.liveness;
    out.push(['HealthCmd', livenessShell(l.check)]);
    out.push(['HealthInterval', `${LIVENESS_PERIOD_S}s`]);
    out.push(['HealthTimeout', `${livenessTimeoutS(l.check)}s`]);
    out.push(['HealthRetries', String(LIVENESS_RETRIES)]);
    out.push(['HealthStartPeriod', `${Math.ceil(l.startPeriodS)}s`]);
    out.push(['HealthOnFailure', l.restart ? 'kill' : 'none']);
  }
  if (s.start === 'args') out.push(['Exec', words('a vLLM argument', s.vllmArgs)]);
  else if (s.start === 'entrypoint-vllm') {
    out.push(['PodmanArgs', '--entrypoint=vllm']);
    out.push(['Exec', words('a vLLM argument', ['serve', ...s.vllmArgs])]);
  } else out.push(['Exec', words('a vLLM argument', ['vllm', 'serve', ...s.vllmArgs])]);
  return out;
}

/** What the health check is and does, for the header. */
function healthComment(l: NonNullable<QuadletInput['liveness']>): string {
  const c = l.check;
  return `# Health (sparkctl watch's verdict, run inside the container by python3; decode: the base64 word | base64 -d):
# it fails only when /health does not answer 200, or requests are held and nothing the engine reports has moved
# for the window (${c.windowS} s, raised by the server's slowest first token and longest quiet spell, at most ${c.maxWindowS} s)
# and an engine process is stopped or a 1-token probe is not answered in ${c.probeTimeoutS} s; never on a timeout alone.
# ${LIVENESS_RETRIES} failures ${LIVENESS_PERIOD_S} s apart after the start period: ${
    l.restart
      ? 'podman kills the container and systemd restarts it (Restart=on-failure; StartLimitBurst is the circuit breaker)'
      : 'unhealthy in podman ps and its events (watch.action is not restart: nothing is killed)'
  }.
`;
}

export function renderQuadlet(x: QuadletInput): QuadletUnit {
  if (x.spec.cli !== 'podman')
    throw new UsageError("--quadlet: Quadlet is podman's; this profile runs docker", [
      '--set container.cli=podman, or leave out --quadlet (a docker run unit)',
    ]);
  // Quadlet's own default name (systemd-%N): serve names its containers sparkctl-*, so quadlet's --replace never takes
  // one of them
  const name = `systemd-${x.unit}`;
  const lines = containerLines(x, name);
  const keys = [...new Set(lines.map(([k]) => k))];
  const minPodman = maxVersion(keys.map((k) => own(QUADLET_KEY_SINCE, k) ?? '99.0'));
  // the health keys said once, as Health*=
  const since = [
    ...new Set(
      keys.filter((k) => own(QUADLET_KEY_SINCE, k) !== '4.4').map((k) => (k.startsWith('Health') ? 'Health*' : k)),
    ),
  ].map((k) => `${k}= ${own(QUADLET_KEY_SINCE, k === 'Health*' ? 'HealthCmd' : k)}`);
  const text = `# Needs podman >= ${minPodman} (Quadlet came in 4.4${since.length ? `; ${since.join(', ')}` : ''}).
# Install: save as /etc/containers/systemd/${x.unit}.container, then
#   systemctl daemon-reload && systemctl start ${x.unit}
# Quadlet runs the container as ${name} with --replace (a leftover of this unit is replaced) and
# stops it with podman rm -f, which waits the --stop-timeout below (vLLM's drain) before SIGKILL.
${x.liveness ? healthComment(x.liveness) : ''}[Unit]
Description=${rawValue('the description', x.description)}
After=network-online.target nvidia-persistenced.service
Wants=network-online.target
StartLimitIntervalSec=600
StartLimitBurst=5

[Container]
${lines.map(([k, v]) => `${k}=${v}`).join('\n')}

[Service]
TimeoutStartSec=${x.startTimeoutS}
TimeoutStopSec=${x.stopTimeoutS}
Restart=on-failure
RestartSec=15

[Install]
WantedBy=multi-user.target
`;
  return { text, minPodman, containerName: name };
}
