// Ctrl-C and SIGTERM, wired one way for every verb: the library's work is cancelled through an
// AbortSignal, never by a handler that exits. The first signal aborts `signal`. What a second does
// is the caller's choice: `second: 'force'` (serve, bench) aborts `force` (stop at once, abort what
// is in flight); otherwise the handlers are gone after the first, so a second ends the process as
// Node does (exit 130 / 143): a stuck drain can always be left.

interface Interrupt {
  /** aborted by the first SIGINT or SIGTERM */
  readonly signal: AbortSignal;
  /** aborted by a second one, with `second: 'force'` only */
  readonly force: AbortSignal;
  /** removes the handlers (idempotent) */
  off(): void;
}

interface InterruptOptions {
  /** 'exit' (default): a second signal ends the process; 'force': it aborts `force` */
  second?: 'exit' | 'force';
  /** the signals listened to (default SIGINT and SIGTERM) */
  signals?: readonly NodeJS.Signals[];
  /** the abort reason the first signal gives (default: AbortSignal's own) */
  reason?: () => unknown;
  /** said once, when the first signal arrives (bench: what a second one does) */
  onFirst?: () => void;
}

export function interrupts(opts: InterruptOptions = {}): Interrupt {
  const first = new AbortController();
  const force = new AbortController();
  const signals = opts.signals ?? (['SIGINT', 'SIGTERM'] as const);
  const on = () => {
    if (first.signal.aborted) {
      force.abort();
      return;
    }
    first.abort(opts.reason?.());
    if (opts.second !== 'force') off();
    opts.onFirst?.();
  };
  const off = () => {
    for (const s of signals) process.off(s, on);
  };
  for (const s of signals) process.on(s, on);
  return { signal: first.signal, force: force.signal, off };
}

/** `fn` with Ctrl-C / SIGTERM aborting its signal; the handlers are removed when it settles. */
export async function withInterrupts<T>(fn: (signal: AbortSignal) => Promise<T>, opts: InterruptOptions = {}): Promise<T> {
  const i = interrupts(opts);
  try {
    return await fn(i.signal);
  } finally {
    i.off();
  }
}
