// Talking to a running server: every call has its own deadline (headers AND body: a server that
// trickles a byte a second ends at the deadline), a bounded body (a 50 MB answer is cut off, not
// buffered), no redirects followed (a 3xx is an answer to report); failures are classified, never thrown.
import { request, Agent } from 'undici';

export type HttpResult =
  | { ok: true; status: number; body: string; ms: number; json?: any }
  | { ok: false; error: 'refused' | 'timeout' | 'reset' | 'unresolved' | 'too-large' | 'other'; message: string; ms: number };

/** The largest body read from a server (vLLM's /metrics of a big deployment is well under 1 MiB). */
export const MAX_BODY_BYTES = 8 * 1024 * 1024;

const agent = new Agent({ keepAliveTimeout: 4_000, connections: 8, connect: { timeout: 2_000 } });

export async function http(
  url: string,
  opts: { method?: 'GET' | 'POST'; body?: unknown; timeoutMs: number; apiKey?: string; headers?: Record<string, string>; signal?: AbortSignal; maxBytes?: number },
): Promise<HttpResult> {
  const started = performance.now();
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
  // One controller for the deadline and the caller's signal. Not AbortSignal.any(AbortSignal.timeout()):
  // on Node 20 the timeout signal inside any() can be garbage-collected before it fires, and a
  // server that never answers then hangs the call forever (seen: probe --url of a silent port).
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(Object.assign(new Error('deadline'), { name: 'TimeoutError' })), opts.timeoutMs);
  const onAbort = () => ac.abort(opts.signal?.reason);
  if (opts.signal?.aborted) onAbort();
  else opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const res = await request(url, {
      method: opts.method ?? (opts.body !== undefined ? 'POST' : 'GET'),
      headers,
      body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
      signal: ac.signal,
      dispatcher: agent,
    });
    const max = opts.maxBytes ?? MAX_BODY_BYTES;
    const declared = Number(res.headers['content-length']);
    if (declared > max) {
      res.body.destroy();
      return { ok: false, error: 'too-large', message: `the answer is ${declared} bytes, more than the ${max} read from a server`, ms: performance.now() - started };
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > max) {
        res.body.destroy();
        return { ok: false, error: 'too-large', message: `the answer exceeded ${max} bytes: cut off`, ms: performance.now() - started };
      }
      chunks.push(chunk as Buffer);
    }
    const body = Buffer.concat(chunks).toString('utf8');
    const ms = performance.now() - started;
    let json: any;
    if (String(res.headers['content-type'] ?? '').includes('json')) {
      try {
        json = JSON.parse(body);
      } catch {
        /* not JSON after all */
      }
    }
    return { ok: true, status: res.statusCode, body, ms, json };
  } catch (e) {
    const ms = performance.now() - started;
    const err = e as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
    const code = err.code ?? err.cause?.code;
    if (code === 'ECONNREFUSED') return { ok: false, error: 'refused', message: 'connection refused', ms };
    if (err.name === 'TimeoutError' || err.name === 'AbortError' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT')
      return { ok: false, error: 'timeout', message: `no answer within ${opts.timeoutMs} ms`, ms };
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME') return { ok: false, error: 'unresolved', message: `host ${hostOf(url)} does not resolve`, ms };
    if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return { ok: false, error: 'reset', message: 'connection reset', ms };
    return { ok: false, error: 'other', message: err.message, ms };
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  }
}

function hostOf(url: string): string {
  try {
    return new URL(url).hostname;
  } catch {
    return '?';
  }
}

export async function closeHttp() {
  await agent.close();
}
