import { describe, it, expect, vi } from 'vitest';
import { diagnose, failedBefore } from '../../src/engine/diagnose.js';
import { endedOnNodes, headFailure, nodesOutcome } from '../../src/engine/cluster/common.js';
import { nodesEnvelope, textRenderer } from '../../src/verbs/serve/render.js';
import { exitCodeOf } from '../../src/errors.js';
import type { Profile } from '../../src/profiles/schema.js';

const OOM =
  'INFO loading\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB\n';
const BIND = 'INFO starting\nOSError: [Errno 98] Address already in use\n';

describe('diagnose(result, log): one explanation for one node and a Ray head', () => {
  it.each([
    [
      'exited + OOM in the log',
      { reason: 'exited', detail: 'exited with code 1 before it was ready', ms: 10 },
      OOM,
      { causeId: 'cuda-oom', cause: /out of GPU memory/, evidence: /OutOfMemoryError/ },
    ],
    [
      'exited + bind error',
      { reason: 'exited', detail: 'exited with code 1', ms: 10 },
      BIND,
      { causeId: 'port-in-use', cause: /port is already in use/, evidence: /Errno 98/ },
    ],
    [
      'stalled, nothing in the log',
      { reason: 'stalled', detail: 'no log output for 61 s', ms: 61_000 },
      'INFO Loading safetensors checkpoint shards:  50%\n',
      { causeId: 'stalled', cause: /stopped logging while loading/, fix: /stallTimeoutSeconds/ },
    ],
    [
      'timeout, nothing in the log',
      { reason: 'timeout', detail: 'not ready after 900 s', ms: 900_000 },
      'INFO still loading\n',
      { causeId: 'timeout', cause: /longer than the ready timeout/, fix: /--ready-timeout 30m/ },
    ],
    [
      'not ours',
      { reason: 'not-ours', detail: 'another process', ms: 1 },
      '',
      { causeId: 'not-ours', cause: /not the one sparkctl started/, fix: /ss -ltnp/ },
    ],
    // The hang is named from where the log stopped (vLLM's own wording, ray_utils.py), not "raise the timeout".
    [
      'stalled at a Ray placement-group wait',
      { reason: 'stalled', detail: 'no log output for 16 s', ms: 16_000 },
      "INFO Initializing a Ray cluster\nINFO Waiting for creating a placement group of specs for 10 seconds. specs=[{'GPU': 1.0, 'node:10.0.0.1': 0.001}, {'GPU': 1.0}]. Check `ray status` and `ray list nodes` to see if you have enough resources, and make sure the IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each node if you are running on a multi-node.\n",
      { causeId: 'ray-placement-group', cause: /Ray cannot place the workers/, fix: /ray status/ },
    ],
    [
      'timeout at the P2P access check',
      { reason: 'timeout', detail: 'not ready after 900 s', ms: 900_000 },
      'INFO custom_all_reduce_utils.py:234] generating GPU P2P access cache in /root/.cache/vllm/gpu_p2p_access_cache_for_0,1.json\n',
      { causeId: 'p2p-hang', fix: /NCCL_P2P_DISABLE=1/ },
    ],
    [
      'interrupted: no cause is invented',
      { reason: 'interrupted', detail: 'interrupted', ms: 1 },
      OOM,
      { causeId: 'interrupted' },
    ],
  ] as const)('%s', (_, result, log, want) => {
    const d = diagnose(result, log);
    expect(d.reason).toBe(result.reason);
    expect(d.detail).toBe(result.detail);
    expect(d.causeId).toBe(want.causeId);
    if ('cause' in want) expect(d.cause).toMatch(want.cause);
    if ('fix' in want) expect(d.fix).toMatch(want.fix);
    if ('evidence' in want) expect(d.evidence).toMatch(want.evidence);
    if (result.reason === 'interrupted') expect(d.cause).toBeUndefined();
  });

  it('quotes the last lines, blank lines dropped, at most keepLines', () => {
    const log = Array.from({ length: 50 }, (_, i) => `line ${i}`).join('\n\n');
    const d = diagnose({ reason: 'exited', detail: 'x', ms: 1 }, log, 5);
    expect(d.lastLines).toEqual(['line 45', 'line 46', 'line 47', 'line 48', 'line 49']);
  });
});

// One failure shape for both placements (issue 41): a server over nodes is diagnosed from its head's
// (or a rank's) log exactly as a replica on this host is, and the failure names the node. Before, the
// nodes path kept only a sentence, a fix and the lines (NodeFailure): no cause id, no evidence line.
describe('over nodes: the same diagnosis, naming the node', () => {
  const nf = { head: { name: 'n0' } } as Parameters<typeof headFailure>[0]['nf'];
  const nodesPlan = {
    executor: 'native' as const,
    engine: 'vllm' as const,
    nodesFile: '/abs/nodes.yaml',
    profile: { name: 'big' } as Profile,
    replica: { name: 'big-0', argv: [], env: {}, port: 8000 },
  };

  it.each([
    [
      'exited with an OOM in the head log',
      { reason: 'exited', detail: 'exited with code 1', ms: 10 } as const,
      OOM,
      'cuda-oom',
      /OutOfMemoryError/,
      /^vLLM on n0 exited before it was ready: .*out of GPU memory/,
    ],
    [
      'stalled at a Ray placement-group wait',
      { reason: 'stalled', detail: 'no log output for 16 s (stall timeout): stuck loading?', ms: 16_000 } as const,
      "INFO Waiting for creating a placement group of specs for 10 seconds. specs=[{'GPU': 1.0}]. Check `ray status` and `ray list nodes` to see if you have enough resources\n",
      'ray-placement-group',
      /placement group/,
      /^vLLM on n0 no log output for 16 s \(stall timeout\): stuck loading\?: Ray cannot place/,
    ],
    [
      'timeout, nothing in the log',
      { reason: 'timeout', detail: 'not ready after 900 s (ready timeout)', ms: 900_000 } as const,
      'INFO still loading\n',
      'timeout',
      undefined,
      /^vLLM on n0 was not ready after 900 s: /,
    ],
  ])('%s: the cause id, the line and the fix of one host, the node named', (_, r, log, causeId, line, detail) => {
    const one = diagnose(r, log);
    const f = headFailure({ nf }, r, log);
    expect(f).toMatchObject({ reason: r.reason, causeId, node: 'n0' });
    expect(f.detail).toMatch(detail);
    // everything one host's diagnosis says of the same log, the nodes path says too
    for (const k of ['causeId', 'cause', 'fix', 'evidence', 'lastLines'] as const) expect(f[k]).toEqual(one[k]);
    if (line) expect(f.evidence).toMatch(line);
    else expect(f.evidence).toBeUndefined();
  });

  it('several ranks ended: the first whose log names a cause gives the cause id, its line and its node', () => {
    const parts = [
      { node: 'n1', d: diagnose({ reason: 'exited', detail: 'x', ms: 0 }, 'INFO nothing to see\n') },
      { node: 'n2', d: diagnose({ reason: 'exited', detail: 'x', ms: 0 }, OOM) },
    ];
    const f = endedOnNodes(
      parts,
      'vLLM rank 1 on n1 exited\nvLLM rank 2 on n2 exited',
      ['n1: a', 'n2: b'],
      'read its log',
    );
    expect(f).toMatchObject({
      reason: 'exited',
      causeId: 'cuda-oom',
      node: 'n2',
      detail: 'vLLM rank 1 on n1 exited\nvLLM rank 2 on n2 exited',
      lastLines: ['n1: a', 'n2: b'],
    });
    expect(f.evidence).toMatch(/OutOfMemoryError/);
    expect(f.fix).toBe(parts[1]!.d.fix);
    // no log named a cause: the first rank, its reason as the id, the fix given
    const none = endedOnNodes([parts[0]!], 'vLLM rank 1 on n1 exited', [], 'read its log');
    expect(none).toMatchObject({ causeId: 'exited', node: 'n1', fix: 'read its log' });
    expect(none.evidence).toBeUndefined();
  });

  it('a failure before the watch: its reason is its cause id, no line', () => {
    expect(
      failedBefore('refused', 'big is already served on these nodes', [], { fix: 'stop it first', node: 'n0' }),
    ).toEqual({
      reason: 'refused',
      detail: 'big is already served on these nodes',
      causeId: 'refused',
      fix: 'stop it first',
      lastLines: [],
      node: 'n0',
    });
  });

  it('serve --nodes --json gains the cause id, the line and the node; its text says what it always said', () => {
    const failure = headFailure({ nf }, { reason: 'exited', detail: 'exited with code 1', ms: 10 }, OOM);
    const o = nodesOutcome(nodesPlan, { failure });
    const env = JSON.parse(nodesEnvelope(o, exitCodeOf(o.status), 'nodes.yaml'));
    expect(env.status).toBe('launch-failed');
    expect(env.exitCode).toBe(4);
    expect(Object.keys(env.failure)).toEqual(['message', 'fix', 'evidence', 'node', 'reason', 'cause', 'line']);
    expect(env.failure).toMatchObject({
      node: 'n0',
      reason: 'exited',
      cause: 'cuda-oom',
      line: expect.stringMatching(/OutOfMemoryError/),
    });
    expect(env.failure.message).toMatch(/^vLLM on n0 exited before it was ready: /);
    expect(env.failure.evidence).toEqual(OOM.trim().split('\n'));
    const err: string[] = [];
    process.env.NO_COLOR = '1';
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((s) => (err.push(String(s)), true));
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    textRenderer({ profile: 'big', simulated: false, nodes: 'nodes.yaml' }).outcome(o);
    spy.mockRestore();
    out.mockRestore();
    expect(err.join('')).toBe(
      [
        `launch failed: ${failure.detail}`,
        `fix: ${failure.fix}`,
        ...OOM.trim()
          .split('\n')
          .map((l) => `  | ${l}`),
      ]
        .map((l) => `${l}\n`)
        .join(''),
    );
  });
});
