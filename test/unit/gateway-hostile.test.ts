// The gateway's HAProxy config from hostile inputs: each model's own key travels in its own variable
// (profiles whose names differ only in case or in '-' vs '_' once shared one, and one model's key
// went to the other's server); names a route cannot hold never reach the config; --config is one
// bounded read of a regular file.
import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { GatewaySettings, planGateway, keyVar, type ServedInstance } from '../../src/gateway/plan.js';
import { renderGatewayConfig, haproxyEnv } from '../../src/gateway/config.js';
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
    const plan = planGateway(GatewaySettings.parse({ apiKeyEnv: 'GW_KEY', port: 18080 }), [inst(p1, `m-${p1}`, 18100, 'KEY_ONE'), inst(p2, `m-${p2}`, 18101, 'KEY_TWO')], '/state');
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
  it.each(['a b', 'x\nbackend evil', '${GW_KEY}', "q'uote", 'a#b', 'm%[var(x)]'])('served name %j: left out, said why', (name) => {
    const plan = planGateway(GatewaySettings.parse({ port: 18080 }), [inst('p', name, 18100), inst('ok', 'fine/model', 18101)], '/state');
    expect(plan.models.map((m) => m.name)).toEqual(['fine/model']);
    expect(plan.skipped.join('\n')).toContain('has characters a route cannot hold');
    expect(renderGatewayConfig(plan)).not.toContain(name);
  });
  it.each(['a b', 'x\nuse_backend evil', '${GW_KEY}', "q'x"])('alias %j: refused (exit 2), naming it', (alias) => {
    let err: { details?: string[] } | undefined;
    try {
      planGateway(GatewaySettings.parse({ port: 18080, aliases: { [alias]: 'fine/model' } }), [inst('ok', 'fine/model', 18101)], '/state');
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
