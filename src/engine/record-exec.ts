// A vLLM executable read back from a record (a host entry's argv[0], a pin's vllmBin) is started
// again by restart and upgrade, as root. sparkctl writes whatever --vllm-bin the operator gave, so
// there is no fixed list to compare with; instead the file is checked before it runs: a regular file
// (symlinks resolved), executable, and neither it nor its folder (nor the folder of the path as
// recorded) writable by group or others: no one but its owner can swap it between serve and restart.
// Its owner is not required to be root: an operator's own venv (~/venv/bin/vllm, owned by the login
// user, served with sudo) is the common case on a DGX Spark, serve ran it on the operator's word, and
// refusing it would leave watch unable to restart a wedged server at 3 a.m.; the record naming it sits
// in a folder only root can write (instances/, 0700). A bare name (`vllm`) is found on the operator's
// PATH, not named by the record: it is not checked here.
import { realpathSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { UsageError } from '../errors.js';
import { shownValue } from './runtime/cli-words.js';

/** Why a recorded executable path must not run (undefined: it may). */
export function recordedExecProblem(path: string): string | undefined {
  if (!path.includes('/')) return undefined;
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    return 'it does not exist';
  }
  const st = statSync(real);
  if (!st.isFile()) return `${real === path ? 'it' : `${real} (where it leads)`} is not a regular file`;
  if (!(st.mode & 0o111)) return `${real} is not executable`;
  if (st.mode & 0o022)
    return `${real} is writable by ${st.mode & 0o002 ? 'others' : 'its group'} (mode ${(st.mode & 0o7777).toString(8)})`;
  for (const dir of new Set([dirname(real), dirname(path)])) {
    let d: ReturnType<typeof statSync>;
    try {
      d = statSync(dir);
    } catch {
      return `its folder ${dir} cannot be read`;
    }
    if (d.mode & 0o022)
      return `its folder ${dir} is writable by ${d.mode & 0o002 ? 'others' : 'its group'} (mode ${(d.mode & 0o7777).toString(8)}): anyone there could replace it`;
  }
  return undefined;
}

/** Refuse (bad input: exit 2) to start a recorded executable that fails recordedExecProblem. */
export function checkRecordedExec(path: string, what: string): void {
  const why = recordedExecProblem(path);
  if (!why) return;
  throw new UsageError(`${what}: the vLLM executable ${shownValue(path)} is not started again: ${why}`, [
    'a file sparkctl runs as root must be a regular executable writable by its owner alone, in a folder only its owner can write to (chmod go-w on both)',
    'or serve the profile again with --vllm-bin PATH naming such a file',
  ]);
}
