// The gateway's HAProxy config from hostile inputs: each model's own key travels in its own variable
// (profiles whose names differ only in case or in '-' vs '_' once shared one, and one model's key
// went to the other's server); names a route cannot hold never reach the config; --config is one
// bounded read of a regular file.
import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { GatewaySettings, planGateway, keyVar, exposure, type ServedInstance } from '../../src/gateway/plan.js';
import { renderGatewayConfig, haproxyEnv } from '../../src/gateway/config.js';
import { routeBody, carriesKey } from '../../src/gateway/route.js';
import { settingsFrom } from '../../src/verbs/gateway/run.js';
import { tempDirs } from '../helpers.js';

const fresh = tempDirs('sparkctl-gwhostile-');
const inst = (profile: string, served: string, port: number, apiKeyEnv?: string): ServedInstance => ({
  name: `${profile}-0`,
  profile,
  servedName: served,
  host: '127.0.0.1',
  port,
  argv: [],
  apiKeyEnv,
});

describe("each model's key in its own variable", () => {
  it.each([
    ['qwen-a', 'qwen_a'],
    ['Qwen', 'qwen'],
    ['a.b', 'a-b'],
  ])('%s and %s: two backends and two variables, each with its own key, each backend sending its own', (p1, p2) => {
    const plan = planGateway(
      GatewaySettings.parse({ apiKeyEnv: 'GW_KEY', port: 18080 }),
      [inst(p1, `m-${p1}`, 18100, 'KEY_ONE'), inst(p2, `m-${p2}`, 18101, 'KEY_TWO')],
      '/state',
    );
    const [a, b] = plan.models.map((m) => keyVar(m));
    expect(a).not.toBe(b);
    expect(new Set(plan.models.map((m) => m.backend)).size).toBe(2);
    const { env, missing } = haproxyEnv(plan, { GW_KEY: 'gw-secret', KEY_ONE: 'secret-one', KEY_TWO: 'secret-two' });
    expect(missing).toEqual([]);
    const byProfile = Object.fromEntries(plan.models.map((m) => [m.profile, env[keyVar(m)]]));
    expect(byProfile).toEqual({ [p1]: 'secret-one', [p2]: 'secret-two' });
    const cfg = renderGatewayConfig(plan);
    for (const m of plan.models) {
      const section = cfg.slice(cfg.indexOf(`backend ${m.backend}\n`)).split('\n\n')[0]!;
      expect(section).toContain(`"Bearer \${${keyVar(m)}}"`);
    }
    expect(cfg).not.toMatch(/secret-/);
  });
});

describe('hostile names never reach the config', () => {
  it.each(['a b', 'x\nbackend evil', '${GW_KEY}', "q'uote", 'a#b', 'm%[var(x)]'])(
    'served name %j: left out, said why',
    (name) => {
      const plan = planGateway(
        GatewaySettings.parse({ port: 18080 }),
        [inst('p', name, 18100), inst('ok', 'fine/model', 18101)],
        '/state',
      );
      expect(plan.models.map((m) => m.name)).toEqual(['fine/model']);
      expect(plan.skipped.join('\n')).toContain('has characters a route cannot hold');
      expect(renderGatewayConfig(plan)).not.toContain(name);
    },
  );
  it.each(['a b', 'x\nuse_backend evil', '${GW_KEY}', "q'x"])('alias %j: refused (exit 2), naming it', (alias) => {
    let err: { details?: string[] } | undefined;
    try {
      planGateway(
        GatewaySettings.parse({ port: 18080, aliases: { [alias]: 'fine/model' } }),
        [inst('ok', 'fine/model', 18101)],
        '/state',
      );
    } catch (e) {
      err = e as { details?: string[] };
    }
    expect(err?.details?.join('\n')).toContain(`${JSON.stringify(alias)} has characters a route cannot hold`);
  });
});

describe('--config is one bounded read of a regular file', () => {
  it('a FIFO is refused at once, naming it; a file past 1 MiB too', () => {
    const d = fresh();
    const fifo = join(d, 'gw.yaml');
    execFileSync('mkfifo', [fifo]);
    const t0 = Date.now();
    expect(() => settingsFrom({ config: fifo, alias: [] } as never)).toThrow(/--config .*(pipe|FIFO|regular)/i);
    expect(Date.now() - t0).toBeLessThan(2000);
  });
});

describe("the keeper's door: it believes the body and the gateway's key, never a header", () => {
  const two = () =>
    planGateway(
      GatewaySettings.parse({ port: 18080, apiKeyEnv: 'GW_KEY', aliases: { coder: 'fine/model' } }),
      [inst('ok', 'fine/model', 18101, 'KEY_ONE'), inst('other', 'other/model', 18102)],
      '/state',
    );
  const body = (o: unknown) => Buffer.from(typeof o === 'string' ? o : JSON.stringify(o));
  it.each([
    ['a served name', { model: 'fine/model', prompt: 'x' }, 'fine/model', undefined],
    ['an alias: renamed to the served name', { model: 'coder' }, 'fine/model', 'fine/model'],
    ['the model after a long prompt', { prompt: 'y'.repeat(300_000), model: 'other/model' }, 'other/model', undefined],
  ])('%s', (_l, b, model, rename) => {
    const r = routeBody(two(), body(b));
    expect(r.ok && r.model.name).toBe(model);
    expect(r.ok && r.rename).toBe(rename);
  });
  it.each([
    [
      'an unknown name: vLLM 404 listing the served ones',
      { model: 'evil' },
      404,
      /The model `evil` does not exist\. Models served here: fine\/model, other\/model, coder/,
    ],
    [
      'no model among several: 400 naming them',
      { prompt: 'x' },
      400,
      /names no model; this gateway serves: fine\/model, other\/model, coder/,
    ],
    ['not JSON', 'not json {', 400, /names no model/],
    ['a model that is not a string', { model: ['fine/model'] }, 400, /names no model/],
    ['an array', [{ model: 'fine/model' }], 400, /names no model/],
  ])('%s', (_l, b, status, message) => {
    const r = routeBody(two(), body(b));
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.status).toBe(status);
      expect(r.message).toMatch(message);
    }
  });
  it('one model served and none named: that one', () => {
    const plan = planGateway(GatewaySettings.parse({ port: 18080 }), [inst('ok', 'fine/model', 18101)], '/state');
    const r = routeBody(plan, body({ prompt: 'x' }));
    expect(r.ok && r.model.name).toBe('fine/model');
  });
  it.each([
    [{ authorization: 'Bearer gw-secret' }, true],
    [{ 'x-api-key': 'gw-secret' }, true],
    [{ authorization: 'Bearer gw-secret ' }, false],
    [{ authorization: 'bearer gw-secret' }, false],
    [{ authorization: 'Bearer gw-secre' }, false],
    [{ authorization: 'gw-secret' }, false],
    [{ 'x-api-key': 'Bearer gw-secret' }, false],
    [{ 'x-sparkctl-model': 'fine/model' }, false],
    [{}, false],
  ])('key %j: %s', (headers, ok) => {
    expect(carriesKey(headers, 'gw-secret')).toBe(ok);
    // no key configured (an unset variable) is never matched, not even by an empty one
    expect(carriesKey({ ...headers, authorization: 'Bearer ' }, '')).toBe(false);
  });
  it('the config: every internal header removed before any rule, the keeper a Unix socket in the folder (no port), its absence a JSON 503, a body past the window to the keeper', () => {
    const plan = planGateway(
      GatewaySettings.parse({ port: 18080, apiKeyEnv: 'GW_KEY', aliases: { coder: 'fine/model' } }),
      [{ ...inst('ok', 'fine/model', 18101), argv: ['--enable-sleep-mode'] }, inst('other', 'other/model', 18102)],
      '/state',
    );
    const cfg = renderGatewayConfig(plan);
    const front = cfg.slice(cfg.indexOf('frontend gateway'), cfg.indexOf('\nbackend via_keeper'));
    const rules = front.split('\n').filter((l) => /^\s+http-request /.test(l));
    expect(rules[0]).toBe('    http-request del-header x-sparkctl- -m beg');
    // a stream's chunks go out as they come (item 15): the defaults every proxy of the gateway inherits
    expect(cfg.slice(cfg.indexOf('\ndefaults\n'), cfg.indexOf('\nfrontend gateway'))).toContain(
      '\n    option http-no-delay\n',
    );
    expect(cfg).not.toMatch(/set-header X-Sparkctl/i);
    expect(cfg).toContain('    server keeper unix@/state/gateway/keeper.sock\n');
    expect(cfg).not.toMatch(/server (waker|keeper) 127\.0\.0\.1:/);
    expect(cfg).not.toContain(':18082');
    const keeper = cfg.slice(cfg.indexOf('\nbackend via_keeper') + 1).split('\n\n')[0]!;
    expect(keeper).toMatch(
      /http-error status 503 content-type application\/json string '\{"error":\{"message":"the gateway\\u0027s keeper .*is not running/,
    );
    // a sleeping model's backup is the keeper's second socket, never a port
    const sleeper = cfg.slice(cfg.indexOf(`\nbackend ${plan.models[0]!.backend}\n`) + 1).split('\n\n')[0]!;
    expect(sleeper).toContain('    server waker unix@/state/gateway/backup.sock backup no-check');
    expect(plan.keeper.backupSocket).toBe('/state/gateway/backup.sock');
    expect(front).toContain('use_backend via_keeper if body_cut !{ var(txn.model) -m found }');
    expect(plan.keeper.socket).toBe('/state/gateway/keeper.sock');
  });
  it('a state folder too deep for a Unix socket path: refused at plan time, naming the path and the fix', () => {
    expect(() => planGateway(GatewaySettings.parse({ port: 18080 }), [], `/${'d'.repeat(100)}`)).toThrow(
      expect.objectContaining({
        details: expect.arrayContaining([
          expect.stringMatching(/keeper's socket .* at most 107 \(set SPARKCTL_STATE_DIR/),
        ]),
      }),
    );
  });
});

describe('a gateway beyond loopback without its own key (item 14)', () => {
  it.each([
    ['127.0.0.1', undefined, false, 'ok'],
    ['127.0.0.2', undefined, false, 'ok'],
    ['::1', undefined, false, 'ok'],
    ['localhost', undefined, false, 'ok'],
    ['0.0.0.0', 'GW_KEY', false, 'ok'],
    ['0.0.0.0', undefined, false, 'refused'],
    ['::', undefined, false, 'refused'],
    ['10.0.0.5', undefined, false, 'refused'],
    ['0.0.0.0', undefined, true, 'warned'],
  ] as const)('--host %s key %s allow %s: %s', (host, apiKeyEnv, allow, want) => {
    let got: string;
    try {
      const w = exposure({ host, apiKeyEnv }, allow);
      got = w ? 'warned' : 'ok';
      if (w) expect(w).toMatch(/^WARNING: the gateway listens on .* without a key: anyone who reaches the address/);
    } catch (e) {
      got = 'refused';
      expect((e as { exitCode: number }).exitCode).toBe(2);
      expect((e as { details: string[] }).details.join('\n')).toMatch(
        /--api-key-env NAME[\s\S]*--allow-unauthenticated/,
      );
    }
    expect(got).toBe(want);
  });
});
