// The upgrade's pure core: what changes between two vLLMs (from the per-version tables of vLLM's
// source, src/profiles/vllm-facts.ts), how a canary is judged against current, and the pin file
// (digest resolution from `image inspect`, rollback, a hostile file refused).
import { describe, it, expect, afterAll } from 'vitest';
import { writeFileSync, mkdirSync, symlinkSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { versionDiff, diffLines, vllmArgsOfRendered } from '../../src/upgrade/diff.js';
import { judge, similarity, sameVllmVersion, DEFAULT_THRESHOLDS, type Measured } from '../../src/upgrade/judge.js';
import { chatText, templateTokens, defaultGolden, DEFAULT_GOLDEN, TOOL_GOLDEN } from '../../src/upgrade/measure.js';
import { runningVersion } from '../../src/verbs/upgrade/run.js';
import {
  pinFromInspect,
  readPins,
  writePin,
  rollbackPins,
  repositoryOf,
  decideImagePin,
  movedLine,
  pinOfDecision,
  nodesImagePin,
  type Pin,
  type PinFile,
} from '../../src/engine/pins.js';
import { fingerprintChange, vllmFingerprint } from '../../src/engine/vllm-version.js';
import { clusterImageDrift, driftOf, imageDrift } from '../../src/engine/drift.js';
import type { Entry } from '../../src/engine/registry.js';
import { appendUpgrade, readUpgrades } from '../../src/upgrade/record.js';
import { UsageError } from '../../src/errors.js';
import { tempDir, rmrf } from '../helpers.js';
/** the candidate refuses the profile's own flag (the plan refuses those: engine/plan.ts) */
const refused = (d: ReturnType<typeof versionDiff>) => d.profileFlags.filter((p) => p.severity === 'error');

const dirs: string[] = [];
const fresh = () => {
  const d = tempDir('sparkctl-upgrade-unit-');
  dirs.push(d);
  return d;
};
afterAll(() => dirs.forEach(rmrf));

describe('versionDiff: what changes between two vLLMs', () => {
  it('0.17.0 -> 0.28.0: --swap-space is gone, and a profile that renders it is refused with the fix', () => {
    const d = versionDiff('0.17.0', '0.28.0', [
      'vllm',
      'serve',
      'Qwen/Qwen3-8B',
      '--swap-space',
      '4',
      '--max-num-seqs',
      '8',
    ]);
    expect(d.direction).toBe('upgrade');
    expect(d.options.removed).toContain('--swap-space');
    expect(refused(d)).toEqual([
      expect.objectContaining({ flag: '--swap-space', fix: 'drop it: the V1 engine has no CPU swap space' }),
    ]);
    expect(d.metrics.removed).toContain('vllm:spec_decode_num_drafts_total');
  });

  it('0.10.0 -> 0.12.0: the histogram sparkctl reads for inter-token latency is renamed; the rules must be regenerated', () => {
    const d = versionDiff('0.10.0', '0.12.0');
    expect(d.monitoringNames).toContainEqual({
      what: 'itl',
      from: 'vllm:time_per_output_token_seconds',
      to: 'vllm:inter_token_latency_seconds',
    });
    expect(d.options.deprecated).toContain('--disable-log-requests');
    expect(diffLines(d).join('\n')).toMatch(
      /monitoring reads itl as vllm:inter_token_latency_seconds instead of vllm:time_per_output_token_seconds/,
    );
  });

  it.each([
    ['0.17.0', '0.17.0', 'same'],
    ['0.28.0', '0.17.0', 'downgrade'],
    ['0.9.0', '0.28.0', 'upgrade'],
  ] as const)('%s -> %s is a %s', (a, b, dir) => {
    const d = versionDiff(a, b);
    expect(d.direction).toBe(dir);
    expect(d.sameVersion).toBe(dir === 'same');
    if (dir === 'same')
      expect([...d.options.removed, ...d.options.added, ...d.metrics.removed, ...d.metrics.added]).toEqual([]);
  });

  it('a downgrade names back what the upgrade took away', () => {
    const up = versionDiff('0.17.0', '0.28.0');
    const down = versionDiff('0.28.0', '0.17.0');
    expect(down.options.added).toEqual(up.options.removed);
    expect(down.options.removed).toEqual(up.options.added);
  });

  it("the simulator's own knobs are not vLLM flags", () => {
    expect(
      vllmArgsOfRendered([
        'node',
        'sparkctl.js',
        'sim',
        'serve',
        'm',
        '--port',
        '8000',
        '--sim-profile',
        'p.yaml',
        '--sim-vllm-version',
        '0.17.0',
      ]),
    ).toEqual(['--port', '8000']);
    expect(
      refused(versionDiff('0.17.0', '0.28.0', ['sim', 'serve', 'm', '--port', '8000', '--sim-vllm-version', '0.28.0'])),
    ).toEqual([]);
  });
});

const side = (over: Partial<Measured> = {}): Measured => ({
  url: 'http://127.0.0.1:1',
  vllmVersion: '0.17.0',
  probe: { state: 'healthy', failed: [] },
  bench: { requests: 8, failed: 0, ttftP50Ms: 20, tpotP50Ms: 8, outputTokensPerS: 200 },
  golden: [
    { name: 'a', text: 'one two three four five' },
    { name: 'b', text: 'six seven eight' },
  ],
  chatTemplate: [
    { name: 'one user turn', tokens: [151644, 872, 198, 3838, 151645, 198, 151644, 77091, 198] },
    { name: 'a conversation', tokens: [151644, 8948, 198, 2610, 151645, 198, 151644, 872, 198] },
  ],
  ...over,
});

describe("the comparison's readers: every byte a server returns is hostile", () => {
  it.each([
    ['a reply', { choices: [{ message: { role: 'assistant', content: 'Red\nBlue' } }] }, { text: 'Red\nBlue' }],
    [
      'only tool calls (content null): empty text',
      { choices: [{ message: { role: 'assistant', content: null, tool_calls: [] } }] },
      { text: '' },
    ],
    ['no choices', { choices: [] }, /choices: expected a non-empty array/],
    ['not an object', [1, 2], /choices: expected a non-empty array/],
    ['null', null, /choices: expected a non-empty array/],
    ['a message that is text', { choices: [{ message: 'hi' }] }, /choices\.0\.message: expected an object/],
    ['content a number', { choices: [{ message: { content: 7 } }] }, /content: expected a string or null/],
    // tool calls: what the server's parser read out of the answer follows the text (the random id left out)
    [
      'a tool call (content null)',
      {
        choices: [
          {
            message: {
              content: null,
              tool_calls: [
                {
                  id: 'chatcmpl-tool-1',
                  type: 'function',
                  function: { name: 'read_file', arguments: '{"path": "/etc/hostname"}' },
                },
              ],
            },
          },
        ],
      },
      { text: '[tool call read_file {"path":"/etc/hostname"}]' },
    ],
    [
      'text, then two calls; keys sorted, spacing dropped',
      {
        choices: [
          {
            message: {
              content: 'Reading both.',
              tool_calls: [
                {
                  id: 'a',
                  type: 'function',
                  function: { name: 'read_file', arguments: '{"path":"/a","limit":{"z":1,"b":2}}' },
                },
                { id: 'b', type: 'function', function: { name: 'read_file', arguments: '{ "path" : "/b" }' } },
              ],
            },
          },
        ],
      },
      {
        text: 'Reading both.\n[tool call read_file {"limit":{"b":2,"z":1},"path":"/a"}]\n[tool call read_file {"path":"/b"}]',
      },
    ],
    [
      'arguments that are not JSON: as they came',
      {
        choices: [
          { message: { content: null, tool_calls: [{ function: { name: 'f', arguments: '<path>/x</path>' } }] } },
        ],
      },
      { text: '[tool call f <path>/x</path>]' },
    ],
    ['tool_calls null', { choices: [{ message: { content: 'hi', tool_calls: null } }] }, { text: 'hi' }],
    [
      'tool_calls not a list',
      { choices: [{ message: { content: null, tool_calls: { function: { name: 'f', arguments: '{}' } } } }] },
      /tool_calls: expected a list of at most 16/,
    ],
    [
      'too many tool calls',
      {
        choices: [
          { message: { content: null, tool_calls: new Array(17).fill({ function: { name: 'f', arguments: '{}' } }) } },
        ],
      },
      /tool_calls: expected a list of at most 16/,
    ],
    [
      'a call without a name',
      { choices: [{ message: { content: null, tool_calls: [{ function: { arguments: '{}' } }] } }] },
      /tool_calls\.0\.function\.name: expected a name/,
    ],
    [
      'a call whose name is not text',
      { choices: [{ message: { content: null, tool_calls: [{ function: { name: 7, arguments: '{}' } }] } }] },
      /tool_calls\.0\.function\.name/,
    ],
    [
      'arguments an object (not the string vLLM sends)',
      {
        choices: [{ message: { content: null, tool_calls: [{ function: { name: 'f', arguments: { path: '/x' } } }] } }],
      },
      /tool_calls\.0\.function\.arguments: expected a string/,
    ],
    [
      'arguments too long',
      {
        choices: [
          { message: { content: null, tool_calls: [{ function: { name: 'f', arguments: 'x'.repeat(65_537) } }] } },
        ],
      },
      /arguments: expected a string of at most 65536/,
    ],
    [
      'a call that is null',
      { choices: [{ message: { content: null, tool_calls: [null] } }] },
      /tool_calls\.0\.function\.name: expected a name/,
    ],
  ])('chat answer: %s', (_, json, want) => {
    const r = chatText(json, JSON.stringify(json));
    if (want instanceof RegExp) expect('problem' in r && r.problem).toMatch(want);
    else expect(r).toEqual(want);
  });

  it.each([
    ['token IDs', { count: 3, tokens: [151644, 872, 0] }, { tokens: [151644, 872, 0] }],
    ['no tokens field (an older server answering count only)', { count: 3 }, /tokens: expected an array/],
    ['an empty list', { tokens: [] }, /expected 1 to 16384 token IDs, got 0/],
    ['too many', { tokens: new Array(16_385).fill(1) }, /got 16385/],
    ['a negative ID', { tokens: [1, -2] }, /whole, non-negative/],
    ['a fraction', { tokens: [1, 2.5] }, /whole, non-negative/],
    ['strings', { tokens: ['1'] }, /whole, non-negative/],
    ['null', null, /expected an array/],
  ])('/tokenize answer: %s', (_, json, want) => {
    const r = templateTokens(json, JSON.stringify(json));
    if (want instanceof RegExp) expect('problem' in r && r.problem).toMatch(want);
    else expect(r).toEqual(want);
  });
});

describe('the version the replicas run, as the comparison judges it', () => {
  it.each([
    // the real host run: the profile states 0.27.2, the install says more; the candidate (the same install) is read
    [
      'a host install: what its fingerprint read, not what the profile states',
      { vllm: { resolved: '0.27.2' }, fingerprint: { version: '0.27.2.dev0+g6adad0876.cpu' } },
      '0.27.2.dev0+g6adad0876.cpu',
    ],
    ['a container (no fingerprint): what the launch resolved', { vllm: { resolved: '0.17.1' } }, '0.17.1'],
    ['no record', undefined, undefined],
  ])('%s', (_, rec, want) => {
    expect(runningVersion(rec)).toBe(want);
    // and so the same install is judged as one version: a changed chat template is a failure, not a similarity
    if (want) {
      const cur = side({ vllmVersion: want });
      const can = side({
        vllmVersion: '0.27.2.dev0+g6adad0876.cpu',
        chatTemplate: [
          { name: 'one user turn', tokens: [151644, 872, 198, 3838, 151645, 198, 151644, 77091, 198, 1] },
          side().chatTemplate![1]!,
        ],
      });
      expect(judge(cur, can).pass).toBe(want !== '0.27.2.dev0+g6adad0876.cpu');
    }
  });
});

describe('one vLLM version or two, for the exact checks (when unsure: the stricter judgement)', () => {
  it.each([
    ['0.27.2', '0.27.2', true],
    ['0.27.2', '0.27.2.dev0+g6adad0876.cpu', true], // a stated release and what the install says
    ['0.27.2.dev0+g6adad0876.cpu', '0.27.2', true],
    ['0.10.2', '0.10.2+9dd9ca32', true], // NGC's label
    ['v0.11.0', '0.11.0.post1', true],
    ['0.27.2.dev0+g6adad0876.cpu', '0.27.2.dev1+gabc.cpu', false], // two builds, both read
    ['0.27.2', '0.27.3', false],
    ['0.27', '0.27.2', false],
    ['0.17.1', '0.28.0', false],
  ])('%s and %s: %s', (a, b, same) => {
    expect(sameVllmVersion(a, b)).toBe(same);
  });
});

describe('judge: the canary against current', () => {
  it('identical answers and numbers within the limits pass', () => {
    const v = judge(
      side(),
      side({ bench: { requests: 8, failed: 0, ttftP50Ms: 29, tpotP50Ms: 11.9, outputTokensPerS: 140 } }),
    );
    expect(v.pass, v.why.join('\n')).toBe(true);
    expect(v.comparisons.map((c) => c.check)).toEqual([
      'deep probe',
      'bench failed requests',
      'TTFT p50',
      'TPOT p50',
      'output tokens/s',
      'golden "a"',
      'golden "b"',
      'chat template (one user turn)',
      'chat template (a conversation)',
    ]);
  });

  it.each([
    [
      'TTFT 2x worse',
      { bench: { requests: 8, failed: 0, ttftP50Ms: 40, tpotP50Ms: 8, outputTokensPerS: 200 } },
      /^TTFT p50: canary 40\.0 ms \(2\.00x\)/,
    ],
    [
      'TPOT 1.6x',
      { bench: { requests: 8, failed: 0, ttftP50Ms: 20, tpotP50Ms: 12.8, outputTokensPerS: 200 } },
      /^TPOT p50/,
    ],
    [
      'throughput halved',
      { bench: { requests: 8, failed: 0, ttftP50Ms: 20, tpotP50Ms: 8, outputTokensPerS: 100 } },
      /^output tokens\/s/,
    ],
    [
      'a failed request',
      { bench: { requests: 8, failed: 1, ttftP50Ms: 20, tpotP50Ms: 8, outputTokensPerS: 200 } },
      /^bench failed requests/,
    ],
    [
      'unhealthy probe',
      { probe: { state: 'unhealthy', failed: ['inference: 500'] } },
      /^deep probe: canary unhealthy: inference: 500/,
    ],
    ['no bench', { bench: undefined, benchError: 'refused' }, /^bench: canary not measured \(refused\)/],
    [
      'a NaN from the server',
      { bench: { requests: 8, failed: 0, ttftP50Ms: Number.NaN, tpotP50Ms: 8, outputTokensPerS: 200 } },
      /^TTFT p50: canary none/,
    ],
    [
      'a golden answer that differs (same vLLM: identical required)',
      {
        golden: [
          { name: 'a', text: 'one two three four six' },
          { name: 'b', text: 'six seven eight' },
        ],
      },
      /^golden "a".*similarity 0\.80/,
    ],
    [
      'a golden prompt unanswered',
      {
        golden: [
          { name: 'a', error: 'HTTP 500' },
          { name: 'b', text: 'six seven eight' },
        ],
      },
      /^golden "a": canary no answer \(HTTP 500\)/,
    ],
    [
      // a template that adds a default system prompt when none is given (what the real podman run's changed image does)
      'the chat template renders one user turn otherwise',
      {
        chatTemplate: [
          {
            name: 'one user turn',
            tokens: [
              151644, 8948, 198, 2610, 525, 151645, 198, 151644, 872, 198, 3838, 151645, 198, 151644, 77091, 198,
            ],
          },
          { name: 'a conversation', tokens: [151644, 8948, 198, 2610, 151645, 198, 151644, 872, 198] },
        ],
      },
      /^chat template \(one user turn\): canary 16 tokens, differs from token 1 \(current 872, canary 8948; similarity 0\.\d\d\)/,
    ],
    [
      'the chat template renders a conversation shorter (a turn dropped at the end)',
      {
        chatTemplate: [
          { name: 'one user turn', tokens: [151644, 872, 198, 3838, 151645, 198, 151644, 77091, 198] },
          { name: 'a conversation', tokens: [151644, 8948, 198, 2610, 151645, 198] },
        ],
      },
      /^chat template \(a conversation\): canary 6 tokens, differs from token 6 \(current 151644, canary ends/,
    ],
    [
      'the canary cannot render the chat template',
      { chatTemplate: [{ name: 'one user turn', error: 'HTTP 400: no chat template' }] },
      /^chat template \(one user turn\): canary not rendered \(HTTP 400: no chat template\)/,
    ],
    [
      'nothing rendered on the canary at all',
      { chatTemplate: undefined },
      /^chat template \(a conversation\): canary not rendered \(none\)/,
    ],
  ])('%s fails, and says so', (_, over, why) => {
    const v = judge(side(), side(over as Partial<Measured>));
    expect(v.pass).toBe(false);
    expect(
      v.why.some((w) => why.test(w)),
      v.why.join('\n'),
    ).toBe(true);
  });

  it('a current TPOT below the floor (tokens delivered together) is judged against the floor, and said', () => {
    const cur = side({ bench: { requests: 4, failed: 0, ttftP50Ms: 50, tpotP50Ms: 0.018, outputTokensPerS: 300 } });
    const at = (tpot: number) =>
      judge(
        cur,
        side({ bench: { requests: 4, failed: 0, ttftP50Ms: 50, tpotP50Ms: tpot, outputTokensPerS: 300 } }),
      ).comparisons.find((c) => c.check === 'TPOT p50')!;
    expect(at(0.7)).toMatchObject({
      ok: true,
      canary: '0.7 ms (1.40x)',
      current: expect.stringMatching(/^0\.0 ms \(tokens arrived together: judged against 0\.5 ms\)/),
    });
    expect(at(4.1)).toMatchObject({ ok: false, canary: '4.1 ms (8.20x)' });
    // at or above the floor, the ratio is the measured one
    const real = judge(
      side({ bench: { requests: 4, failed: 0, ttftP50Ms: 50, tpotP50Ms: 2, outputTokensPerS: 300 } }),
      side({ bench: { requests: 4, failed: 0, ttftP50Ms: 50, tpotP50Ms: 4.1, outputTokensPerS: 300 } }),
    );
    expect(real.comparisons.find((c) => c.check === 'TPOT p50')).toMatchObject({
      ok: false,
      canary: '4.1 ms (2.05x)',
      current: '2.0 ms',
    });
  });

  it('across vLLM versions the chat template may render within the stated similarity (token level), not beyond it', () => {
    const base = side();
    const t = base.chatTemplate!;
    const oneMore = side({
      vllmVersion: '0.28.0',
      chatTemplate: [{ ...t[0]!, tokens: [...t[0]!.tokens!, 271] }, t[1]!],
    });
    expect(judge(base, oneMore).pass, judge(base, oneMore).why.join('\n')).toBe(true);
    // within one version, the same change is a failure: identical tokens required
    expect(judge(base, { ...oneMore, vllmVersion: '0.17.0' }).pass).toBe(false);
    const other = side({
      vllmVersion: '0.28.0',
      chatTemplate: [{ ...t[0]!, tokens: [1, 2, 3, 4, 5, 6, 7, 8, 9] }, t[1]!],
    });
    expect(judge(base, other).why).toEqual([
      expect.stringMatching(/^chat template \(one user turn\).*similarity 0\.00.*token similarity >= 0\.6/),
    ]);
  });

  it('tool calls: another call, other arguments or none at all fail within one version; the same call passes', () => {
    const call = '[tool call read_file {"path":"/etc/hostname"}]';
    const base = side({ golden: [{ name: 'tool-call', text: call }] });
    expect(judge(base, side({ golden: [{ name: 'tool-call', text: call }] })).pass).toBe(true);
    for (const other of [
      '[tool call read_file {"path":"/etc/hosts"}]',
      '[tool call cat {"path":"/etc/hostname"}]',
      '',
      'I cannot read files.',
    ]) {
      const v = judge(base, side({ golden: [{ name: 'tool-call', text: other }] }));
      expect(v.pass, other).toBe(false);
      expect(v.why, other).toEqual([expect.stringMatching(/^golden "tool-call"/)]);
    }
    // the server refused the tools (no parser on the candidate): no answer, a failure
    expect(
      judge(
        base,
        side({
          golden: [
            {
              name: 'tool-call',
              error: 'HTTP 400: "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
            },
          ],
        }),
      ).why,
    ).toEqual([expect.stringMatching(/^golden "tool-call": canary no answer \(HTTP 400/)]);
  });

  it.each([
    ['no tool-call parser: the defaults alone (a server without one refuses tools)', {}, DEFAULT_GOLDEN],
    [
      'a tool-call parser: the defaults and the tool call',
      { toolCallParser: 'qwen3_coder' },
      [...DEFAULT_GOLDEN, TOOL_GOLDEN],
    ],
  ])('the default golden prompts: %s', (_, engine, want) => {
    expect(defaultGolden({ engine })).toEqual(want);
  });

  it('the current side rendering nothing is a failure too, never a pass', () => {
    const v = judge(side({ chatTemplate: undefined }), side());
    expect(v.pass).toBe(false);
    expect(v.why).toEqual([
      expect.stringMatching(
        /^chat template \(chat template\): canary not rendered \(none\), current not rendered \(not measured\)/,
      ),
    ]);
  });

  it('across vLLM versions greedy answers may differ within the stated similarity, not beyond it', () => {
    const near = side({
      vllmVersion: '0.28.0',
      golden: [
        { name: 'a', text: 'one two three four six' },
        { name: 'b', text: 'six seven eight' },
      ],
    });
    expect(judge(side(), near).pass).toBe(true);
    const far = side({
      vllmVersion: '0.28.0',
      golden: [
        { name: 'a', text: 'nothing alike here at all' },
        { name: 'b', text: 'six seven eight' },
      ],
    });
    expect(judge(side(), far).pass).toBe(false);
    expect(judge(side(), near, { ...DEFAULT_THRESHOLDS, goldenOtherVersion: 0.9 }).pass).toBe(false);
  });

  it.each([
    ['a b c', 'a b c', 1],
    ['a b c d', 'a b x d', 0.75],
    ['', '', 1],
    ['a', '', 0],
    ['x y', 'a b', 0],
  ])('similarity(%j, %j) = %d', (a, b, s) => expect(similarity(a, b)).toBeCloseTo(s, 5));
});

const D1 = 'a'.repeat(64);
const D2 = 'b'.repeat(64);
const ID = 'c'.repeat(64);

describe('pins: a tag moves, a digest does not', () => {
  it.each([
    [
      'a repository digest of the same repository',
      'nvcr.io/nvidia/vllm:26.03-py3',
      `sha256:${ID} ["nvcr.io/nvidia/vllm@sha256:${D1}"]`,
      { pinned: `nvcr.io/nvidia/vllm@sha256:${D1}`, how: 'digest', id: ID },
    ],
    [
      "another repository's digest is not this one's",
      'nvcr.io/nvidia/vllm:26.03-py3',
      `${ID} ["docker.io/someone/vllm@sha256:${D2}"]`,
      { pinned: ID, how: 'image-id', id: ID },
    ],
    [
      'docker hub short names',
      'vllm/vllm-openai:v0.17.0',
      `sha256:${ID} ["vllm/vllm-openai@sha256:${D2}"]`,
      { pinned: `vllm/vllm-openai@sha256:${D2}`, how: 'digest', id: ID },
    ],
    [
      'an image built or loaded here has none: its ID',
      'localhost/sparkctl-vllm:test',
      `${ID} []`,
      { pinned: ID, how: 'image-id', id: ID },
    ],
    ['null RepoDigests (docker)', 'localhost/x:1', `${ID} null`, { pinned: ID, how: 'image-id', id: ID }],
    [
      'a reference that is a digest already',
      `nvcr.io/nvidia/vllm@sha256:${D1}`,
      `${ID} []`,
      { pinned: `nvcr.io/nvidia/vllm@sha256:${D1}`, how: 'digest', id: ID },
    ],
  ])('%s', (_, ref, out, want) => expect(pinFromInspect(ref, out)).toEqual(want));

  it.each([
    ['not an id', 'hello world'],
    ['RepoDigests not JSON', `${ID} [oops`],
    ['RepoDigests not a list', `${ID} {"a":1}`],
    ['a digest with a shell in it is not taken', `${ID} ["x@sha256:${D1}; rm -rf /"]`],
  ])('%s: an error or the image ID, never a hostile string', (_, out) => {
    const p = pinFromInspect('localhost/x:1', out);
    if ('error' in p) expect(p.error).toBeTruthy();
    else expect(p).toEqual({ pinned: ID, how: 'image-id', id: ID });
  });

  it('repositoryOf keeps a registry port', () =>
    expect(repositoryOf('localhost:5000/vllm:1')).toBe('localhost:5000/vllm'));

  it('write, then roll back: the previous pin becomes current and the one rolled back from goes first', () => {
    const dir = fresh();
    const p1: Pin = { at: 't1', vllmVersion: '0.17.0', sets: ['engine.vllmVersion=auto'] };
    const p2: Pin = {
      at: 't2',
      vllmVersion: '0.28.0',
      imagePinned: ID,
      image: 'localhost/x:2',
      sets: [`container.image=${ID}`],
    };
    writePin(dir, 'prof', p1);
    writePin(dir, 'prof', p2);
    const f = readPins(dir, 'prof')!;
    expect(f.current).toEqual(p2);
    expect(f.previous).toEqual([p1]);
    const back = rollbackPins(f)!;
    expect(back.to).toEqual(p1);
    expect(back.next.current).toEqual(p1);
    expect(back.next.previous).toEqual([p2]);
    expect(rollbackPins({ ...f, previous: [] })).toBeUndefined();
  });

  it.each([
    ['not JSON', '{'],
    [
      'a pin that names another profile',
      JSON.stringify({ version: 1, profile: 'other', current: { at: 't', vllmVersion: '1', sets: [] }, previous: [] }),
    ],
    [
      'an image pin that is not a digest',
      JSON.stringify({
        version: 1,
        profile: 'prof',
        current: { at: 't', vllmVersion: '1', imagePinned: 'x:latest', sets: [] },
        previous: [],
      }),
    ],
    [
      'an unknown field',
      JSON.stringify({
        version: 1,
        profile: 'prof',
        current: { at: 't', vllmVersion: '1', sets: [], run: 'rm' },
        previous: [],
      }),
    ],
  ])('a pin file with %s is bad input naming the file and the fix', (_, text) => {
    const dir = fresh();
    mkdirSync(join(dir, 'pins'), { recursive: true });
    writeFileSync(join(dir, 'pins', 'prof.json'), text);
    expect(() => readPins(dir, 'prof')).toThrow(UsageError);
    expect(() => readPins(dir, 'prof')).toThrow(/pins\/prof\.json/);
  });

  it('never writes through a link planted where the pin goes', () => {
    const dir = fresh();
    mkdirSync(join(dir, 'pins'), { recursive: true });
    const victim = join(dir, 'victim');
    writeFileSync(victim, 'keep');
    symlinkSync(victim, join(dir, 'pins', 'prof.json'));
    expect(() => writePin(dir, 'prof', { at: 't', vllmVersion: '1', sets: [] })).toThrow();
    expect(readFileSync(victim, 'utf8')).toBe('keep');
  });
});

describe('pinned by default: what serve runs for the reference a profile names', () => {
  const ID2 = 'd'.repeat(64);
  const TAG = 'localhost/vllm:prod';
  const PINNED = `localhost/vllm@sha256:${D1}`;
  const pin = (over: Partial<Pin> = {}): Pin => ({
    at: 't1',
    vllmVersion: '0.17.0',
    image: TAG,
    imagePinned: PINNED,
    imageId: ID,
    sets: [`container.image=${PINNED}`],
    ...over,
  });
  const file = (current: Pin, previous: Pin[] = []): PinFile => ({ version: 1, profile: 'p', current, previous });
  const here = (id: string, pinned = `localhost/vllm@sha256:${id === ID ? D1 : D2}`) => ({
    pinned,
    how: 'digest' as const,
    id,
  });
  const gone = { error: 'podman image inspect localhost/vllm:prod: image not known' };
  it.each([
    ['a digest named runs as named', PINNED, undefined, gone, false, { state: 'given', run: PINNED }],
    ['an image ID named runs as named', ID, file(pin()), gone, false, { state: 'given', run: ID }],
    ['no pin yet: pinned now to its digest', TAG, undefined, here(ID), false, { state: 'new', run: PINNED, id: ID }],
    [
      'no pin, no digest (built here): its image ID',
      TAG,
      undefined,
      { pinned: ID, how: 'image-id' as const, id: ID },
      false,
      { state: 'new', run: ID, how: 'image-id' },
    ],
    ['the pin runs while the tag still names it', TAG, file(pin()), here(ID), false, { state: 'kept', run: PINNED }],
    [
      'a tag that moved: the pin runs, the move is named',
      TAG,
      file(pin()),
      here(ID2),
      false,
      { state: 'kept', run: PINNED, movedTo: ID2 },
    ],
    ['the tag gone from this host: the pin still runs', TAG, file(pin()), gone, false, { state: 'kept', run: PINNED }],
    [
      '--repin: the tag as it is now',
      TAG,
      file(pin()),
      here(ID2),
      true,
      { state: 'repinned', run: `localhost/vllm@sha256:${D2}`, id: ID2 },
    ],
    [
      'the profile edited to another reference: pinned anew, said',
      'localhost/vllm:next',
      file(pin()),
      here(ID2),
      false,
      { state: 'edited', run: `localhost/vllm@sha256:${D2}` },
    ],
    [
      'after an upgrade the profile still names the old tag: the current (upgraded) pin runs',
      TAG,
      file(pin({ image: 'localhost/vllm:new', imagePinned: `localhost/vllm@sha256:${D2}`, imageId: ID2 }), [pin()]),
      here(ID),
      false,
      { state: 'kept', run: `localhost/vllm@sha256:${D2}`, older: true },
    ],
    ['not pulled and no pin: unpinned, said', TAG, undefined, gone, false, { state: 'unpinned', run: TAG }],
    [
      'a host pin (no image) does not pin an image',
      TAG,
      file(pin({ image: undefined, imagePinned: undefined, imageId: undefined })),
      here(ID),
      false,
      { state: 'new', run: PINNED },
    ],
  ])('%s', (_, ref, f, inspected, repin, want) => expect(decideImagePin(ref, f, inspected, repin)).toMatchObject(want));

  it.each([
    ['a reference the pin was taken from: every node runs the pin ID', TAG, file(pin()), ID],
    [
      'an older reference an upgrade moved on from: the current pin ID',
      TAG,
      file(pin({ image: 'localhost/vllm:new', imageId: ID2 }), [pin()]),
      ID2,
    ],
    ['no pin yet: the reference runs (the first healthy serve pins it)', TAG, undefined, undefined],
    ['a digest named: runs as named', PINNED, file(pin()), undefined],
    [
      'a pin without an image ID (written before IDs were kept): the reference runs',
      TAG,
      file(pin({ imageId: undefined })),
      undefined,
    ],
    ['another reference than the pin: the reference runs', 'localhost/vllm:other', file(pin()), undefined],
  ])('nodes: %s', (_, ref, f, run) => expect(nodesImagePin(ref, f)?.run).toBe(run));

  it('a moved tag is one warning naming both images and the two fixes; nothing else warns', () => {
    const d = decideImagePin(TAG, file(pin()), here(ID2));
    const w = movedLine(d, 'prof')!;
    expect(w).toContain(`the tag ${TAG} moved`);
    expect(w).toContain(ID2.slice(0, 12));
    expect(w).toContain(ID.slice(0, 12));
    expect(w).toContain(`sparkctl upgrade prof --image ${TAG}`);
    expect(w).toContain('--repin');
    expect(movedLine(decideImagePin(TAG, file(pin()), here(ID)), 'prof')).toBeUndefined();
  });

  it('serve writes a pin only for a new, re-pinned or edited reference; the pin written reads back', () => {
    const dir = fresh();
    expect(pinOfDecision(decideImagePin(TAG, file(pin()), here(ID)), '0.17.0')).toBeUndefined();
    expect(pinOfDecision(decideImagePin(PINNED, undefined, gone), '0.17.0')).toBeUndefined();
    const p = pinOfDecision(decideImagePin(TAG, undefined, here(ID)), '0.17.0', 't0')!;
    expect(p).toEqual({
      at: 't0',
      vllmVersion: '0.17.0',
      image: TAG,
      imagePinned: PINNED,
      imageId: ID,
      sets: [`container.image=${PINNED}`],
    });
    writePin(dir, 'p', p);
    expect(decideImagePin(TAG, readPins(dir, 'p'), here(ID2))).toMatchObject({
      state: 'kept',
      run: PINNED,
      movedTo: ID2,
    });
  });
});

describe("a host install's fingerprint: the vLLM version and its environment's packages", () => {
  /** a venv: bin/vllm (#! its python), lib/python3.11/site-packages/<dists> */
  function venv(dists: string[]): string {
    const root = fresh();
    mkdirSync(join(root, 'bin'), { recursive: true });
    const site = join(root, 'lib', 'python3.11', 'site-packages');
    for (const d of dists) mkdirSync(join(site, d), { recursive: true });
    const v = dists.find((d) => d.startsWith('vllm-'));
    if (v)
      writeFileSync(
        join(site, v, 'METADATA'),
        `Name: vllm\nVersion: ${v.replace(/^vllm-/, '').replace(/\.dist-info$/, '')}\n`,
      );
    writeFileSync(join(root, 'bin', 'vllm'), `#!${join(root, 'bin', 'python3')}\nimport vllm\n`, { mode: 0o755 });
    return root;
  }
  it('reads the version and hashes the distributions; a pip install changes the hash, not the version', async () => {
    const root = venv(['vllm-0.17.1.dist-info', 'torch-2.9.0.dist-info', 'transformers-4.57.0.dist-info']);
    const a = (await vllmFingerprint(join(root, 'bin', 'vllm')))!;
    expect(a).toMatchObject({ version: '0.17.1', count: 3 });
    expect(a.packages).toMatch(/^[a-f0-9]{16}$/);
    mkdirSync(join(root, 'lib', 'python3.11', 'site-packages', 'transformers-4.58.0.dist-info'));
    rmSync(join(root, 'lib', 'python3.11', 'site-packages', 'transformers-4.57.0.dist-info'), { recursive: true });
    const b = (await vllmFingerprint(join(root, 'bin', 'vllm')))!;
    expect(b.version).toBe('0.17.1');
    expect(b.packages).not.toBe(a.packages);
    expect(fingerprintChange(a, b)).toMatchObject({ kind: 'packages' });
    expect(fingerprintChange(a, a)).toBeUndefined();
  });
  it('another vllm on PATH is another version: kind version; none to read: gone; a non-Python executable: no fingerprint', async () => {
    const one = (await vllmFingerprint(join(venv(['vllm-0.17.1.dist-info']), 'bin', 'vllm')))!;
    const two = (await vllmFingerprint('vllm', { PATH: join(venv(['vllm-0.28.0.dist-info']), 'bin') }))!;
    expect(two.version).toBe('0.28.0');
    expect(fingerprintChange(one, two)).toMatchObject({
      kind: 'version',
      line: expect.stringContaining('now 0.28.0, not the 0.17.1'),
    });
    expect(fingerprintChange(one, undefined)).toMatchObject({ kind: 'gone' });
    expect(await vllmFingerprint('vllm', { PATH: fresh() })).toBeUndefined();
    const sh = fresh();
    writeFileSync(join(sh, 'vllm'), '#!/bin/sh\necho hi\n', { mode: 0o755 });
    expect(await vllmFingerprint(join(sh, 'vllm'))).toBeUndefined();
  });
});

describe('drift: a server on another image than its pin, or on a vLLM that changed under it', () => {
  const ID2 = 'd'.repeat(64);
  const pinned = `localhost/vllm@sha256:${D1}`;
  const pins: PinFile = {
    version: 1,
    profile: 'p',
    current: {
      at: 't1',
      vllmVersion: '0.17.0',
      image: 'localhost/vllm:prod',
      imagePinned: pinned,
      imageId: ID,
      sets: [],
    },
    previous: [],
  };
  it.each([
    ['the container runs the pinned image', ID, pinned, pins, undefined],
    [
      'the container runs another image: named with both',
      ID2,
      pinned,
      pins,
      `p-0 runs image ${ID2.slice(0, 12)}, not the pin ${pinned} (from localhost/vllm:prod, t1) (image ${ID.slice(0, 12)})`,
    ],
    [
      "the container's image unreadable: the record's reference is compared",
      undefined,
      'localhost/vllm:prod',
      pins,
      `p-0 was started from localhost/vllm:prod, not the pin ${pinned} (from localhost/vllm:prod, t1)`,
    ],
    ['no pin: nothing to compare', ID2, 'x', undefined, undefined],
  ])('%s', (_, running, recImage, f, line) => {
    const d = imageDrift('p-0', 'p', running, recImage, f);
    if (line === undefined) expect(d).toBeUndefined();
    else expect(d?.line).toBe(line);
  });

  it.each([
    ['every rank on the pin', [ID, ID], []],
    [
      'one node on another image: that node named, with its rank',
      [ID, ID2],
      [
        `p: node n1 (rank 1) runs image ${ID2.slice(0, 12)}, not the pin ${pinned} (from localhost/vllm:prod, t1) (image ${ID.slice(0, 12)})`,
      ],
    ],
    ['a node whose runtime did not answer: passed over (status shows it unknown)', [undefined, ID], []],
  ] as const)('a cluster: %s', (_, ids, lines) => {
    const ranks = ids.map((imageId, rank) => ({ node: `n${rank}`, rank, imageId }));
    expect(clusterImageDrift('p', ranks, pins).map((d) => d.line)).toEqual(lines);
    expect(clusterImageDrift('p', ranks, undefined)).toEqual([]);
  });

  const entry = (over: Record<string, unknown>) =>
    ({
      alive: true,
      proof: { state: 'proven' },
      inst: { name: 'h-0', profile: 'h', engine: 'vllm', argv: ['/opt/v/bin/vllm', 'serve'], ...over },
    }) as unknown as Entry;
  const fp = { version: '0.17.1', packages: 'a'.repeat(16), count: 3 };
  it('a host install: another version, other packages, or gone is named; the same is not; a dead one is not read', async () => {
    const rec = { sets: [], vllm: { asked: 'auto', resolved: '0.17.1', how: 'installed' }, fingerprint: fp };
    const dir = fresh();
    const seen: string[] = [];
    const run = (now: typeof fp | undefined, e = entry({ launch: rec })) =>
      driftOf([e], dir, {
        fingerprint: async (bin) => {
          seen.push(bin);
          return now;
        },
      });
    expect((await run(fp)).drift).toEqual([]);
    expect((await run({ ...fp, version: '0.28.0' })).drift[0]?.line).toMatch(
      /h-0: its vLLM is now 0\.28\.0, not the 0\.17\.1 it started on \(\/opt\/v\/bin\/vllm\)/,
    );
    expect((await run({ ...fp, packages: 'b'.repeat(16), count: 4 })).drift[0]?.line).toMatch(
      /Python environment changed \(3 -> 4 packages/,
    );
    expect((await run(undefined)).drift[0]?.line).toMatch(/no longer there/);
    expect(seen).toEqual(Array(4).fill('/opt/v/bin/vllm'));
    expect((await run(undefined, { ...entry({ launch: rec }), alive: false } as Entry)).drift).toEqual([]);
    expect(seen.length).toBe(4);
  });

  it('a container: its own image ID against the pin file; a hostile pin file is named, never a crash', async () => {
    const dir = fresh();
    writePin(dir, 'c', { ...pins.current });
    const e = entry({
      name: 'c-0',
      profile: 'c',
      container: { cli: 'podman', cliArgs: [], name: 'x', image: pinned, id: 'f'.repeat(64) },
      launch: { sets: [], vllm: { asked: 'auto', resolved: '1', how: 'installed' }, image: pinned },
    });
    expect((await driftOf([e], dir, { imageId: async () => ID })).drift).toEqual([]);
    expect((await driftOf([e], dir, { imageId: async () => ID2 })).drift.map((d) => d.kind)).toEqual(['image']);
    writeFileSync(join(dir, 'pins', 'c.json'), '{');
    const bad = await driftOf([e], dir, { imageId: async () => ID2 });
    expect(bad.drift).toEqual([]);
    expect(bad.unreadable[0]).toMatch(/pins\/c\.json: not JSON/);
  });
});

describe('the upgrade history', () => {
  it('appends records and reads back only what is a record', () => {
    const dir = fresh();
    const rec = {
      at: 't',
      profile: 'p',
      kind: 'upgrade' as const,
      from: { vllmVersion: '0.17.0' },
      to: { vllmVersion: '0.28.0' },
      status: 'rolled',
      failed: [],
      ms: 1,
      by: 'root',
    };
    appendUpgrade(dir, rec);
    appendUpgrade(dir, { ...rec, status: 'canary-failed', failed: ['TTFT p50'] });
    const file = join(dir, 'history', 'upgrades.jsonl');
    expect(existsSync(file)).toBe(true);
    writeFileSync(file, `${readFileSync(file, 'utf8')}not json\n{"at":1}\n`);
    const r = readUpgrades(dir);
    expect(r.records.map((x) => x.status)).toEqual(['rolled', 'canary-failed']);
    expect(r.skipped).toBe(2);
  });
});
