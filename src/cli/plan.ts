import { createCommand, lazy } from './define.js';
import { PROFILE_OPTIONS } from './args.js';

export default createCommand({
  name: 'plan',
  args: [['<profile>', 'profile name or YAML file']],
  description: 'per-GPU memory budget: weights, KV cache tokens, concurrency, whether it fits',
  options: [
    ['--gpu-memory <size>', "memory of one GPU, e.g. 80GiB, 141GB (default: the platform's)"],
    ['--platform <name>', "platform baseline (default: the profile's)"],
    ['--json', 'machine-readable output'],
    ...PROFILE_OPTIONS,
  ],
  help: `
Examples:
  sparkctl plan qwen3.5-9b
  sparkctl plan qwen3.5-9b --gpu-memory 141GB --set engine.maxModelLen=262144`,
  handler: lazy(() => import('../commands/plan.js')),
});
