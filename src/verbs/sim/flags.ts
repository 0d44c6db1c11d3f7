import { createCommand, lazy } from '../define.js';

export default createCommand({
  name: 'sim',
  description: 'the built-in vLLM simulator (what --engine sim runs)',
  subcommands: [
    createCommand({
      name: 'serve',
      args: [['<model>'], ['[args...]']],
      description: 'serve like `vllm serve MODEL [flags]`, on no GPU',
      // vLLM's flags are the simulator's: commander passes them through.
      setup: (cmd) => cmd.allowUnknownOption().helpOption(false),
      handler: lazy(() => import('./run.js')),
    }),
  ],
});
