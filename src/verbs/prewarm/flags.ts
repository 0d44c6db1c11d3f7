import { createCommand, deprecatedAlias, lazy } from '../define.js';
import { durationArg, countArg, urlArg } from '../args.js';
import { SparkError, ExitCode } from '../../errors.js';

const share = (v: string) => {
  const n = Number(v);
  if (!(n >= 0 && n <= 10))
    throw new SparkError(`--settle-margin: "${v}" is not a share such as 0.2`, ExitCode.badInput, [
      'e.g. --settle-margin 0.2 (within 20 % of the round before)',
    ]);
  return n;
};

export default createCommand({
  name: 'prewarm',
  args: [['[name]', 'instance or profile']],
  options: [
    ['--url <url>', 'a server by URL instead of a registered instance', urlArg('--url')],
    ['--model <name>', 'served model name (with --url; default: the first /v1/models entry)'],
    [
      '--deadline <duration>',
      'deadline of the whole prewarm (90s, 15m; a bare number is seconds)',
      durationArg('--deadline', 's'),
    ],
    deprecatedAlias('--timeout <duration>', '--deadline', durationArg('--timeout', 's')),
    ['--rounds <n>', "at most this many rounds (default: the profile's, 5)", countArg('--rounds')],
    ['--settle-margin <share>', 'warm when a round is within this share of the one before (default 0.2)', share],
    ['--json', 'machine-readable output'],
  ],
  description: 'take a restarted server from cold to warm: rounds at 128/1024/4096 prompt tokens until latency settles',
  help: '\nExamples:\n  sparkctl prewarm qwen3.5-9b\n  sparkctl prewarm --url http://127.0.0.1:8000',
  handler: lazy(() => import('./run.js')),
});
