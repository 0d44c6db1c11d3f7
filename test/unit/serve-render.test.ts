// serve's one renderer (src/verbs/serve/render.ts) and the one outcome (engine/events.ts) for a server
// over nodes: the outcome an executor returns (nodesOutcome) becomes the `serve --nodes --json`
// envelope with the same keys, in the same order, and the same values as before the union (stage b
// of issue 41); the text renderer says the node events as the multi-node serve always said them.
import { describe, it, expect, vi, afterEach } from 'vitest';
import type { Profile } from '../../src/profiles/schema.js';
import { nodesOutcome } from '../../src/engine/cluster/common.js';
import { failedBefore } from '../../src/engine/diagnose.js';
import { jsonRenderer, nodesEnvelope, textRenderer } from '../../src/verbs/serve/render.js';
import { exitCodeOf } from '../../src/errors.js';
import type { ClusterRecord } from '../../src/engine/registry.js';
import type { ProbeResult } from '../../src/health/probe.js';
import type { ServeEvent } from '../../src/engine/events.js';

const plan = {
  executor: 'native' as const,
  engine: 'sim' as const,
  nodesFile: '/abs/nodes.yaml',
  profile: { name: 'big' } as Profile,
  replica: { name: 'big-0', argv: [], env: {}, port: 8000 },
};
const record: ClusterRecord = {
  version: 1,
  executor: 'native',
  profile: 'big',
  nodesFile: '/abs/nodes.yaml',
  head: 'n0',
  pid: 4242,
  port: 8000,
  url: 'http://10.0.0.1:8000',
  servedName: 'big',
  logFile: '/var/log/big.log',
  startedAt: '2026-12-04T00:00:00.000Z',
  marker: 'm',
};
const probe = (state: 'healthy' | 'unhealthy') =>
  ({
    state,
    target: 'big (n0)',
    ms: 12,
    steps: [{ step: 'health', status: state === 'healthy' ? 'pass' : 'fail', detail: 'x' }],
  }) as unknown as ProbeResult;
const view = { nodes: 2, gpus: 16, complete: true };

const named = 'nodes.yaml';
const envelopeOf = (o: ReturnType<typeof nodesOutcome>) => JSON.parse(nodesEnvelope(o, exitCodeOf(o.status), named));

describe('serve over nodes: one outcome, the envelope as it was', () => {
  it.each([
    [
      'healthy',
      nodesOutcome(plan, { record, view, readyMs: 900, probe: probe('healthy') }),
      {
        status: 'healthy',
        exitCode: 0,
        failure: null,
        url: record.url,
        head: { node: 'n0', pid: 4242, logFile: '/var/log/big.log' },
        cluster: { nodes: 2, gpus: 16 },
        readyMs: 900,
        stop: 'sparkctl stop big --nodes nodes.yaml',
      },
    ],
    [
      'unhealthy: exit 1, still the stop command',
      nodesOutcome(plan, { record, view, readyMs: 900, probe: probe('unhealthy') }),
      { status: 'unhealthy', exitCode: 1, stop: 'sparkctl stop big --nodes nodes.yaml' },
    ],
    [
      'refused before anything started: exit 4, nothing of a head',
      nodesOutcome(plan, {
        failure: failedBefore('refused', 'big is already served on these nodes', [], {
          fix: 'stop it first',
          node: 'n0',
        }),
      }),
      {
        status: 'refused',
        exitCode: 4,
        failure: {
          message: 'big is already served on these nodes',
          fix: 'stop it first',
          evidence: [],
          node: 'n0',
          reason: 'refused',
          cause: 'refused',
          line: null,
        },
        url: null,
        head: null,
        cluster: null,
        readyMs: null,
        probe: null,
        stop: null,
      },
    ],
    [
      'a rank left before ready: exit 4, the head it had (native keeps the record in its failure)',
      nodesOutcome(plan, { failure: failedBefore('not-started', 'vLLM rank 1 on n1 exited', ['| boom']), record }),
      {
        status: 'launch-failed',
        exitCode: 4,
        failure: {
          message: 'vLLM rank 1 on n1 exited',
          fix: null,
          evidence: ['| boom'],
          node: null,
          reason: 'not-started',
          cause: 'not-started',
          line: null,
        },
        url: record.url,
        head: { node: 'n0', pid: 4242, logFile: '/var/log/big.log' },
        cluster: null,
        readyMs: null,
        stop: null,
      },
    ],
  ])('%s', (_, outcome, want) => {
    const env = envelopeOf(outcome);
    expect(env).toMatchObject({ version: 1, kind: 'serve', profile: 'big', engine: 'sim', nodesFile: named, ...want });
    // the keys scripts read, in the order serve --nodes --json always wrote them
    expect(Object.keys(env)).toEqual([
      'version',
      'kind',
      'status',
      'exitCode',
      'profile',
      'engine',
      'nodesFile',
      'failure',
      'url',
      'head',
      'cluster',
      'readyMs',
      'start',
      'ranks',
      'prewarm',
      'probe',
      'stop',
    ]);
  });

  it('the one-host envelope is untouched by the union: no nodes, the replicas form', () => {
    const out: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
    jsonRenderer((o) => exitCodeOf(o.status)).outcome({
      status: 'healthy',
      profile: 'one',
      engine: 'sim',
      replicas: [],
      stoppedAll: false,
    });
    spy.mockRestore();
    expect(Object.keys(JSON.parse(out.join('')))).toEqual([
      'version',
      'kind',
      'status',
      'exitCode',
      'profile',
      'engine',
      'failure',
      'replicas',
      'router',
    ]);
  });
});

describe('serve over nodes: the one text renderer', () => {
  const lines = { out: [] as string[], err: [] as string[] };
  afterEach(() => vi.restoreAllMocks());
  const capture = () => {
    lines.out = [];
    lines.err = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((s) => (lines.out.push(String(s)), true));
    vi.spyOn(process.stderr, 'write').mockImplementation((s) => (lines.err.push(String(s)), true));
  };

  it('node events: each rank started, phases sparse per node, ready over the nodes, probe; the stop line names the file as given', () => {
    process.env.NO_COLOR = '1';
    capture();
    const r = textRenderer({ profile: 'big', simulated: true, nodes: named });
    const events: ServeEvent[] = [
      { type: 'launched', replica: 'big-0', pid: 11, port: 8000, gpus: [], logFile: '/l0', node: 'n0', rank: 0 },
      { type: 'launched', replica: 'big-0', pid: 12, port: 8000, gpus: [], logFile: '/l1', node: 'n1', rank: 1 },
      { type: 'ranks-joined', nodes: 2, gpus: 16 },
      { type: 'phase', replica: 'big-0', node: 'n0', phase: 'loading weights 10%' },
      { type: 'phase', replica: 'big-0', node: 'n0', phase: 'loading weights 50%' },
      { type: 'phase', replica: 'big-0', node: 'n0', phase: 'loading weights 100%' },
      { type: 'ready', replica: 'big-0', node: 'n0', ms: 1500, url: record.url, cluster: { nodes: 2, gpus: 16 } },
      { type: 'probe', replica: 'big-0', node: 'n0', result: probe('healthy') },
    ];
    for (const e of events) r.event(e);
    r.outcome(nodesOutcome(plan, { record, view, readyMs: 1500, probe: probe('healthy') }));
    const err = lines.err.join('');
    const out = lines.out.join('');
    expect(err).toContain('vLLM rank 0 started on n0 (pid 11, log /l0)');
    expect(err).toContain('vLLM rank 1 started on n1 (pid 12, log /l1)');
    expect(err).toContain('all 2 ranks joined (16 GPUs)');
    expect(err).toContain('n0: loading weights 10%');
    expect(err).not.toContain('loading weights 50%');
    expect(err).toContain('n0: loading weights 100%');
    expect(out).toMatch(/ready.*: big over 2 nodes \(16 GPUs\) in .*: http:\/\/10\.0\.0\.1:8000\/v1/);
    expect(out).toContain('probe: ');
    expect(out).toContain('stop with: sparkctl stop big --nodes nodes.yaml');
    // nothing of the one-host table (replica rows, "replica(s) in")
    expect(out).not.toContain('replica(s)');
  });

  it('a failure over nodes: what failed, its fix and evidence; no stop line', () => {
    capture();
    const r = textRenderer({ profile: 'big', simulated: true, nodes: named });
    r.event({ type: 'cleanup', node: 'n1', what: 'ray stopped' });
    r.outcome(
      nodesOutcome(plan, {
        failure: failedBefore('not-started', 'node n1 failed to join', ['last line'], {
          fix: 'check the fabric',
          node: 'n1',
        }),
      }),
    );
    const err = lines.err.join('');
    expect(err).toContain('cleanup: n1: ray stopped');
    expect(err).toMatch(/launch failed.*: node n1 failed to join/);
    expect(err).toContain('fix: check the fabric');
    expect(err).toContain('  | last line');
    expect(lines.out.join('')).not.toContain('stop with');
  });
});
