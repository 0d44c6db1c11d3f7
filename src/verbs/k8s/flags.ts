import { createCommand, deprecatedAlias, lazy } from '../define.js';
import { countArg, PROFILE_OPTIONS } from '../args.js';

export default createCommand({
  name: 'k8s',
  args: [['<profile>']],
  options: [
    [
      '--image <image>',
      "container image; default the profile's, as engine.runtime container runs it (container.image, else NGC's on a DGX baseline, else vllm/vllm-openai:v<engine.vllmVersion>; with auto and no image set, that of the newest flag table; with auto, an image's vLLM is what its tag or NVIDIA's release notes state, else read on this host, else exit 2)",
    ],
    [
      '--node-count <n>',
      'multi-node: a LeaderWorkerSet of N pods (--nodes is a nodes file in serve, stop and preflight)',
      countArg('--node-count'),
    ],
    deprecatedAlias('--nodes <n>', '--node-count', countArg('--nodes')),
    ['--namespace <ns>', 'namespace', 'default'],
    ...PROFILE_OPTIONS,
  ],
  description: 'print a Deployment + Service (or a LeaderWorkerSet for multi-node) with real probes',
  help: '\nExamples:\n  sparkctl k8s qwen-prod | kubectl apply -f -\n  sparkctl k8s qwen3-200b --node-count 4',
  handler: lazy(() => import('./run.js')),
});
