// A start over nodes, per rank (serve's one start record, engine/start.ts, with engine/cluster/rank-start.ts
// naming the node of a Ray-forwarded line): Ray's forwarded worker lines go to the node whose address
// they name; each rank's clock is its own; what a record kept is checked on read. The same record on
// one host (a clock per replica, the read-ahead and caches in each report; the events each says).
// The Ray prefix and wording are as vLLM logs them through Ray (vllm-project/vllm#11208:
// "(RayWorkerWrapper pid=2149832, ip=10.124.70.174) INFO 12-15 07:41:01 model_runner.py:1077] ...",
// "[repeated 4x across cluster]"); the phase lines are the format strings phases.ts names.
import { describe, it, expect } from 'vitest';
import { rankStarts, rayLineNode } from '../../src/engine/cluster/rank-start.js';
import { StartRecord, startReports } from '../../src/engine/start.js';
import type { ServeEvent } from '../../src/engine/events.js';
import { rankStartsOf } from '../../src/engine/start-shape.js';
import type { NodesFile } from '../../src/profiles/schema.js';

const node = (name: string, address: string, fabric?: string) => ({
  name,
  address,
  sshUser: 'root',
  gpus: 8,
  ...(fabric ? { fabric: { address: fabric, interface: 'ib0' } } : {}),
});
const nf = {
  head: node('spark-a', '192.168.1.10', '10.0.0.1'),
  workers: [node('spark-b', '192.168.1.11', '10.0.0.2'), node('spark-c', '192.168.1.12')],
  rayPort: 6379,
} as unknown as NodesFile;

describe('Ray: a worker actor line goes to the node its address names', () => {
  const t0 = 1_000_000;
  const lines: Array<[ms: number, line: string]> = [
    [2000, 'INFO 12-15 07:40:50 [core.py:61] Initializing a V1 LLM engine (v0.8.3) with config: ...'],
    // the driver's own worker (no ip=): the head's, not a worker node's
    [
      9000,
      '(RayWorkerWrapper pid=1358643) INFO 12-15 07:40:54 [gpu_model_runner.py:1802] Model loading took 3.88 GiB and 5.100000 seconds',
    ],
    // spark-b by its fabric address (Ray's --node-ip-address), behind EngineCore's own prefix
    [
      11000,
      '(EngineCore_DP0 pid=100) (RayWorkerWrapper pid=2149832, ip=10.0.0.2) INFO 12-15 07:41:01 [gpu_model_runner.py:1802] Model loading took 3.88 GiB and 7.250000 seconds',
    ],
    // spark-c has no fabric: its ssh address; Ray folded the same line of other nodes into this one
    [
      12000,
      '(RayWorkerWrapper pid=77, ip=192.168.1.12) INFO 12-15 07:41:02 [monitor.py:53] torch.compile takes 31.50 s in total [repeated 2x across cluster]',
    ],
    [
      13000,
      '(RayWorkerWrapper pid=2149832, ip=10.0.0.2) INFO 12-15 07:41:03 [gpu_model_runner.py:2625] Graph capturing finished in 4 secs, took 0.52 GiB',
    ],
    // an address that is no node of the file: nobody's
    [
      14000,
      '(RayWorkerWrapper pid=5, ip=10.9.9.9) INFO 12-15 07:41:04 [gpu_model_runner.py:1802] Model loading took 1.00 GiB and 1.000000 seconds',
    ],
    [20000, 'INFO:     Application startup complete.'],
  ];

  const rayLine = (s: StartRecord, line: string) => {
    const at = rayLineNode(nf, line);
    if (at) s.forwarded(at.index, at.node, line);
  };

  it('each node its own report, timed from the engine launch; the head keeps every line', async () => {
    const s = new StartRecord();
    const head = s.launched({ index: 0, server: 'x', node: 'spark-a', ready: true });
    Object.defineProperty(head, 't0', { value: t0 });
    for (const [ms, l] of lines) {
      head.line(l, t0 + ms);
      // rayLine times with Date.now(): the order is what matters here, the head's own clock the times
      rayLine(s, l);
    }
    const r = rankStarts(await s.reports());
    expect(r.map((x) => `${x.rank}:${x.node}`)).toEqual(['0:spark-a', '1:spark-b', '2:spark-c']);
    const b = r[1]!.start;
    expect(b.weights).toEqual({ gib: 3.88, seconds: 7.25 });
    expect(b.phases.map((p) => p.id)).toEqual(['process', 'weights', 'cuda-graphs']);
    expect(b.phases.find((p) => p.id === 'cuda-graphs')?.seconds).toBe(4);
    const c = r[2]!.start;
    expect(c.compile).toMatchObject({ seconds: 31.5 });
    expect(c.weights).toBeUndefined();
    // the head's report is the engine's (every line): a phase ends at its first end (the driver's own worker here), and
    // the API
    expect(r[0]!.start.phases.find((p) => p.id === 'weights')).toMatchObject({ atMs: 9000, seconds: 5.1 });
    expect(r[0]!.start.phases.find((p) => p.id === 'api')?.atMs).toBe(20000);
  });

  it('a line without a Ray prefix, or of the head itself (ip = the head), feeds no worker node', async () => {
    const s = new StartRecord();
    s.launched({ index: 0, server: 'x', node: 'spark-a', ready: true });
    rayLine(s, 'INFO 12-15 07:41:01 [gpu_model_runner.py:1802] Model loading took 3.88 GiB and 7.25 seconds');
    rayLine(
      s,
      '(RayWorkerWrapper pid=9, ip=10.0.0.1) INFO 12-15 07:41:01 [gpu_model_runner.py:1802] Model loading took 3.88 GiB and 7.25 seconds',
    );
    expect((await s.reports()).map((x) => x.node)).toEqual(['spark-a']);
  });

  it('native: each rank timed from its own launch; the first token is the head only', async () => {
    const s = new StartRecord();
    const h = s.launched({ index: 0, server: 'x', node: 'spark-a', ready: true });
    const w = s.launched({ index: 1, server: 'x', node: 'spark-b', ready: false });
    w.line('INFO 12-15 07:41:01 [serve.py:216] Launching vLLM (v0.17.0) headless multiproc executor', w.t0 + 1500);
    w.line(
      'INFO 12-15 07:41:09 [gpu_model_runner.py:1802] Model loading took 3.88 GiB memory and 7.25 seconds',
      w.t0 + 9000,
    );
    h.ready(h.t0 + 30_000);
    s.observe({ type: 'probe', replica: 'x', result: { inferenceMs: 12 } as never });
    s.observe({ type: 'prewarm-request', replica: 'x', request: { ok: false } as never });
    const [r0, r1] = rankStarts(await s.reports());
    expect(r0!.start.readyMs).toBe(30_000);
    expect(r0!.start.firstTokenMs).toBeGreaterThanOrEqual(0);
    expect(r1!.start.firstTokenMs).toBeUndefined();
    expect(r1!.start.phases.map((p) => [p.id, p.atMs])).toEqual([
      ['process', 1500],
      ['weights', 9000],
    ]);
  });
});

describe('the one start record: a clock per group, one way to say the reports, on one host and over nodes', () => {
  const said = () => {
    const events: ServeEvent[] = [];
    return { events, sink: (e: ServeEvent) => void events.push(e) };
  };

  it('on one host: a clock per replica, the first token by the replica the event names, the read-ahead and caches in each; said without rank or node', async () => {
    const s = new StartRecord({
      notes: ['start caches: /c'],
      readAhead: Promise.resolve({ skipped: 'the simulator reads no weights' }),
      caches: { dir: '/c', warm: true },
    });
    const a = s.launched({ index: 0, server: 'm-0', ready: true });
    const b = s.launched({ index: 1, server: 'm-1', ready: true });
    expect(s.clockOf('m-1')).toBe(b);
    s.observe({ type: 'prewarm-request', replica: 'm-1', request: { ok: true } as never });
    a.ready(a.t0 + 100);
    const { events, sink } = said();
    const r = await startReports(s, sink);
    expect(r.map((x) => [x.group, x.replica, x.node])).toEqual([
      [0, 'm-0', undefined],
      [1, 'm-1', undefined],
    ]);
    expect(r[0]!.start).toMatchObject({
      readyMs: 100,
      caches: { dir: '/c', warm: true },
      readAhead: { skipped: 'the simulator reads no weights' },
    });
    expect(r[0]!.start.firstTokenMs).toBeUndefined();
    expect(r[1]!.start.firstTokenMs).toBeGreaterThanOrEqual(0);
    // the one-host event names no rank and no node (its text and --json lines are what they were)
    expect(events.map((e) => Object.keys(e))).toEqual([
      ['type', 'replica', 'report'],
      ['type', 'replica', 'report'],
    ]);
    expect(s.notes).toEqual(['start caches: /c']);
  });

  it('over nodes: every rank said with its rank and node, in rank order; the record keeps {rank, node, start}', async () => {
    const s = new StartRecord();
    s.launched({ index: 1, server: 'x', node: 'spark-b', ready: false });
    s.launched({ index: 0, server: 'x', node: 'spark-a', ready: true });
    const { events, sink } = said();
    const r = rankStarts(await startReports(s, sink));
    expect(r.map((x) => Object.keys(x))).toEqual([
      ['rank', 'node', 'start'],
      ['rank', 'node', 'start'],
    ]);
    expect(events.map((e) => e.type === 'start' && [e.replica, e.rank, e.node])).toEqual([
      ['x', 0, 'spark-a'],
      ['x', 1, 'spark-b'],
    ]);
    // nothing prepared over nodes: no read-ahead or caches in a rank's report
    expect(r[0]!.start.readAhead).toBeUndefined();
    expect(r[0]!.start.caches).toBeUndefined();
  });

  it('a worker rank never takes the first token, even when an event names the endpoint it helps serve', async () => {
    const s = new StartRecord();
    s.launched({ index: 1, server: 'x', node: 'spark-b', ready: false });
    s.observe({ type: 'probe', replica: 'x', result: { inferenceMs: 3 } as never });
    expect((await s.reports())[0]!.start.firstTokenMs).toBeUndefined();
    expect(s.clockOf('x')).toBeUndefined();
  });
});

describe('rankStartsOf: a record is a file, hostile until checked', () => {
  const ok = { phases: [{ id: 'weights', atMs: 9000, seconds: 7.25 }] };
  it.each<[string, unknown, Array<[number, string]>]>([
    ['absent', undefined, []],
    ['not an array', { rank: 0 }, []],
    [
      'one good, one with a bad phase id, one with a negative rank, one with a huge node name',
      [
        { rank: 0, node: 'a', start: ok },
        { rank: 1, node: 'b', start: { phases: [{ id: 'rm -rf', atMs: 1 }] } },
        { rank: -1, node: 'c', start: ok },
        { rank: 2, node: 'x'.repeat(500), start: ok },
      ],
      [[0, 'a']],
    ],
    ['a start that is not an object', [{ rank: 3, node: 'd', start: 'fast' }], []],
    ['times out of range', [{ rank: 1, node: 'b', start: { phases: [{ id: 'api', atMs: -5 }] } }], []],
  ])('%s', (_, v, want) => {
    expect(rankStartsOf(v).map((x) => [x.rank, x.node])).toEqual(want);
  });
});
