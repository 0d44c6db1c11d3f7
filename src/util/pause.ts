// A wait that an AbortSignal ends early (resolving, not throwing: the caller checks why it woke).
// Its abort listener goes when it ends: loops that wait on one long-lived signal every round
// (readiness, cluster waits) must not pile listeners onto it.
export const pause = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
