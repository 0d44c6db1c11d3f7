// How one replica runs in a container (docker or podman), as NVIDIA ships vLLM: pure rendering of
// the run/stop/inspect command lines and of the identity proof from what the runtime reports. The
// same spec renders both CLIs; they differ only where the tools do (GPUs: docker's --gpus, podman's
// CDI devices). Secrets travel by name (-e VLLM_API_KEY): the value only in the environment.

export type ContainerCli = 'docker' | 'podman';

/** The label that carries the instance marker: the one basis for stopping or removing a container. */
export const MARKER_LABEL = 'io.sparkctl.instance';
export const NAME_LABEL = 'io.sparkctl.name';

export interface Mount {
  host: string;
  container: string;
  readOnly: boolean;
}

export interface ContainerSpec {
  cli: ContainerCli;
  image: string;
  /** derived from the instance name (sparkctl-<instance>) */
  name: string;
  marker: string;
  /** the replica's GPUs */
  gpus: number[];
  /** publish the port on the profile's host address, or share the host's network (Ray) */
  network: { mode: 'publish'; host: string; port: number } | { mode: 'host' };
  mounts: Mount[];
  /** --ipc=host (vLLM's docs) or a /dev/shm of this size (NVIDIA's run_cluster.sh: 10.24g) */
  ipc: 'host' | { shmSize: string };
  /** non-secret variables, by value */
  env: Record<string, string>;
  /** variables passed by name only (their values come from sparkctl's environment) */
  envByName: string[];
  /** the arguments after `vllm serve` */
  vllmArgs: string[];
  /** seconds the runtime waits after SIGTERM before SIGKILL (the drain + teardown) */
  stopTimeoutS: number;
  /** serve --pull: fetch a missing image; otherwise never (no pull at 3 a.m.) */
  pull?: boolean;
  /** false only where the host's hard limits refuse NVIDIA's ulimits (a CI sandbox); default true */
  ulimits?: boolean;
}

// registry/name[:tag][@sha256:<64 hex>], as docker and podman accept them
const IMAGE_REF = /^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;

export function validImageRef(ref: string): boolean {
  return ref.length <= 512 && IMAGE_REF.test(ref);
}

/**
 * The image for a platform: NVIDIA's NGC build on the DGX baselines (its tag is the NGC release,
 * YY.MM), vLLM's own image of the target version elsewhere.
 */
export function defaultImage(platform: string, vllmVersion: string, ngcTag?: string): string {
  if (platform.startsWith('dgx-') && ngcTag) return `nvcr.io/nvidia/vllm:${ngcTag}-py3`;
  return `vllm/vllm-openai:v${vllmVersion}`;
}

/** A container name from an instance name (docker: [a-zA-Z0-9][a-zA-Z0-9_.-]*). */
export function containerName(instance: string): string {
  return `sparkctl-${instance.replace(/[^a-zA-Z0-9_.-]/g, '-')}`;
}

function gpuArgs(cli: ContainerCli, gpus: number[]): string[] {
  if (!gpus.length) return [];
  // docker reads --gpus as CSV: a list of devices must be quoted inside the value
  if (cli === 'docker') return ['--gpus', `"device=${gpus.join(',')}"`];
  return gpus.flatMap((g) => ['--device', `nvidia.com/gpu=${g}`]);
}

/** `docker|podman run -d ...`: the argv (never a shell string). */
export function runArgv(s: ContainerSpec): string[] {
  const out = [s.cli, 'run', '--detach', `--pull=${s.pull ? 'missing' : 'never'}`, '--name', s.name, '--label', `${MARKER_LABEL}=${s.marker}`, '--label', `${NAME_LABEL}=${s.name}`];
  out.push(...gpuArgs(s.cli, s.gpus));
  out.push(...(s.ipc === 'host' ? ['--ipc=host'] : ['--shm-size', s.ipc.shmSize]));
  // the ulimits NVIDIA's DGX instructions use
  if (s.ulimits !== false) out.push('--ulimit', 'memlock=-1', '--ulimit', 'stack=67108864');
  if (s.network.mode === 'host') out.push('--network', 'host');
  else out.push('--publish', `${s.network.host === '0.0.0.0' ? '' : `${s.network.host}:`}${s.network.port}:${s.network.port}`);
  for (const m of s.mounts) out.push('--volume', `${m.host}:${m.container}${m.readOnly ? ':ro' : ''}`);
  for (const k of s.envByName) out.push('--env', k);
  for (const [k, v] of Object.entries(s.env)) out.push('--env', `${k}=${v}`);
  out.push('--stop-timeout', String(s.stopTimeoutS));
  out.push(s.image, 'vllm', 'serve', ...s.vllmArgs);
  return out;
}

/** What the runtime is asked about a container: its id, its marker label, whether it runs. */
export function inspectArgv(cli: ContainerCli, idOrName: string): string[] {
  return [cli, 'inspect', '--type', 'container', '--format', `{{.Id}} {{index .Config.Labels "${MARKER_LABEL}"}} {{.State.Running}}`, idOrName];
}

export const stopArgv = (cli: ContainerCli, id: string, timeoutS: number) => [cli, 'stop', '--time', String(timeoutS), id];
export const removeArgv = (cli: ContainerCli, id: string) => [cli, 'rm', id];

export type ContainerProof = { state: 'alive' | 'exited'; id: string } | { state: 'gone' } | { state: 'unproven'; code: 'id-differs' | 'no-label' | 'other-marker' | 'unreadable'; reason: string };

/**
 * Is the container the record names ours? Only by the id recorded at launch AND the marker label;
 * a name alone proves nothing (another container may carry it now). Pure: the inspect output is
 * hostile text. `notFound` when the runtime said there is no such container.
 */
export function proveContainer(record: { containerId?: string; marker?: string }, inspect: { stdout: string; notFound: boolean }): ContainerProof {
  if (inspect.notFound) return { state: 'gone' };
  const line = inspect.stdout.trim().split('\n')[0] ?? '';
  // a missing label prints as Go's "<no value>"
  const m = /^([a-f0-9]{12,64}) (\S*|<no value>) (true|false)$/.exec(line);
  if (!m) return { state: 'unproven', code: 'unreadable', reason: `the runtime's answer is not an id, a label and a state: ${JSON.stringify(line.slice(0, 120))}` };
  const [, id, label, running] = m as unknown as [string, string, string, string];
  if (!record.containerId || !id.startsWith(record.containerId))
    return { state: 'unproven', code: 'id-differs', reason: `container ${id.slice(0, 12)} is not the one recorded (${record.containerId?.slice(0, 12) ?? 'none'})` };
  if (!label || label === '<no value>') return { state: 'unproven', code: 'no-label', reason: `container ${id.slice(0, 12)} carries no ${MARKER_LABEL} label` };
  if (!record.marker || label !== record.marker) return { state: 'unproven', code: 'other-marker', reason: `container ${id.slice(0, 12)} carries another instance's marker` };
  return { state: running === 'true' ? 'alive' : 'exited', id };
}
