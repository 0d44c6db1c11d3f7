// What every HAProxy configuration sparkctl writes has in common (the router's, src/profiles/router.ts,
// and the gateway's, src/gateway/config.ts): the global section (logging, the runtime API socket,
// the limits), the defaults (HTTP mode, keep-alive on both sides, the retry, the timeouts) and the
// loopback stats frontend (the stats page and the Prometheus exporter). Pure text from validated
// fields: a value with a newline or a quote could add a directive, so `configValue` refuses it.
import { UsageError } from '../errors.js';
import type { RouterBlock } from './schema.js';
import type { z } from 'zod';

/** host:port as a config line takes it ([v6]:port). */
export const haproxyAddr = (host: string, port: number) =>
  host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;

/** A value for a config line, or bad input naming `what` (`who`: "router config", "gateway config"). */
export function configValue(v: string, what: string, who: string, fix: string): string {
  if (!/^[A-Za-z0-9._:/@+[\]-]+$/.test(v))
    throw new UsageError(`${who}: ${what} ${JSON.stringify(v)} has characters a config line cannot hold`, [fix]);
  return v;
}

interface GlobalOptions {
  /** log to stdout (HAProxy run by sparkctl in the foreground); otherwise the operator's syslog */
  logStdout?: boolean;
  /** the runtime API socket (checked by the caller); omitted: no `stats socket` line */
  socket?: string;
  /** the socket hands the listening sockets to a reloaded worker (master-worker reloads: no refused connect) */
  exposeFd?: boolean;
  /** log to this inherited file descriptor (a pipe the keeper reads) instead */
  logFd?: number;
  /** a Lua file to load (the gateway's usage filter) */
  luaLoad?: string;
}

/**
 * glibc's malloc in every HAProxy sparkctl starts (router and gateway): keep what is freed at the heap's
 * top (up to 64 MiB) and take buffers under 4 MiB from the heap. With glibc's own tuning, each request's
 * 256 KiB buffers (tune.bufsize below: the request body HAProxy reads, and the copy it keeps for an L7
 * retry) went back to the system when the request ended and came back as 17 page faults on the next: half
 * of HAProxy's CPU per request (scripts/profile-usage-filter.mjs: 17.4 -> 0 faults and about 540 -> 260 us
 * a request on this host). Setting one threshold turns glibc's tuning of both off, so both are set. An
 * operator's own HAProxy (`sparkctl router config`) gets them from its unit (docs/router-and-gateway.md).
 */
export const HAPROXY_MALLOC_ENV = {
  MALLOC_TRIM_THRESHOLD_: String(64 << 20),
  MALLOC_MMAP_THRESHOLD_: String(4 << 20),
} as const;

/** The global section, and a blank line. */
export function globalSection(o: GlobalOptions): string[] {
  const L = [
    'global',
    o.logFd !== undefined
      ? `    log fd@${Math.trunc(o.logFd)} format raw local0 info`
      : o.logStdout
        ? '    log stdout format raw local0 info'
        : '    log /dev/log local0 info',
  ];
  // One thread where Lua is loaded. A `lua-load` script runs on one Lua state shared by every thread, and
  // HAProxy before 2.6.17 touched that state's stack outside its lock when it made a stream's filter
  // (fixed upstream in 2024: "BUG/MAJOR: hlua: improper lock usage with hlua_ctx_resume()" and its
  // filter follow-ups; Debian 12 ships 2.6.12): under load a filter object lost its HAProxy handle,
  // `register_data_filter` failed ("bad argument #-1 ... got nil") and the client got a 502 (the
  // gateway's on-demand start on a loaded host: one of four held requests). The shared state's lock
  // runs one thread's Lua at a time anyway; a per-thread state would split the prefix routing's memory.
  if (o.luaLoad) L.push('    nbthread 1', `    lua-load ${o.luaLoad}`);
  if (o.socket) {
    L.push(`    stats socket ${o.socket} mode 600 level admin${o.exposeFd ? ' expose-fd listeners' : ''}`);
    L.push('    stats timeout 30s');
  }
  L.push('    maxconn 4096', '    tune.bufsize 262144', '');
  return L;
}

type Timeouts = Pick<
  z.infer<typeof RouterBlock>,
  | 'connectTimeoutSeconds'
  | 'clientTimeoutSeconds'
  | 'serverTimeoutSeconds'
  | 'tunnelTimeoutSeconds'
  | 'queueTimeoutSeconds'
>;

/**
 * The defaults section, and a blank line. Only errors and server state changes are logged, never
 * every request (a bench would fill the disk). The keep-alive timeout is vLLM's own (uvicorn's 5 s):
 * clients see the same as on a direct connection; it also bounds a stop (a connection whose answer
 * was under way at the soft stop stays open, idle, this long).
 */
export function defaultsSection(t: Timeouts, checkIntervalMs: number): string[] {
  return [
    'defaults',
    '    mode http',
    '    log global',
    '    option httplog',
    '    option dontlognull',
    '    option dontlog-normal',
    '    option log-health-checks',
    '    option http-keep-alive',
    // each chunk of a stream (an SSE token) is sent the moment it arrives, never held for a fuller
    // packet: scripts/bench-router.mjs ttft and bench-gateway.mjs ttft measure the difference
    '    option http-no-delay',
    '    http-reuse safe',
    '    option redispatch 1',
    '    retries 1',
    '    retry-on conn-failure empty-response',
    `    timeout connect ${t.connectTimeoutSeconds}s`,
    `    timeout client ${t.clientTimeoutSeconds}s`,
    `    timeout server ${t.serverTimeoutSeconds}s`,
    `    timeout tunnel ${t.tunnelTimeoutSeconds}s`,
    `    timeout queue ${t.queueTimeoutSeconds}s`,
    '    timeout http-request 60s',
    '    timeout http-keep-alive 5s',
    `    timeout check ${Math.max(1000, Math.min(checkIntervalMs, 5000))}ms`,
    '',
  ];
}

/** The stats frontend (loopback: it shows every backend and server), and a blank line. */
export function statsSection(stats: { host: string; port: number }): string[] {
  return [
    'frontend stats',
    `    bind ${haproxyAddr(stats.host, stats.port)}`,
    '    http-request use-service prometheus-exporter if { path /metrics }',
    '    stats enable',
    '    stats uri /stats',
    '    stats refresh 5s',
    '',
  ];
}

/** How a backend picks a replica: the fields of router:/gateway: that say it. */
export interface Balance {
  balance: 'prefix' | 'leastconn';
  prefixBytes: number;
  hashBalanceFactor: number;
}

/**
 * The sample a prefix-balanced backend hashes: the request body from its "messages", "prompt" or
 * "input" key on (chat, completions, embeddings; whatever comes before it, the model and the
 * sampling fields, is left out), its first `bytes` bytes. A body without those keys is hashed whole.
 * The regex sits in a double-quoted converter argument: HAProxy's argument parser ends an unquoted
 * argument at a parenthesis and strips a bare double quote (measured on 2.6.12: `"(a|b)"` unquoted
 * matched without its quotes); inside the quoted argument \" is a literal quote.
 */
export const prefixSample = (bytes: number) =>
  `req.body,regsub('"(?s)^.*?\\"(messages|prompt|input)\\"\\s*:\\s*"',''),bytes(0,${Math.trunc(bytes)})`;

/**
 * A backend's balance lines. prefix: bounded-load consistent hashing (Mirrokni et al., HAProxy's
 * hash-balance-factor): one prefix goes to one replica while that replica carries at most the
 * factor times the average load, then to the next replica on the ring; a replica added or removed
 * moves only its share of the prefixes. A request without a body is balanced round robin.
 */
export function balanceLines(b: Balance): string[] {
  if (b.balance === 'leastconn') return ['    balance leastconn'];
  return [
    `    balance hash ${prefixSample(b.prefixBytes)}`,
    '    hash-type consistent',
    `    hash-balance-factor ${Math.trunc(b.hashBalanceFactor)}`,
  ];
}

/** The balance in words, as serve and status say it. */
export const balanceWords = (b: Balance) =>
  b.balance === 'leastconn' ? 'leastconn' : `prefix-hash (${b.prefixBytes} B, factor ${b.hashBalanceFactor} %)`;
