// preflight and preflight --nodes are one report (issue 41): each check says what it saw, what it
// expected and the fix, a node's check names its node; both render their checks through one function
// (preflight/report.ts renderChecks, summaryLine) and list them in one JSON shape (checkJson). The
// nodes' report adds its matrix and fabric lines around the same checks.
import { describe, expect, it } from 'vitest';
import {
  checkJson,
  countChecks,
  renderChecks,
  renderReport,
  reportJson,
  summaryLine,
} from '../../src/preflight/report.js';
import { nodeChecks, nodesJson, nodesReport, renderNodesReport } from '../../src/verbs/preflight/nodes.js';
import type { NodeReport } from '../../src/preflight/nodes.js';
import type { PreflightReport } from '../../src/preflight/run.js';
import type { CheckOutcome } from '../../src/output/check.js';

const check = (over: Partial<CheckOutcome>): CheckOutcome => ({
  id: 'driver.version',
  area: 'driver',
  title: 'the driver',
  status: 'fail',
  observed: '550.54',
  expected: '>= 580',
  fix: 'install driver 580',
  blocking: true,
  durationMs: 3,
  ...over,
});

const hostReport = (checks: CheckOutcome[]): PreflightReport => ({
  host: 'h1',
  hostKind: 'real',
  platform: 'dgx-h100',
  platformReason: 'detected',
  checks,
  gpus: [],
  system: {} as PreflightReport['system'],
  summary: countChecks(checks),
  versions: { gpus: 0 },
  wallMs: 12,
  factsMs: 1,
});

const node = (name: string, checks: NonNullable<NodeReport['checks']>): NodeReport => ({
  node: name,
  address: '10.0.0.1',
  reached: true,
  ifaceName: 'eth0',
  platform: 'dgx-h100',
  summary: countChecks(checks),
  versions: {},
  checks,
});

describe('one host and the nodes: the same check renders the same, through one function', () => {
  it.each<[string, CheckOutcome]>([
    ['a failure: what it saw, what it expected, the fix', check({})],
    [
      'a warning',
      check({
        status: 'warn',
        id: 'cuda.version',
        area: 'cuda',
        observed: '12.2',
        expected: '12.4',
        fix: 'upgrade CUDA',
      }),
    ],
    [
      'a pass: what it saw only',
      check({ status: 'pass', id: 'gpu.count', area: 'gpu', observed: '8 GPUs', fix: undefined }),
    ],
    [
      'a skip',
      check({
        status: 'skip',
        id: 'ray.cluster',
        area: 'ray',
        observed: 'no cluster running',
        expected: '',
        fix: undefined,
      }),
    ],
  ])('%s', (_, k) => {
    const block = renderChecks([k]).join('\n');
    // one host: its checks, then the summary line
    const host = renderReport(hostReport([k]));
    expect(host).toContain(block);
    expect(host.endsWith(summaryLine({ summary: countChecks([k]), wallMs: 12 }))).toBe(true);
    // the nodes: the same check across the nodes renders the same lines, and the same summary line
    const nodes = renderNodesReport(nodesReport([], [k], {}, 12), 'preflight over 0 nodes', []);
    expect(nodes).toContain(block);
    expect(nodes.endsWith(summaryLine({ summary: countChecks([k]), wallMs: 12 }))).toBe(true);
    // and in JSON, the one shape of a check
    expect(JSON.parse(reportJson(hostReport([k]))).checks).toEqual([checkJson(k)]);
    expect(JSON.parse(nodesJson(nodesReport([], [k], {}, 12))).checks).toEqual([checkJson(k)]);
  });
});

describe("a node's own check is a report check that names its node", () => {
  const n3 = node('n3', [
    { id: 'driver.version', status: 'fail', observed: '550.54', expected: '>= 580', fix: 'install driver 580' },
    { id: 'gpu.count', status: 'pass', observed: '8 GPUs', expected: '8', fix: null },
    { id: 'cuda.version', status: 'warn', observed: '12.2', expected: '12.4', fix: 'upgrade CUDA' },
  ]);
  const r = nodesReport(
    [node('n0', [{ id: 'gpu.count', status: 'pass', observed: '8 GPUs', fix: null }]), n3],
    [check({ id: 'nodes.same-driver', area: 'nodes', observed: 'n3 has 550.54 (others: 580.1)' })],
    {},
    40,
  );

  it('text: its failures and warnings by the same renderer, with the node column; its passes are in the matrix', () => {
    const text = renderNodesReport(r, 'preflight over 2 nodes (nodes.yaml)', ['  n0  export X=1']);
    const shownNodeChecks = nodeChecks(n3).filter((k) => k.status !== 'pass');
    expect(text).toContain(renderChecks(shownNodeChecks).join('\n'));
    expect(text).toMatch(/(?:✗|FAIL)\s+n3\s+driver\.version\s+550\.54 \| expected: >= 580\n\s+fix: install driver 580/);
    expect(text).toMatch(/nodes\.same-driver\s+n3 has 550\.54 \(others: 580\.1\)/);
    expect(text).not.toMatch(/n0\s+gpu\.count\s+8 GPUs/);
    // the matrix, the fabric lines and the summary of every check (the passes included)
    expect(text).toMatch(/CHECK\s+n0\s+n3/);
    expect(text).toContain('  n0  export X=1');
    expect(text.endsWith('2 failed, 1 warnings, 2 passed, 0 skipped in 40 ms')).toBe(true);
  });

  it("JSON: every check in the preflight shape, a node's with its node; the fields tests pin are kept", () => {
    const j = JSON.parse(nodesJson(r));
    expect(j.kind).toBe('preflight-nodes');
    expect(j.checks).toContainEqual({
      id: 'driver.version',
      status: 'fail',
      observed: '550.54',
      expected: '>= 580',
      fix: 'install driver 580',
      durationMs: 0,
      node: 'n3',
    });
    expect(j.checks).toContainEqual({
      id: 'gpu.count',
      status: 'pass',
      observed: '8 GPUs',
      expected: '',
      fix: null,
      durationMs: 0,
      node: 'n0',
    });
    expect(j.summary).toEqual({ pass: 2, warn: 1, fail: 2, skip: 0 });
    expect(j.nodes.map((n: { node: string }) => n.node)).toEqual(['n0', 'n3']);
    expect(j.nodes[1].checks).toEqual({ 'driver.version': 'fail', 'gpu.count': 'pass', 'cuda.version': 'warn' });
    expect(j.nodes[1].failed).toEqual([{ id: 'driver.version', observed: '550.54', fix: 'install driver 580' }]);
    expect(j.cross).toEqual([
      {
        id: 'nodes.same-driver',
        status: 'fail',
        observed: 'n3 has 550.54 (others: 580.1)',
        expected: '>= 580',
        fix: 'install driver 580',
        blocking: true,
      },
    ]);
    expect(Object.keys(j)).toEqual(['version', 'kind', 'nodes', 'cross', 'fabric', 'checks', 'summary', 'wallMs']);
  });

  it("a node's words are shown escaped, never an escape sequence to the terminal", () => {
    const bad = nodesReport(
      [
        node('evil', [
          { id: 'gpu.count', status: 'fail', observed: '\u001b[2Jgone', expected: '8\u0007', fix: 'run \u009b reset' },
        ]),
      ],
      [],
      {},
      1,
    );
    const text = renderNodesReport(bad, 't', []);
    expect(text).toContain('\\x1b[2Jgone | expected: 8\\x07');
    expect(text).toContain('fix: run \\u009b reset');
    expect(text).not.toMatch(/[\u0007\u001b\u009b]\[2J|\u0007|\u009b/);
  });
});
