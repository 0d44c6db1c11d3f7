// A server reached over a Unix socket, written as a URL so that every reader that takes a server's URL
// (the readiness wait, prewarm, the probe, watch, status, sleep, the upgrade's canary) takes it
// unchanged: `http+unix://<the socket's path, percent-encoded>` and the request's path after it, the
// convention of requests-unixsocket (Python) and others. `${url}/health` stays a URL of the same socket.
// client/http.ts opens the socket (node:http's socketPath) for such a URL; shown to an operator as
// `unix:PATH`. A router's replicas listen so (vLLM --uds: profiles/render.ts replicaSocket).

const PREFIX = 'http+unix://';

/** The URL of a server that listens on the Unix socket at `path` (an absolute path). */
export function unixUrl(path: string): string {
  return `${PREFIX}${encodeURIComponent(path)}`;
}

/** The socket's path of a unix URL (with or without a request path after it); undefined for any other URL. */
export function socketPathOf(url: string): string | undefined {
  if (!url.startsWith(PREFIX)) return undefined;
  const rest = url.slice(PREFIX.length);
  const end = rest.indexOf('/');
  try {
    const path = decodeURIComponent(end < 0 ? rest : rest.slice(0, end));
    return path.startsWith('/') && !path.includes('\0') ? path : undefined;
  } catch {
    return undefined;
  }
}

/** The request path (and query) of a unix URL: '/' when it names none. */
export function requestPathOf(url: string): string {
  const rest = url.slice(PREFIX.length);
  const end = rest.indexOf('/');
  return end < 0 ? '/' : rest.slice(end);
}

/** A server's address as an operator reads it: unix:PATH for a socket, the URL itself otherwise. */
export function shownAddress(url: string): string {
  const p = socketPathOf(url);
  return p ? `unix:${p}${requestPathOf(url) === '/' ? '' : requestPathOf(url)}` : url;
}
