// What stop may claim about in-flight requests: only what vLLM's own shutdown lines (and the gauges
// read before the signal) show. Lines in vLLM 0.27.2's format (launcher.py, v1/engine/core.py).
import { describe, it, expect } from 'vitest';
import { readShutdownLines, judgeRequests, graceMsOf } from '../../src/engine/stop.js';
import { requestsText } from '../../src/verbs/stop/run.js';
import { shutdownTimeoutArg, shutdownTimeoutOf, vllmArgs } from '../../src/profiles/render.js';
import { loadProfile } from '../../src/profiles/load.js';

const api = (msg: string) => `(APIServer pid=4242) INFO 12-01 09:31:07 [launcher.py:131] ${msg}`;
const core = (msg: string) => `(EngineCore_DP0 pid=4300) INFO 12-01 09:31:07 [core.py:1464] ${msg}`;

const ABORT_ONE = [
  api('[shutdown] API server: shutdown triggered'),
  api('[shutdown] API server: stopping engine client mode=abort timeout=0s'),
  core('[shutdown] EngineCore: trigger received signal=SIGTERM'),
  core('[shutdown] EngineCore: start mode=abort timeout=0s'),
  core('[shutdown] EngineCore: aborting in-flight requests count=1'),
  core('[shutdown] EngineCore: request processing complete; starting resource teardown'),
];
const DRAIN_TWO = [
  api('[shutdown] API server: stopping engine client mode=drain timeout=30s'),
  core('[shutdown] EngineCore: start mode=drain timeout=30s'),
  core('[shutdown] EngineCore: draining in-flight requests count=2 timeout=30s'),
  'INFO:     127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK',
  core('[shutdown] EngineCore: request processing complete; starting resource teardown'),
  api('[shutdown] API server: engine client stopped'),
];
const DRAIN_IDLE = [
  api('[shutdown] API server: stopping engine client mode=drain timeout=30s'),
  core('[shutdown] EngineCore: start mode=drain timeout=30s'),
  core('[shutdown] EngineCore: request processing complete; starting resource teardown'),
];
const DRAIN_UNFINISHED = DRAIN_TWO.slice(0, 4);
// two data-parallel engines: each logs its own count and its own completion
const DP_DRAIN = [
  core('[shutdown] EngineCore: start mode=drain timeout=30s'),
  core('[shutdown] EngineCore: start mode=drain timeout=30s').replace('DP0', 'DP1'),
  core('[shutdown] EngineCore: draining in-flight requests count=3 timeout=30s'),
  core('[shutdown] EngineCore: draining in-flight requests count=1 timeout=30s').replace('DP0', 'DP1'),
  core('[shutdown] EngineCore: request processing complete; starting resource teardown'),
];

describe('readShutdownLines + judgeRequests', () => {
  it.each([
    ['abort mode with one request in flight', ABORT_ONE, 1, 'terminated', { kind: 'aborted', count: 1 }],
    [
      'abort mode, even when SIGKILL ended it (the requests were aborted first)',
      ABORT_ONE.slice(0, 5),
      1,
      'killed',
      { kind: 'aborted', count: 1 },
    ],
    ['drain of two, completed, exited in time', DRAIN_TWO, 2, 'terminated', { kind: 'drained', count: 2 }],
    [
      'drain with nothing in flight (vLLM logs no count line for zero)',
      DRAIN_IDLE,
      0,
      'terminated',
      { kind: 'drained', count: 0 },
    ],
    ['drain cut off by SIGKILL at the end of the grace', DRAIN_UNFINISHED, 2, 'killed', { kind: 'cut-off', count: 2 }],
    [
      'drain mode, exited, but never said its requests completed: not a drain',
      DRAIN_UNFINISHED,
      2,
      'terminated',
      { kind: 'unconfirmed', inFlight: 2 },
    ],
    [
      'a second engine that never completed makes no drain',
      DP_DRAIN.slice(0, 4),
      4,
      'terminated',
      { kind: 'unconfirmed', inFlight: 4 },
    ],
    // seen on the real 0.27.2 when the whole group got SIGTERM: the workers died, the engine failed
    [
      'the API server said drain, the EngineCore never started one: not a drain',
      DRAIN_TWO.slice(0, 1),
      0,
      'terminated',
      { kind: 'unconfirmed', inFlight: 0 },
    ],
    [
      'no [shutdown] lines at all (older vLLM): the gauge is all there is',
      ['INFO:     Shutting down', 'INFO:     Application shutdown complete.'],
      3,
      'terminated',
      { kind: 'unknown', inFlight: 3 },
    ],
    ['no lines, gauge unreadable', [], undefined, 'terminated', { kind: 'unknown' }],
    ['no lines, killed with requests running: cut off', [], 2, 'killed', { kind: 'cut-off', count: 2 }],
  ] as const)('%s', (_what, lines, before, ended, expected) => {
    expect(judgeRequests(readShutdownLines(lines), before, ended)).toEqual(expected);
  });

  it('sums the counts of every engine, and needs every started engine to complete', () => {
    const ev = readShutdownLines(DP_DRAIN);
    expect(ev).toMatchObject({ mode: 'drain', timeoutS: 30, draining: 4, complete: false });
    expect(readShutdownLines([...DP_DRAIN, DP_DRAIN[4]!.replace('DP0', 'DP1')]).complete).toBe(true);
  });

  it('keeps the shutdown lines as evidence, and nothing else', () => {
    const ev = readShutdownLines(DRAIN_TWO);
    expect(ev.lines).toHaveLength(5);
    expect(ev.lines.every((l) => l.includes('[shutdown]'))).toBe(true);
  });

  it('a hostile log cannot claim a count through a look-alike line', () => {
    const ev = readShutdownLines([
      '[shutdown] EngineCore: draining in-flight requests count=NaN',
      `x${'y'.repeat(10_000)}[shutdown] EngineCore: aborting in-flight requests count=9`,
    ]);
    expect(ev.draining).toBeUndefined();
    expect(ev.aborting).toBeUndefined();
  });
});

describe('what stop says', () => {
  it.each([
    [{ kind: 'drained', count: 1 }, 'drained 1 in-flight request'],
    [{ kind: 'drained', count: 0 }, 'drained 0 in-flight requests'],
    [
      { kind: 'aborted', count: 2 },
      /^aborted 2 in-flight requests \(vLLM aborts on SIGTERM unless .*server\.shutdownTimeoutSeconds\)$/,
    ],
    [{ kind: 'cut-off', count: 3 }, 'SIGKILL cut off 3 in-flight requests'],
    [{ kind: 'unknown', inFlight: 1 }, /^1 request was in flight; .*not known$/],
    [{ kind: 'unknown' }, /not known/],
    [{ kind: 'unknown', inFlight: 0 }, /^its gauges showed no running or waiting request at the signal/],
    [
      { kind: 'unconfirmed', inFlight: 3 },
      /^vLLM was draining but never logged that its requests completed \(3 in flight at the signal\): they may have failed/,
    ],
  ] as const)('%o', (r, text) => {
    const said = requestsText(r);
    if (typeof text === 'string') expect(said).toBe(text);
    else expect(said).toMatch(text);
    expect(said).not.toMatch(r.kind === 'drained' ? /abort|not known/ : /drained/);
  });
});

describe('the grace before SIGKILL', () => {
  it.each([
    [{}, 30_000],
    [{ shutdownTimeoutSeconds: 0 }, 30_000],
    [{ shutdownTimeoutSeconds: 5 }, 30_000],
    [{ shutdownTimeoutSeconds: 30 }, 45_000],
    [{ shutdownTimeoutSeconds: 120 }, 135_000],
  ])('%o -> %d ms', (inst, ms) => expect(graceMsOf(inst)).toBe(ms));
});

describe('the drain rendered for the target vLLM', () => {
  const prof = (version: string, s: number) => {
    const p = structuredClone(loadProfile('qwen3.5-9b').profile);
    p.engine.vllmVersion = version;
    p.server.shutdownTimeoutSeconds = s;
    return p;
  };
  it.each([
    ['0.16.0', 30, 0],
    // 0.17's extraction marks the flag uncertain: rendering it could stop vLLM from starting
    ['0.17.0', 30, 0],
    ['0.20.0', 30, 0],
    ['0.25.0', 30, 30],
    ['0.27.2', 45, 45],
    ['0.28.0', 30, 30],
    ['0.28.0', 0, 0],
  ])('vLLM %s, shutdownTimeoutSeconds %d -> --shutdown-timeout %d', (v, s, want) => {
    const p = prof(v, s);
    expect(shutdownTimeoutArg(p)).toBe(want);
    const args = vllmArgs(p);
    expect(shutdownTimeoutOf(args)).toBe(want);
    expect(args.includes('--shutdown-timeout')).toBe(want > 0);
  });

  it.each([
    [['--port', '1'], 0],
    [['--shutdown-timeout', '20'], 20],
    [['--shutdown_timeout=7'], 7],
    [['--shutdown-timeout', '20', '--shutdown-timeout', '0'], 0],
    [['--shutdown-timeout', 'soon'], 0],
  ])('argv %j carries %d', (argv, want) => expect(shutdownTimeoutOf(argv)).toBe(want));
});
