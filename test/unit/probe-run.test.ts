// The probe's phases without a server: the check list runs in order and stops at a verdict; a run's
// state, exit code and printed lines follow from the results alone.
import { describe, it, expect } from 'vitest';
import { probe, PROBE_CHECKS, type ProbeCheck, type ProbeResult } from '../../src/health/probe.js';
import { verdictCode, render, resolveTargets, redactResults } from '../../src/verbs/probe/run.js';
import { nextState } from '../../src/health/alerts.js';
import { targetFromUrl } from '../../src/health/target.js';

const settings = { timeoutMs: 100, kvCacheUsageMax: 0.9, waitingMax: 10, gpuMemoryHeadroomPct: 5 };
const check = (step: ProbeCheck['step'], status: 'pass' | 'warn' | 'fail', end?: ProbeResult['state']): ProbeCheck => ({
  step,
  run: async ({ add }) => {
    add(step, status, `${step} ${status}`);
    return end;
  },
});
const result = (state: ProbeResult['state'], url = 'http://h:1'): ProbeResult => ({
  target: url,
  url,
  state,
  steps: [],
  ms: 1,
});

describe('probe: a list of checks', () => {
  it('the default list has one check per step, live first', () => {
    expect(PROBE_CHECKS.map((c) => c.step)).toEqual([
      'live',
      'sleep',
      'identity',
      'inference',
      'metrics',
      'gpu',
      'auth',
      'client',
    ]);
  });

  it('runs every check in order; a fail makes the target unhealthy, a warn does not', async () => {
    const t = targetFromUrl('http://127.0.0.1:9');
    const ok = await probe(t, settings, [check('live', 'pass'), check('metrics', 'warn')]);
    expect(ok.state).toBe('healthy');
    expect(ok.steps.map((s) => `${s.step}:${s.status}`)).toEqual(['live:pass', 'metrics:warn']);
    const bad = await probe(t, settings, [check('live', 'pass'), check('auth', 'fail'), check('client', 'pass')]);
    expect(bad.state).toBe('unhealthy');
    expect(bad.steps).toHaveLength(3);
  });

  it('a check that returns a verdict ends the probe there', async () => {
    const r = await probe(targetFromUrl('http://127.0.0.1:9'), settings, [
      check('live', 'fail', 'unreachable'),
      check('identity', 'pass'),
    ]);
    expect(r.state).toBe('unreachable');
    expect(r.steps.map((s) => s.step)).toEqual(['live']);
  });

  it('once the run deadline fired, no further check starts and the target is unreachable', async () => {
    const stop = new AbortController();
    const firing: ProbeCheck = {
      step: 'live',
      run: async ({ add }) => (add('live', 'pass', 'ok'), stop.abort(), undefined),
    };
    const r = await probe(targetFromUrl('http://127.0.0.1:9'), { ...settings, signal: stop.signal }, [
      firing,
      check('identity', 'pass'),
    ]);
    expect(r.state).toBe('unreachable');
    expect(r.steps.map((s) => s.step)).toEqual(['live']);
  });

  it("a check's findings reach the result (identity's served name reaches the checks after it)", async () => {
    const seen: Array<string | undefined> = [];
    const ident: ProbeCheck = {
      step: 'identity',
      run: async (ctx) => ((ctx.served = 'm'), ctx.add('identity', 'pass', 'serves m'), undefined),
    };
    const infer: ProbeCheck = {
      step: 'inference',
      run: async (ctx) => (
        seen.push(ctx.served), (ctx.found.inferenceMs = 7), ctx.add('inference', 'pass', '1 token'), undefined
      ),
    };
    const r = await probe(targetFromUrl('http://127.0.0.1:9'), settings, [ident, infer]);
    expect(seen).toEqual(['m']);
    expect(r.inferenceMs).toBe(7);
  });
});

describe('probe run phases', () => {
  it('exit code: unreachable beats unhealthy beats healthy', () => {
    expect(verdictCode([result('healthy')])).toBe(0);
    expect(verdictCode([result('healthy'), result('unhealthy')])).toBe(1);
    expect(verdictCode([result('unhealthy'), result('unreachable')])).toBe(3);
  });

  it('state: a change, or a first probe that is not healthy, is news for the webhook', () => {
    const at = new Date('2026-01-01T00:00:00Z');
    const prev = {
      'http://a:1': { state: 'healthy' as const, at: 'x' },
      'http://b:1': { state: 'unhealthy' as const, at: 'x' },
    };
    const { next, changed } = nextState(
      prev,
      [
        result('unhealthy', 'http://a:1'),
        result('unhealthy', 'http://b:1'),
        result('healthy', 'http://c:1'),
        result('unreachable', 'http://d:1'),
      ],
      at,
    );
    expect(changed.map((r) => r.url)).toEqual(['http://a:1', 'http://d:1']);
    expect(next['http://c:1']).toEqual({ state: 'healthy', preemptions: undefined, at: '2026-01-01T00:00:00.000Z' });
    expect(Object.keys(next)).toHaveLength(4);
  });

  it('--quiet prints only the targets that are not healthy; --json one envelope without the raw vLLM numbers', () => {
    const rs = [
      {
        ...result('healthy', 'http://a:1'),
        inferenceMs: 3,
        steps: [{ step: 'live' as const, status: 'pass' as const, detail: '', ms: 1 }],
        vllm: {} as never,
      },
      {
        ...result('unhealthy', 'http://b:1'),
        steps: [{ step: 'auth' as const, status: 'fail' as const, detail: 'open', ms: 1 }],
      },
    ];
    expect(render(rs, {}).map((l) => l.replace(/\x1b\[\d+m/g, ''))).toEqual([
      'http://a:1 healthy 1 ms: live ok; 1 token in 3 ms',
      'http://b:1 UNHEALTHY 1 ms: auth fail: open',
    ]);
    expect(render(rs, { quiet: true })).toHaveLength(1);
    const [json] = render(rs, { json: true });
    const env = JSON.parse(json!);
    expect(env.results).toHaveLength(2);
    expect(env.results[0].vllm).toBeUndefined();
  });

  it('a --url target needs no registry; userinfo and echoed keys never leave the probe', () => {
    const targets = resolveTargets([], { url: ['http://u:sekrit-pass@127.0.0.1:9'], model: 'm' }, undefined);
    expect(targets).toHaveLength(1);
    expect(targets[0]!.t.servedName).toBe('m');
    targets[0]!.t.apiKey = 'sk-test-0123456789abcdef';
    const raw = [
      {
        ...result('unhealthy', targets[0]!.t.url),
        steps: [
          { step: 'identity' as const, status: 'fail' as const, detail: 'bad key sk-test-0123456789abcdef', ms: 1 },
        ],
      },
    ];
    const out = JSON.stringify(redactResults(raw, targets));
    expect(out).not.toContain('sekrit-pass');
    expect(out).not.toContain('sk-test-0123456789abcdef');
  });
});
