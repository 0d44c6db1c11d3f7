// The container runtime: the same launch plan the host runtime spawns, run by docker or podman.
// The `vllm serve ...` argv of a replica becomes the container's command; everything around it
// (image, GPUs, mounts, ports, ulimits, labels, name) is rendered here. Pure, table-tested: the
// key is passed by NAME (-e VLLM_API_KEY) and its value travels in the CLI's environment only.
import { homedir } from 'node:os';
import { join, isAbsolute } from 'node:path';
import { existsSync, statSync } from 'node:fs';
import type { ContainerBlock, Platform, Profile } from '../../profiles/schema.js';
import { ContainerBlock as ContainerSchema } from '../../profiles/schema.js';
import type { ReplicaPlan } from '../../profiles/render.js';
import { UsageError } from '../../errors.js';

export type ContainerCli = 'docker' | 'podman';
export type Runtime = 'host' | 'container';

/** The label whose value is the instance marker: what proves a container ours (with its id). */
export const MARKER_LABEL = 'sparkctl.instance';
export const PROFILE_LABEL = 'sparkctl.profile';
export const REPLICA_LABEL = 'sparkctl.replica';
/** The state folder that launched it: orphans are looked for among this folder's containers only. */
export const STATE_LABEL = 'sparkctl.state';
/** What the model's Hugging Face cache is mounted as inside the image (both images run as root). */
export const CONTAINER_HF_CACHE = '/root/.cache/huggingface';
/**
 * The NGC vLLM release the DGX baselines run by default. NGC tags are YY.MM of the container
 * release, not vLLM's version, so they cannot be derived: pin another one with container.image.
 */
export const NGC_VLLM_TAG = '25.09';

/** The image a profile runs: its own, else NGC's on a DGX baseline, else vLLM's for the target version. */
export function imageFor(p: Profile, platform: Pick<Platform, 'name'>): string {
  if (p.container?.image) return p.container.image;
  if (/^dgx-/.test(platform.name)) return `nvcr.io/nvidia/vllm:${NGC_VLLM_TAG}-py3`;
  const v = p.engine.vllmVersion;
  if (!/^\d+\.\d+(\.\d+)?$/.test(v))
    throw new UsageError(`engine.runtime container: no image for vLLM "${v}" (vllm/vllm-openai is tagged v<version>)`, [
      '--set engine.vllmVersion=0.11.0 (vllm/vllm-openai:v0.11.0), or --set container.image=REPO:TAG (or REPO@sha256:DIGEST)',
    ]);
  return `vllm/vllm-openai:v${v}`;
}

/** The CLI: the profile's, else podman, else docker, whichever is on PATH. */
export function detectCli(p: Pick<Profile, 'container'>, onPath: (bin: string) => boolean = binOnPath): ContainerCli {
  if (p.container?.cli) return p.container.cli;
  if (onPath('podman')) return 'podman';
  if (onPath('docker')) return 'docker';
  throw new UsageError('engine.runtime container: neither podman nor docker is on PATH', ['install podman (apt-get install podman) or docker, or --set engine.runtime=host']);
}

export function binOnPath(bin: string, path = process.env.PATH ?? ''): boolean {
  return path.split(':').some((d) => {
    if (!d) return false;
    try {
      const st = statSync(join(d, bin));
      return st.isFile() && (st.mode & 0o111) !== 0;
    } catch {
      return false;
    }
  });
}

/** The container name of a replica: derived from the instance, so a leftover one is recognised (never replaced). */
export function containerName(instance: string): string {
  return `sparkctl-${instance}`;
}

export interface ContainerPlan {
  cli: ContainerCli;
  /** global options before the subcommand (cliArgs), used for every call of this container */
  cliArgs: string[];
  image: string;
  name: string;
  /** [cli, ...cliArgs, 'run', '-d', ...options, image, ...command] */
  argv: string[];
  /** variables the CLI process must carry (their names are in argv as -e NAME; never their values) */
  envByName: string[];
}

export interface ContainerRenderInput {
  profile: Profile;
  platform: Pick<Platform, 'name'>;
  replica: ReplicaPlan;
  engine: 'vllm' | 'sim';
  /** the instance marker (a random id at launch; "<marker>" in a dry run) */
  marker: string;
  stateDir: string;
  /** the profile's file: the simulator reads the architecture facts from it (mounted read-only) */
  profileFile?: string;
  cli: ContainerCli;
  env?: NodeJS.ProcessEnv;
  /** detached (-d, what serve runs) or not (systemd runs the CLI in the foreground) */
  detached?: boolean;
}

const settingsOf = (p: Profile): ContainerBlock => p.container ?? ContainerSchema.parse({});

/** Where the Hugging Face cache is on this host (HF_HUB_CACHE's parent is not assumed: HF_HOME, else ~/.cache/huggingface). */
export function hfCacheDir(p: Profile, env: NodeJS.ProcessEnv = process.env): string {
  return settingsOf(p).hfCache ?? env.HF_HOME ?? join(env.HOME ?? homedir(), '.cache', 'huggingface');
}

/** Ray places workers over the host network: a published port cannot carry it. */
export function usesHostNetwork(p: Profile): boolean {
  return settingsOf(p).network === 'host' || p.parallel.executor === 'ray' || p.parallel.nodes > 1;
}

/**
 * The vLLM command inside the container: the replica's argv with the image's own `vllm` in front.
 * With a published port vLLM must listen on every interface of its own network namespace (the
 * publish decides which host address reaches it); the GPUs are the container's 0..n-1, so the
 * host's CUDA_VISIBLE_DEVICES indices are not passed.
 */
export function containerCommand(r: ReplicaPlan, executableLen: number, hostNet: boolean): string[] {
  const args = r.argv.slice(executableLen);
  const out = ['vllm', ...args];
  if (!hostNet) {
    const i = out.indexOf('--host');
    if (i > 0 && i + 1 < out.length) out[i + 1] = '0.0.0.0';
  }
  return out;
}

function volume(source: string, target: string, ro: boolean): string {
  // a bind spec is split on ':'; a path holding one (or ',') would mount something else
  if (/[:,]/.test(source) || /[:,]/.test(target))
    throw new UsageError(`container mount ${JSON.stringify(source)}: a path with ':' or ',' cannot be bind-mounted`, ['rename the folder, or link it from a plain path']);
  return `${source}:${target}${ro ? ':ro' : ''}`;
}

/** The `run` argv of one replica's container. Pure but for the existence of the mounted paths. */
export function renderContainerRun(x: ContainerRenderInput & { executableLen: number }): ContainerPlan {
  const p = x.profile;
  const s = settingsOf(p);
  const env = x.env ?? process.env;
  const image = imageFor(p, x.platform);
  const name = containerName(x.replica.name);
  const hostNet = usesHostNetwork(p);
  const o: string[] = ['--name', name];
  o.push('--label', `${MARKER_LABEL}=${x.marker}`, '--label', `${PROFILE_LABEL}=${p.name}`, '--label', `${REPLICA_LABEL}=${x.replica.name}`, '--label', `${STATE_LABEL}=${x.stateDir}`);
  // vLLM handles SIGTERM itself (the drain): the CLI's stop -t gives it the grace before SIGKILL.
  if (s.shmSize) o.push('--shm-size', s.shmSize);
  else o.push('--ipc=host');
  for (const [k, v] of Object.entries(s.ulimits)) o.push('--ulimit', `${k}=${v}`);
  if (x.engine === 'vllm') {
    if (x.cli === 'docker') o.push('--gpus', `"device=${x.replica.gpus.join(',')}"`);
    else for (const g of x.replica.gpus) o.push('--device', `nvidia.com/gpu=${g}`);
  }
  if (hostNet) o.push('--network', 'host');
  else {
    const host = p.server.host;
    o.push('-p', `${host.includes(':') ? `[${host}]` : host}:${x.replica.port}:${x.replica.port}`);
  }
  const hf = hfCacheDir(p, env);
  if (existsSync(hf)) o.push('-v', volume(hf, CONTAINER_HF_CACHE, true));
  if (p.model.path && isAbsolute(p.model.path)) o.push('-v', volume(p.model.path, p.model.path, true));
  if (x.engine === 'sim' && x.profileFile && isAbsolute(x.profileFile) && existsSync(x.profileFile)) o.push('-v', volume(x.profileFile, x.profileFile, true));
  for (const m of s.mounts) o.push('-v', volume(m.source, m.target, m.readOnly));
  const envs = { ...x.replica.env };
  if (x.engine === 'vllm') delete envs.CUDA_VISIBLE_DEVICES;
  for (const [k, v] of Object.entries(envs).sort(([a], [b]) => a.localeCompare(b))) o.push('-e', `${k}=${v}`);
  const byName = Object.keys(x.replica.envFrom).sort();
  for (const k of byName) o.push('-e', k);
  const argv = [x.cli, ...s.cliArgs, 'run', ...(x.detached === false ? ['--rm'] : ['-d']), ...o, image, ...containerCommand(x.replica, x.executableLen, hostNet)];
  return { cli: x.cli, cliArgs: [...s.cliArgs], image, name, argv, envByName: byName };
}
