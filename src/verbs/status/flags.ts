import { createCommand, lazy } from '../define.js';

export default createCommand({
  name: 'status',
  description:
    'every registered server: pid, alive, port, health, uptime, GPUs (stale entries are cleaned), and the gateway if one runs',
  options: [['--json', 'machine-readable output']],
  help: '\nExample:\n  sparkctl status --json',
  handler: lazy(() => import('./run.js')),
});
