import { createCommand, lazy } from '../define.js';
import { intArg } from '../args.js';

export default createCommand({
  name: 'logs',
  args: [['<name>', "instance (qwen3.5-9b-0) or profile (all its replicas); over nodes, the head's log over ssh"]],
  options: [
    ['-f, --follow', 'keep printing as the log grows'],
    ['-n, --lines <n>', 'last N lines', intArg('--lines'), 50],
  ],
  description: "print a server's log",
  help: '\nExample:\n  sparkctl logs qwen3.5-9b-0 -f',
  handler: lazy(() => import('./run.js')),
});
