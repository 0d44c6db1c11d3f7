// The head start of a plain `sparkctl preflight`: its slowest probe spawned before the checks'
// modules load (bin/sparkctl.js -> src/early.ts -> here, then preflight/early.ts). nvidia-smi -q
// bounds the whole run (about 170 ms on 1 x H200, where every other probe answers within 80 ms), so
// the time to its spawn is the time the run ends later; loading the fact sources first put it about
// 30 ms after Node's start there (scripts/trace-preflight.mjs). Imports only the real host.
import { RealHost } from '../host/real.js';

/** preflight's --probe-timeout default (verbs/preflight/flags.ts): a run with another deadline gathers its own facts. */
export const DEFAULT_PROBE_TIMEOUT_MS = 5000;

/** The probe that bounds a preflight: started first (preflight/facts.ts FACT_SOURCES) and, in a plain preflight, before anything loads. */
export const SLOWEST_PROBE: readonly string[] = ['nvidia-smi', '-q'];

/** A real host with the slowest probe already running under the default deadline. */
export function headStart(): RealHost {
  const host = new RealHost(DEFAULT_PROBE_TIMEOUT_MS);
  host.ahead([...SLOWEST_PROBE], DEFAULT_PROBE_TIMEOUT_MS);
  return host;
}
