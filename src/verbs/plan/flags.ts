import { createCommand, lazy } from '../define.js';
import { PROFILE_OPTIONS } from '../args.js';

export default createCommand({
  name: 'plan',
  args: [
    [
      '<profile>',
      'profile name or YAML file, or a model: a Hugging Face id (read from the local cache) or a folder with config.json',
    ],
  ],
  description:
    "per-GPU memory budget: weights, KV cache tokens, concurrency, whether it fits (this host's GPUs unless told otherwise)",
  options: [
    ['--gpu-memory <size>', "memory of one GPU, e.g. 80GiB, 141GB (default: read from this host, else the platform's)"],
    ['--platform <name>', "plan for a platform baseline instead of this host's GPUs"],
    [
      '--nodes <file>',
      'plan for the nodes of a nodes file (every GPU of every node, as serve --nodes runs it); a model id gets a profile for them',
    ],
    ['--vllm-bin <path>', 'the vllm whose version renders the flags when engine.vllmVersion is auto', 'vllm'],
    ['--json', 'machine-readable output'],
    ...PROFILE_OPTIONS,
  ],
  help: `
Examples:
  sparkctl plan qwen3.5-9b
  sparkctl plan qwen3.5-9b --gpu-memory 141GB --set engine.maxModelLen=262144
  sparkctl plan ./models/my-model                 a local folder with config.json, no profile
  sparkctl plan openai/gpt-oss-120b --nodes sparks.yaml   two Sparks, TP 2 over both (its config.json pulled first)`,
  handler: lazy(() => import('./run.js')),
});
