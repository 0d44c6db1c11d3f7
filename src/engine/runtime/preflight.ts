// What the container runtime needs before vLLM can run in it: the CLI answers (its daemon is
// reachable, or podman runs), its OCI runtime (runc/crun) is there, the image is here (serve never
// pulls unless --pull), and for a GPU engine the NVIDIA Container Toolkit (nvidia-ctk; CDI devices for
// podman, the nvidia runtime for docker). Two phases: the answers are asked through a runner (serve:
// the CLI itself; `sparkctl preflight`: its Host, like its other facts; a replay lacking them skips them), then
// judged by a pure function. Each failure names its fix. Every call is bounded.
import { withCliArgs, type ContainerCli } from './container.js';
import { cliRunAsync, failureLine, type CliResult } from './ops.js';
import { parseImageInspect, versionFromLabels } from './image-version.js';
import { asciiLine } from '../../util/control.js';

export interface ContainerCheck {
  id: ContainerCheckId;
  status: 'pass' | 'fail' | 'warn' | 'skip';
  detail: string;
  expected: string;
  fix?: string;
}

const CONTAINER_CHECK_IDS = [
  'container.cli',
  'container.image',
  'container.oci-runtime',
  'container.toolkit',
  'container.cdi',
  'container.toolkit.docker',
] as const;
export type ContainerCheckId = (typeof CONTAINER_CHECK_IDS)[number];

type Runner = (argv: string[], timeoutMs: number) => Promise<CliResult>;

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

const CDI_LS =
  'for d in /etc/cdi /var/run/cdi; do for f in "$d"/*.yaml "$d"/*.yml "$d"/*.json; do [ -f "$f" ] && echo "$f"; done; done; true';

/** Ask everything, bounded; the GPU answers only for a GPU engine. */
export async function askContainer(x: {
  cli: ContainerCli;
  cliArgs: readonly string[];
  image: string;
  gpu: boolean;
  run: Runner;
}): Promise<ContainerAnswers> {
  const c = (argv: string[]) => x.run(withCliArgs(argv, x.cliArgs), 20_000);
  // docker's server answers only through its daemon; podman has none (its client is the runtime)
  const version = await c([
    x.cli,
    'version',
    '--format',
    x.cli === 'docker' ? '{{.Server.Version}}' : '{{.Client.Version}}',
  ]);
  const a: ContainerAnswers = { cli: x.cli, image: x.image, version };
  if (version.error || version.code !== 0) return a;
  const info = c(
    x.cli === 'docker'
      ? [x.cli, 'info', '--format', '{{.DefaultRuntime}} {{json .Runtimes}}']
      : [x.cli, 'info', '--format', '{{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Path}}'],
  );
  const inspect = c([
    x.cli,
    'image',
    'inspect',
    '--format',
    '{{.Id}} {{json .Config.Labels}} {{json .Config.Entrypoint}}',
    x.image,
  ]);
  const ctk = x.gpu ? x.run(['nvidia-ctk', '--version'], 10_000) : undefined;
  const cdiList = x.gpu && x.cli === 'podman' ? x.run(['nvidia-ctk', 'cdi', 'list'], 10_000) : undefined;
  const cdiSpecs = x.gpu && x.cli === 'podman' ? x.run(['sh', '-c', CDI_LS], 5_000) : undefined;
  [a.info, a.inspect, a.ctk, a.cdiList, a.cdiSpecs] = await Promise.all([info, inspect, ctk, cdiList, cdiSpecs]);
  return a;
}

const ok = (r?: CliResult): r is CliResult => !!r && !r.error && r.code === 0;
/** ok() without narrowing: the failure branch still reads the result's error */
const answered = (r?: CliResult): boolean => ok(r);
const lastLine = (r: CliResult) => asciiLine(r.error ?? failureLine(r.stderr) ?? '', 200) || `exit ${r.code}`;

/**
 * The checks, from the answers (pure). `gpus`: the GPU indices the replicas use, each of which podman
 * must resolve as the CDI device nvidia.com/gpu=N. Every id is reported; one that does not apply says why.
 */
export function judgeContainer(
  a: ContainerAnswers,
  o: { pull: boolean; gpu: boolean; gpus?: number[]; noGpu?: string },
): ContainerCheck[] {
  const cli = judgeCli(a);
  if (cli.status !== 'pass')
    return [
      cli,
      ...CONTAINER_CHECK_IDS.slice(1).map((id) => check(id, 'skip', `${a.cli} does not answer (container.cli)`, '')),
    ];
  const out = [cli, judgeImage(a, o.pull), judgeOciRuntime(a)];
  if (!o.gpu)
    return [
      ...out,
      ...(['container.toolkit', 'container.cdi', 'container.toolkit.docker'] as const).map((id) =>
        check(id, 'skip', o.noGpu ?? 'the simulator uses no GPU', ''),
      ),
    ];
  return [...out, ...judgeGpuAccess(a, o.gpus ?? [])];
}

const check = (
  id: ContainerCheckId,
  status: ContainerCheck['status'],
  detail: string,
  expected: string,
  fix?: string,
): ContainerCheck => ({ id, status, detail, expected, ...(fix ? { fix } : {}) });

/** container.cli: the CLI answers (docker: and its daemon). */
function judgeCli(a: ContainerAnswers): ContainerCheck {
  const cli = a.cli;
  if (answered(a.version))
    return check(
      'container.cli',
      'pass',
      `${cli} ${a.version.stdout.trim().slice(0, 40) || 'answers'}`,
      `${cli} answers`,
    );
  return check(
    'container.cli',
    'fail',
    a.version.error ?? `${cli} version failed: ${lastLine(a.version)}`,
    cli === 'docker' ? 'docker and its daemon answer' : 'podman answers',
    cli === 'docker'
      ? 'install docker and start its daemon (systemctl start docker), or --set container.cli=podman'
      : 'install podman (apt-get install podman runc), or --set container.cli=docker',
  );
}

/** container.image: present locally (serve never pulls; with --pull, a warning). */
function judgeImage(a: ContainerAnswers, pull: boolean): ContainerCheck {
  const cli = a.cli;
  const facts = ok(a.inspect) ? parseImageInspect(a.inspect.stdout) : undefined;
  if (facts && !('error' in facts)) {
    const v = versionFromLabels(facts.labels);
    return check(
      'container.image',
      'pass',
      `${a.image} is present (${facts.id.replace(/^sha256:/, '').slice(0, 12)}${'version' in v ? `, vLLM ${v.version} by its label` : ''})`,
      'the image is present locally',
    );
  }
  if (pull)
    return check(
      'container.image',
      'warn',
      `${a.image} is not present: --pull lets ${cli} fetch it at launch`,
      'the image is present locally',
      `${cli} pull ${a.image}`,
    );
  return check(
    'container.image',
    'fail',
    `${a.image} is not present locally (serve never pulls)${facts && 'error' in facts ? `: ${facts.error}` : ''}`,
    'the image is present locally',
    `${cli} pull ${a.image} (or serve --pull; offline: ${cli} load -i FILE)`,
  );
}

/** container.oci-runtime: the OCI runtime under the CLI (podman: runc or crun; docker: its default runtime). */
function judgeOciRuntime(a: ContainerAnswers): ContainerCheck {
  if (a.cli === 'podman') {
    const m = ok(a.info) ? /^(\S+) (\/\S+)$/.exec(a.info.stdout.trim()) : null;
    if (m) return check('container.oci-runtime', 'pass', `${m[1]} (${m[2]})`, 'an OCI runtime (runc or crun)');
    return check(
      'container.oci-runtime',
      'fail',
      a.info
        ? `podman info names no OCI runtime: ${ok(a.info) ? JSON.stringify(a.info.stdout.trim().slice(0, 80)) : lastLine(a.info)}`
        : 'podman info was not asked',
      'an OCI runtime (runc or crun)',
      'apt-get install runc (or crun); where crun refuses the cgroup layout: --set container.cliArgs=["--runtime","runc"]',
    );
  }
  const m = ok(a.info) ? /^(\S+) (\{.*\})$/.exec(a.info.stdout.trim()) : null;
  if (m) return check('container.oci-runtime', 'pass', `default runtime ${m[1]}`, 'an OCI runtime (runc)');
  return check(
    'container.oci-runtime',
    'fail',
    `docker info: ${a.info ? lastLine(a.info) : 'not asked'}`,
    'an OCI runtime (runc)',
    'reinstall docker (its containerd and runc), then systemctl restart docker',
  );
}

/** The NVIDIA Container Toolkit, then the CLI's own way to the GPUs: podman's CDI devices, docker's nvidia runtime. */
function judgeGpuAccess(a: ContainerAnswers, gpus: number[]): ContainerCheck[] {
  const toolkit = answered(a.ctk)
    ? check(
        'container.toolkit',
        'pass',
        a.ctk!.stdout.trim().split('\n')[0]!.slice(0, 80) || 'nvidia-ctk answers',
        'the NVIDIA Container Toolkit (nvidia-ctk)',
      )
    : check(
        'container.toolkit',
        'fail',
        a.ctk?.error
          ? 'nvidia-ctk is not installed: the NVIDIA Container Toolkit is missing'
          : `nvidia-ctk --version failed: ${a.ctk ? lastLine(a.ctk) : 'not asked'}`,
        'the NVIDIA Container Toolkit (nvidia-ctk)',
        "install nvidia-container-toolkit (NVIDIA's apt repository)",
      );
  if (a.cli === 'podman')
    return [
      toolkit,
      judgeCdi(a, gpus),
      check('container.toolkit.docker', 'skip', 'podman reaches the GPUs through CDI (container.cdi)', ''),
    ];
  const cdi = check(
    'container.cdi',
    'skip',
    'docker reaches the GPUs through its nvidia runtime (container.toolkit.docker)',
    '',
  );
  const m = ok(a.info) ? /^\S+ (\{.*\})$/.exec(a.info.stdout.trim()) : null;
  const runtime =
    m && /"nvidia"\s*:/.test(m[1]!)
      ? check('container.toolkit.docker', 'pass', 'docker has the nvidia runtime', "docker's nvidia runtime")
      : check(
          'container.toolkit.docker',
          'fail',
          'docker info lists no nvidia runtime',
          "docker's nvidia runtime",
          'nvidia-ctk runtime configure --runtime=docker && systemctl restart docker',
        );
  return [toolkit, cdi, runtime];
}

const GENERATE = 'nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml';

/** podman resolves nvidia.com/gpu=N from a CDI spec: each GPU the replicas use must be a device in it. */
function judgeCdi(a: ContainerAnswers, gpus: number[]): ContainerCheck {
  const expected = gpus.length
    ? `CDI devices ${gpus.map((g) => `nvidia.com/gpu=${g}`).join(', ')}`
    : 'a CDI spec for the GPUs';
  const specs = ok(a.cdiSpecs)
    ? a.cdiSpecs.stdout
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => /^\/[^\s]+$/.test(l))
    : [];
  if (ok(a.cdiList)) {
    const devices = new Set([...a.cdiList.stdout.matchAll(/\bnvidia\.com\/gpu=([A-Za-z0-9-]+)/g)].map((m) => m[1]!));
    const missing = gpus.filter((g) => !devices.has(String(g)));
    if (!devices.size)
      return {
        id: 'container.cdi',
        status: 'fail',
        detail: 'nvidia-ctk cdi list shows no nvidia.com/gpu device',
        expected,
        fix: GENERATE,
      };
    if (missing.length)
      return {
        id: 'container.cdi',
        status: 'fail',
        detail: `the CDI spec has no ${missing.map((g) => `nvidia.com/gpu=${g}`).join(', ')} (it has ${[...devices].slice(0, 8).join(', ')})`,
        expected,
        fix: `${GENERATE} (again, after a GPU or driver change)`,
      };
    return {
      id: 'container.cdi',
      status: 'pass',
      detail: `nvidia-ctk cdi list: ${devices.size} nvidia.com/gpu device(s)${specs.length ? ` in ${specs.join(', ')}` : ''}`,
      expected,
    };
  }
  if (specs.length)
    return {
      id: 'container.cdi',
      status: 'warn',
      detail: `CDI spec ${specs.join(', ')}; its devices not listed (nvidia-ctk cdi list failed)`,
      expected,
      fix: 'nvidia-ctk cdi list (to see the devices podman can resolve)',
    };
  return {
    id: 'container.cdi',
    status: 'fail',
    detail: 'no CDI spec under /etc/cdi or /var/run/cdi: podman cannot resolve nvidia.com/gpu=N',
    expected,
    fix: GENERATE,
  };
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
