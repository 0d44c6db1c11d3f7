// A sleep that an AbortSignal ends early (resolving, not throwing: the caller checks
// why it woke). No wait at all for ms <= 0 (the simulator's time model asks for zero delays).
// Its abort listener goes when it ends: loops that wait on one long-lived signal every round
// (readiness, cluster waits) must not pile listeners onto it.
export const pause = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted || ms <= 0) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
