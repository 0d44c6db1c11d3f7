import { Option } from 'commander';
import { createCommand, lazy } from '../define.js';
import { durationArg, FORCE_OPTION, intArg, urlArg } from '../args.js';

export default createCommand({
  name: 'watch',
  args: [['[profiles...]', 'profiles or instances to watch (or --all)']],
  description:
    'supervise servers: find a wedged or dead one and bring it back, never restarting a busy one (foreground; one per state folder)',
  options: [
    ['--all', 'every registered server, followed as servers are served and stopped'],
    new Option('--interval <duration>', 'one cheap reading per server this often (/metrics, /health, its processes)')
      .argParser(durationArg('--interval', 'ms'))
      .default(5000, '5s'),
    ['--dry-run', 'judge and say what it would do; never stop or start anything'],
    ['--once', 'one reading of every server, the verdicts, then exit (nothing is restarted: a verdict needs a window)'],
    new Option('--action <action>', "what a dead or wedged server gets (over each profile's watch.action)").choices([
      'restart',
      'alert',
      'none',
    ]),
    ['--window <duration>', "the wedge window's floor (over watch.windowSeconds)", durationArg('--window', 's')],
    [
      '--probe-timeout <duration>',
      'the deep probe sent when the cheap signals disagree (over watch.probeTimeoutSeconds)',
      durationArg('--probe-timeout', 's'),
    ],
    [
      '--max-restarts <n>',
      'restarts of one server within --restart-window before the circuit opens (over watch.circuitRestarts)',
      intArg('--max-restarts'),
    ],
    [
      '--restart-window <duration>',
      "the circuit breaker's window (over watch.circuitWindowMinutes)",
      durationArg('--restart-window', 's'),
    ],
    [
      '--prometheus <file>',
      "write the watcher's own textfile every tick (last tick, servers, verdicts, restarts, circuit state)",
    ],
    FORCE_OPTION,
    [
      '--alert-webhook <url>',
      'POST JSON when a server turns dead or wedged, and when it is back (retried until it answers 2xx); default $SPARKCTL_ALERT_WEBHOOK',
      urlArg('--alert-webhook'),
    ],
    ['--no-history', 'do not record incidents in the history (sparkctl report reads it)'],
    ['--json', 'one JSON object per event, a line each'],
  ],
  help: `
A wedge is called only on evidence: the server holds requests (running or waiting), nothing its engine
reports has moved for the window (its own slowest first token and quiet spells raise it), and a second
signal agrees (an engine process is stopped, or a 1-token probe is not answered). Busy, saturated,
preempting, loading, sleeping and draining servers are never restarted. A server whose identity cannot
be proven sparkctl's is never touched; one the gateway holds is the gateway's. Restarts go through
sparkctl restart (the same stop, the same serve, the settings it was served with); a replica behind its
router restarts alone while the others serve. Back-off doubles between restarts of one server; after
--max-restarts in --restart-window the circuit opens: no more restarts, an alert says why.

Examples:
  sparkctl watch --all                               supervise every server of this host
  sparkctl watch qwen3.5-9b --dry-run --json         say what it would do, a JSON line per event
  sparkctl watch --all --prometheus /var/lib/node_exporter/sparkctl-watch.prom --alert-webhook https://hooks.example/x
  sparkctl systemd --watch                           a unit that runs sparkctl watch --all on this host

Exit codes: 0 stopped by a signal (or --once with every server serving); 1 --once found a server dead or
wedged; 2 bad input or another watcher holds this state folder.`,
  handler: lazy(() => import('./run.js')),
});
