// What the container runtime needs before vLLM can run in it: the CLI answers (its daemon is
// reachable, or podman runs), its OCI runtime (runc/crun) is there, the image is here (serve never
// pulls unless --pull), and for a GPU engine the NVIDIA Container Toolkit (nvidia-ctk; CDI devices for
// podman, the nvidia runtime for docker). Two phases: the answers are asked through a runner (serve:
// the CLI itself; `sparkctl preflight`: its Host, like its other facts; a replay lacking them skips them), then
// judged by a pure function. Each failure names its fix. Every call is bounded.
import { withCliArgs, type ContainerCli } from './container.js';
import { cliRunAsync, failureLine, type CliResult } from './ops.js';
import { parseImageInspect, versionFromLabels } from './image-version.js';

export interface ContainerCheck {
  id: ContainerCheckId;
  status: 'pass' | 'fail' | 'warn' | 'skip';
  detail: string;
  expected: string;
  fix?: string;
}

export const CONTAINER_CHECK_IDS = ['container.cli', 'container.image', 'container.oci-runtime', 'container.toolkit', 'container.cdi', 'container.toolkit.docker'] as const;
export type ContainerCheckId = (typeof CONTAINER_CHECK_IDS)[number];

export type Runner = (argv: string[], timeoutMs: number) => Promise<CliResult>;

/** What the runtime and the host answered; absent where it was not asked (an earlier answer made it moot). */
export interface ContainerAnswers {
  cli: ContainerCli;
  image: string;
  version: CliResult;
  inspect?: CliResult;
  /** podman: the OCI runtime; docker: the runtimes (nvidia among them) */
  info?: CliResult;
  ctk?: CliResult;
  /** podman: `nvidia-ctk cdi list` */
  cdiList?: CliResult;
  /** podman: the spec files under /etc/cdi and /var/run/cdi */
  cdiSpecs?: CliResult;
}

const CDI_LS = 'for d in /etc/cdi /var/run/cdi; do for f in "$d"/*.yaml "$d"/*.yml "$d"/*.json; do [ -f "$f" ] && echo "$f"; done; done; true';

/** Ask everything, bounded; the GPU answers only for a GPU engine. */
export async function askContainer(x: { cli: ContainerCli; cliArgs: readonly string[]; image: string; gpu: boolean; run: Runner }): Promise<ContainerAnswers> {
  const c = (argv: string[]) => x.run(withCliArgs(argv, x.cliArgs), 20_000);
  // docker's server answers only through its daemon; podman has none (its client is the runtime)
  const version = await c([x.cli, 'version', '--format', x.cli === 'docker' ? '{{.Server.Version}}' : '{{.Client.Version}}']);
  const a: ContainerAnswers = { cli: x.cli, image: x.image, version };
  if (version.error || version.code !== 0) return a;
  const info = c(x.cli === 'docker' ? [x.cli, 'info', '--format', '{{.DefaultRuntime}} {{json .Runtimes}}'] : [x.cli, 'info', '--format', '{{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Path}}']);
  const inspect = c([x.cli, 'image', 'inspect', '--format', '{{.Id}} {{json .Config.Labels}} {{json .Config.Entrypoint}}', x.image]);
  const ctk = x.gpu ? x.run(['nvidia-ctk', '--version'], 10_000) : undefined;
  const cdiList = x.gpu && x.cli === 'podman' ? x.run(['nvidia-ctk', 'cdi', 'list'], 10_000) : undefined;
  const cdiSpecs = x.gpu && x.cli === 'podman' ? x.run(['sh', '-c', CDI_LS], 5_000) : undefined;
  [a.info, a.inspect, a.ctk, a.cdiList, a.cdiSpecs] = await Promise.all([info, inspect, ctk, cdiList, cdiSpecs]);
  return a;
}

const ok = (r?: CliResult): r is CliResult => !!r && !r.error && r.code === 0;
const lastLine = (r: CliResult) => (r.error ?? failureLine(r.stderr) ?? '').replace(/[^\x20-\x7e]/g, '?').slice(0, 200) || `exit ${r.code}`;

/**
 * The checks, from the answers (pure). `gpus`: the GPU indices the replicas use, each of which podman
 * must resolve as the CDI device nvidia.com/gpu=N. Every id is reported; one that does not apply says why.
 */
export function judgeContainer(a: ContainerAnswers, o: { pull: boolean; gpu: boolean; gpus?: number[]; noGpu?: string }): ContainerCheck[] {
  const cli = a.cli;
  const out: ContainerCheck[] = [];
  const add = (id: ContainerCheckId, status: ContainerCheck['status'], detail: string, expected: string, fix?: string) => out.push({ id, status, detail, expected, ...(fix ? { fix } : {}) });
  const usable = ok(a.version);
  if (usable) add('container.cli', 'pass', `${cli} ${a.version.stdout.trim().slice(0, 40) || 'answers'}`, `${cli} answers`);
  else
    add(
      'container.cli',
      'fail',
      a.version.error ?? `${cli} version failed: ${lastLine(a.version)}`,
      cli === 'docker' ? 'docker and its daemon answer' : 'podman answers',
      cli === 'docker' ? 'install docker and start its daemon (systemctl start docker), or --set container.cli=podman' : 'install podman (apt-get install podman runc), or --set container.cli=docker',
    );
  const moot = `${cli} does not answer (container.cli)`;
  if (!usable) {
    for (const id of CONTAINER_CHECK_IDS.slice(1)) add(id, 'skip', moot, '');
    return out;
  }
  // the image
  const facts = ok(a.inspect) ? parseImageInspect(a.inspect.stdout) : undefined;
  if (facts && !('error' in facts)) {
    const v = versionFromLabels(facts.labels);
    add(
      'container.image',
      'pass',
      `${a.image} is present (${facts.id.replace(/^sha256:/, '').slice(0, 12)}${'version' in v ? `, vLLM ${v.version} by its label` : ''})`,
      'the image is present locally',
    );
  } else if (o.pull) add('container.image', 'warn', `${a.image} is not present: --pull lets ${cli} fetch it at launch`, 'the image is present locally', `${cli} pull ${a.image}`);
  else
    add(
      'container.image',
      'fail',
      `${a.image} is not present locally (serve never pulls)${facts && 'error' in facts ? `: ${facts.error}` : ''}`,
      'the image is present locally',
      `${cli} pull ${a.image} (or serve --pull; offline: ${cli} load -i FILE)`,
    );
  // the OCI runtime under the CLI
  if (cli === 'podman') {
    const m = ok(a.info) ? /^(\S+) (\/\S+)$/.exec(a.info.stdout.trim()) : null;
    if (m) add('container.oci-runtime', 'pass', `${m[1]} (${m[2]})`, 'an OCI runtime (runc or crun)');
    else
      add(
        'container.oci-runtime',
        'fail',
        a.info ? `podman info names no OCI runtime: ${ok(a.info) ? JSON.stringify(a.info.stdout.trim().slice(0, 80)) : lastLine(a.info)}` : 'podman info was not asked',
        'an OCI runtime (runc or crun)',
        'apt-get install runc (or crun); where crun refuses the cgroup layout: --set container.cliArgs=["--runtime","runc"]',
      );
  } else {
    const m = ok(a.info) ? /^(\S+) (\{.*\})$/.exec(a.info.stdout.trim()) : null;
    if (m) add('container.oci-runtime', 'pass', `default runtime ${m[1]}`, 'an OCI runtime (runc)');
    else
      add(
        'container.oci-runtime',
        'fail',
        `docker info: ${a.info ? lastLine(a.info) : 'not asked'}`,
        'an OCI runtime (runc)',
        'reinstall docker (its containerd and runc), then systemctl restart docker',
      );
  }
  // the NVIDIA Container Toolkit
  const noGpu = o.noGpu ?? 'the simulator uses no GPU';
  if (!o.gpu) {
    for (const id of ['container.toolkit', 'container.cdi', 'container.toolkit.docker'] as const) add(id, 'skip', noGpu, '');
    return out;
  }
  const ctkOk = ok(a.ctk);
  if (ctkOk) add('container.toolkit', 'pass', a.ctk!.stdout.trim().split('\n')[0]!.slice(0, 80) || 'nvidia-ctk answers', 'the NVIDIA Container Toolkit (nvidia-ctk)');
  else
    add(
      'container.toolkit',
      'fail',
      a.ctk?.error ? 'nvidia-ctk is not installed: the NVIDIA Container Toolkit is missing' : `nvidia-ctk --version failed: ${a.ctk ? lastLine(a.ctk) : 'not asked'}`,
      'the NVIDIA Container Toolkit (nvidia-ctk)',
      "install nvidia-container-toolkit (NVIDIA's apt repository)",
    );
  if (cli === 'podman') {
    out.push(judgeCdi(a, o.gpus ?? []));
    add('container.toolkit.docker', 'skip', 'podman reaches the GPUs through CDI (container.cdi)', '');
  } else {
    add('container.cdi', 'skip', 'docker reaches the GPUs through its nvidia runtime (container.toolkit.docker)', '');
    const m = ok(a.info) ? /^\S+ (\{.*\})$/.exec(a.info.stdout.trim()) : null;
    if (m && /"nvidia"\s*:/.test(m[1]!)) add('container.toolkit.docker', 'pass', 'docker has the nvidia runtime', "docker's nvidia runtime");
    else add('container.toolkit.docker', 'fail', 'docker info lists no nvidia runtime', "docker's nvidia runtime", 'nvidia-ctk runtime configure --runtime=docker && systemctl restart docker');
  }
  return out;
}

const GENERATE = 'nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml';

/** podman resolves nvidia.com/gpu=N from a CDI spec: each GPU the replicas use must be a device in it. */
function judgeCdi(a: ContainerAnswers, gpus: number[]): ContainerCheck {
  const expected = gpus.length ? `CDI devices ${gpus.map((g) => `nvidia.com/gpu=${g}`).join(', ')}` : 'a CDI spec for the GPUs';
  const specs = ok(a.cdiSpecs)
    ? a.cdiSpecs.stdout
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => /^\/[^\s]+$/.test(l))
    : [];
  if (ok(a.cdiList)) {
    const devices = new Set([...a.cdiList.stdout.matchAll(/\bnvidia\.com\/gpu=([A-Za-z0-9-]+)/g)].map((m) => m[1]!));
    const missing = gpus.filter((g) => !devices.has(String(g)));
    if (!devices.size) return { id: 'container.cdi', status: 'fail', detail: 'nvidia-ctk cdi list shows no nvidia.com/gpu device', expected, fix: GENERATE };
    if (missing.length)
      return {
        id: 'container.cdi',
        status: 'fail',
        detail: `the CDI spec has no ${missing.map((g) => `nvidia.com/gpu=${g}`).join(', ')} (it has ${[...devices].slice(0, 8).join(', ')})`,
        expected,
        fix: `${GENERATE} (again, after a GPU or driver change)`,
      };
    return { id: 'container.cdi', status: 'pass', detail: `nvidia-ctk cdi list: ${devices.size} nvidia.com/gpu device(s)${specs.length ? ` in ${specs.join(', ')}` : ''}`, expected };
  }
  if (specs.length)
    return {
      id: 'container.cdi',
      status: 'warn',
      detail: `CDI spec ${specs.join(', ')}; its devices not listed (nvidia-ctk cdi list failed)`,
      expected,
      fix: 'nvidia-ctk cdi list (to see the devices podman can resolve)',
    };
  return { id: 'container.cdi', status: 'fail', detail: 'no CDI spec under /etc/cdi or /var/run/cdi: podman cannot resolve nvidia.com/gpu=N', expected, fix: GENERATE };
}

export interface ContainerPreflightInput {
  cli: ContainerCli;
  cliArgs: string[];
  image: string;
  engine: 'vllm' | 'sim';
  pull: boolean;
  gpus?: number[];
  /** why the container gets no GPU though the engine is vLLM (container.gpus none: containerGpuUse) */
  noGpu?: string;
  /** the CLI runner (tests pass canned answers) */
  run?: Runner;
}

/** serve's container checks: asked of the CLI and the host directly, then judged. */
export async function containerPreflight(x: ContainerPreflightInput): Promise<ContainerCheck[]> {
  const run: Runner = x.run ?? ((argv, timeoutMs) => cliRunAsync(argv, { timeoutMs }));
  const gpu = x.engine === 'vllm' && !x.noGpu;
  const answers = await askContainer({ cli: x.cli, cliArgs: x.cliArgs, image: x.image, gpu, run });
  return judgeContainer(answers, { pull: x.pull, gpu, gpus: x.gpus, noGpu: x.engine === 'vllm' ? x.noGpu : undefined });
}
