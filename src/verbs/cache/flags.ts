import { createCommand, lazy } from '../define.js';

export default createCommand({
  name: 'cache',
  description:
    "vLLM's start caches that sparkctl keeps per profile and vLLM version (torch.compile, P2P, Triton, FlashInfer, CUDA JIT): see and clear them",
  subcommands: [
    createCommand({
      name: 'ls',
      args: [['[profile]', 'only this profile']],
      description: 'list the start caches: profile, vLLM version (and image), size, files, last used',
      options: [['--json', 'machine-readable output']],
      help: "\nThe folder: $SPARKCTL_CACHE_DIR, else $XDG_CACHE_HOME/sparkctl (~/.cache/sparkctl). The model's files are not here: they are pull's.\n\nExamples:\n  sparkctl cache ls\n  sparkctl cache ls qwen3.5-9b --json",
      handler: lazy(
        () => import('./run.js'),
        (m) => m.ls,
      ),
    }),
    createCommand({
      name: 'rm',
      args: [['<profile>', 'the profile whose caches go']],
      description:
        "remove a profile's start caches (every vLLM version of it, or one with --vllm): its next start compiles again",
      options: [
        ['--vllm <version>', 'only the caches of this vLLM version (as cache ls shows it)'],
        ['--json', 'machine-readable output'],
      ],
      help: '\nA running server keeps working; its next restart starts cold.\n\nExamples:\n  sparkctl cache rm qwen3.5-9b\n  sparkctl cache rm qwen3.5-9b --vllm 0.11.0',
      handler: lazy(
        () => import('./run.js'),
        (m) => m.rm,
      ),
    }),
  ],
});
