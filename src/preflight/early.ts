// A plain `sparkctl preflight` (no flag that changes what is probed or where) starts its probes
// before the CLI's parser and the verbs' tables load (bin/sparkctl.js -> src/early.ts), and
// runPreflight takes them over: the same gatherFacts with the same probes and deadline, only started
// sooner. On the H200 host loading commander and the preflight modules took about 30 ms before the
// first probe spawned; the slowest probe (python3's package listing, about 75 ms there) then bounds
// the run, with the CLI's loading beside it.
import type { Host } from '../host/host.js';
import { RealHost } from '../host/real.js';
import { gatherFacts, type Facts, type GatherOptions } from './facts.js';
import { probesFor, selectChecks } from './catalog.js';

/**
 * preflight's --probe-timeout default (verbs/preflight/flags.ts): a run with another deadline gathers its own facts.
 */
const DEFAULT_PROBE_TIMEOUT_MS = 5000;

interface Early {
  facts: Promise<Facts>;
  startedAt: number;
  timeoutMs: number;
  probes: ReadonlySet<string>;
}
let pending: Early | undefined;
let last: 'taken' | 'not-matched' | 'none' = 'none';

/** Start a plain preflight's facts now: the checks of a preflight without --only/--skip/--profile, platform auto. */
export function startEarlyFacts(host: Host = new RealHost(DEFAULT_PROBE_TIMEOUT_MS)): void {
  const probes = probesFor(selectChecks(), { platform: 'auto' });
  const startedAt = performance.now();
  const facts = gatherFacts(host, { timeoutMs: DEFAULT_PROBE_TIMEOUT_MS, probes });
  // A run that never takes them over (it failed first) must not report an unhandled rejection.
  facts.catch(() => {});
  pending = { facts, startedAt, timeoutMs: DEFAULT_PROBE_TIMEOUT_MS, probes };
}

/**
 * The early facts, when this run asks for exactly what they gather: the real host, no profile, the
 * same deadline and the same probes. Taken once; anything else gathers its own (the early probes are
 * reads, and they end on their own).
 */
export function takeEarlyFacts(host: Host, g: GatherOptions): Pick<Early, 'facts' | 'startedAt'> | undefined {
  const e = pending;
  pending = undefined;
  if (!e) {
    last = 'none';
    return undefined;
  }
  const same =
    host.kind === 'real' &&
    !g.profile &&
    g.timeoutMs === e.timeoutMs &&
    g.probes !== undefined &&
    g.probes.size === e.probes.size &&
    [...g.probes].every((p) => e.probes.has(p));
  last = same ? 'taken' : 'not-matched';
  return same ? e : undefined;
}

/** What the last run found (for tests: a plain preflight takes its early facts; any other starts none). */
export function lastEarly(): typeof last {
  return last;
}
