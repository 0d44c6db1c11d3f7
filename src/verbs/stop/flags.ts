import { Option } from 'commander';
import { createCommand, deprecatedAlias, lazy } from '../define.js';
import { durationArg } from '../args.js';

export default createCommand({
  name: 'stop',
  args: [['[name]', 'instance or profile']],
  options: [
    ['--all', 'every registered server, and the gateway (first: its streams finish before their servers stop)'],
    new Option(
      '--grace <duration>',
      "SIGTERM, then SIGKILL after this long (30s, 2m; a bare number is seconds; 0: at once); default: the server's drain (server.shutdownTimeoutSeconds) + 15 s, at least 30 s. A router: its soft stop (SIGUSR1), then the hard stop after this long (default router.drainTimeoutSeconds)",
    ).argParser(durationArg('--grace', 's', true)),
    deprecatedAlias('--timeout <duration>', '--grace', durationArg('--timeout', 's', true)),
    [
      '--nodes <file>',
      'multi-node: stop what the registry records on these nodes (every vLLM rank, then Ray on each node where Ray ran it); nothing recorded: ray stop on each node. Without --nodes, stop NAME and --all stop a multi-node server over the nodes file its record names',
    ],
    ['--force-forget', 'drop entries whose processes cannot be proven ours, without signalling anything'],
    ['--json', 'machine-readable output'],
  ],
  description:
    'stop servers: SIGTERM to the process group, wait while vLLM drains, SIGKILL; say what happened to in-flight requests; verify port and GPUs are free',
  help: '\nExamples:\n  sparkctl stop qwen3.5-9b\n  sparkctl stop --all --grace 60s',
  handler: lazy(() => import('./run.js')),
});
