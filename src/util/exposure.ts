// Where nothing is exposed, nothing is exposed by default (issue 42 item 14): one rule for every
// listener sparkctl starts for a client (serve's replicas, the router, the gateway). An address
// beyond loopback without a key is refused unless the operator says --allow-unauthenticated, and
// then it is warned of at every start.
import { UsageError } from '../errors.js';

/** 127.0.0.0/8, ::1 and localhost: an address only this host reaches. */
export const isLoopback = (h: string) => /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || h === '::1' || h === 'localhost';

interface Exposure {
  /** who listens, in words: "the gateway", "qwen3.5-9b's server" */
  who: string;
  /** the flag or field that set the address (--host, server.host) */
  field: string;
  host: string;
  /** a key is asked for on the routes that carry requests */
  keyed: boolean;
  /** routes that answer without the key even when one is set (vLLM's sleep mode: /sleep, /wake_up), named */
  openRoutes?: string;
  /** the fixes besides --allow-unauthenticated, each a command or an edit */
  fixes: string[];
}

/** What is open to whoever reaches the address, in words; undefined where nothing is. */
export function exposedWhat(e: Exposure): string | undefined {
  if (isLoopback(e.host)) return undefined;
  if (!e.keyed)
    return `${e.who} listens on ${e.host} (beyond this host) without a key: anyone who reaches the address reaches the model`;
  if (e.openRoutes)
    return `${e.who} listens on ${e.host} (beyond this host) with ${e.openRoutes}, which answer without the key`;
  return undefined;
}

/**
 * Refused (exit 2, naming the fixes) unless allowed; allowed, the warning to print at this start.
 * undefined: nothing is exposed.
 */
export function checkExposure(e: Exposure, allowUnauthenticated: boolean): string | undefined {
  const what = exposedWhat(e);
  if (!what) return undefined;
  if (!allowUnauthenticated)
    throw new UsageError(`${e.field} ${e.host}: ${what}`, [
      ...e.fixes,
      'or --allow-unauthenticated to expose it knowingly (warned at every start)',
    ]);
  return `WARNING: ${what} (--allow-unauthenticated)`;
}
