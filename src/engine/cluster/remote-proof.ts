// Identity on a remote node, before a signal goes there over ssh: the same rule as proveIdentity()
// on this host (src/engine/runtime/proc.ts), as a shell snippet that runs on the node. The group is ours if
// its leader still has the kernel start time recorded at launch, or if a member of the group
// carries the launch's SPARKCTL_INSTANCE marker (the leader may be gone: an orphaned EngineCore).
// Nothing left of the group: "gone". Anything else lives under that pid or group but is not
// provably ours: exit 4, and nothing is signalled.
import { INSTANCE_ENV } from '../runtime/proc.js';

export const REMOTE_UNPROVEN_EXIT = 4;

export interface RemoteIdentity {
  pid: number;
  /** field 22 of /proc/PID/stat, read on the node right after launch */
  startTime?: number;
  marker?: string;
}

const safeMarker = (m: string | undefined) => (m && /^[A-Za-z0-9-]{8,64}$/.test(m) ? m : '');

/** Shell (POSIX sh) that exits 0 with nothing left, 4 when unproven, and otherwise falls through to `then`. */
export function remoteProven(id: RemoteIdentity, then: string): string {
  if (!Number.isInteger(id.pid) || id.pid <= 1) return `echo 'unproven: the record has no valid pid' >&2; exit ${REMOTE_UNPROVEN_EXIT}`;
  const P = id.pid;
  const S = Number.isInteger(id.startTime) && (id.startTime ?? 0) > 0 ? String(id.startTime) : '';
  const M = safeMarker(id.marker);
  return [
    `P=${P}; S='${S}'; M='${M}'; ok=`,
    // the comm field may hold spaces and parentheses: cut after the last ") "
    // (a zombie is gone: it holds nothing and cannot be signalled into anything)
    `st=$(sed 's/.*) //' /proc/$P/stat 2>/dev/null | awk '$1 != "Z" { print $20 }')`,
    `[ -n "$S" ] && [ "$st" = "$S" ] && ok=1`,
    `members=$(ps -eo pid=,pgid=,stat= 2>/dev/null | awk -v g="$P" '$2 == g && $3 !~ /^Z/ { print $1 }')`,
    `if [ -z "$ok" ] && [ -n "$M" ]; then for p in $members; do tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null | grep -qx "${INSTANCE_ENV}=$M" && ok=1 && break; done; fi`,
    `if [ -z "$ok" ]; then if [ -z "$st" ] && [ -z "$members" ]; then exit 0; fi; echo "unproven: pid $P (group $P) is not provably the server sparkctl started: not signalled" >&2; exit ${REMOTE_UNPROVEN_EXIT}; fi`,
    then,
  ].join('\n');
}

/** The launch's tail: start the server in its own session and print "PID STARTTIME". */
export const launchAndReport = (cmd: string) => `${cmd} & p=$!; echo "$p $(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -d' ' -f20)"`;
