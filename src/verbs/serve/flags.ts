import { Option } from 'commander';
import { createCommand, deprecatedAlias, lazy } from '../define.js';
import { durationArg, PROFILE_OPTIONS } from '../args.js';

export default createCommand({
  name: 'serve',
  args: [
    [
      '<profile>',
      'profile name or YAML file, or a model: a Hugging Face id (read from the local cache) or a folder with config.json',
    ],
  ],
  description: 'preflight, launch every replica, wait until ready, prewarm, deep probe',
  options: [
    new Option('--engine <engine>', 'vllm, or sim for the built-in simulator').choices(['vllm', 'sim']).default('vllm'),
    ['--vllm-bin <path>', 'the vllm executable', 'vllm'],
    new Option(
      '--runtime <runtime>',
      "host (vllm on this machine) or container (docker/podman; the container: block); default the profile's engine.runtime",
    ).choices(['host', 'container']),
    [
      '--pull',
      'fetch what is missing first: the model into the Hugging Face cache (sparkctl pull), and with runtime container the image (serve never downloads otherwise)',
    ],
    [
      '--repin',
      "runtime container: pin the profile's image reference anew, as it is now (a tag that moved since its pin); the pin before it is kept for upgrade --rollback",
    ],
    ['--dry-run', 'print the launch plan and stop (never spawns)'],
    ['--json', 'machine-readable output: the plan (--dry-run) or one outcome envelope at the end'],
    ['--no-prewarm', 'skip prewarm after ready'],
    ['--skip-preflight', 'do not run the blocking preflight checks first'],
    [
      '--foreground',
      'stay attached (systemd, containers): SIGTERM/SIGINT stop the servers; exit 0 when stopped, 4 when a server fails',
    ],
    [
      '--ready-timeout <duration>',
      'give up after this long (90s, 15m; a bare number is seconds); default from the profile',
      durationArg('--ready-timeout', 'ms'),
    ],
    ['--nodes <file>', 'multi-node inventory (YAML): run over Ray on these nodes'],
    ['--platform <name>', "platform baseline (default: the profile's)"],
    [
      '--sim-load <duration>',
      'simulated model load time (engine sim): 300ms, 2s; a bare number is seconds',
      durationArg('--sim-load', 's', true),
    ],
    deprecatedAlias('--sim-load-seconds <s>', '--sim-load', durationArg('--sim-load-seconds', 's', true)),
    [
      '--allow-unauthenticated',
      'let a server (or its router) listen beyond loopback (server.host 0.0.0.0) without server.apiKeyEnv, or with sleep mode; warned at every start; refused otherwise',
    ],
    ['--router', "HAProxy on the profile's port in front of the replicas (also: router: in the profile)"],
    ...PROFILE_OPTIONS,
  ],
  help: `
Examples:
  sparkctl serve qwen3.5-9b --dry-run                 the vllm command for each replica
  sparkctl serve qwen3.5-9b --engine sim              launch on the simulator (any machine)
  sparkctl serve qwen3.5-9b --router                  one endpoint (HAProxy) for every replica
  sparkctl serve qwen-prod --set engine.maxModelLen=8192
  sparkctl serve qwen3-200b --nodes nodes.yaml --dry-run   Ray over 4 nodes
  sparkctl serve qwen3.5-9b --runtime container --dry-run   the docker/podman run of each replica
  sparkctl serve qwen3.5-9b --foreground              for systemd Type=simple
  sparkctl serve Qwen/Qwen3-8B --dry-run              any downloaded model, no profile`,
  handler: lazy(() => import('./run.js')),
});
