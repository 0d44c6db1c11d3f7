// What the container runtime needs before serve starts anything: the CLI answers (its daemon is
// reachable, or podman runs), the image is here (serve never pulls unless --pull), and for a GPU
// engine the NVIDIA Container Toolkit (nvidia-ctk; a CDI spec for podman, the nvidia runtime for
// docker). Each failure names its fix. Every call is bounded.
import { existsSync, readdirSync } from 'node:fs';
import { binOnPath, withCliArgs, type ContainerCli } from './container.js';
import { cliRun, type CliResult } from './ops.js';

export interface ContainerCheck {
  id: string;
  status: 'pass' | 'fail' | 'warn';
  detail: string;
  fix?: string;
}

export interface ContainerPreflightInput {
  cli: ContainerCli;
  cliArgs: string[];
  image: string;
  engine: 'vllm' | 'sim';
  pull: boolean;
  /** the CLI runner (tests pass canned answers) */
  run?: (argv: string[]) => CliResult;
  onPath?: (bin: string) => boolean;
  cdiDirs?: string[];
}

const CDI_DIRS = ['/etc/cdi', '/var/run/cdi'];

export function containerPreflight(x: ContainerPreflightInput): ContainerCheck[] {
  const run = x.run ?? ((argv: string[]) => cliRun(argv, { timeoutMs: 20_000 }));
  const onPath = x.onPath ?? binOnPath;
  const out: ContainerCheck[] = [];
  const c = (argv: string[]) => run(withCliArgs(argv, x.cliArgs));
  // docker's server answers only through its daemon; podman has none (its client is the runtime)
  const v = c([x.cli, 'version', '--format', x.cli === 'docker' ? '{{.Server.Version}}' : '{{.Client.Version}}']);
  const usable = !v.error && v.code === 0;
  out.push(
    usable
      ? { id: 'container.cli', status: 'pass', detail: `${x.cli} ${v.stdout.trim() || 'answers'}` }
      : {
          id: 'container.cli',
          status: 'fail',
          detail: v.error ?? `${x.cli} version failed: ${v.stderr.trim().split('\n').pop() ?? `exit ${v.code}`}`,
          fix:
            x.cli === 'docker'
              ? 'install docker and start its daemon (systemctl start docker), or --set container.cli=podman'
              : 'install podman (apt-get install podman runc), or --set container.cli=docker',
        },
  );
  if (!usable) return out;
  const img = x.cli === 'podman' ? c([x.cli, 'image', 'exists', x.image]) : c([x.cli, 'image', 'inspect', '--format', '{{.Id}}', x.image]);
  const present = !img.error && img.code === 0;
  out.push(
    present
      ? { id: 'container.image', status: 'pass', detail: `${x.image} is present` }
      : x.pull
        ? { id: 'container.image', status: 'warn', detail: `${x.image} is not present: --pull lets ${x.cli} fetch it at launch` }
        : { id: 'container.image', status: 'fail', detail: `${x.image} is not present locally (serve never pulls)`, fix: `${x.cli} pull ${x.image} (or serve --pull; offline: ${x.cli} load -i FILE)` },
  );
  if (x.engine !== 'vllm') return out;
  out.push(
    onPath('nvidia-ctk')
      ? { id: 'container.toolkit', status: 'pass', detail: 'nvidia-ctk is installed' }
      : {
          id: 'container.toolkit',
          status: 'fail',
          detail: 'nvidia-ctk is not on PATH: the NVIDIA Container Toolkit is not installed',
          fix: "install nvidia-container-toolkit (NVIDIA's apt repository)",
        },
  );
  if (x.cli === 'podman') {
    const specs = (x.cdiDirs ?? CDI_DIRS).flatMap((d) => {
      try {
        return existsSync(d)
          ? readdirSync(d)
              .filter((f) => /\.(ya?ml|json)$/.test(f))
              .map((f) => `${d}/${f}`)
          : [];
      } catch {
        return [];
      }
    });
    out.push(
      specs.length
        ? { id: 'container.cdi', status: 'pass', detail: `CDI spec ${specs.join(', ')}` }
        : {
            id: 'container.cdi',
            status: 'fail',
            detail: 'no CDI spec under /etc/cdi or /var/run/cdi: podman cannot resolve nvidia.com/gpu=N',
            fix: 'nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml',
          },
    );
  } else {
    const info = c([x.cli, 'info', '--format', '{{json .Runtimes}}']);
    const has = !info.error && info.code === 0 && /"nvidia"\s*:/.test(info.stdout);
    out.push(
      has
        ? { id: 'container.toolkit.docker', status: 'pass', detail: 'docker has the nvidia runtime' }
        : { id: 'container.toolkit.docker', status: 'fail', detail: 'docker info lists no nvidia runtime', fix: 'nvidia-ctk runtime configure --runtime=docker && systemctl restart docker' },
    );
  }
  return out;
}
