// What stopping the router may claim: drained only when no request was still running; the cut
// count from the connections HAProxy still held at the deadline; its outcome in HAProxy's words,
// not vLLM's; a log rotated away never names the server "x.log (deleted)".
import { describe, it, expect } from 'vitest';
import { parseTcp } from '../../src/engine/runtime/socket-owner.js';
import { splitConnections, judgeDeadline } from '../../src/router/stop.js';
import { logTarget } from '../../src/engine/registry.js';
import { requestsText, outcomeLine } from '../../src/verbs/stop/run.js';
import { routerDrainSeconds } from '../../src/profiles/router.js';
import { routerDrainMsOf, ROUTER_DRAIN_MS, heldText, type StopOutcome } from '../../src/engine/stop.js';

const HEAD = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode';
// local 127.0.0.1:8000 (0x1F40), stats 8005 (0x1F45), replica 8001 (0x1F41)
const row = (sl: number, local: string, remote: string, st: string, inode: string) =>
  `   ${sl}: ${local} ${remote} ${st} 00000000:00000000 00:00000000 00000000  1000        0 ${inode} 1 0000000000000000 100 0 0 10 0`;
const TCP = [
  HEAD,
  row(0, '0100007F:1F40', '00000000:0000', '0A', '100'), // public listener
  row(1, '0100007F:1F45', '00000000:0000', '0A', '101'), // stats listener
  row(2, '0100007F:1F40', '0100007F:C350', '01', '102'), // a client on the public port
  row(3, '0100007F:1F40', '0100007F:C351', '01', '103'), // another
  row(4, '0100007F:D6D8', '0100007F:1F41', '01', '104'), // HAProxy -> replica
  row(5, '0100007F:1F40', '0100007F:C352', '01', '999'), // the client's own end (another process)
  row(6, '0100007F:1F40', '0100007F:C353', '06', '105'), // TIME_WAIT: not a connection
  'garbage line',
].join('\n');
const TCP6 = [
  HEAD,
  row(0, '00000000000000000000000001000000:1F40', '00000000000000000000000001000000:C360', '01', '106'),
].join('\n');

describe('the connections HAProxy holds, from /proc/net/tcp', () => {
  const ours = new Set(['100', '101', '102', '103', '104', '105', '106']);
  it('listening ports and established connections of its own sockets only', () => {
    const v = parseTcp([TCP, TCP6], ours);
    expect([...v.listening].sort()).toEqual([8000, 8005]);
    expect(v.established).toEqual([
      { localPort: 8000, remotePort: 50000 },
      { localPort: 8000, remotePort: 50001 },
      { localPort: 55000, remotePort: 8001 },
      { localPort: 8000, remotePort: 50016 },
    ]);
  });
  it('a missing file (null) or no sockets of ours: nothing', () => {
    expect(parseTcp([null, null], ours)).toEqual({ listening: new Set(), established: [] });
    expect(parseTcp([TCP], new Set())).toEqual({ listening: new Set(), established: [] });
  });
  it('clients are the connections on its listening ports (read before the soft stop closes them); the rest go to the replicas', () => {
    const v = parseTcp([TCP, TCP6], ours);
    expect(splitConnections(v, v.listening)).toEqual({ clients: 3, servers: 1 });
    // after the soft stop it listens on nothing: the ports read before still tell clients from servers
    const after = parseTcp([TCP.replace(/ 0A /g, ' 07 '), TCP6], ours);
    expect(after.listening.size).toBe(0);
    expect(splitConnections(after, new Set([8000, 8005]))).toEqual({ clients: 3, servers: 1 });
  });
});

describe('the drain deadline: cut or not', () => {
  it.each([
    [
      { clients: 0, servers: 0 },
      { cut: 0, idleClosed: 0 },
    ],
    // answers that ended during the stop leave their connections idle (keep-alive): not cut
    [
      { clients: 3, servers: 0 },
      { cut: 0, idleClosed: 3 },
    ],
    // a request still runs on a replica: every client connection left counts as cut (no finer view from outside)
    [
      { clients: 2, servers: 1 },
      { cut: 2, idleClosed: 0 },
    ],
    [
      { clients: 0, servers: 2 },
      { cut: 0, idleClosed: 0 },
    ],
    // the kernel's view could not be read: nothing to judge by, so neither "drained" nor a count
    [undefined, undefined],
  ])('%j -> %j', (at, want) => expect(judgeDeadline(at)).toEqual(want));
});

describe('stop output for a router: HAProxy words, never vLLM', () => {
  const base: StopOutcome = {
    name: 'p-router',
    pid: 42,
    result: 'stopped',
    recovered: false,
    degraded: false,
    requests: { kind: 'none' },
    evidence: [],
    graceMs: 30_000,
    ms: 1234,
    portFree: true,
    groupLeft: 0,
    gpuHolders: [],
    removed: true,
    forgotten: false,
  };
  it.each([
    [
      { kind: 'router-drained', connections: 2, inFlight: 1, idleClosed: 0 },
      'drained: all 2 open client connections finished; HAProxy had 1 request in flight',
    ],
    [
      { kind: 'router-drained', connections: 0, inFlight: 0, idleClosed: 0 },
      'drained: no client connection was open; HAProxy had 0 requests in flight',
    ],
    [
      { kind: 'router-drained', connections: 1, idleClosed: 1 },
      'drained: the 1 open client connection finished; 1 idle keep-alive connection closed at the deadline',
    ],
    [{ kind: 'router-drained', idleClosed: 0 }, 'drained: every open client connection finished'],
    [
      { kind: 'router-cut', cut: 1, connections: 3 },
      'CUT 1 client connection with a request still running at the drain deadline (of 3 open at the soft stop): stop --grace longer, or router.drainTimeoutSeconds',
    ],
    [
      { kind: 'router-unknown', inFlight: 2 },
      "HAProxy's connections could not be read (/proc/net/tcp) at the drain deadline: whether the hard stop cut a request is not known (HAProxy had 2 in flight at the soft stop)",
    ],
  ] as const)('%j', (r, text) => {
    expect(requestsText(r)).toBe(text);
    expect(requestsText(r)).not.toMatch(/vLLM/);
  });
  it.each([
    [
      { routerEnd: 'soft-stop', requests: { kind: 'router-drained', connections: 1, idleClosed: 0 } },
      'p-router: soft-stopped (SIGUSR1) in 1.2 s: drained: the 1 open client connection finished; port free',
    ],
    [
      { routerEnd: 'hard-stop', requests: { kind: 'router-cut', cut: 2, connections: 2 } },
      'p-router: soft stop did not end within 30 s: hard stop (SIGTERM): CUT 2 client connections with a request still running at the drain deadline (of 2 open at the soft stop): stop --grace longer, or router.drainTimeoutSeconds; port free',
    ],
    [
      { routerEnd: 'SIGKILL', result: 'killed', requests: { kind: 'router-cut', cut: 1 } },
      /^p-router: soft stop did not end within 30 s, nor the hard stop: killed \(SIGKILL\): CUT 1 client connection /,
    ],
  ] as const)('outcome line %#', (o, want) => {
    const line = outcomeLine({ ...base, ...(o as Partial<StopOutcome>) });
    if (typeof want === 'string') expect(line).toBe(want);
    else expect(line).toMatch(want);
    expect(line).not.toMatch(/vLLM/);
  });
  it('a server whose log was rotated away: said so once, without the kernel suffix', () => {
    const line = outcomeLine({ ...base, name: 'qwen3.5-9b-3', logDeleted: true, requests: { kind: 'unknown' } });
    expect(line).toMatch(/^qwen3\.5-9b-3: stopped \(SIGTERM\)/);
    expect(line).toMatch(/its log was deleted while it ran \(rotated away\?\): its shutdown lines are lost$/);
    expect(line).not.toContain('(deleted)');
  });
  // the one reading of "released everything" (stop's exit code, restart's refusal, the rolling
  // restart's out-of-rotation): a container the runtime could not remove counts, as the port does
  it.each([
    [{}, undefined],
    [{ result: 'unproven' as const, portFree: false }, undefined],
    [{ portFree: false }, 'port still in use'],
    [{ portFree: false, uds: '/run/x.sock' }, 'socket still in use'],
    [{ groupLeft: 2, gpuHolders: [7, 9] }, '2 process(es) of its group left; GPU still held by 7,9'],
    [
      { held: 'its container 0123456789ab was not removed (podman rm: Error: container is in use)' },
      'its container 0123456789ab was not removed (podman rm: Error: container is in use)',
    ],
  ] as const)('heldText %#', (o, want) => {
    const r = { ...base, ...(o as Partial<StopOutcome>) };
    expect(heldText(r)).toBe(want);
    if (r.held)
      expect(outcomeLine(r)).toMatch(
        /; port free; its container 0123456789ab was not removed \(podman rm: Error: container is in use\)$/,
      );
  });
});

describe("a log's link in /proc: the kernel's (deleted) suffix", () => {
  it.each([
    ['/s/logs/qwen3.5-9b-3.log (deleted)', [], { file: '/s/logs/qwen3.5-9b-3.log', deleted: true }],
    ['/s/logs/qwen3.5-9b-3.log', ['/s/logs/qwen3.5-9b-3.log'], { file: '/s/logs/qwen3.5-9b-3.log', deleted: false }],
    // a file really named so (it exists under the whole name) keeps its name
    ['/s/logs/odd.log (deleted)', ['/s/logs/odd.log (deleted)'], { file: '/s/logs/odd.log (deleted)', deleted: false }],
    ['/s/logs/x.log(deleted)', [], { file: '/s/logs/x.log(deleted)', deleted: false }],
  ])('%s', (link, existing, want) => expect(logTarget(link, (p) => existing.includes(p))).toEqual(want));
});

describe("the router's drain on stop", () => {
  const p = (shutdown: number, drain?: number) =>
    ({ server: { shutdownTimeoutSeconds: shutdown }, router: drain ? { drainTimeoutSeconds: drain } : {} }) as never;
  it.each([
    [30, undefined, 30],
    [120, undefined, 120],
    [0, undefined, 30],
    [30, 600, 600],
  ])('server.shutdownTimeoutSeconds %i, router.drainTimeoutSeconds %s -> %i s', (s, d, want) =>
    expect(routerDrainSeconds(p(s, d))).toBe(want),
  );
  it('the recorded drain, else the default', () => {
    expect(routerDrainMsOf({ shutdownTimeoutSeconds: 90 })).toBe(90_000);
    expect(routerDrainMsOf({})).toBe(ROUTER_DRAIN_MS);
    expect(routerDrainMsOf({ shutdownTimeoutSeconds: -1 })).toBe(ROUTER_DRAIN_MS);
  });
});
