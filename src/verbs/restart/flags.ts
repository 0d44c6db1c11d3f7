import { Option } from 'commander';
import { createCommand, deprecatedAlias, lazy } from '../define.js';
import { collect, durationArg, PROFILE_OPTIONS } from '../args.js';

export default createCommand({
  name: 'restart',
  args: [
    [
      '<profile>',
      "profile name or YAML file (as it is now: an edited profile gives its new argv; serve's --set and flags are kept)",
    ],
  ],
  description:
    'restart a profile: everything at once, or --rolling one replica at a time while the router keeps serving',
  options: [
    [
      '--rolling',
      'one replica at a time behind the router: drain, stop, start, ready, prewarm, probe, back in rotation',
    ],
    [
      '--replica <name>',
      'with --rolling: restart only this replica (repeatable); the others keep serving untouched',
      collect,
      [],
    ],
    ['--no-prewarm', 'skip prewarm after each start'],
    new Option(
      '--drain-timeout <duration>',
      "wait this long for a drained replica's requests in flight, then stop it anyway (its stop drains)",
    )
      .argParser(durationArg('--drain-timeout', 'ms', true))
      .default(600_000, '10m'),
    new Option(
      '--grace <duration>',
      "stop: SIGTERM, then SIGKILL after this long; default: the server's drain (server.shutdownTimeoutSeconds) + 15 s, at least 30 s",
    ).argParser(durationArg('--grace', 's', true)),
    deprecatedAlias('--timeout <duration>', '--grace', durationArg('--timeout', 's', true)),
    [
      '--ready-timeout <duration>',
      'give up on a replica after this long; default from the profile',
      durationArg('--ready-timeout', 'ms'),
    ],
    ['--skip-preflight', 'without --rolling: do not run the blocking preflight checks before serving again'],
    [
      '--allow-unauthenticated',
      "as serve's: beyond loopback without a key, warned (kept from serve where it was given there)",
    ],
    ['--json', 'machine-readable output'],
    ...PROFILE_OPTIONS,
  ],
  help: `
restart starts the profile as serve did: serve's --set, --profiles (by its whole path: a restart from
another folder reads the same one), --gpus, --platform, --runtime and --router are kept in each
replica's entry, restart's own --set go on top (and are kept in turn). Before
anything stops it says what changes, flag by flag, or that nothing does. To drop serve's --set, stop
the profile and serve it again.

Examples:
  sparkctl restart qwen3.5-9b --rolling       nobody notices: the router sends each request to a serving replica
  sparkctl restart qwen3.5-9b                 stop everything, serve again
  sparkctl restart qwen3.5-9b --set engine.maxNumSeqs=64   the same, with one more override`,
  handler: lazy(() => import('./run.js')),
});
