import { createCommand, deprecatedAlias, lazy } from '../define.js';
import { durationArg, FORCE_OPTION, urlArg, urlsArg, GPU_HOUR_PRICE } from '../args.js';

export default createCommand({
  name: 'probe',
  args: [['[names...]', 'instances or profiles']],
  options: [
    ['--url <url>', 'a server by URL (repeatable)', urlsArg('--url'), []],
    ['--all', 'every registered server'],
    ['--model <name>', 'expected served name (with --url)'],
    [
      '--step-timeout <duration>',
      'deadline of each step (500ms, 10s; a bare number is seconds)',
      durationArg('--step-timeout', 'ms'),
    ],
    deprecatedAlias('--timeout <duration>', '--step-timeout', durationArg('--timeout', 'ms')),
    [
      '--client <kind>',
      "also check what a client needs: claude-code (/v1/messages) or openai; its request's deadline is --step-timeout, else 2m (a client's first prompt is long: its prefill on one Spark takes seconds)",
    ],
    [
      '--prometheus <file>',
      'write a node_exporter textfile (atomically); it replaces the one it wrote last, any other file there only with --force',
    ],
    FORCE_OPTION,
    [
      '--alert-webhook <url>',
      'POST JSON when a target changes state; kept and retried by the next run until it answers 2xx',
      urlArg('--alert-webhook'),
    ],
    ['-q, --quiet', 'print only targets that are not healthy (cron mails only what matters)'],
    [
      '--deadline <duration>',
      'deadline of the whole run, so cron never stacks probes (4m, 90s; default: the step deadline x its 8 steps, plus the 2m of the client step with --client and no --step-timeout)',
      durationArg('--deadline', 'ms'),
    ],
    ['--gpu-from <dir>', "judge the GPUs of a support bundle (sparkctl collect) instead of this host's"],
    ['--no-history', 'do not append this run to the history (sparkctl cost/report read it)'],
    GPU_HOUR_PRICE(
      'with --prometheus: also write the running cost per 1K tokens (or probe.gpuHourPriceUsd in the profile)',
    ),
    ['--json', 'machine-readable output'],
  ],
  description:
    'deep health check: live, identity, 1-token inference, metrics, GPU, auth (0 healthy, 1 unhealthy or an alert not delivered, 3 unreachable)',
  help: `
Examples:
  sparkctl probe --all
  sparkctl probe --url http://127.0.0.1:8000 --model Qwen/Qwen3.5-9B --json
  */5 * * * * sparkctl probe --all --prometheus /var/lib/node_exporter/sparkctl.prom`,
  handler: lazy(() => import('./run.js')),
});
