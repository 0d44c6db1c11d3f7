// The gateway's models from what runs (src/gateway/plan.ts modelsOf): a profile's replicas are its servers, balanced
// by the gateway itself; but replicas behind a router on vLLM's --uds listen on Unix sockets only (the port their
// record keeps is not listened on), so the gateway reaches them through their router: the router is the model's one
// server, taking what every replica takes, with no sleep through it (a sleep or a wake would reach one replica).
import { describe, it, expect } from 'vitest';
import { modelsOf, planGateway, GatewaySettings, type ServedInstance } from '../../src/gateway/plan.js';
import { renderGatewayConfig } from '../../src/gateway/config.js';

const replica = (profile: string, i: number, extra: Partial<ServedInstance> = {}): ServedInstance => ({
  name: `${profile}-${i}`,
  profile,
  servedName: `m-${profile}`,
  host: '127.0.0.1',
  port: 18100 + i,
  argv: ['--max-num-seqs', '8', '--enable-sleep-mode'],
  ...extra,
});
const router = (profile: string): ServedInstance => ({
  name: `${profile}-router`,
  profile,
  servedName: `m-${profile}`,
  host: '0.0.0.0',
  port: 18080,
  role: 'router',
  argv: [],
});
const uds = (profile: string, i: number) => ({ uds: `/var/lib/sparkctl/router/${profile}/${profile}-${i}.sock` });

describe('the servers of a model', () => {
  it('replicas on ports: each one a server of the gateway (the router left out), sleep as they run', () => {
    const { models, skipped } = modelsOf([replica('a', 0), replica('a', 1), router('a')]);
    expect(skipped).toEqual([]);
    expect(models[0]!.servers).toEqual([
      { name: 'a-0', host: '127.0.0.1', port: 18100 },
      { name: 'a-1', host: '127.0.0.1', port: 18101 },
    ]);
    expect(models[0]!.sleepMode).toBe(true);
    expect(models[0]!.admission).toEqual({ perServer: 8, queue: 16 });
  });

  it('replicas on Unix sockets behind their router: the router is the one server, with every replica’s slots', () => {
    const { models, skipped } = modelsOf([replica('a', 0, uds('a', 0)), replica('a', 1, uds('a', 1)), router('a')]);
    expect(skipped).toEqual([]);
    expect(models[0]!.servers).toEqual([{ name: 'a-router', host: '127.0.0.1', port: 18080 }]);
    expect(models[0]!.sleepMode).toBe(false);
    expect(models[0]!.admission).toEqual({ perServer: 16, queue: 16 });
  });

  it('replicas on Unix sockets whose router is not running: not routed, and said why', () => {
    const { models, skipped } = modelsOf([replica('a', 0, uds('a', 0)), replica('b', 0)]);
    expect(models.map((m) => m.profile)).toEqual(['b']);
    expect(skipped).toEqual(['a: its replicas listen on Unix sockets behind a router that is not running']);
  });

  it("the config HAProxy gets sends to the router's address, never to a replica's unlistened port", () => {
    const served = [replica('a', 0, uds('a', 0)), replica('a', 1, uds('a', 1)), router('a')];
    const plan = planGateway(GatewaySettings.parse({ port: 18000, statsPort: 18001 }), served, '/tmp/state-x');
    const cfg = renderGatewayConfig(plan);
    expect(cfg).toMatch(/server a-router 127\.0\.0\.1:18080/);
    expect(cfg).not.toMatch(/:1810[01]/);
  });

  it('gateway settings keyed by a profile named like an inherited property are no settings', () => {
    const { models } = modelsOf([replica('constructor', 0)], {});
    expect(models[0]!.admission).toEqual({ perServer: 8, queue: 8 });
  });
});
