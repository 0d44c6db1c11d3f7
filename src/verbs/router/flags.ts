import { createCommand, lazy } from '../define.js';
import { intArg, PROFILE_OPTIONS } from '../args.js';

export default createCommand({
  name: 'router',
  description: 'HAProxy in front of the replicas',
  subcommands: [
    createCommand({
      name: 'config',
      args: [['<profile>', 'profile name or YAML file']],
      description: "print the HAProxy configuration sparkctl would run, for an operator's own HAProxy",
      options: [
        [
          '--socket <path>',
          'runtime API socket line for your HAProxy (default: none; your global section has its own)',
        ],
        ['--replicas <n>', "replicas behind it (default: the profile's)", intArg('--replicas')],
        ...PROFILE_OPTIONS,
      ],
      help: '\nExample:\n  sparkctl router config qwen3.5-9b > /etc/haproxy/haproxy.cfg && haproxy -c -f /etc/haproxy/haproxy.cfg',
      handler: lazy(() => import('./run.js')),
    }),
  ],
});
