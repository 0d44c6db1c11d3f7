// Talking to a running server: every call has its own deadline (headers AND body: a server that
// trickles a byte a second ends at the deadline), a bounded body (a 50 MB answer is cut off, not
// buffered), no redirects followed (a 3xx is an answer to report); failures are classified, never thrown.
// node:http, not undici: every verb that talks to a server loads this, and undici is a 1 MB module
// that compiles its HTTP parser from WebAssembly at start-up (most of a short probe's CPU time).
// node:https (and with it TLS) is loaded by the first https: call: most servers probed are http:.
import {
  request as httpRequest,
  Agent as HttpAgent,
  type IncomingMessage,
  type ClientRequest,
  type Agent,
} from 'node:http';
import { socketPathOf, requestPathOf } from '../util/socket-url.js';

export type HttpResult =
  | { ok: true; status: number; body: string; ms: number; json?: any }
  | {
      ok: false;
      error: 'refused' | 'timeout' | 'reset' | 'unresolved' | 'too-large' | 'other';
      message: string;
      ms: number;
    };

/** The largest body read from a server (vLLM's /metrics of a big deployment is well under 1 MiB). */
export const MAX_BODY_BYTES = 8 * 1024 * 1024;

/** A TCP connect that has not completed by then is a timeout (a black-holed address), whatever the call's deadline. */
const CONNECT_TIMEOUT_MS = 2_000;
// Kept-alive sockets between the calls of one run (a probe's 7 steps), at most 8 per server; idle ones never hold the
// process open.
const AGENT_OPTS = { keepAlive: true, maxSockets: 8 };
const httpAgent = new HttpAgent(AGENT_OPTS);
let httpsClient: { request: typeof httpRequest; agent: Agent } | undefined;
async function client(https: boolean) {
  if (!https) return { request: httpRequest, agent: httpAgent };
  if (!httpsClient) {
    const m = await import('node:https');
    httpsClient = { request: m.request as typeof httpRequest, agent: new m.Agent(AGENT_OPTS) };
  }
  return httpsClient;
}

const named = (name: string, message: string, code?: string) => Object.assign(new Error(message), { name, code });

type HttpOptions = {
  method?: 'GET' | 'POST';
  body?: unknown;
  timeoutMs: number;
  apiKey?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  maxBytes?: number;
};

/**
 * One request with one deadline (a stale socket's retry: retryDeadlineMs). A GET whose kept-alive socket the server had
 * just closed (it closes an idle one after its keep-alive timeout: 5 s in Node and uvicorn) fails with a reset before
 * any answer; that GET is sent once more on a fresh socket, as Node's documentation advises (request.reusedSocket).
 * Seen: a server probed a few seconds after its readiness poll on a loaded host answered "connection reset" though it
 * was up. A POST is never sent twice.
 */
export async function http(url: string, opts: HttpOptions): Promise<HttpResult> {
  const first = await attempt(url, opts);
  if (
    !first.staleSocket ||
    (opts.method ?? (opts.body !== undefined ? 'POST' : 'GET')) !== 'GET' ||
    opts.signal?.aborted
  )
    return strip(first);
  const again = await attempt(url, { ...opts, timeoutMs: retryDeadlineMs(opts.timeoutMs, first.ms) });
  return strip({ ...again, ms: again.ms + first.ms });
}

/**
 * What the fresh socket's GET is given: what is left of the deadline, but never less than the
 * deadline itself or STALE_RETRY_FLOOR_MS (the smaller). The time before the reset was spent on our
 * dead socket, not waiting on the server: on a loaded host a reset noticed late left the retry 1 ms
 * and the read said "no answer within 1 ms" of a server that was up (seen in a real-vLLM watch soak).
 */
const STALE_RETRY_FLOOR_MS = 2000;
export const retryDeadlineMs = (timeoutMs: number, spentMs: number): number =>
  Math.max(Math.min(timeoutMs, STALE_RETRY_FLOOR_MS), Math.round(timeoutMs - spentMs));

const strip = ({ staleSocket: _, ...r }: HttpResult & { staleSocket?: boolean }): HttpResult => r;

/** The request's headers and its JSON body (the key as a bearer token, never in the URL). */
function requestOf(opts: HttpOptions): { headers: Record<string, string>; payload?: Buffer } {
  const headers: Record<string, string> = { ...opts.headers };
  const payload = opts.body !== undefined ? Buffer.from(JSON.stringify(opts.body)) : undefined;
  if (payload) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(payload.length);
  }
  if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
  return { headers, payload };
}

async function attempt(url: string, opts: HttpOptions): Promise<HttpResult & { staleSocket?: boolean }> {
  const started = performance.now();
  let staleSocket = false;
  const { headers, payload } = requestOf(opts);
  const max = opts.maxBytes ?? MAX_BODY_BYTES;
  let req: ClientRequest | undefined;
  let timer: NodeJS.Timeout | undefined;
  let connectTimer: NodeJS.Timeout | undefined;
  // One deadline for headers AND body, and the caller's signal: either destroys the request, and
  // is the reason given (the response may first report the cut-off body as a reset).
  let fired: Error | undefined;
  const end = (e: Error) => {
    fired ??= e;
    req?.destroy(e);
  };
  const onAbort = () => end(named('AbortError', 'aborted'));
  try {
    // a server on a Unix socket (a router's replica on vLLM's --uds: util/socket-url.ts): the same request over the
    // socket
    const socketPath = socketPathOf(url);
    if (url.startsWith('http+unix:') && !socketPath)
      return { ok: false, error: 'other', message: `${url.slice(0, 200)} names no socket (an absolute path)`, ms: 0 };
    const u = socketPath ? undefined : new URL(url);
    const https = u?.protocol === 'https:';
    if (u && !https && u.protocol !== 'http:')
      return { ok: false, error: 'other', message: `${u.protocol} is not http: or https:`, ms: 0 };
    const { request, agent } = await client(https);
    const method = opts.method ?? (payload ? 'POST' : 'GET');
    const { status, resHeaders, body } = await new Promise<Answered>((resolve, reject) => {
      // the agent keys its pool by socketPath too: a socket's kept-alive connections are its own
      req = socketPath
        ? request({ socketPath, path: requestPathOf(url), host: 'localhost', method, headers, agent })
        : request(u!, { method, headers, agent });
      timer = setTimeout(() => end(named('TimeoutError', 'deadline')), opts.timeoutMs);
      if (opts.signal?.aborted) onAbort();
      else opts.signal?.addEventListener('abort', onAbort, { once: true });
      req.on('socket', (sock) => {
        if (!sock.connecting) return;
        connectTimer = setTimeout(() => end(named('TimeoutError', 'connect timeout')), CONNECT_TIMEOUT_MS);
        sock.once('connect', () => clearTimeout(connectTimer));
      });
      let answered = false;
      req.on('error', (e: NodeJS.ErrnoException) => {
        // a kept-alive socket the server closed while it sat idle: nothing was answered on it
        if (req!.reusedSocket && !answered && (e.code === 'ECONNRESET' || e.code === 'EPIPE')) staleSocket = true;
        reject(e);
      });
      req.on('response', (res) => {
        answered = true;
        const tooLarge = (message: string) => {
          const e = named('TooLarge', message);
          fired ??= e; // before the destroy, which reports the cut-off body as a reset
          res.destroy();
          req!.destroy();
          reject(e);
        };
        readAnswer(res, max, tooLarge, resolve, reject);
      });
      req.end(payload);
    });
    return {
      ok: true,
      status,
      body,
      ms: performance.now() - started,
      json: String(resHeaders['content-type'] ?? '').includes('json') ? jsonOf(body) : undefined,
    };
  } catch (e) {
    const f = failureOf((fired ?? e) as NodeJS.ErrnoException, url, opts.timeoutMs, performance.now() - started);
    return staleSocket && !fired ? { ...f, staleSocket } : f;
  } finally {
    clearTimeout(timer);
    clearTimeout(connectTimer);
    opts.signal?.removeEventListener('abort', onAbort);
  }
}

/** A response read to its end: its status, headers and body. */
type Answered = { status: number; resHeaders: IncomingMessage['headers']; body: string };

/**
 * Reads a response's body, at most `max` bytes: a larger one (declared, or once it grows past max) goes to tooLarge,
 * which cuts it off; a body cut off by a reset or the deadline rejects as a reset.
 */
function readAnswer(
  res: IncomingMessage,
  max: number,
  tooLarge: (message: string) => void,
  resolve: (a: Answered) => void,
  reject: (e: unknown) => void,
) {
  const declared = Number(res.headers['content-length']);
  if (declared > max) return tooLarge(`the answer is ${declared} bytes, more than the ${max} read from a server`);
  const chunks: Buffer[] = [];
  let size = 0;
  res.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > max) return tooLarge(`the answer exceeded ${max} bytes: cut off`);
    chunks.push(chunk);
  });
  res.on('error', reject);
  // a body cut off by a reset or the deadline is 'aborted' on the response
  res.on('aborted', () => reject(named('ResetError', 'connection reset', 'ECONNRESET')));
  res.on('end', () =>
    resolve({
      status: res.statusCode ?? 0,
      resHeaders: res.headers,
      body: Buffer.concat(chunks).toString('utf8'),
    }),
  );
}

function jsonOf(body: string): any {
  try {
    return JSON.parse(body);
  } catch {
    return undefined; // not JSON after all
  }
}

/** Why a call got no answer, in the words the verbs report. */
function failureOf(err: NodeJS.ErrnoException, url: string, timeoutMs: number, ms: number): HttpResult {
  const code = err.code;
  if (err.name === 'TooLarge') return { ok: false, error: 'too-large', message: err.message, ms };
  if (code === 'ECONNREFUSED') return { ok: false, error: 'refused', message: 'connection refused', ms };
  // a Unix socket that is not there (its server never bound it, or removed it): nothing listens, as a refused port
  if (code === 'ENOENT' && socketPathOf(url))
    return { ok: false, error: 'refused', message: `no socket at ${socketPathOf(url)}`, ms };
  if (code === 'EACCES' && socketPathOf(url))
    return { ok: false, error: 'other', message: `permission denied on the socket ${socketPathOf(url)}`, ms };
  if (err.name === 'TimeoutError' || err.name === 'AbortError')
    return { ok: false, error: 'timeout', message: `no answer within ${timeoutMs} ms`, ms };
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME')
    return { ok: false, error: 'unresolved', message: `host ${hostOf(url)} does not resolve`, ms };
  if (code === 'ECONNRESET' || code === 'EPIPE') return { ok: false, error: 'reset', message: 'connection reset', ms };
  return { ok: false, error: 'other', message: err.message, ms };
}

function hostOf(url: string): string {
  const sock = socketPathOf(url);
  if (sock) return `unix:${sock}`;
  try {
    return new URL(url).hostname;
  } catch {
    return '?';
  }
}

export async function closeHttp() {
  httpAgent.destroy();
  httpsClient?.agent.destroy();
}
