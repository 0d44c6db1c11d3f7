// The router's pure parts: the plan (ports), the HAProxy config text, `show stat` parsing, how a
// server state reads, the probe's verdict on the backend, and what a rolling restart refuses.
import { describe, it, expect } from 'vitest';
import { existsSync, writeFileSync, rmSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Profile, RouterBlock } from '../../src/profiles/schema.js';
import { loadProfile } from '../../src/profiles/load.js';
import { resolveLoaded } from '../../src/profiles/resolve.js';
import { planRouter, renderConfig, routerMetricsEndpoint, routerPorts } from '../../src/profiles/router.js';
import { backendColumn, parseShowProc, parseShowStat, serverState } from '../../src/router/api.js';
import { judgeRouter } from '../../src/router/probe.js';
import { checkRollable } from '../../src/router/rolling.js';
import { buildServePlan, withRouterFlag } from '../../src/engine/plan.js';
import { conflictsWith } from '../../src/engine/serve.js';
import { vllmArgs } from '../../src/profiles/render.js';
import type { Instance } from '../../src/engine/registry.js';
import { tempDir } from '../temp-dirs.js';

const base = (router: unknown, server: Record<string, unknown> = {}) =>
  Profile.parse({
    name: 'm',
    model: { id: 'x/y', parameters: 1e9, layers: 2, attentionHeads: 4, kvHeads: 2, headDim: 8, maxContext: 4096 },
    server: { port: 8000, ...server },
    ...(router === undefined ? {} : { router }),
  });

describe('router plan: ports', () => {
  it.each([
    // [router block, replicas, public, replica ports, stats]
    [{}, 4, 8000, [8001, 8002, 8003, 8004], 8005],
    [{ replicaPort: 9100 }, 2, 8000, [9100, 9101], 9102],
    [{ replicaPort: 9100, statsPort: 8404 }, 3, 8000, [9100, 9101, 9102], 8404],
    [{}, 1, 8000, [8001], 8002],
  ])('%j x %i replicas', (router, n, pub, ports, stats) => {
    const r = planRouter(base(router), n, '/state')!;
    expect(r.bind).toEqual({ host: '127.0.0.1', port: pub });
    expect(r.servers.map((s) => s.port)).toEqual(ports);
    expect(r.servers.every((s) => s.host === '127.0.0.1')).toBe(true);
    expect(r.stats.port).toBe(stats);
    expect(routerPorts(r)).toEqual([pub, stats]);
    expect(routerMetricsEndpoint(r).url).toBe(`http://127.0.0.1:${stats}/metrics`);
    expect(r.socket).toBe('/state/router/m/api.sock');
  });

  it('no router: block, or enabled: false -> no router, replicas keep server.port + i on server.host', () => {
    expect(planRouter(base(undefined), 2, '/s')).toBeUndefined();
    expect(planRouter(base({ enabled: false }), 2, '/s')).toBeUndefined();
    expect(vllmArgs(base(undefined), 1)).toEqual(expect.arrayContaining(['--port', '8001', '--host', '127.0.0.1']));
    // behind the router, the replica listens on loopback only
    const a = vllmArgs(base({}), 1);
    expect(a.slice(a.indexOf('--port'), a.indexOf('--port') + 4)).toEqual(['--port', '8002', '--host', '127.0.0.1']);
  });

  it.each([
    [{ replicaPort: 7999 }, 2, /replica m-1 would listen on 8000, the router's public port/],
    [{ statsPort: 8002 }, 4, /router.statsPort: 8002 is replica m-1's port/],
    [{ statsPort: 8000 }, 1, /8000 is the router's public port/],
    [{ replicaPort: 65535 }, 2, /would need port 65536/],
  ])('collisions are bad input naming the field: %j', (router, n, msg) => {
    let err: { message: string; hints?: string[] } | undefined;
    try {
      planRouter(base(router), n, '/s');
    } catch (e) {
      err = e as { message: string; hints?: string[] };
    }
    expect(err?.message).toMatch(/the router's ports collide/);
    expect(JSON.stringify(err)).toMatch(msg);
  });

  it('--router turns a router on with the defaults; a profile router: keeps its settings', () => {
    const loaded = loadProfile('qwen3.5-9b', { sets: ['parallel.replicas=2'] });
    const r = resolveLoaded(loaded);
    expect(withRouterFlag(r, false)).toBe(r);
    expect(withRouterFlag(r, true).profile.router).toMatchObject({ enabled: true, checkIntervalMs: 2000 });
    const plan = buildServePlan(r, {
      engine: 'sim',
      vllmBin: 'vllm',
      prewarm: false,
      router: true,
      stateDir: '/tmp/x',
    });
    expect(plan.router?.servers.map((s) => s.port)).toEqual([8001, 8002]);
    expect(plan.replicas.map((p) => p.port)).toEqual([8001, 8002]);
    // a running server on the stats port is a collision, like one on a replica's
    const live = {
      name: 'other-0',
      profile: 'other',
      port: 8003,
      pid: 5,
      engine: 'vllm',
      gpus: [7],
    } as unknown as Instance;
    expect(conflictsWith(plan, [live])).toEqual([
      "port 8003, the router's stats and Prometheus exporter's (router.statsPort, default after the last replica): held by other-0 (profile other, pid 5); fix: --set router.statsPort=N, or sparkctl stop other",
    ]);
    // a replica moved behind the router onto a running server's port: the router, the port, the holder and the fix
    const dev = {
      name: 'qwen-dev-0',
      profile: 'qwen-dev',
      port: 8002,
      pid: 6,
      engine: 'vllm',
      gpus: [7],
    } as unknown as Instance;
    expect(conflictsWith(plan, [dev])).toEqual([
      "port 8002, qwen3.5-9b-1's: with the router qwen3.5-9b-router on 8000, the replicas move to router.replicaPort (default server.port + 1) + 1: held by qwen-dev-0 (profile qwen-dev, pid 6); fix: --set router.replicaPort=N (the first of the replicas' loopback ports behind the router), or sparkctl stop qwen-dev",
    ]);
  });
});

describe('router config text', () => {
  // replicas on loopback ports (router.replicaSocket false); on vLLM's --uds: router-uds.test.ts
  const plan = planRouter(
    base({ checkIntervalMs: 1000, serverTimeoutSeconds: 3600, maxConnPerReplica: 64, replicaSocket: false }),
    2,
    '/state',
  )!;
  const text = renderConfig(plan, { socket: plan.socket, logStdout: true });
  it.each([
    [`balance hash req.body,regsub('"(?s)^.*?\\"(messages|prompt|input)\\"\\s*:\\s*"',''),bytes(0,1024)`],
    ['hash-type consistent'],
    ['hash-balance-factor 150'],
    ['option httpchk GET /health'],
    ['http-check expect status 200'],
    ['option http-keep-alive'],
    // each SSE chunk sent as it comes (issue 42 item 15: without it the first token came ~40 ms late here, ~190 ms on a
    // GPU host)
    ['option http-no-delay'],
    ['http-reuse safe'],
    ['timeout server 3600s'],
    ['timeout client 300s'],
    ['timeout tunnel 3600s'],
    ['timeout queue 60s'],
    ['default-server check inter 1000ms fastinter 250ms downinter 1000ms fall 2 rise 2 maxconn 64'],
    ['server m-0 127.0.0.1:8001'],
    ['server m-1 127.0.0.1:8002'],
    ['bind 127.0.0.1:8000'],
    ['bind 127.0.0.1:8003'],
    ['http-request use-service prometheus-exporter if { path /metrics }'],
    ['stats socket /state/router/m/api.sock mode 600 level admin'],
    ['retry-on conn-failure empty-response'],
  ])('has %s', (line) => expect(text.split('\n').map((l) => l.trim())).toContain(line));

  it('router.balance leastconn: no hash; prefixBytes and hashBalanceFactor reach the lines; out-of-range values are refused', () => {
    const lc = renderConfig(planRouter(base({ balance: 'leastconn' }), 2, '/state')!).split('\n');
    expect(lc).toContain('    balance leastconn');
    expect(lc.join('\n')).not.toMatch(/hash/);
    const tuned = renderConfig(planRouter(base({ prefixBytes: 4096, hashBalanceFactor: 125 }), 2, '/state')!);
    expect(tuned).toContain(',bytes(0,4096)');
    expect(tuned).toContain('hash-balance-factor 125');
    for (const bad of [{ hashBalanceFactor: 100 }, { prefixBytes: 8 }, { balance: 'random' }])
      expect(() => RouterBlock.parse(bad)).toThrow();
  });

  it('nothing that buffers or rewrites a stream, and no key or Authorization anywhere', () => {
    expect(text).not.toMatch(/compression|http-buffer-response|Authorization|api[-_]?key|Bearer/i);
  });

  it('without a socket (an operator HAProxy) no stats socket line; logs to syslog', () => {
    const t = renderConfig(plan);
    expect(t).not.toContain('stats socket');
    expect(t).toContain('log /dev/log local0');
  });

  it('an IPv6 bind is bracketed; a value that could add a directive is refused', () => {
    const v6 = planRouter(base({}, { host: '::' }), 1, '/s')!;
    expect(renderConfig(v6)).toContain('bind [::]:8000');
    const bad = { ...plan, servers: [{ name: 'm-0\n    server evil 10.0.0.1:80', host: '127.0.0.1', port: 8001 }] };
    expect(() => renderConfig(bad)).toThrow(/characters a config line cannot hold/);
  });

  it.skipIf(!existsSync('/usr/sbin/haproxy'))(
    'HAProxy itself accepts it (haproxy -c), with and without the socket',
    () => {
      const d = tempDir('router-cfg-');
      try {
        for (const [i, t] of [
          renderConfig(
            { ...plan, bind: { host: '127.0.0.1', port: 8000 } },
            { socket: join(d, 'api.sock'), logStdout: true },
          ),
          renderConfig(plan),
        ].entries()) {
          writeFileSync(join(d, `${i}.cfg`), t);
          expect(execFileSync('/usr/sbin/haproxy', ['-c', '-f', join(d, `${i}.cfg`)], { encoding: 'utf8' })).toMatch(
            /Configuration file is valid/,
          );
        }
      } finally {
        rmSync(d, { recursive: true, force: true });
      }
    },
  );
});

// A real capture (test/fixtures/router/SOURCE.md): m-0 UP, m-1 DOWN (refused), m-2 DRAIN.
const CAPTURE = readFileSync(new URL('../fixtures/router/show-stat-2.6.csv', import.meta.url), 'utf8');
const [HEADER_LINE, ...ROWS] = CAPTURE.split('\n').filter(Boolean);
const HEADER = `${HEADER_LINE}\n`;
const M0 = ROWS.find((r) => r.startsWith('replicas,m-0,'))!;
/** A server row of the capture, renamed and with its status (and check) replaced, fields by the header. */
const row = (sv: string, scur: number, status: string, check = 'L7OK', lastChk = '') => {
  const cols = HEADER_LINE!.slice(2).split(',');
  const f = M0.split(',');
  const set = (k: string, v: string) => (f[cols.indexOf(k)] = v);
  set('svname', sv);
  set('scur', String(scur));
  set('status', status);
  set('check_status', check);
  set('last_chk', lastChk);
  return `${f.join(',')}\n`;
};

// `show proc` on HAProxy 2.6.12's master CLI (haproxy -W -S), captured here after one reload while a
// stream was still on the first worker
const SHOW_PROC = `#<PID>          <type>          <reloads>       <uptime>        <version>
11413           master          2 [failed: 0]   0d00h00m30s     2.6.12-1+deb12u3
# workers
11628           worker          0               0d00h00m01s     2.6.12-1+deb12u3
# old workers
11481           worker          1               0d00h00m19s     2.6.12-1+deb12u3
# programs

`;

describe('show proc (the master CLI): the current and the old workers', () => {
  it.each([
    ['a real capture after a reload', SHOW_PROC, { workers: [11628], old: [11481] }],
    ['no old worker', SHOW_PROC.replace(/# old workers\n.*\n/, '# old workers\n'), { workers: [11628], old: [] }],
    [
      'a program is not a worker',
      `${SHOW_PROC}4242            program         0               0d00h00m19s     -\n`,
      { workers: [11628], old: [11481] },
    ],
    [
      'the master, pid 1 and a pid too long are never a worker',
      SHOW_PROC.replace('11481 ', '1     ').replace('11628 ', '12345678901 '),
      { workers: [], old: [] },
    ],
    [
      'two old workers',
      SHOW_PROC.replace(
        '# programs',
        '11500           worker          2               0d00h00m09s     2.6.12\n# programs',
      ),
      { workers: [11628], old: [11481, 11500] },
    ],
  ])('%s', (_name, text, want) => expect(parseShowProc(text)).toEqual(want));

  it.each([[''], ['Unknown command.'], ['# workers\n11628 worker 0\n']])(
    'an answer without its header is an error, never "no old worker": %j',
    (text) => expect(() => parseShowProc(text)).toThrow(/without its header/),
  );
});

describe('show stat: a BACKEND column (the gateway reads qcur and lastsess by it)', () => {
  const CSV = '# pxname,svname,qcur,lastsess\nb1,s1,4,2\nb1,BACKEND,3,7\nb2,BACKEND,,-1\n,BACKEND,9,9\nb3,BACKEND\n';
  it.each([
    [
      'qcur',
      [
        { backend: 'b1', value: '3' },
        { backend: 'b2', value: '' },
      ],
    ],
    [
      'lastsess',
      [
        { backend: 'b1', value: '7' },
        { backend: 'b2', value: '-1' },
      ],
    ],
    ['no-such-column', []],
  ])('%s: the BACKEND rows only, a nameless or short row left out', (column, want) =>
    expect(backendColumn(CSV, column)).toEqual(want),
  );
});

describe('show stat', () => {
  it('reads the server rows of a real capture by its header (not FRONTEND/BACKEND)', () => {
    const st = parseShowStat(CAPTURE);
    expect(st.map((s) => [s.backend, s.server, s.status, serverState(s), s.checkStatus, s.lastCheck, s.scur])).toEqual([
      ['replicas', 'm-0', 'UP', 'up', 'L7OK', '', 0],
      ['replicas', 'm-1', 'DOWN', 'down', 'L4CON', 'Connection refused', 0],
      ['replicas', 'm-2', 'DRAIN', 'drain', 'L7OK', '', 0],
    ]);
    expect(st[1]!.chkdown).toBeGreaterThanOrEqual(1);
  });

  it('counters by their column: scur, qcur', () => {
    const st = parseShowStat(HEADER + row('m-9', 7, 'UP'));
    expect(st[0]).toMatchObject({ server: 'm-9', scur: 7, status: 'UP' });
  });

  it.each([
    ['', /without its CSV header/],
    ['Unknown command. Please enter one of the following commands only :', /without its CSV header/],
    ['# pxname,svname,qcur\nreplicas,m-0,0\n', /no scur column/],
  ])('a hostile answer is an error, never an empty healthy list: %j', (text, msg) =>
    expect(() => parseShowStat(text)).toThrow(msg),
  );

  it('a truncated row is skipped, not half read', () => {
    expect(parseShowStat(`${HEADER}replicas,m-0,0,0\n${row('m-1', 1, 'UP')}`).map((s) => s.server)).toEqual(['m-1']);
  });

  it.each([
    ['UP', 'up'],
    ['no check', 'up'],
    ['UP 1/2', 'up-checking'],
    ['DOWN', 'down'],
    ['DOWN 1/2', 'down-checking'],
    ['DRAIN', 'drain'],
    ['NOLB', 'drain'],
    ['MAINT', 'maint'],
    ['MAINT (via replicas/m-0)', 'maint'],
    ['MAINT (resolution)', 'maint'],
    ['garbage', 'unknown'],
  ])('status %j reads %s', (status, want) => expect(serverState({ status })).toBe(want));
});

describe('the probe: the backend as HAProxy sees it', () => {
  const rec = {
    socket: '/s',
    configFile: '/c',
    backend: 'replicas',
    statsPort: 8005,
    servers: [0, 1, 2].map((i) => ({ name: `m-${i}`, host: '127.0.0.1', port: 8001 + i })),
  };
  const stats = (statuses: string[]) =>
    parseShowStat(
      HEADER +
        statuses
          .map((s, i) => row(`m-${i}`, 0, s, s === 'DOWN' ? 'L4CON' : 'L7OK', s === 'DOWN' ? 'Connection refused' : ''))
          .join(''),
    );
  it.each([
    [['UP', 'UP', 'UP'], 'pass', /3\/3 replicas UP/],
    [['UP', 'DOWN', 'UP'], 'fail', /marked 1 of 3 replica\(s\) down: m-1 \(port 8002\) DOWN: L4CON Connection refused/],
    [
      ['UP', 'MAINT', 'UP'],
      'fail',
      /1 of 3 replica\(s\) in MAINT \(out of rotation\): m-1 \(port 8002\) MAINT: L7OK; fix: sparkctl restart PROFILE/,
    ],
    [['UP', 'UP', 'DRAIN'], 'warn', /2\/3 UP; m-2 \(port 8003\) DRAIN/],
    [['UP', 'UP 1/2', 'DRAIN'], 'warn', /1\/3 UP/],
    [['MAINT', 'MAINT', 'DRAIN'], 'fail', /no replica takes traffic/],
    [['UP', 'UP'], 'fail', /m-2 \(port 8003\) missing/],
  ])('%j -> %s', (st, status, detail) => {
    const { step, view } = judgeRouter(rec, stats(st));
    expect(step.status).toBe(status);
    expect(step.detail).toMatch(detail);
    expect(view.servers).toHaveLength(3);
  });
});

describe('rolling restart: what it refuses', () => {
  const loaded = loadProfile('qwen3.5-9b', { sets: ['parallel.replicas=2'] });
  const plan = buildServePlan(resolveLoaded(loaded), {
    engine: 'sim',
    vllmBin: 'vllm',
    prewarm: false,
    router: true,
    stateDir: '/tmp/x',
  });
  const tcp = buildServePlan(
    resolveLoaded(loadProfile('qwen3.5-9b', { sets: ['parallel.replicas=2', 'router.replicaSocket=false'] })),
    {
      engine: 'sim',
      vllmBin: 'vllm',
      prewarm: false,
      router: true,
      stateDir: '/tmp/x',
    },
  );
  const sock = (i: number) => `/tmp/x/router/qwen3.5-9b/qwen3.5-9b-${i}.sock`;
  const router = (servers: Array<{ name: string; port: number; uds?: string }>) =>
    ({
      name: 'qwen3.5-9b-router',
      router: {
        socket: '/s',
        configFile: '/c',
        backend: 'replicas',
        statsPort: 1,
        servers: servers.map((s) => ({ ...s, host: '127.0.0.1' })),
      },
    }) as unknown as Instance;
  it('the same servers: fine', () => {
    expect(() =>
      checkRollable(
        tcp,
        router([
          { name: 'qwen3.5-9b-0', port: 8001 },
          { name: 'qwen3.5-9b-1', port: 8002 },
        ]),
      ),
    ).not.toThrow();
    expect(() =>
      checkRollable(
        plan,
        router([
          { name: 'qwen3.5-9b-0', port: 8001, uds: sock(0) },
          { name: 'qwen3.5-9b-1', port: 8002, uds: sock(1) },
        ]),
      ),
    ).not.toThrow();
  });
  it('a router on ports and a plan on sockets (or back): the servers change, so no rolling restart', () => {
    expect(() =>
      checkRollable(
        plan,
        router([
          { name: 'qwen3.5-9b-0', port: 8001 },
          { name: 'qwen3.5-9b-1', port: 8002 },
        ]),
      ),
    ).toThrow(
      /now has 2 replica\(s\) on unix:\/tmp\/x\/router\/qwen3\.5-9b\/qwen3\.5-9b-0\.sock,.*the running router balances qwen3\.5-9b-0:8001/,
    );
    expect(() =>
      checkRollable(
        tcp,
        router([
          { name: 'qwen3.5-9b-0', port: 8001, uds: sock(0) },
          { name: 'qwen3.5-9b-1', port: 8002, uds: sock(1) },
        ]),
      ),
    ).toThrow(/the running router balances/);
  });
  it.each([
    [[{ name: 'qwen3.5-9b-0', port: 8001 }]],
    [
      [
        { name: 'qwen3.5-9b-0', port: 8001 },
        { name: 'qwen3.5-9b-1', port: 9002 },
      ],
    ],
    [[]],
  ])('a profile edited to another layout: bad input with the way out (%j)', (servers) => {
    expect(() => checkRollable(tcp, router(servers))).toThrow(/the running router balances/);
  });
});
