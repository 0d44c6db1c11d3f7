// HAProxy's runtime API on its unix socket (the folder is sparkctl's, mode 0700; the socket 0600):
// one command per connection, the answer read until HAProxy closes. Every answer is hostile input:
// `show stat` is parsed by its own header and a row without the fields we need is dropped.
import { connect } from 'node:net';

class RouterApiError extends Error {}

/** Send one command; resolves with HAProxy's answer. Every call has a deadline. */
export function runtimeCommand(socket: string, command: string, timeoutMs = 3000): Promise<string> {
  if (/[\r\n;]/.test(command))
    return Promise.reject(new RouterApiError(`runtime command ${JSON.stringify(command)}: one command, no separators`));
  return send(socket, command, command, timeoutMs);
}

/**
 * One command on the master CLI (`haproxy -W -S SOCKET`): `show proc`, or `@!PID COMMAND` for one
 * worker. The master keeps its CLI open after answering (2.6.12, either kind), so `quit` follows.
 */
export function masterCommand(socket: string, command: string, timeoutMs = 3000): Promise<string> {
  if (/[\r\n;]/.test(command))
    return Promise.reject(new RouterApiError(`master command ${JSON.stringify(command)}: one command, no separators`));
  return send(socket, `${command}; quit`, command, timeoutMs);
}

function send(socket: string, line: string, command: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const s = connect(socket);
    const timer = setTimeout(() => {
      s.destroy();
      reject(
        new RouterApiError(`HAProxy's runtime API (${socket}) did not answer "${command}" within ${timeoutMs} ms`),
      );
    }, timeoutMs);
    s.once('connect', () => s.write(`${line}\n`));
    s.on('data', (d: Buffer) => {
      size += d.length;
      // `show stat` of a few dozen servers is a few KiB: anything near this is not HAProxy.
      if (size > 8 * 1024 * 1024) {
        s.destroy();
        clearTimeout(timer);
        reject(new RouterApiError(`HAProxy's runtime API answered more than 8 MiB to "${command}"`));
        return;
      }
      chunks.push(d);
    });
    s.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(
        new RouterApiError(
          `HAProxy's runtime API (${socket}): ${e.code === 'ENOENT' ? 'no socket (is the router running?)' : e.code === 'ECONNREFUSED' ? 'refused (the router is not running)' : e.message}`,
        ),
      );
    });
    s.once('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
  });
}

export interface ServerStat {
  backend: string;
  server: string;
  /**
   * UP, DOWN, MAINT, DRAIN, NOLB, "UP 1/2" (up, its checks not settled: just started or failing), "DOWN 1/2" (down,
   * passing again), "no check"
   */
  status: string;
  /** current sessions: with http-server-close, the requests in flight on that server */
  scur: number;
  /** requests waiting in this server's queue */
  qcur: number;
  /** total sessions it has served */
  stot: number;
  /** connection errors, response errors, retries and redispatches (counters) */
  econ: number;
  eresp: number;
  wretr: number;
  wredis: number;
  /** times it went from UP to DOWN */
  chkdown: number;
  /** seconds since its last state change */
  lastchg: number;
  /** e.g. L7OK, L4CON (refused), L7STS (bad status), L4TOUT */
  checkStatus: string;
  /** the last check's text, e.g. "Connection refused" */
  lastCheck: string;
}

const num = (v: string | undefined) => {
  const n = Number(v);
  return v !== undefined && v !== '' && Number.isFinite(n) ? n : 0;
};

/** `show stat` (CSV) -> the server rows (not FRONTEND/BACKEND). Rows that do not fit the header are skipped. */
export function parseShowStat(text: string): ServerStat[] {
  const lines = text.split('\n').filter((l) => l.trim());
  const head = lines.findIndex((l) => l.startsWith('# pxname,svname,'));
  if (head < 0)
    throw new RouterApiError(`"show stat" answered without its CSV header: ${JSON.stringify(text.slice(0, 120))}`);
  const cols = lines[head]!.slice(2).split(',');
  const at = (name: string) => cols.indexOf(name);
  const need = ['pxname', 'svname', 'scur', 'status'];
  for (const n of need) if (at(n) < 0) throw new RouterApiError(`"show stat" has no ${n} column`);
  const out: ServerStat[] = [];
  for (const l of lines.slice(head + 1)) {
    if (l.startsWith('#')) continue;
    const f = l.split(',');
    if (f.length < cols.length - 1) continue;
    const get = (name: string) => (at(name) >= 0 ? f[at(name)] : undefined);
    const sv = get('svname') ?? '';
    if (!sv || sv === 'FRONTEND' || sv === 'BACKEND') continue;
    out.push({
      backend: get('pxname') ?? '',
      server: sv,
      status: get('status') ?? '',
      scur: num(get('scur')),
      qcur: num(get('qcur')),
      stot: num(get('stot')),
      econ: num(get('econ')),
      eresp: num(get('eresp')),
      wretr: num(get('wretr')),
      wredis: num(get('wredis')),
      chkdown: num(get('chkdown')),
      lastchg: num(get('lastchg')),
      checkStatus: get('check_status') ?? '',
      lastCheck: get('last_chk') ?? '',
    });
  }
  return out;
}

export async function showStat(socket: string, timeoutMs?: number): Promise<ServerStat[]> {
  return parseShowStat(await runtimeCommand(socket, 'show stat', timeoutMs));
}

type AdminState = 'ready' | 'drain' | 'maint';

/** `set server BACKEND/SERVER state ...`: HAProxy answers nothing on success, a sentence otherwise. */
export async function setServerState(
  socket: string,
  backend: string,
  server: string,
  state: AdminState,
  timeoutMs?: number,
): Promise<void> {
  if (!/^[A-Za-z0-9._-]+$/.test(backend) || !/^[A-Za-z0-9._-]+$/.test(server))
    throw new RouterApiError(`bad server name ${backend}/${server}`);
  const answer = (await runtimeCommand(socket, `set server ${backend}/${server} state ${state}`, timeoutMs)).trim();
  if (answer)
    throw new RouterApiError(
      `HAProxy refused "set server ${backend}/${server} state ${state}": ${answer.slice(0, 200)}`,
    );
}

/** How HAProxy sees a server, in one word: up (taking traffic), drain, maint, down, or going up/down. */
export function serverState(
  st: Pick<ServerStat, 'status'>,
): 'up' | 'down' | 'drain' | 'maint' | 'up-checking' | 'down-checking' | 'unknown' {
  const s = st.status.trim();
  if (s === 'UP' || s === 'no check' || s === 'OPEN') return 'up';
  if (s.startsWith('UP ')) return 'up-checking';
  if (s === 'DOWN') return 'down';
  if (s.startsWith('DOWN ')) return 'down-checking';
  if (s.startsWith('DRAIN') || s === 'NOLB') return 'drain';
  if (s.startsWith('MAINT')) return 'maint';
  return 'unknown';
}

/** A router's health in status: how many of its replicas HAProxy sends traffic to. */
export async function routerHealth(rec: {
  socket: string;
  backend: string;
  servers: readonly unknown[];
}): Promise<string> {
  try {
    const st = (await showStat(rec.socket, 1500)).filter((s) => s.backend === rec.backend);
    const up = st.filter((s) => serverState(s) === 'up').length;
    return up === rec.servers.length ? `healthy (${up}/${rec.servers.length} up)` : `${up}/${rec.servers.length} up`;
  } catch {
    return 'runtime API silent';
  }
}

/**
 * `show stat` (CSV) -> each BACKEND row's value in `column` (by the header; a row or header without it gives nothing).
 */
export function backendColumn(text: string, column: string): Array<{ backend: string; value: string }> {
  const lines = text.split('\n');
  const at = (lines[0] ?? '').replace(/^# /, '').split(',').indexOf(column);
  if (at < 0) return [];
  const out: Array<{ backend: string; value: string }> = [];
  for (const l of lines.slice(1)) {
    const f = l.split(',');
    if (f[1] === 'BACKEND' && f[0] && f[at] !== undefined) out.push({ backend: f[0], value: f[at] });
  }
  return out;
}

/**
 * `show proc` on the master CLI -> the pids of the current worker(s) and of the old ones still finishing their
 * connections.
 */
export function parseShowProc(text: string): { workers: number[]; old: number[] } {
  if (!/^#<PID>/m.test(text))
    throw new RouterApiError(`"show proc" answered without its header: ${JSON.stringify(text.slice(0, 120))}`);
  const out = { workers: [] as number[], old: [] as number[] };
  let into: number[] | undefined;
  for (const l of text.split('\n')) {
    if (l.startsWith('#')) {
      into = l.trim() === '# workers' ? out.workers : l.trim() === '# old workers' ? out.old : undefined;
      continue;
    }
    const m = /^(\d{1,9})\s+worker\s/.exec(l);
    if (into && m && Number(m[1]) > 1) into.push(Number(m[1]));
  }
  return out;
}

/**
 * `show stat` of every worker of a master-worker HAProxy, the current one first. After a reload the
 * stats socket answers for the new worker alone, while the old one still carries the connections it
 * had (a stream runs to its end there): what is in flight, and when a backend last had a request, is
 * the sum and the latest over all of them. An old worker that leaves meanwhile is left out; one that
 * stays and answers something else is an error (a count without it would be too low).
 */
export async function showStatEveryWorker(statsSocket: string, master: string, timeoutMs = 3000): Promise<string[]> {
  const [current, proc] = await Promise.all([
    runtimeCommand(statsSocket, 'show stat', timeoutMs),
    masterCommand(master, 'show proc', timeoutMs),
  ]);
  const texts = [current];
  for (const pid of parseShowProc(proc).old) {
    const text = await oldWorkerStat(master, pid, timeoutMs);
    if (text) texts.push(text);
  }
  return texts;
}

/**
 * One old worker's `show stat`, or undefined once it has left. A worker whose last connection ended
 * closes its CLI on the way out: for a moment (20-30 ms here) the master still lists it and passes
 * the command on, and the answer is empty; then "Can't find the target PID" (2.6), and `show proc`
 * drops it. So an empty answer is asked again for up to 500 ms; anything else is an error.
 */
async function oldWorkerStat(master: string, pid: number, timeoutMs: number): Promise<string | undefined> {
  const until = Date.now() + 500;
  for (;;) {
    const text = await masterCommand(master, `@!${pid} show stat`, timeoutMs);
    if (/^# pxname,/m.test(text)) return text;
    if (/^Can't find the target PID/.test(text.trim())) return undefined;
    if (text.trim() || Date.now() > until) {
      if (!parseShowProc(await masterCommand(master, 'show proc', timeoutMs)).old.includes(pid)) return undefined;
      throw new RouterApiError(
        `HAProxy's old worker ${pid} did not answer "show stat": ${JSON.stringify(text.slice(0, 120))}`,
      );
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
