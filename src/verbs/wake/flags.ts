import { Option } from 'commander';
import { createCommand, lazy } from '../define.js';
import { durationArg } from '../args.js';

export default createCommand({
  name: 'wake',
  args: [['<name>', 'instance or profile (every replica of it)']],
  options: [
    new Option('--deadline <duration>', 'how long the wake may take')
      .default(300_000, '5m')
      .argParser(durationArg('--deadline', 'ms')),
    ['--json', 'machine-readable output'],
  ],
  description: "wake sleeping servers (vLLM's /wake_up) and say how long it took",
  help: '\nExit codes: 0 awake, 1 a server refused, 2 not started with sleep mode, 3 unreachable.\n\nExample:\n  sparkctl wake qwen3.5-9b',
  handler: lazy(() => import('./run.js')),
});
