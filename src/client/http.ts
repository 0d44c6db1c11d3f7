// Talking to a running server: every call has its own deadline; failures are classified, never thrown.
import { request, Agent } from 'undici';

export type HttpResult =
  | { ok: true; status: number; body: string; ms: number; json?: any }
  | { ok: false; error: 'refused' | 'timeout' | 'reset' | 'other'; message: string; ms: number };

const agent = new Agent({ keepAliveTimeout: 4_000, connections: 8, connect: { timeout: 2_000 } });

export async function http(url: string, opts: { method?: 'GET' | 'POST'; body?: unknown; timeoutMs: number; apiKey?: string; headers?: Record<string, string>; signal?: AbortSignal }): Promise<HttpResult> {
  const started = performance.now();
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
  try {
    const res = await request(url, {
      method: opts.method ?? (opts.body !== undefined ? 'POST' : 'GET'),
      headers,
      body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
      signal: opts.signal ? AbortSignal.any([AbortSignal.timeout(opts.timeoutMs), opts.signal]) : AbortSignal.timeout(opts.timeoutMs),
      dispatcher: agent,
    });
    const body = await res.body.text();
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
    if (err.name === 'TimeoutError' || err.name === 'AbortError' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return { ok: false, error: 'timeout', message: `no answer within ${opts.timeoutMs} ms`, ms };
    if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return { ok: false, error: 'reset', message: 'connection reset', ms };
    return { ok: false, error: 'other', message: err.message, ms };
  }
}

export async function closeHttp() {
  await agent.close();
}
