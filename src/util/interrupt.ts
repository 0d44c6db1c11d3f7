// Ctrl-C and SIGTERM, wired one way for every verb: the library's work is cancelled through an
// AbortSignal, never by a handler that exits. The first signal aborts `signal`. What a second does
// is the caller's choice: `second: 'force'` (serve, bench) aborts `force` (stop at once, abort what
// is in flight); otherwise the handlers are gone after the first, so a second ends the process as
// Node does (exit 130 / 143): a stuck drain can always be left.
//
// Under it, `onSignals`: one process listener per signal, added on first use and kept, that calls
// the handlers live when the signal is delivered. Handlers come and go; the listener does not.
// Why: Node hands a signal to JavaScript at its next turn of the event loop, and drops it if the
// signal's last listener was removed in between. A handler swapped by off() then on() during a
// stretch of synchronous work (the simulator's end of load: build the server, listen, swap its load
// handler for its shutdown) met such a signal with neither: the process neither acted on the stop's
// SIGTERM nor ended, and was killed 30 s later. With no handler live, the signal gets Node's default
// (the process ends by it), or goes to the listeners others added (execa's cleanup), as without us.

type Handler = (sig: NodeJS.Signals) => void;
const live = new Map<NodeJS.Signals, Handler[]>();
const listening = new Map<NodeJS.Signals, () => void>();

function deliver(sig: NodeJS.Signals) {
  const handlers = [...(live.get(sig) ?? [])];
  for (const h of handlers) h(sig);
  if (handlers.length) return;
  // nobody here wants it: step aside, then what Node does without us
  process.off(sig, listening.get(sig)!);
  listening.delete(sig);
  if (process.listenerCount(sig) > 0) process.emit(sig as never);
  else process.kill(process.pid, sig);
}

/**
 * `fn` on each of `signals` until the returned function is called (idempotent); never drops a signal between handlers.
 */
export function onSignals(signals: readonly NodeJS.Signals[], fn: Handler): () => void {
  for (const sig of signals) {
    live.set(sig, [...(live.get(sig) ?? []), fn]);
    if (!listening.has(sig)) {
      const l = () => deliver(sig);
      listening.set(sig, l);
      process.on(sig, l);
    }
  }
  let on = true;
  return () => {
    if (!on) return;
    on = false;
    for (const sig of signals) {
      const left = (live.get(sig) ?? []).filter((h) => h !== fn);
      live.set(sig, left);
    }
  };
}

/** How many handlers are live for `sig` (tests: every scope removed its own). */
export function liveHandlers(sig: NodeJS.Signals): number {
  return live.get(sig)?.length ?? 0;
}

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
  const off = onSignals(signals, on);
  return { signal: first.signal, force: force.signal, off };
}

/** `fn` with Ctrl-C / SIGTERM aborting its signal; the handlers are removed when it settles. */
export async function withInterrupts<T>(
  fn: (signal: AbortSignal) => Promise<T>,
  opts: InterruptOptions = {},
): Promise<T> {
  const i = interrupts(opts);
  try {
    return await fn(i.signal);
  } finally {
    i.off();
  }
}
