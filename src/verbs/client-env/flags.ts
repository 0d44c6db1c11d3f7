import { createCommand, lazy } from '../define.js';

export default createCommand({
  name: 'client-env',
  args: [['<name>', 'instance or profile']],
  options: [
    ['--claude-code', 'ANTHROPIC_* variables for Claude Code'],
    ['--openai', 'OPENAI_* variables for OpenAI clients'],
    ['--host <host>', 'the address clients use', '127.0.0.1'],
    ['--profiles <dir>', 'also read profiles from DIR'],
  ],
  description: 'print what a client needs to use a server',
  help: '\n--claude-code also sets CLAUDE_CODE_MAX_OUTPUT_TOKENS to what the context leaves after a Claude Code turn, and refuses\n(exit 2, with the fix) a server whose context or tool calling cannot run one.\n\nExample:\n  eval "$(sparkctl client-env qwen3.5-9b-code --claude-code)"',
  handler: lazy(() => import('./run.js')),
});
