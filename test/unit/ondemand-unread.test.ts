// The on-demand planner over a keeper whose HAProxy count could not be read (a loaded host held
// `show stat` past its deadline; CI saw a model stopped under its own stream that way): an unread
// count is never "nothing in flight", so the model is not taken out of rotation or stopped, and the
// refusal says why. The host here is a stand-in for the keeper's OnDemandHost (src/gateway/keeper.ts).
import { describe, it, expect } from 'vitest';
import { OnDemand, type OnDemandHost, type OnDemandProfile } from '../../src/gateway/ondemand.js';
import type { GatewayModel, GatewaySettings } from '../../src/gateway/plan.js';

const GiB = 2 ** 30;
const model = (profile: string, backend: string): GatewayModel =>
  ({
    name: profile,
    profile,
    backend,
    servers: [{ name: `${profile}-0`, host: '127.0.0.1', port: 1 }],
  }) as unknown as GatewayModel;
const od = (profile: string): OnDemandProfile =>
  ({ profile, pinned: false, serveArgs: [], needBytes: 30 * GiB, weightsBytes: 10 * GiB }) as OnDemandProfile;

function host(unread: string | undefined) {
  const calls: string[] = [];
  const running = [model('a', 'be_a')];
  const h: OnDemandHost = {
    model: (p) => running.find((m) => m.profile === p),
    running: () => running,
    load: async () => ({ inFlight: new Map([['be_a', 0]]), idleS: new Map([['be_a', 600]]), unread }),
    rotation: async (m, out) => void calls.push(`rotation ${m.profile} ${out}`),
    follow: async () => undefined,
    asleep: () => false,
    markSlept: () => undefined,
    log: () => undefined,
  };
  return { h, calls };
}

const settings = {
  onDemand: { gpuMemoryBytes: 48 * GiB, unified: false, evict: 'stop' },
} as unknown as GatewaySettings;

describe('on demand, the count of requests in flight unread', () => {
  it('unread: the idle-looking model is not evicted, and the refusal names why', async () => {
    const { h, calls } = host("HAProxy's stat socket: no answer in 5000 ms");
    const o = new OnDemand(settings, [od('a'), od('b')], h, {
      stateDir: '/nonexistent',
      sparkctl: '/bin/false',
      startTimeoutMs: 1000,
    });
    await expect(o.roomFor('b')).rejects.toThrow(/a's requests in flight could not be read/);
    expect(calls).toEqual([]);
  });
  it('read, and 0 in flight: the same model is evicted (taken out of rotation first)', async () => {
    const { h, calls } = host(undefined);
    const o = new OnDemand(settings, [od('a'), od('b')], h, {
      stateDir: '/nonexistent',
      sparkctl: '/bin/false',
      startTimeoutMs: 1000,
    });
    await o.roomFor('b').catch(() => undefined);
    expect(calls[0]).toBe('rotation a true');
  });
});
