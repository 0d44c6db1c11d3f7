// Who owns a server's life when the watcher reads it (src/watch/read.ts ownerOf), and that the
// verdict never calls a server dead or wedged while the gateway is starting, sleeping, stopping or
// evicting it: the gateway's keeper record (on-demand states), its HAProxy (maint, drain), the
// profile's router, serve (not ready). Each owner is tried against readings that would otherwise be
// dead (processes gone, no API) and wedged (engine stopped, requests frozen, probe unanswered).
import { describe, expect, it } from 'vitest';
import { ownerOf } from '../../src/watch/read.js';
import { judge, type Owner, type Reading } from '../../src/watch/verdict.js';

const inst = { name: 'qwen-0', profile: 'qwen', readyAt: '2026-12-04T03:00:00.000Z' } as never;
const T0 = Date.parse('2026-12-04T03:00:00Z');
const frozenM = {
  running: 2,
  waiting: 1,
  kv: 0.3,
  generation: 900,
  prompt: 4000,
  preemptions: 0,
  iterations: 300,
  prefills: 20,
  finished: 18,
};

/** 20 readings 5 s apart: the last `shape` of them as given, with `owner` on every one. */
function readings(shape: 'dead' | 'wedged', owner: Owner | undefined): Reading[] {
  return Array.from({ length: 20 }, (_, i) => {
    const base: Reading = { at: T0 + i * 5000, process: 'alive', health: 'ok', metrics: frozenM, owner };
    if (shape === 'dead') return { ...base, process: 'gone', health: 'unreachable', metrics: undefined };
    return {
      ...base,
      process: 'stopped',
      processDetail: 'VLLM::EngineCor pid 42',
      probe: { ok: false, ms: 3000, detail: 'no token' },
    };
  });
}

const cases: Array<{
  name: string;
  states?: Record<string, string>;
  gateway?: Record<string, 'drain' | 'maint'>;
  router?: Record<string, 'drain' | 'maint'>;
  ready?: boolean;
  owner: Owner | undefined;
  verdict: string;
}> = [
  {
    name: "the gateway's keeper is starting the profile (on demand)",
    states: { qwen: 'starting' },
    owner: { by: 'gateway', state: 'starting' },
    verdict: 'loading',
  },
  {
    name: "the gateway's keeper is evicting it",
    states: { qwen: 'evicting' },
    owner: { by: 'gateway', state: 'evicting' },
    verdict: 'draining',
  },
  {
    name: "the gateway's keeper holds it asleep",
    states: { qwen: 'sleeping' },
    owner: { by: 'gateway', state: 'sleeping' },
    verdict: 'sleeping',
  },
  {
    name: "the gateway's HAProxy holds it in maint (asleep or waking)",
    gateway: { 'qwen-0': 'maint' },
    owner: { by: 'gateway', state: 'sleeping' },
    verdict: 'sleeping',
  },
  {
    name: "the gateway's HAProxy drains it (stopping)",
    gateway: { 'qwen-0': 'drain' },
    owner: { by: 'gateway', state: 'stopping' },
    verdict: 'draining',
  },
  {
    name: 'the keeper\'s word wins over its HAProxy ("evicting" while HAProxy shows drain)',
    states: { qwen: 'evicting' },
    gateway: { 'qwen-0': 'drain' },
    owner: { by: 'gateway', state: 'evicting' },
    verdict: 'draining',
  },
  {
    name: 'its router holds it in drain (a rolling restart)',
    router: { 'qwen-0': 'drain' },
    owner: { by: 'router', state: 'drain' },
    verdict: 'draining',
  },
  { name: 'serve has not made it ready', ready: false, owner: { by: 'serve', state: 'loading' }, verdict: 'loading' },
];

describe('ownerOf and the verdict under an owner', () => {
  for (const c of cases)
    it(`${c.name}: ${c.verdict}, never dead or wedged`, () => {
      const o = ownerOf({ inst: c.ready === false ? { ...(inst as object), readyAt: undefined } : inst } as never, {
        gatewayStates: c.states ? new Map(Object.entries(c.states)) : undefined,
        gateway: c.gateway ? new Map(Object.entries(c.gateway)) : undefined,
        router: c.router ? new Map(Object.entries(c.router)) : undefined,
      });
      expect(o).toEqual(c.owner);
      for (const shape of ['dead', 'wedged'] as const) expect(judge(readings(shape, o)).verdict).toBe(c.verdict);
    });

  it('nobody owns it (the keeper says running, another profile is starting, HAProxy holds another server): the same readings are dead and wedged', () => {
    const o = ownerOf({ inst } as never, {
      gatewayStates: new Map([
        ['qwen', 'running'],
        ['other', 'starting'],
      ]),
      gateway: new Map([['other-0', 'maint']]),
      router: new Map([['qwen-1', 'drain']]),
    });
    expect(o).toBeUndefined();
    expect(judge(readings('dead', o)).verdict).toBe('dead');
    expect(judge(readings('wedged', o)).verdict).toBe('wedged');
  });
});
