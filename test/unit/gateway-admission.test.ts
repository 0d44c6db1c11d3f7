// Admission at the gateway, pure: each model's concurrency (per server, HAProxy maxconn) and queue
// (past it a 429 with Retry-After), from gateway.models or the servers' own --max-num-seqs. The burst
// through the real HAProxy is test/e2e/gateway-admission.test.ts.
import { describe, it, expect } from 'vitest';
import {
  GatewaySettings,
  planGateway,
  maxNumSeqs,
  admissionOf,
  VLLM_DEFAULT_MAX_NUM_SEQS,
  type ServedInstance,
} from '../../src/gateway/plan.js';
import { renderGatewayConfig } from '../../src/gateway/config.js';
import { settingsFrom } from '../../src/verbs/gateway/run.js';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDirs } from '../helpers.js';
import { UsageError } from '../../src/errors.js';

const fresh = tempDirs('sparkctl-gwadmission-');

const inst = (profile: string, port: number, argv: string[] = [], i = 0): ServedInstance => ({
  name: `${profile}-${i}`,
  profile,
  servedName: `m-${profile}`,
  host: '127.0.0.1',
  port,
  argv,
});

describe('--max-num-seqs from a server argv', () => {
  it.each<[string[], number | undefined]>([
    [['--max-num-seqs', '8'], 8],
    [['--model', 'x', '--max-num-seqs=16'], 16],
    [[], undefined],
    [['--max-num-seqs'], undefined],
    [['--max-num-seqs', '0'], undefined],
    [['--max-num-seqs', '-3'], undefined],
    [['--max-num-seqs', '1e9'], undefined],
    [['--max-num-seqs', '99999999'], undefined],
  ])('%j -> %s', (argv, want) => expect(maxNumSeqs(argv)).toBe(want));
});

describe('admission of a model', () => {
  it.each<[string, string[][], Parameters<typeof admissionOf>[1], { perServer: number; queue: number }]>([
    [
      'the servers own max-num-seqs, a queue of as many as run at once',
      [
        ['--max-num-seqs', '8'],
        ['--max-num-seqs', '8'],
      ],
      undefined,
      { perServer: 8, queue: 16 },
    ],
    [
      'servers that differ: the smallest',
      [
        ['--max-num-seqs', '8'],
        ['--max-num-seqs', '4'],
      ],
      undefined,
      { perServer: 4, queue: 8 },
    ],
    [
      "none said: vLLM's default",
      [[]],
      undefined,
      { perServer: VLLM_DEFAULT_MAX_NUM_SEQS, queue: VLLM_DEFAULT_MAX_NUM_SEQS },
    ],
    [
      'the operator says both',
      [['--max-num-seqs', '8']],
      { concurrency: 2, queue: 3, pinned: false },
      { perServer: 2, queue: 3 },
    ],
    [
      'queue 0: nothing waits, a full model is a 429 at once',
      [['--max-num-seqs', '8']],
      { queue: 0, pinned: false },
      { perServer: 8, queue: 0 },
    ],
  ])('%s', (_, argvs, own, want) => expect(admissionOf(argvs, own)).toEqual(want));

  it('gateway.models reaches the config: maxconn per server, the 429 rule with Retry-After on its queue, a JSON 503 for a queue timeout', () => {
    const s = GatewaySettings.parse({ port: 18080, retryAfterSeconds: 7, models: { a: { concurrency: 3, queue: 5 } } });
    const plan = planGateway(
      s,
      [inst('a', 18100), inst('a', 18101, [], 1), inst('b', 18102, ['--max-num-seqs', '12'])],
      '/state',
    );
    const cfg = renderGatewayConfig(plan);
    const [a, b] = plan.models;
    const section = (m: typeof a) => cfg.slice(cfg.indexOf(`backend ${m!.backend}\n`)).split('\n\n')[0]!;
    expect(section(a)).toMatch(/default-server .* maxconn 3$/m);
    expect(section(b)).toMatch(/default-server .* maxconn 12$/m);
    expect(section(a)).toContain('http-error status 503 content-type application/json hdr Retry-After 7');
    const rule = cfg.split('\n').find((l) => l.includes('status 429') && l.includes(a!.backend))!;
    expect(rule).toContain(`if { var(txn.backend) -m str ${a!.backend} } { queue(${a!.backend}) ge 5 }`);
    expect(rule).toContain('hdr Retry-After 7');
    const body = JSON.parse(/string '(.*)' if/.exec(rule)![1]!);
    expect(body).toEqual({
      error: {
        message: 'm-a: 5 request(s) already wait for its 6 slot(s); retry later',
        type: 'RateLimitError',
        param: null,
        code: 429,
      },
    });
    // the 429 rules come before any use_backend: a full model's request never reaches a backend
    const lines = cfg.split('\n');
    expect(lines.findIndex((l) => l.includes('status 429'))).toBeLessThan(
      lines.findIndex((l) => l.includes('use_backend')),
    );
  });

  it.each([{ concurrency: 0 }, { queue: -1 }, { concurrency: 1.5 }, { pinned: 'yes' }, { other: 1 }])(
    'gateway.models.a %j is refused',
    (bad) => {
      expect(() => GatewaySettings.parse({ models: { a: bad } })).toThrow();
    },
  );
});

describe('the on-demand settings as docs/router-and-gateway.md gives them', () => {
  it('the example gateway: block parses: the memory in bytes, the set, pinned, serve arguments, admission; --on-demand and --gpu-memory add to it', () => {
    const doc = readFileSync(new URL('../../docs/router-and-gateway.md', import.meta.url), 'utf8');
    const yaml = /```yaml\n([\s\S]*?) *```/.exec(doc)![1]!.replace(/^ {2}/gm, '');
    const file = join(fresh(), 'gw.yaml');
    writeFileSync(file, yaml);
    const s = settingsFrom({ config: file });
    expect(s.onDemand).toMatchObject({ gpuMemoryBytes: 128e9, unified: true, evict: 'stop', startTimeout: '10m' });
    expect(Object.keys(s.models).sort()).toEqual(['my-embed', 'my-vision', 'qwen-dev', 'qwen3.5-9b-code']);
    expect(s.models['qwen3.5-9b-code']).toMatchObject({
      pinned: true,
      onDemand: true,
      serve: ['--set', 'engine.gpuMemoryUtilization=0.3'],
    });
    expect(s.models['qwen-dev']).toMatchObject({ concurrency: 8, queue: 16, pinned: false });
    const flags = settingsFrom({ config: file, onDemand: ['other'], gpuMemory: '80GiB', evict: 'sleep1' });
    expect(flags.models.other).toMatchObject({ onDemand: true, pinned: false, serve: [] });
    expect(flags.onDemand).toMatchObject({ gpuMemoryBytes: 80 * 2 ** 30, evict: 'sleep1' });
  });
  it.each([
    [{ gpuMemory: 'lots' }, /--gpu-memory: "lots" is not a size/],
    [{ evict: 'delete' }, /gateway.onDemand.evict/],
  ])('bad input %j is exit 2 naming the field', (o, re) => {
    let err: { message: string; details?: string[]; exitCode?: number } | undefined;
    try {
      settingsFrom(o);
    } catch (e) {
      err = e as typeof err;
    }
    expect(err).toBeInstanceOf(UsageError);
    expect([err!.message, ...(err!.details ?? [])].join('\n')).toMatch(re);
  });
});

// HAProxy's own refusals pass no filter: with usage on, each is preceded by the action that writes its
// usage line, under the very same condition (a condition that differed would count what was not refused);
// keeper_return's refusals are counted on the client's side, so none there; with usage off, no action.
describe("HAProxy's own refusals are counted (usage filter on)", () => {
  const plan = () =>
    planGateway(
      GatewaySettings.parse({ port: 18080, statsPort: 18081, apiKeyEnv: 'K', models: { a: { queue: 3 } } }),
      [inst('a', 18100), inst('b', 18101)],
      '/tmp/state-x',
    );
  const usage = { lua: '/tmp/state-x/gateway/usage.lua', logFd: 3 };
  it('each return of 400, 401, 404 and 429 in the client frontend follows its sparkctl_own line with the same condition', () => {
    const L = renderGatewayConfig(plan(), { usage }).split('\n');
    const front = L.slice(L.indexOf('frontend gateway'), L.indexOf('frontend keeper_return'));
    const refusals = front
      .map((l, i) => [l, i] as const)
      .filter(
        ([l]) =>
          /http-request return status (400|401|404|429)\b|http-request return .*"code":(400|401|404|429)/.test(l) ||
          /http-request return status 4\d\d/.test(l),
      );
    const statuses = refusals.map(([l]) => Number(/status (\d{3})/.exec(l)![1]));
    expect(statuses.sort()).toEqual([400, 401, 404, 404, 429, 429]);
    for (const [l, i] of refusals) {
      const st = /status (\d{3})/.exec(l)![1];
      const cond = l.slice(l.lastIndexOf(' if ') + 1);
      expect(front[i - 1], l).toBe(`    http-request lua.sparkctl_own ${st} ${cond}`);
    }
    const back = L.slice(L.indexOf('frontend keeper_return'));
    expect(back.filter((l) => l.includes('sparkctl_own'))).toEqual([]);
    expect(back.filter((l) => /http-request return status 429/.test(l))).toHaveLength(2);
  });
  it('without the usage filter: no action line (the action is registered only by its Lua file)', () => {
    expect(renderGatewayConfig(plan()).includes('sparkctl_own')).toBe(false);
  });
  // HAProxy before 2.6.17 worked on the shared Lua state's stack outside its lock when it made a stream's
  // filter: with several threads a filter lost its handle and the client got a 502 (src/profiles/haproxy.ts)
  it('with the Lua file loaded HAProxy runs one thread; without it, as many as it chooses', () => {
    const global = (cfg: string) => cfg.split('\n').slice(0, cfg.split('\n').indexOf('defaults'));
    const on = global(renderGatewayConfig(plan(), { usage }));
    expect(on.filter((l) => /nbthread|lua-load/.test(l))).toEqual(['    nbthread 1', `    lua-load ${usage.lua}`]);
    expect(global(renderGatewayConfig(plan())).filter((l) => /nbthread|lua-load/.test(l))).toEqual([]);
  });
});

describe('a reload: the old worker never answers a 404 for a model served since (src/gateway/config.ts)', () => {
  it('a stopping worker sends a name its map lacks to the keeper; the 404, the 400 and the one-model default leave that request alone', () => {
    for (const served of [[inst('a', 18100)], [inst('a', 18100), inst('b', 18101)]]) {
      const L = renderGatewayConfig(
        planGateway(GatewaySettings.parse({ port: 18080, statsPort: 18081 }), served, '/tmp/state-x'),
      ).split('\n');
      const front = L.slice(L.indexOf('frontend gateway'), L.indexOf('frontend keeper_return'));
      const stale = front.findIndex((l) => l.includes('set-var(txn.stale)'));
      expect(front[stale]).toBe(
        '    http-request set-var(txn.stale) bool(1) if { stopping } { var(txn.model) -m found } !{ var(txn.backend) -m found }',
      );
      // each later rule that answers or routes a request with no backend of its map leaves a stale one to the keeper
      const later = front
        .slice(stale + 1)
        .filter((l) => /http-request return status (400|404)\b|set-var\(txn\.backend\) str\(/.test(l));
      expect(later.length, served.length === 1 ? 'the 404 and the one-model default' : 'the 404 and the 400').toBe(2);
      for (const l of later) expect(l).toContain('!{ var(txn.stale) -m found }');
      expect(front.find((l) => l.includes('use_backend'))).toBe(
        '    use_backend via_keeper if { var(txn.stale) -m found }',
      );
    }
  });
});
