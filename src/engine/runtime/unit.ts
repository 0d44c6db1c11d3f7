// The systemd lines a runtime runs one replica under: the command lines of a unit's Exec*= keys,
// quoted per systemd.service(5) "Command lines". A container runs attached (`run --rm`), so systemd
// supervises the CLI and its stop reaches vLLM as SIGTERM with the drain (--stop-timeout).
import { CONTROL } from '../../util/control.js';
import { UsageError } from '../../errors.js';
import { STATE_LABEL, runArgv, type ContainerPlan } from './container.js';

// systemd unit syntax: one setting a line, so a newline (or any control character) in a value
// would start a new setting ([Service], ExecStartPre=...). Such values are refused.

export function refuseControl(what: string, v: string) {
  if (CONTROL.test(v))
    throw new UsageError(
      `${what}: contains a newline or another control character, which would inject lines into the systemd unit`,
      ['remove it'],
    );
}

/**
 * One ExecStart= argument: % (specifiers) and $ (variable expansion) doubled, and one that is not plain double-quoted
 * with C-style escapes.
 */
export function execArg(a: string): string {
  const v = a.replace(/%/g, '%%').replace(/\$/g, '$$$$');
  if (/^[A-Za-z0-9_@+=:,./-]+$/.test(v)) return v;
  return `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/**
 * Where a podman run unit keeps its container's id: %t is systemd's runtime folder, %n the unit's name (written as is,
 * not escaped).
 */
const CIDFILE = '%t/%n.ctr-id';

export interface UnitExec {
  /** systemd's name for the unit (<name>.service) */
  unit: string;
  /** units it needs first (docker's daemon) */
  after: string[];
  requires: string[];
  /** Exec*= values, already quoted; a leading '-' lets the line fail */
  execStartPre: string[];
  execStart: string;
  execStop: string;
  execStopPost: string[];
  /** what the runtime waits after SIGTERM before SIGKILL; the unit's TimeoutStopSec adds a margin */
  stopTimeoutS: number;
  /** why a unit of this runtime cannot run as User=NAME (undefined: it can) */
  userRefusal?: (user: string, profile: string) => UsageError | undefined;
}

/**
 * One replica's container, run attached by its unit. Named systemd-<name> as Quadlet names its own:
 * serve names its containers sparkctl-<instance>, so this unit's ExecStop never stops one serve
 * started (and run refuses a name already taken). Nor a state folder's label: no sparkctl
 * status/stop may take it for one of its own orphans. podman: the id of the container this start
 * created goes in a file of the unit's own (as podman generate systemd does), and the stop and the
 * leftover removal are by that id; docker stop has no --cidfile, so docker's is by the unique name.
 */
export function containerUnitExec(cp: ContainerPlan): UnitExec {
  const ctr = `systemd-${cp.name}`;
  const { [STATE_LABEL]: _state, ...labels } = cp.spec.labels ?? {};
  const argv = runArgv({ ...cp.spec, name: ctr, labels });
  for (const a of argv) refuseControl('a container argument', a);
  const words = argv.map(execArg);
  const podman = cp.cli === 'podman';
  if (podman) words.splice(2 + cp.cliArgs.length, 0, `--cidfile=${CIDFILE}`); // after [cli, ...cliArgs, run]
  // docker: -t, which the 20.10 CLI takes and 23+ takes without the deprecation warning --time prints
  const stop = [
    cp.cli,
    ...cp.cliArgs,
    'stop',
    ...(podman ? ['--ignore', '--time'] : ['-t']),
    String(cp.stopTimeoutS),
  ].map(execArg);
  // A container left by an unclean end (the unit killed, the host rebooted mid-run) would hold the
  // name, and every restart would fail on it: it is removed by the id this unit recorded, never by name.
  const rmOurs = [cp.cli, ...cp.cliArgs, 'rm', '-f', '--ignore', `--cidfile=${CIDFILE}`]
    .map((a) => (a === `--cidfile=${CIDFILE}` ? a : execArg(a)))
    .join(' ');
  return {
    unit: cp.name,
    after: podman ? [] : ['docker.service'],
    requires: podman ? [] : ['docker.service'],
    // a leftover container of this unit (by its recorded id), then the stale id file, which would make podman refuse to
    // run
    execStartPre: podman ? [`-${rmOurs}`, `-/bin/rm -f ${CIDFILE}`] : [],
    execStart: words.join(' '),
    execStop: [...stop, podman ? `--cidfile=${CIDFILE}` : execArg(ctr)].join(' '),
    execStopPost: podman ? [`-${rmOurs}`] : [],
    stopTimeoutS: cp.stopTimeoutS,
    // The podman unit keeps its container's id in %t (/run for a system unit), where a User= account
    // cannot write: every start would fail. Rootless podman belongs in that user's own unit folder.
    userRefusal: podman
      ? (user, profile) =>
          new UsageError(
            `--user ${user} with container.cli podman: the unit's container id file is in /run, which ${user} cannot write`,
            [
              'leave out --user (the unit runs rootful podman)',
              `or run rootless podman: sparkctl systemd ${profile} --runtime container --quadlet (without --user), saved in ~${user}/.config/containers/systemd/`,
            ],
          )
      : undefined,
  };
}
