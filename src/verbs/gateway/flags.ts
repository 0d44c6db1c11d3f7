import { createCommand, lazy } from '../define.js';
import { collect, intArg } from '../args.js';
import type { OptionTuple } from '../define.js';

const SETTINGS: OptionTuple[] = [
  [
    '--port <port>',
    "where the gateway listens (default 8080; stats on port+1 on 127.0.0.1; the keeper on a Unix socket in the gateway's folder)",
    intArg('--port'),
  ],
  ['--host <addr>', 'the address it binds (default 127.0.0.1; 0.0.0.0 for every interface)'],
  ['--config <file>', 'a YAML file with a gateway: block (port, host, aliases, apiKeyEnv, idleSleep, ...)'],
  [
    '--alias <name=model>',
    "a name clients may send for a served model (repeatable; over the file's gateway.aliases)",
    collect,
    [],
  ],
  [
    '--api-key-env <name>',
    "one key at the gateway: the NAME of the variable that holds it (default: each model's own key passes through)",
  ],
  [
    '--allow-unauthenticated',
    'let a gateway bound beyond loopback (--host 0.0.0.0) run without --api-key-env (warned at every start); refused otherwise',
  ],
  ['--idle-sleep <duration>', 'put a model with sleep mode to sleep after this long without a request (15m)'],
  [
    '--on-demand <profile>',
    'a profile started when a request names it and it is not running (repeatable; gateway.models in the file says more: pinned, serve arguments, admission)',
    collect,
    [],
  ],
  [
    '--gpu-memory <size>',
    'the memory the on-demand models share (one GPU, e.g. 80GiB; a Spark 128GB with gateway.onDemand.unified): the plan decides what to evict before a start',
  ],
  ['--evict <how>', 'how a model makes room: stop (default), sleep1 or sleep2 (its profile needs server.sleepMode)'],
  [
    '--balance <how>',
    "within a model: prefix (default: a prompt's first gateway.prefixBytes pick its replica, bounded by load) or leastconn",
  ],
];

export default createCommand({
  name: 'gateway',
  description:
    "one HAProxy endpoint for every model this host serves: routes by the request's model, lists them all on /v1/models, wakes sleeping ones",
  subcommands: [
    createCommand({
      name: 'up',
      description: 'start the gateway (it follows serve, stop and restart of every profile by reloading HAProxy)',
      options: [...SETTINGS, ['--json', 'machine-readable output']],
      help: '\nExamples:\n  sparkctl gateway up --port 8080\n  sparkctl gateway up --alias coder=Qwen/Qwen3.5-9B --idle-sleep 15m\n  QWEN_GATEWAY_KEY=... sparkctl gateway up --api-key-env QWEN_GATEWAY_KEY\n  sparkctl gateway up --on-demand qwen3.5-9b-code --on-demand qwen-dev --gpu-memory 128GB --evict stop\n  sparkctl gateway up --config gateway.yaml   (gateway.models: per profile pinned, serve arguments, concurrency, queue)',
      handler: lazy(
        () => import('./run.js'),
        (m) => m.up,
      ),
    }),
    createCommand({
      name: 'down',
      description:
        'stop the gateway: HAProxy soft-stops (the requests in flight finish), then the keeper exits (stop --all does it too)',
      options: [
        ['--force-forget', 'drop a gateway record whose processes cannot be proven ours, without signalling anything'],
        ['--json', 'machine-readable output'],
      ],
      handler: lazy(
        () => import('./run.js'),
        (m) => m.down,
      ),
    }),
    createCommand({
      name: 'status',
      description: 'the gateway, its models and their servers as HAProxy sees them (up, down, asleep)',
      options: [['--json', 'machine-readable output']],
      help: '\nExit codes: 0 running, 1 not running.',
      handler: lazy(
        () => import('./run.js'),
        (m) => m.status,
      ),
    }),
    createCommand({
      name: 'config',
      description: 'print the HAProxy configuration the gateway would run now, for the servers running now',
      options: SETTINGS,
      handler: lazy(
        () => import('./run.js'),
        (m) => m.config,
      ),
    }),
    createCommand({
      name: 'run',
      description: 'the gateway in the foreground (what `gateway up` starts; for systemd)',
      options: SETTINGS,
      handler: lazy(
        () => import('./run.js'),
        (m) => m.runForeground,
      ),
    }),
  ],
});
