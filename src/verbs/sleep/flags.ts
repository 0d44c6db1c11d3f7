import { Option } from 'commander';
import { createCommand, lazy } from '../define.js';
import { durationArg } from '../args.js';
import { UsageError } from '../../errors.js';

const levelArg = (v: string) => {
  if (v !== '1' && v !== '2')
    throw new UsageError(`--level: "${v}" is not a sleep level`, [
      '--level 1 (weights to CPU memory, KV cache dropped: the fast wake) or --level 2 (both dropped)',
    ]);
  return Number(v);
};

export default createCommand({
  name: 'sleep',
  args: [['<name>', 'instance or profile (every replica of it)']],
  options: [
    new Option(
      '--level <n>',
      "vLLM's sleep level: 1 copies the weights to CPU memory and drops the KV cache; 2 drops both",
    )
      .default(1)
      .argParser(levelArg),
    ['--abort', 'end the requests in flight (vLLM mode=abort); default: they finish first (mode=wait)'],
    new Option('--deadline <duration>', 'how long the sleep may take (a wait for requests in flight included)')
      .default(120_000, '2m')
      .argParser(durationArg('--deadline', 'ms')),
    ['--json', 'machine-readable output'],
  ],
  description:
    "put servers to sleep through vLLM's sleep mode: their GPU memory is freed, the process and port stay (needs server.sleepMode: true)",
  help: '\nExit codes: 0 asleep, 1 a server refused, 2 not started with sleep mode, 3 unreachable.\n\nExamples:\n  sparkctl sleep qwen3.5-9b\n  sparkctl sleep qwen3.5-9b --level 2 --json',
  handler: lazy(() => import('./run.js')),
});
