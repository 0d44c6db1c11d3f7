// What HAProxy counts after a reload, with real HAProxy (2.6) in master-worker mode, as the gateway
// runs it: the stats socket answers for the new worker alone, so a stream the old worker still
// carries reads as 0 in flight there (the on-demand room plan then evicted a model under its
// stream, and the idle timer could put one to sleep). showStatEveryWorker asks the master CLI for
// the old workers and each of them for its own `show stat`. The backend is a plain Node HTTP server
// that streams slowly; nothing here is simulated.
import { describe, it, expect, afterAll } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import {
  masterCommand,
  parseShowProc,
  parseShowStat,
  runtimeCommand,
  showStatEveryWorker,
} from '../../src/router/api.js';
import { freePortRange, waitFor } from '../helpers.js';
import { tempDir } from '../temp-dirs.js';

const HAPROXY = '/usr/sbin/haproxy';
const have = existsSync(HAPROXY);
if (!have) console.warn(`haproxy-workers e2e skipped: ${HAPROXY} is not installed (apt-get install haproxy)`);

let haproxy: ChildProcess | undefined;
let backend: Server | undefined;
afterAll(async () => {
  haproxy?.kill('SIGKILL');
  await new Promise<void>((r) => (backend ? backend.close(() => r()) : r()));
});

/** in flight on backend `b` by every `show stat` text given */
const inFlight = (texts: string[]) =>
  texts
    .flatMap(parseShowStat)
    .filter((s) => s.backend === 'b')
    .reduce((n, s) => n + s.scur + s.qcur, 0);

describe.skipIf(!have)('HAProxy master-worker: what is in flight after a reload', () => {
  it('a stream on the old worker: 0 on the stats socket, 1 over every worker; 0 once it ended and the old worker left', async () => {
    const dir = tempDir('sparkctl-hap-workers-');
    const port = await freePortRange(2);
    // the backend: a response that writes a line every 100 ms until the test lets it end
    let release!: () => void;
    const ended = new Promise<void>((r) => (release = r));
    backend = createServer((_q, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const t = setInterval(() => res.write('x\n'), 100);
      void ended.then(() => {
        clearInterval(t);
        res.end();
      });
    }).listen(port + 1, '127.0.0.1');
    const stats = join(dir, 'api.sock');
    const master = join(dir, 'master.sock');
    const cfg = join(dir, 'haproxy.cfg');
    writeFileSync(
      cfg,
      [
        'global',
        `    stats socket ${stats} mode 600 level admin expose-fd listeners`,
        'defaults',
        '    mode http',
        '    timeout connect 5s',
        '    timeout client 60s',
        '    timeout server 60s',
        'frontend f',
        `    bind 127.0.0.1:${port}`,
        '    default_backend b',
        'backend b',
        `    server s1 127.0.0.1:${port + 1}`,
        '',
      ].join('\n'),
    );
    haproxy = spawn(HAPROXY, ['-W', '-db', '-S', `${master},mode,600`, '-f', cfg], { stdio: 'ignore' });
    expect(
      await waitFor(
        async () => (await runtimeCommand(stats, 'show info', 1000).catch(() => '')).includes('Pid:'),
        10_000,
        50,
      ),
    ).toBe(true);

    const ac = new AbortController();
    const res = await fetch(`http://127.0.0.1:${port}/`, { signal: ac.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    await reader.read();
    expect(inFlight(await showStatEveryWorker(stats, master))).toBe(1);

    // the reload: a new worker takes the listeners, the old one keeps the stream
    const before = parseShowProc(await masterCommand(master, 'show proc')).workers;
    haproxy.kill('SIGUSR2');
    expect(
      await waitFor(
        async () => {
          const p = parseShowProc(await masterCommand(master, 'show proc', 1000).catch(() => '#<PID>'));
          return p.old.length === 1 && p.workers.length === 1 && p.workers[0] !== before[0];
        },
        10_000,
        50,
      ),
      'an old worker and a new one',
    ).toBe(true);
    // the new worker's socket took over: it sees nothing of the stream
    expect(
      await waitFor(
        async () =>
          inFlight([await runtimeCommand(stats, 'show stat', 1000)]) === 0 &&
          !(await runtimeCommand(stats, 'show info', 1000)).includes(`Pid: ${before[0]}\n`),
        10_000,
        50,
      ),
    ).toBe(true);
    expect(inFlight([await runtimeCommand(stats, 'show stat')]), 'the stats socket alone, after the reload').toBe(0);
    const every = await showStatEveryWorker(stats, master);
    expect(every).toHaveLength(2);
    expect(inFlight(every), 'every worker, after the reload').toBe(1);
    // the stream still flows, through the old worker
    expect((await reader.read()).done).toBe(false);

    // the stream ends: the old worker leaves, and nothing is in flight
    release();
    while (!(await reader.read()).done) {
      /* drain */
    }
    expect(
      await waitFor(
        async () => parseShowProc(await masterCommand(master, 'show proc', 1000)).old.length === 0,
        15_000,
        100,
      ),
      'the old worker left',
    ).toBe(true);
    const after = await showStatEveryWorker(stats, master);
    expect(after).toHaveLength(1);
    expect(inFlight(after)).toBe(0);
  }, 60_000);
});
