// serve's flags, as the verb holds them (gh's options struct): commander hands them over, the verb
// checks their spelling (validateServeFlags) and settles them into what the engine takes (a finished
// plan from engine/plan.ts buildServePlan; the engine never sees a flag).
import type { ReadInputs, RunInputs } from '../../engine/plan.js';
import { UsageError } from '../../errors.js';

/**
 * serve's flags, as commander hands them over (durations already parsed: --ready-timeout to ms, --sim-load to seconds);
 * what runs and what was read are the engine's input types.
 */
export interface ServeOptions extends RunInputs, ReadInputs {
  json?: boolean;
  skipPreflight?: boolean;
  /** --nodes: the nodes file, as named */
  nodes?: string;
  /** --repin: the image reference pinned anew, as it is now */
  repin?: boolean;
}

/**
 * Every serve flag that is not a profile field, its spelling checked before anything is read or planned (exit 2 naming
 * the flag).
 */
export function validateServeFlags(opts: Pick<ServeOptions, 'simLoadSeconds' | 'engine' | 'vllmBin'>): void {
  if (opts.simLoadSeconds !== undefined && !/^\d+(\.\d+)?$/.test(opts.simLoadSeconds)) {
    throw new UsageError(`--sim-load-seconds: "${opts.simLoadSeconds}" is not a number of seconds`, [
      'write it like 0.5 or 30',
    ]);
  }
  if (opts.engine === 'vllm' && !opts.vllmBin.trim())
    throw new UsageError('--vllm-bin: "" is not an executable', [
      '--vllm-bin /path/to/vllm, or leave it out for vllm on PATH',
    ]);
}
