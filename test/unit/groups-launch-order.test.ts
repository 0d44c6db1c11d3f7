// engine/groups.ts launchInOrder: serve's one loop launches a plan's groups in their `starts` order,
// whatever the placement: the first alone; each 'after-previous' group (a replica here) once the one
// before it started; every 'after-head' group (a worker rank) together, once the first started. A
// failure ends the order, keeps what started (the loop stops it) and names every group that did not.
// Pure: the launches are timed promises, nothing is started; the groups are those groupsOf gives.
import { describe, it, expect } from 'vitest';
import { loadProfile } from '../../src/profiles/load.js';
import { resolveLoaded } from '../../src/profiles/resolve.js';
import { buildServePlan } from '../../src/engine/plan.js';
import { planCluster, toClusterPlan } from '../../src/engine/cluster/plan.js';
import { NodesFile } from '../../src/profiles/schema.js';
import {
  groupsOf,
  launchInOrder,
  nodeName,
  stepOf,
  type GroupStarted,
  type ServerGroup,
} from '../../src/engine/groups.js';
import { failedBefore } from '../../src/engine/diagnose.js';

const nodes = (gpus: number, n: number) =>
  NodesFile.parse({
    head: { name: 'n0', address: '10.0.0.1', interface: 'eth0', gpus },
    workers: Array.from({ length: n - 1 }, (_, i) => ({
      name: `n${i + 1}`,
      address: `10.0.0.${i + 2}`,
      interface: 'eth0',
      gpus,
    })),
  });
const opts = {
  nodesFile: '/abs/nodes.yaml',
  set: [] as string[],
  engine: 'sim' as const,
  vllmBin: 'vllm',
  prewarm: false,
};
const native4 = () =>
  groupsOf(
    toClusterPlan(planCluster('qwen3-200b', nodes(8, 4), { ...opts, set: ['parallel.executor=mp'] }), {
      ...opts,
      stateDir: '/s',
    }),
  );
const ray4 = () => groupsOf(toClusterPlan(planCluster('qwen3-200b', nodes(8, 4), opts), { ...opts, stateDir: '/s' }));
const local3 = () =>
  groupsOf(
    buildServePlan(resolveLoaded(loadProfile('qwen-dev', { sets: ['parallel.replicas=3', 'parallel.firstGpu=0'] })), {
      engine: 'sim',
      vllmBin: 'vllm',
      prewarm: false,
      stateDir: '/s',
    }),
  );

const tick = () => new Promise<void>((r) => setTimeout(r, 5));

/**
 * Launches that take a few ms each, logging when each began and ended; `fail` names the groups (by index) that do not
 * start.
 */
function recorder(fail: number[] = []) {
  const log: string[] = [];
  const launch = async (g: ServerGroup): Promise<GroupStarted<string>> => {
    log.push(`begin ${g.index}`);
    await tick();
    log.push(`end ${g.index}`);
    return fail.includes(g.index)
      ? { error: `group ${g.index} did not start on ${nodeName(g)}`, evidence: ['line a', 'line b'] }
      : { ref: `h${g.index}` };
  };
  const started: string[] = [];
  return { log, launch, started, onStarted: (h: string, g: ServerGroup) => started.push(`${h}@${nodeName(g)}`) };
}

describe('launchInOrder: the groups in their starts order', () => {
  it('replicas on this host: one after another, each begun only once the one before it started', async () => {
    const r = recorder();
    const out = await launchInOrder(local3(), r.launch, r.onStarted);
    expect(r.log).toEqual(['begin 0', 'end 0', 'begin 1', 'end 1', 'begin 2', 'end 2']);
    expect(out).toEqual({ refs: ['h0', 'h1', 'h2'] });
    expect(r.started).toEqual(['h0@local', 'h1@local', 'h2@local']);
  });

  it('native ranks: the head alone first, then every worker together (all begun before any ended)', async () => {
    const g = native4();
    expect(g.map((x) => x.starts)).toEqual(['first', 'after-head', 'after-head', 'after-head']);
    const r = recorder();
    const out = await launchInOrder(g, r.launch, r.onStarted);
    expect(r.log.slice(0, 2)).toEqual(['begin 0', 'end 0']);
    expect(r.log.slice(2, 5).sort()).toEqual(['begin 1', 'begin 2', 'begin 3']);
    expect(out.refs).toEqual(['h0', 'h1', 'h2', 'h3']);
    expect(r.started).toEqual(['h0@n0', 'h1@n1', 'h2@n2', 'h3@n3']);
    expect(out.failure).toBeUndefined();
  });

  it("Ray: the loop launches only the groups that run a vLLM: the head's", async () => {
    const r = recorder();
    const out = await launchInOrder(
      ray4().filter((x) => x.vllm),
      r.launch,
      r.onStarted,
    );
    expect(out.refs).toEqual(['h0']);
    expect(r.log).toEqual(['begin 0', 'end 0']);
  });

  it.each<
    [
      string,
      () => ServerGroup[],
      number[],
      { refs: string[]; message: string; evidence: string[]; node?: string; begun: number[] },
    ]
  >([
    [
      'the head fails: nothing else is launched; its evidence as it came, its node named',
      native4,
      [0],
      { refs: [], message: 'group 0 did not start on n0', evidence: ['line a', 'line b'], node: 'n0', begun: [0] },
    ],
    [
      'two workers fail: the others started (kept, to be stopped); each failure named, its evidence by node',
      native4,
      [1, 3],
      {
        refs: ['h0', 'h2'],
        message: 'group 1 did not start on n1\ngroup 3 did not start on n3',
        evidence: ['n1: line a', 'n1: line b', 'n3: line a', 'n3: line b'],
        begun: [0, 1, 2, 3],
      },
    ],
    [
      'a replica fails: the ones after it are never launched',
      local3,
      [1],
      { refs: ['h0'], message: 'group 1 did not start on local', evidence: ['line a', 'line b'], begun: [0, 1] },
    ],
  ])('%s', async (_, groups, fail, want) => {
    const r = recorder(fail);
    const out = await launchInOrder(groups(), r.launch, r.onStarted);
    expect(out.refs).toEqual(want.refs);
    // the one failure shape (engine/diagnose.ts): not started, no log to classify; the node when one node failed
    expect(out.failure).toEqual({
      reason: 'not-started',
      detail: want.message,
      causeId: 'not-started',
      lastLines: want.evidence,
      ...(want.node ? { node: want.node } : {}),
    });
    expect(r.log.filter((l) => l.startsWith('begin')).map((l) => Number(l.split(' ')[1]))).toEqual(want.begun);
    expect(r.started).toEqual(want.refs.map((h) => `${h}@${nodeName(groups().find((g) => `h${g.index}` === h)!)}`));
  });

  it('a worker launch that throws (a bug): every worker beside it that started is told to `started` first (the loop stops them), then the throw goes on', async () => {
    const r = recorder();
    const bug = new Error('internal: a launch threw');
    const out = launchInOrder(
      native4(),
      async (g) => {
        if (g.index === 2) {
          await tick();
          throw bug;
        }
        return r.launch(g);
      },
      r.onStarted,
    );
    await expect(out).rejects.toBe(bug);
    expect(r.started).toEqual(['h0@n0', 'h1@n1', 'h3@n3']);
  });

  it('cancelled: no further group is launched (fewer refs than groups, no failure: the loop calls it interrupted)', async () => {
    const stop = new AbortController();
    const r = recorder();
    const out = await launchInOrder(
      local3(),
      async (g) => {
        const x = await r.launch(g);
        if (g.index === 1) stop.abort();
        return x;
      },
      r.onStarted,
      stop.signal,
    );
    expect(out).toEqual({ refs: ['h0', 'h1'] });
    expect(r.log.filter((l) => l.startsWith('begin'))).toEqual(['begin 0', 'begin 1']);
    // the workers of a native plan are not launched once the head's launch was cancelled
    const stop2 = new AbortController();
    const r2 = recorder();
    const out2 = await launchInOrder(
      native4(),
      async (g) => {
        stop2.abort();
        return r2.launch(g);
      },
      r2.onStarted,
      stop2.signal,
    );
    expect(out2).toEqual({ refs: ['h0'] });
  });

  it("afterFirst (Ray in containers: the head's Ray answering) runs once, after the first group and before the rest; its failure ends the order", async () => {
    const r = recorder();
    const out = await launchInOrder(ray4(), r.launch, r.onStarted, undefined, async (first) => {
      r.log.push(`after ${first}`);
      return undefined;
    });
    expect(r.log.slice(0, 3)).toEqual(['begin 0', 'end 0', 'after h0']);
    expect(r.log.filter((l) => l.startsWith('after'))).toEqual(['after h0']);
    expect(out).toEqual({ refs: ['h0', 'h1', 'h2', 'h3'] });
    const r2 = recorder();
    const no = failedBefore('not-started', 'Ray head on n0 did not start in its container', ['n0: x'], {
      fix: 'read its output',
      node: 'n0',
    });
    const out2 = await launchInOrder(ray4(), r2.launch, r2.onStarted, undefined, async () => no);
    expect(out2).toEqual({ refs: ['h0'], failure: no });
    expect(r2.log).toEqual(['begin 0', 'end 0']);
  });

  it('stepOf: a group over nodes is its node step; a replica on this host has none', () => {
    const g = native4();
    expect(stepOf(g[2]!).node).toBe('n2');
    expect(() => stepOf(local3()[0]!)).toThrow(/internal: replica .* on this host in a plan over nodes/);
  });
});
