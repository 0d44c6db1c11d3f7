import { createCommand, lazy } from '../define.js';

export default createCommand({
  name: 'sim',
  description: 'the built-in vLLM simulator (what --engine sim runs)',
  subcommands: [
    createCommand({
      name: 'serve',
      args: [['<model>'], ['[args...]']],
      description: 'serve like `vllm serve MODEL [flags]`, on no GPU',
      // vLLM's flags are the simulator's: commander passes them through (`sim serve MODEL ...` never reaches
      // commander: main() hands it to the simulator); `sim serve --help` is this help, as for every verb.
      setup: (cmd) => cmd.allowUnknownOption(),
      handler: lazy(() => import('./run.js')),
    }),
  ],
});
