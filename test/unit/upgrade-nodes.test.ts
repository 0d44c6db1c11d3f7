// The in-place upgrade over nodes, decided (src/upgrade/nodes.ts): when the candidate stays, what the
// end of every path is (what serves, the status, the loud line where nothing healthy serves), the
// plan's words, the /version answer read as hostile; and the --set merge the record keeps.
import { describe, it, expect } from 'vitest';
import {
  afterCandidate,
  afterCanary,
  canaryNodesProblem,
  canaryRefusal,
  nodesEnd,
  nodesPlanLines,
  versionAnswer,
  sideVersion,
  currentUnfit,
  noService,
  recordMissingLeft,
  tagsReplacedLines,
  type CanaryRun,
  type NodesRun,
  type NodesServed,
} from '../../src/upgrade/nodes.js';
import {
  lastOfEach,
  nodesHelpSide,
  tagsNamed,
  upgradeNodes,
  type NodesUpgradeOptions,
} from '../../src/verbs/upgrade/nodes.js';
import type { ClusterRecord } from '../../src/engine/registry.js';
import { LaunchError, UsageError } from '../../src/errors.js';
import { flagChanges, flagsFields, type SideRead } from '../../src/upgrade/flag-defaults.js';
import { parseHelpAll } from '../../src/profiles/vllm-help.js';
import { helpArgv } from '../../src/upgrade/help-read.js';
import { compareSides } from '../../src/verbs/upgrade/help-tables.js';
import type { PlannedCluster } from '../../src/engine/cluster/index.js';
import { DEFAULT_THRESHOLDS } from '../../src/upgrade/judge.js';

describe('afterCandidate: the candidate stays only when it served healthy, passed, and --no-roll was not given', () => {
  const rows: Array<[NodesServed, boolean | undefined, boolean, 'keep' | 'back']> = [
    ['healthy', true, false, 'keep'],
    ['healthy', true, true, 'back'],
    ['healthy', false, false, 'back'],
    ['healthy', undefined, false, 'back'],
    ['unhealthy', undefined, false, 'back'],
    ['launch-failed', undefined, false, 'back'],
    ['refused', undefined, false, 'back'],
    ['interrupted', undefined, false, 'back'],
    // a verdict can never rescue a candidate that did not serve healthy
    ['unhealthy', true, false, 'back'],
  ];
  it.each(rows)('%s, pass %s, no-roll %s -> %s', (served, pass, noRoll, want) =>
    expect(afterCandidate(served, pass, noRoll)).toBe(want),
  );
});

describe('nodesEnd: every path ends saying what serves; nothing healthy serving is always loud', () => {
  const P = 'qwen3-200b';
  const F = '/etc/nodes.yaml';
  const K: CanaryRun = { name: 'qwen3-200b-canary', nodesFile: '/etc/spare.yaml' };
  const rows: Array<[string, NodesRun, { status: string; serving: string; loud?: RegExp }]> = [
    [
      'passed: the candidate stays',
      { noRoll: false, stopCurrent: {}, candidate: 'healthy', pass: true },
      { status: 'rolled', serving: 'candidate' },
    ],
    [
      'failed its comparison, previous served again',
      { noRoll: false, stopCurrent: {}, candidate: 'healthy', pass: false, stopCandidate: {}, previous: 'healthy' },
      { status: 'canary-failed', serving: 'previous' },
    ],
    [
      '--no-roll and passed: compared, previous again',
      { noRoll: true, stopCurrent: {}, candidate: 'healthy', pass: true, stopCandidate: {}, previous: 'healthy' },
      { status: 'compared', serving: 'previous' },
    ],
    [
      '--no-roll and failed: canary-failed',
      { noRoll: true, stopCurrent: {}, candidate: 'healthy', pass: false, stopCandidate: {}, previous: 'healthy' },
      { status: 'canary-failed', serving: 'previous' },
    ],
    [
      'candidate did not launch, previous again',
      { noRoll: false, stopCurrent: {}, candidate: 'launch-failed', stopCandidate: {}, previous: 'healthy' },
      { status: 'canary-failed', serving: 'previous' },
    ],
    [
      'candidate refused before launch, previous again',
      { noRoll: false, stopCurrent: {}, candidate: 'refused', stopCandidate: {}, previous: 'healthy' },
      { status: 'canary-failed', serving: 'previous' },
    ],
    [
      'candidate unhealthy, previous again',
      { noRoll: false, stopCurrent: {}, candidate: 'unhealthy', stopCandidate: {}, previous: 'healthy' },
      { status: 'canary-failed', serving: 'previous' },
    ],
    [
      'the running cluster did not stop whole: nothing started, loud',
      { noRoll: false, stopCurrent: { left: 'rank 2 on n2: unproven' } },
      {
        status: 'roll-failed',
        serving: 'unknown',
        loud: /did not stop whole \(rank 2 on n2: unproven\): nothing was started/,
      },
    ],
    [
      'stopped, candidate never started (interrupted): nothing serves, loud',
      { noRoll: false, stopCurrent: {}, interrupted: true },
      {
        status: 'interrupted',
        serving: 'none',
        loud: /^NOTHING SERVES qwen3-200b: .*sparkctl serve qwen3-200b --nodes \/etc\/nodes.yaml/,
      },
    ],
    [
      'candidate failed and would not stop: the previous is not served over it, loud',
      {
        noRoll: false,
        stopCurrent: {},
        candidate: 'healthy',
        pass: false,
        stopCandidate: { left: 'vLLM on n0: failed' },
      },
      {
        status: 'roll-failed',
        serving: 'candidate',
        loud: /the candidate did not stop whole \(vLLM on n0: failed\), so the previous pin was not served again/,
      },
    ],
    [
      'candidate failed, previous did not come back: nothing serves, loud, exit 4',
      {
        noRoll: false,
        stopCurrent: {},
        candidate: 'healthy',
        pass: false,
        stopCandidate: {},
        previous: 'launch-failed',
      },
      {
        status: 'roll-failed',
        serving: 'none',
        loud: /^NOTHING SERVES qwen3-200b: the candidate was stopped and the previous pin did not serve again \(launch-failed\)/,
      },
    ],
    [
      'previous back but its probe fails: said',
      { noRoll: false, stopCurrent: {}, candidate: 'launch-failed', stopCandidate: {}, previous: 'unhealthy' },
      { status: 'roll-failed', serving: 'previous-unhealthy', loud: /probe fails/ },
    ],
    [
      'interrupted during the candidate, previous served again',
      {
        noRoll: false,
        stopCurrent: {},
        candidate: 'interrupted',
        stopCandidate: {},
        previous: 'healthy',
        interrupted: true,
      },
      { status: 'interrupted', serving: 'previous' },
    ],
    [
      'interrupted while measuring the current: nothing stopped',
      { noRoll: false, interrupted: true },
      { status: 'interrupted', serving: 'previous' },
    ],
    // --canary-nodes: the canary on spare nodes decides first; the server is untouched unless it passed
    [
      'canary failed its comparison, stopped: nothing else changed',
      { noRoll: false, canary: { ...K, served: 'healthy', pass: false, stop: {} } },
      { status: 'canary-failed', serving: 'previous' },
    ],
    [
      'canary did not launch, stopped: nothing else changed',
      { noRoll: false, canary: { ...K, served: 'launch-failed', stop: {} } },
      { status: 'canary-failed', serving: 'previous' },
    ],
    [
      'canary unhealthy (its probe), stopped',
      { noRoll: false, canary: { ...K, served: 'unhealthy', stop: {} } },
      { status: 'canary-failed', serving: 'previous' },
    ],
    [
      'canary passed with --no-roll: compared, stopped, server untouched',
      { noRoll: true, canary: { ...K, served: 'healthy', pass: true, stop: {} } },
      { status: 'compared', serving: 'previous' },
    ],
    [
      'canary interrupted, stopped',
      { noRoll: false, interrupted: true, canary: { ...K, served: 'interrupted', stop: {} } },
      { status: 'interrupted', serving: 'previous' },
    ],
    [
      'canary failed and would not stop: loud, the stop to run named',
      { noRoll: false, canary: { ...K, served: 'healthy', pass: false, stop: { left: 'rank 1 on c1: unproven' } } },
      {
        status: 'canary-failed',
        serving: 'previous',
        loud: /the canary qwen3-200b-canary did not stop whole \(rank 1 on c1: unproven\): sparkctl stop qwen3-200b-canary --nodes \/etc\/spare.yaml/,
      },
    ],
    [
      'canary passed but would not stop: the server is not upgraded over it, exit 4, loud',
      { noRoll: false, canary: { ...K, served: 'healthy', pass: true, stop: { left: 'vLLM on c0: failed' } } },
      {
        status: 'roll-failed',
        serving: 'previous',
        loud: /did not stop whole .*qwen3-200b serves as before, not upgraded/,
      },
    ],
    [
      // review s7 F2: a canary served but whose record is not found was said "stopped" and left running
      'canary served healthy, its record not found at the stop: left (may still run), the stop named, exit 1',
      {
        noRoll: false,
        canary: {
          ...K,
          served: 'healthy',
          pass: false,
          stop: { left: recordMissingLeft('qwen3-200b-canary', 'healthy', undefined)! },
        },
      },
      {
        status: 'canary-failed',
        serving: 'previous',
        loud: /qwen3-200b-canary did not stop whole \(qwen3-200b-canary served healthy but no record of it is found: it may still run\): sparkctl stop qwen3-200b-canary --nodes \/etc\/spare.yaml/,
      },
    ],
    [
      'canary passed with --no-roll but would not stop: not an ok end (exit 4), loud',
      { noRoll: true, canary: { ...K, served: 'healthy', pass: true, stop: { left: 'rank 1 on c1: unproven' } } },
      {
        status: 'roll-failed',
        serving: 'previous',
        loud: /did not stop whole \(rank 1 on c1: unproven\): sparkctl stop qwen3-200b-canary/,
      },
    ],
    [
      'canary passed, stopped: the in-place upgrade decides (passed: the candidate stays)',
      {
        noRoll: false,
        canary: { ...K, served: 'healthy', pass: true, stop: {} },
        stopCurrent: {},
        candidate: 'healthy',
        pass: true,
      },
      { status: 'rolled', serving: 'candidate' },
    ],
    [
      'canary passed, the in-place candidate then failed: the previous served again',
      {
        noRoll: false,
        canary: { ...K, served: 'healthy', pass: true, stop: {} },
        stopCurrent: {},
        candidate: 'healthy',
        pass: false,
        stopCandidate: {},
        previous: 'healthy',
      },
      { status: 'canary-failed', serving: 'previous' },
    ],
  ];
  it.each(rows)('%s', (_, run, want) => {
    const end = nodesEnd(run, P, F);
    expect({ status: end.status, serving: end.serving }).toEqual({ status: want.status, serving: want.serving });
    if (want.loud) expect(end.loud).toMatch(want.loud);
    else expect(end.loud).toBeUndefined();
    // the rule behind every row: healthy service on either side, or a loud line
    if (end.serving !== 'candidate' && end.serving !== 'previous') expect(end.loud).toBeTruthy();
  });
});

// review s8: the canary's serve refused as bad input on the spare nodes ended as canary-failed, exit 1; the table says
// 2
describe('canaryRefusal: a canary refused as bad input when served on the spare nodes is bad input (exit 2), the server untouched', () => {
  const K = { name: 'p-canary', nodesFile: '/s.yaml' };
  const why = {
    message: 'SPARKCTL_RAY_JOIN_TIMEOUT_S: "soon" is not a whole number of seconds',
    details: ['unset it for the default (90)'],
  };
  it('refused, nothing left after its stop: a UsageError (exit 2) naming the file, the refusal, its fix and that the server serves as before', () => {
    const e = canaryRefusal({ ...K, served: 'refused', stop: {} }, why, false, 'p', ['n0', 'n1']);
    expect(e).toBeInstanceOf(UsageError);
    expect(e!.exitCode).toBe(2);
    expect(e!.message).toBe(
      '--canary-nodes /s.yaml: the candidate was refused on the spare nodes: SPARKCTL_RAY_JOIN_TIMEOUT_S: "soon" is not a whole number of seconds',
    );
    expect(e!.details).toEqual([
      'unset it for the default (90)',
      'p serves as before over n0, n1 (nothing of it was touched)',
    ]);
  });
  it.each<[string, Partial<CanaryRun>, typeof why | undefined, boolean]>([
    [
      'served and failed its comparison (exit 1 as before)',
      { served: 'healthy', pass: false, stop: {} },
      undefined,
      false,
    ],
    ['did not launch (exit 1 as before)', { served: 'launch-failed', stop: {} }, undefined, false],
    ['refused, but interrupted (Ctrl-C decides)', { served: 'refused', stop: {} }, why, true],
    [
      'refused, but its stop left something (said loudly by the end)',
      { served: 'refused', stop: { left: 'rank 1 on c1: unproven' } },
      why,
      false,
    ],
    ['refused, its stop not reached', { served: 'refused' }, why, false],
  ])('%s: the usual end decides', (_, c, refusal, interrupted) =>
    expect(canaryRefusal({ ...K, ...c }, refusal, interrupted, 'p', ['n0'])).toBeUndefined(),
  );
});

describe('afterCanary: the server is upgraded only after a canary that served healthy, passed, stopped whole, and no --no-roll', () => {
  const K = { name: 'p-canary', nodesFile: '/s.yaml' };
  const rows: Array<[Partial<CanaryRun>, boolean, 'in-place' | 'stop']> = [
    [{ served: 'healthy', pass: true, stop: {} }, false, 'in-place'],
    [{ served: 'healthy', pass: true, stop: {} }, true, 'stop'],
    [{ served: 'healthy', pass: false, stop: {} }, false, 'stop'],
    [{ served: 'healthy', stop: {} }, false, 'stop'],
    [{ served: 'unhealthy', pass: true, stop: {} }, false, 'stop'],
    [{ served: 'launch-failed', stop: {} }, false, 'stop'],
    [{ served: 'refused', stop: {} }, false, 'stop'],
    [{ served: 'interrupted', stop: {} }, false, 'stop'],
    [{ served: 'healthy', pass: true, stop: { left: 'rank 1 on c1: unproven' } }, false, 'stop'],
    [{}, false, 'stop'],
  ];
  it.each(rows)('%j, no-roll %s -> %s', (c, noRoll, want) => expect(afterCanary({ ...K, ...c }, noRoll)).toBe(want));
});

describe('recordMissingLeft: a side this run served, or whose record is unreadable, is never "stopped" for want of its record', () => {
  it.each<[NodesServed | undefined, string | undefined, RegExp | undefined]>([
    ['healthy', undefined, /p-canary served healthy but no record of it is found: it may still run/],
    ['unhealthy', undefined, /served unhealthy .*may still run/],
    // serve's own failed and interrupted ends stop the ranks and remove the record: nothing left
    ['launch-failed', undefined, undefined],
    ['interrupted', undefined, undefined],
    ['refused', undefined, undefined],
    [undefined, undefined, undefined],
    // a record file there but unreadable (a shape drift, a name over the record's limit) may be a running cluster's,
    // however it ended
    [
      'launch-failed',
      'profile: too long',
      /the record of p-canary cannot be read \(profile: too long\): it may still run/,
    ],
    [undefined, 'Unexpected token', /cannot be read/],
  ])('served %s, corrupt %s', (served, corrupt, want) => {
    const left = recordMissingLeft('p-canary', served, corrupt);
    if (want) expect(left).toMatch(want);
    else expect(left).toBeUndefined();
  });
});

// review s7 F4: a refusal after the candidate was copied over a node's tag said "nothing was stopped" and not that the
// tag moved
describe('after the copy: a refusal names the nodes whose tag the candidate replaced, and how to put each back', () => {
  const A = 'a'.repeat(64);
  const B = 'b'.repeat(64);
  const ref = 'registry.example/vllm:v0.18';
  it.each<[string, Array<{ node: string; had?: string; bytes: number }> | undefined, string[]]>([
    ['nothing copied', undefined, []],
    ['copied only where the reference was not there: no tag replaced', [{ node: 'n1', bytes: 5 }], []],
    [
      'two nodes held other builds under the reference, one did not',
      [
        { node: 'n0', had: A, bytes: 5 },
        { node: 'n1', bytes: 5 },
        { node: 'c0', had: B, bytes: 5 },
      ],
      [
        `the candidate was already copied over ${ref} on n0 (it held aaaaaaaaaaaa), c0 (it held bbbbbbbbbbbb): a plain serve there now runs the candidate`,
        `to put n0's tag back, on n0: podman tag ${A} ${ref}`,
        `to put c0's tag back, on c0: podman tag ${B} ${ref}`,
      ],
    ],
  ])('%s', (_, copied, want) => expect(tagsReplacedLines(copied, 'podman', ref)).toEqual(want));

  const copied = [{ node: 'n0', had: A, bytes: 5 }];
  it.each<[string, () => Error, number | undefined]>([
    [
      'a refusal (the second canary plan, the image-ID check): bad input, exit 2 kept',
      () => new UsageError('--canary-nodes /s.yaml: p-canary is already served', ['sparkctl stop p-canary']),
      2,
    ],
    [
      'the image moved here during the copy: exit 4 kept',
      () => new LaunchError('--image x: every node holds 1, here 2; nothing was stopped', []),
      4,
    ],
  ])('%s', async (_, err, code) => {
    const e = await tagsNamed(copied, 'podman', ref, async () => {
      throw err();
    }).catch((x: unknown) => x as UsageError);
    expect(e.exitCode).toBe(code);
    expect(e.details.slice(-2)).toEqual([
      `the candidate was already copied over ${ref} on n0 (it held aaaaaaaaaaaa): a plain serve there now runs the candidate`,
      `to put n0's tag back, on n0: podman tag ${A} ${ref}`,
    ]);
  });

  it('a bug (not a refusal) goes on as it was; a result passes through', async () => {
    const bug = new TypeError('x is undefined');
    await expect(tagsNamed(copied, 'podman', ref, async () => Promise.reject(bug))).rejects.toBe(bug);
    await expect(tagsNamed(copied, 'podman', ref, async () => 7)).resolves.toBe(7);
  });
});

describe('canaryNodesProblem: spare nodes share none with the server and hold its shape (TP x PP)', () => {
  const server = [
    { name: 'n0', address: '10.0.0.1' },
    { name: 'n1', address: '10.0.0.2' },
  ];
  const node = (name: string, address: string, gpus = 8) => ({ name, address, gpus });
  const shape = { tensor: 8, pipeline: 2 };
  const rows: Array<
    [string, ReturnType<typeof node>[], { tensor: number; pipeline: number }, RegExp | undefined, RegExp | undefined]
  > = [
    ['two spare nodes of 8 GPUs: fits', [node('c0', '10.0.1.1'), node('c1', '10.0.1.2')], shape, undefined, undefined],
    [
      'more GPUs than needed: fits',
      [node('c0', '10.0.1.1', 16), node('c1', '10.0.1.2', 16)],
      shape,
      undefined,
      undefined,
    ],
    [
      'a server node by name',
      [node('n1', '10.0.1.2'), node('c1', '10.0.1.3')],
      shape,
      /^--canary-nodes \/s\.yaml: n1 \(10\.0\.1\.2\) is also one of the server's nodes \(n0, n1\)$/,
      /spare nodes only/,
    ],
    [
      'a server node by address (another name, the same host)',
      [node('c0', '10.0.0.1'), node('c1', '10.0.1.2')],
      shape,
      /c0 \(10\.0\.0\.1\) is also one of the server's nodes/,
      /no name or address of the server's/,
    ],
    [
      "both nodes the server's",
      [node('n0', '10.0.0.1'), node('n1', '10.0.0.2')],
      shape,
      /n0 \(10\.0\.0\.1\), n1 \(10\.0\.0\.2\) are also one of the server's nodes/,
      undefined,
    ],
    [
      "one node: not the server's shape",
      [node('c0', '10.0.1.1', 16)],
      shape,
      /1 node\(s\); the server runs TP 8 x PP 2 = 16 GPUs over 2 nodes \(8 a node\)$/,
      /2 spare nodes with 8 GPUs or more each/,
    ],
    [
      "three nodes: not the server's shape",
      [node('c0', 'a'), node('c1', 'b'), node('c2', 'c')],
      shape,
      /3 node\(s\)/,
      undefined,
    ],
    [
      'a node short of GPUs',
      [node('c0', '10.0.1.1'), node('c1', '10.0.1.2', 4)],
      shape,
      /c1 has 4 GPU\(s\); each node runs 8 of TP 8 x PP 2 = 16$/,
      /8 GPUs or more each/,
    ],
    [
      'TP 2 x PP 1 over 2 nodes: 1 GPU a node is enough',
      [node('c0', 'a', 1), node('c1', 'b', 1)],
      { tensor: 2, pipeline: 1 },
      undefined,
      undefined,
    ],
  ];
  it.each(rows)('%s', (_, canary, sh, msg, fix) => {
    const p = canaryNodesProblem(server, canary, sh, '/s.yaml');
    if (!msg) return expect(p).toBeUndefined();
    expect(p?.message).toMatch(msg);
    if (fix) expect(p?.fix).toMatch(fix);
  });
});

/** An in-place plan over two nodes, 0.17.1 -> 0.28.0, as each plan-lines case starts from. */
const PLAN_BASE = {
  profile: 'p',
  nodesFile: '/n.yaml',
  nodes: ['n0', 'n1'],
  from: '0.17.1',
  to: '0.28.0',
  rollback: false,
  sets: [],
  thresholds: DEFAULT_THRESHOLDS,
  sameVersion: false,
};

describe('nodesPlanLines: in place, said before anything starts', () => {
  const base = PLAN_BASE;
  it('names the nodes, the window without service, the steps and the thresholds', () => {
    const l = nodesPlanLines({
      ...base,
      image: { ref: 'localhost/v:2', id: 'b'.repeat(64) },
      previousImage: 'a'.repeat(64),
    });
    expect(l[0]).toBe('p: upgrade plan over 2 nodes (n0, n1; /n.yaml)');
    expect(l.join('\n')).toContain(
      `image: localhost/v:2 -> ${'b'.repeat(64)} (the same image ID on every node, checked before anything stops`,
    );
    expect(l.join('\n')).toContain(
      `NO SERVICE from the stop of the running cluster until the candidate (or, on a failure, the previous pin ${'a'.repeat(12)}) is ready again`,
    );
    expect(l.join('\n')).toContain('similarity >= 0.6 (another vLLM version)');
    expect(l.join('\n')).toContain(
      `the previous pin ${'a'.repeat(12)} served again over all 2 nodes (exit 1, saying why)`,
    );
  });
  it('a rollback says so; one version: identical; auto said as read later', () => {
    const l = nodesPlanLines({ ...base, rollback: true, to: 'auto', sameVersion: true });
    expect(l[0]).toContain('rollback plan');
    expect(l.join('\n')).toContain("auto (the image's own: read from the candidate once it serves)");
    expect(l.join('\n')).toContain('chat template identical');
  });
  it('how the image gets to every node is said, one line each', () => {
    const l = nodesPlanLines({
      ...base,
      image: { ref: 'r:1', id: 'b'.repeat(64) },
      imageSteps: ['copied to n1 (holds another build aaaaaaaaaaaa)'],
    });
    expect(l[2]).toBe('  copied to n1 (holds another build aaaaaaaaaaaa)');
  });
  it('--canary-nodes: the canary beside the server first, the server untouched on a failure, then in place', () => {
    const l = nodesPlanLines({
      ...base,
      previousImage: 'a'.repeat(64),
      canary: { name: 'p-canary', nodes: ['c0', 'c1'], nodesFile: '/spare.yaml' },
    });
    const t = l.join('\n');
    expect(t).toContain(
      'CANARY on 2 spare nodes (c0, c1; /spare.yaml) as p-canary, beside the running server (it serves throughout the check)',
    );
    expect(t).toContain('serve the candidate over the 2 spare nodes, prewarmed, probed');
    expect(t).toContain('stop the canary; fail: nothing else changes (exit 1, saying why)');
    expect(t).toContain(
      `pass: the running server upgraded IN PLACE, all 2 nodes together: NO SERVICE from its stop until the candidate (or, on a failure, the previous pin ${'a'.repeat(12)}) is ready again`,
    );
    expect(t).not.toContain('no spare nodes given');
    // without one: in place only, and the flag that would give a canary named
    expect(nodesPlanLines(base).join('\n')).toContain('IN PLACE: no spare nodes given (--canary-nodes FILE)');
  });
});

describe('versionAnswer: GET /version read as hostile', () => {
  const rows: Array<[unknown, string | undefined]> = [
    [{ version: '0.17.1' }, '0.17.1'],
    [{ version: '0.27.2.dev0+g6adad0876.cpu' }, '0.27.2.dev0+g6adad0876.cpu'],
    [{ version: 17 }, undefined],
    [{ version: '' }, undefined],
    [{ version: 'v0.1' }, undefined],
    [{ version: '0.1; rm -rf /' }, undefined],
    [{ version: `0.${'1'.repeat(200)}` }, undefined],
    [['0.17.1'], undefined],
    [null, undefined],
    ['0.17.1', undefined],
  ];
  it.each(rows)('%j -> %s', (json, want) => expect(versionAnswer(json)).toBe(want));
  it('auto takes what the server says; a stated version stays', () => {
    expect(sideVersion('auto', '0.28.0')).toBe('0.28.0');
    expect(sideVersion('auto', undefined)).toBe('auto');
    expect(sideVersion('0.17.1', '0.28.0')).toBe('0.17.1');
  });
});

describe('lastOfEach: an upgrade --set on top of serve --set keeps one per field, the last', () => {
  it.each([
    [
      ['server.port=8000', 'engine.vllmVersion=0.17.1', 'engine.vllmVersion=0.28.0'],
      ['server.port=8000', 'engine.vllmVersion=0.28.0'],
    ],
    [
      ['env.A=1', 'env.B=2', 'env.A=3'],
      ['env.B=2', 'env.A=3'],
    ],
    [['container.image=x', 'container.image=y=z'], ['container.image=y=z']],
    [[], []],
  ])('%j -> %j', (sets, want) => expect(lastOfEach(sets)).toEqual(want));
});

describe('currentUnfit: a running cluster that cannot be compared against is not stopped', () => {
  const fit = {
    probe: { state: 'healthy', failed: [] as string[] },
    bench: { requests: 8, failed: 0, ttftP50Ms: 20, tpotP50Ms: 5, outputTokensPerS: 100 },
    golden: [{ name: 'arithmetic', text: '4' }],
    chatTemplate: [{ name: 'one user turn', tokens: [1, 2] }],
  };
  it.each([
    ['fit', fit, undefined],
    [
      'probe unhealthy',
      { ...fit, probe: { state: 'unhealthy', failed: ['kv-cache'] } },
      /deep probe is unhealthy \(kv-cache\)/,
    ],
    [
      'a golden prompt unanswered',
      { ...fit, golden: [{ name: 'arithmetic', error: 'HTTP 500' }] },
      /golden prompt "arithmetic" was not answered \(HTTP 500\)/,
    ],
    ['an empty answer is an answer', { ...fit, golden: [{ name: 'arithmetic', text: '' }] }, undefined],
    [
      'template not rendered',
      { ...fit, chatTemplate: [{ name: 'one user turn', error: 'HTTP 404' }] },
      /chat template \(one user turn\) was not rendered \(HTTP 404\)/,
    ],
    ['no bench', { ...fit, bench: undefined, benchError: 'timed out' }, /did not run \(timed out\)/],
    ['bench requests failed', { ...fit, bench: { ...fit.bench, failed: 2 } }, /had 2 failed request/],
  ])('%s', (_, m, want) => {
    const r = currentUnfit(m);
    if (want) expect(r).toMatch(want);
    else expect(r).toBeUndefined();
  });
});

describe('noService: the window without a healthy server, both windows on a way back', () => {
  it.each([
    ['nothing stopped', {}, 0],
    ['kept: stop to candidate ready', { stoppedAt: 100, candReadyAt: 1100 }, 1000],
    ['candidate never ready, previous back: one window', { stoppedAt: 100, stopCandAt: 900, prevReadyAt: 2100 }, 2000],
    [
      'candidate served, then back: two windows',
      { stoppedAt: 100, candReadyAt: 1100, stopCandAt: 5000, prevReadyAt: 5500 },
      1500,
    ],
    ['candidate never ready and nothing came back: no end', { stoppedAt: 100 }, undefined],
    ['back, previous never ready: no end', { stoppedAt: 100, candReadyAt: 1100, stopCandAt: 5000 }, undefined],
  ])('%s', (_, t, want) => expect(noService(t)).toBe(want));
});

describe("the plan over nodes: vLLM's own tables (serve --help=all), as the one-host plan shows them", () => {
  const base = PLAN_BASE;
  const read = (n: number): SideRead => ({
    what: 'podman run ... vllm serve --help=all',
    source: 'read',
    ms: 2500,
    options: n,
    withDefault: n,
    findings: [],
  });
  const help = (...opts: string[]) => parseHelpAll(`options:\n${opts.join('\n')}\n`);
  const A = help(
    '  --max-num-seqs MAX_NUM_SEQS\n                        Max seqs. (default: 256)',
    '  --old-knob X          Old. (default: 1)',
  );
  const B = help(
    '  --max-num-seqs MAX_NUM_SEQS\n                        Max seqs. (default: 128)',
    '  --old-knob X          [DEPRECATED] Please use --new-knob instead. (default: 1)',
    '  --new-knob X          New. (default: 1)',
  );
  const changes = flagChanges(A, B, ['--old-knob'], { current: read(2), candidate: read(3) }, () => 'engine.extraArgs');

  it('a changed default the profile relies on and a rename it renders: said after the vLLM line, with the fix', () => {
    const l = nodesPlanLines({ ...base, image: { ref: 'r:2', id: 'b'.repeat(64) }, flags: { changes } });
    const at = l.findIndex((x) => x.startsWith('  vLLM: 0.17.1 -> 0.28.0'));
    expect(l[at + 1]).toBe(
      "  vLLM's own tables (serve --help=all): 0.17.1: 2 options, 2 defaults (read in 2.5 s); 0.28.0: 3 options, 3 defaults (read in 2.5 s)",
    );
    expect(l).toContain(
      '    --max-num-seqs: default 256 -> 128 (your profile does not set it: the candidate will run with 128)',
    );
    expect(l.join('\n')).toContain(
      '--old-knob: renamed to --new-knob (vLLM 0.28.0\'s help: "[DEPRECATED] Please use --new-knob instead."); your profile renders it: change engine.extraArgs',
    );
    // the canary plan carries the same lines
    expect(
      nodesPlanLines({
        ...base,
        flags: { changes },
        canary: { name: 'p-canary', nodes: ['c0', 'c1'], nodesFile: '/s.yaml' },
      }).join('\n'),
    ).toContain('--max-num-seqs: default 256 -> 128');
  });
  it('not read: the reason said in its place; no flags given: no line (older callers)', () => {
    const l = nodesPlanLines({ ...base, flags: { why: 'the same vLLM (0.17.1) on both sides: the same tables' } });
    expect(l).toContain(
      "  vLLM's own tables (serve --help=all): not read (the same vLLM (0.17.1) on both sides: the same tables)",
    );
    expect(nodesPlanLines(base).join('\n')).not.toContain('serve --help=all');
  });
  it("the envelope's keys: flags (as the one-host upgrade-plan) or flags null with flagsNotRead", () => {
    const j = JSON.parse(JSON.stringify(flagsFields({ changes })));
    expect(Object.keys(j)).toEqual(['flags']);
    expect(j.flags.defaultsRelied).toEqual([{ flag: '--max-num-seqs', from: '256', to: '128' }]);
    expect(j.flags.renamed[0]).toMatchObject({
      from: '--old-knob',
      to: '--new-knob',
      by: 'candidate',
      rendered: true,
      field: 'engine.extraArgs',
    });
    expect(j.flags.candidate).toMatchObject({ source: 'read', options: 3 });
    expect(flagsFields({ why: 'x' })).toEqual({ flags: null, flagsNotRead: 'x' });
  });

  // where each side is asked over nodes: the image HERE by the ID every node holds, the simulator for native ranks,
  // else why not
  const inContainers = {
    steps: [
      {
        node: 'n0',
        address: 'a',
        argv: [],
        container: { cli: 'podman', cliArgs: ['--root', '/r'], image: 'x', name: 'c' },
      },
    ],
    resolved: { profile: { container: { cliArgs: ['--root', '/r'] } } },
  } as unknown as PlannedCluster;
  const native = {
    steps: [{ node: 'n0', address: 'a', argv: [] }],
    resolved: { profile: {} },
  } as unknown as PlannedCluster;
  it('an image: asked here by its ID, never pulled, no network, with the profile cliArgs', () => {
    const s = nodesHelpSide(inContainers, 'sim', '0.28.0', 'c'.repeat(64), 'candidate');
    expect(s.side).toEqual({
      kind: 'image',
      cli: 'podman',
      cliArgs: ['--root', '/r'],
      image: 'c'.repeat(64),
      id: 'c'.repeat(64),
    });
    const argv = helpArgv(s.side!, 'probe1');
    expect(argv).toEqual(
      expect.arrayContaining(['--pull=never', '--network=none', 'c'.repeat(64), 'serve', '--help=all']),
    );
    expect(argv.slice(0, 3)).toEqual(['podman', '--root', '/r']);
  });
  it('an image whose ID is not known here (a dry run that pulls nothing; ranks on different images): not read, why', () => {
    expect(nodesHelpSide(inContainers, 'vllm', '0.28.0', undefined, 'candidate')).toEqual({
      why: "the candidate image's ID is not known here (not pulled: --dry-run pulls nothing)",
    });
    expect(nodesHelpSide(inContainers, 'vllm', '0.17.1', undefined, 'current').why).toContain(
      'the ranks do not run one image',
    );
  });
  it("native ranks: the simulator plays the version; real vLLM on each node's host: not read, why", () => {
    expect(nodesHelpSide(native, 'sim', '0.12.0', undefined, 'current').side).toMatchObject({
      kind: 'sim',
      version: '0.12.0',
    });
    expect(nodesHelpSide(native, 'vllm', '0.12.0', undefined, 'current')).toEqual({
      why: "the current vLLM runs on each node's host: its install is not read by upgrade",
    });
  });
  it('a side with nothing to ask: nothing read, nothing compared, said', async () => {
    expect(
      await compareSides('/nonexistent', undefined, { kind: 'sim', version: '1', argv0: ['x'] }, [], {
        engine: {} as never,
      }),
    ).toEqual({ why: 'no current vLLM to ask' });
  });
});

describe("upgrade over nodes: the record's launch read by the registry's one reader (registry.ts readLaunch)", () => {
  const rec = {
    version: 1,
    executor: 'native',
    profile: 'big',
    nodesFile: '/etc/sparkctl/nodes.yaml',
    head: 'n0',
    pid: 4242,
    port: 8000,
    url: 'http://10.0.0.1:8000',
    servedName: 'big',
    logFile: '$HOME/x.log',
    startedAt: '2026-12-04T00:00:00.000Z',
  } as ClusterRecord;
  const refusal = async (launch: unknown) => {
    process.env.SPARKCTL_STATE_DIR ??= '/nonexistent-sparkctl-state';
    const e = await upgradeNodes(
      { ...rec, ...(launch === undefined ? {} : { launch }) } as ClusterRecord,
      {} as NodesUpgradeOptions,
    ).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(UsageError);
    return (e as UsageError).message;
  };

  it('none kept (a record from before): said so, and how to serve it so that it is kept', async () => {
    expect(await refusal(undefined)).toBe(
      'big is served over nodes (/etc/sparkctl/nodes.yaml) by a sparkctl that did not keep how it was served: upgrade cannot serve it again the same way',
    );
  });

  it('a launch of another shape: every field that is wrong named, nothing started', async () => {
    expect(await refusal({ asked: 1, sets: 'x', engine: 'vllm', prewarm: true })).toBe(
      "big's cluster record: its launch is not readable (asked: Expected string, received number; sets: Expected array, received string)",
    );
    // a host's launch record is not one over nodes
    expect(await refusal({ sets: [], vllm: { asked: 'auto', resolved: '0.11.0', how: 'installed' } })).toMatch(
      /^big's cluster record: its launch is not readable \(asked: Required; engine: Required; prewarm: Required\)$/,
    );
  });
});
