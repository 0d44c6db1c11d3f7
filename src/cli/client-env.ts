import { createCommand, lazy } from './define.js';

export default createCommand({
  name: 'client-env',
  args: [['<name>', 'instance or profile']],
  options: [
    ['--claude-code', 'ANTHROPIC_* variables for Claude Code'],
    ['--openai', 'OPENAI_* variables for OpenAI clients'],
    ['--host <host>', 'the address clients use', '127.0.0.1'],
  ],
  description: 'print what a client needs to use a server',
  help: '\nExample:\n  eval "$(sparkctl client-env qwen-prod --claude-code)"',
  handler: lazy(() => import('../commands/client-env.js')),
});
