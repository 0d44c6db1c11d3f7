// engine/serve.ts over nodes: a throw on the way (a bug inside an executor's launch) stops what had
// started and says so, as a failure does, before the throw goes on (exit 70 then, nothing orphaned).
// The executor is a stand-in placement (vi.mock of executorFor): it starts nothing, it records what it
// is asked to launch and stop; the plan is planCluster's own for four nodes, native.
import { describe, it, expect, vi } from 'vitest';
import type { ClusterExecutor, GroupLaunch, NodesPlacement } from '../../src/engine/cluster/index.js';

const asked: string[] = [];
const placement: NodesPlacement = {
  refuse: async () => undefined,
  before: async () => ({}),
  launch: async (step, index) => {
    await new Promise((r) => setTimeout(r, 5 * index));
    if (index === 2) throw new Error('internal: rank 2 launch threw');
    asked.push(`launch ${step.node}`);
    return { ref: { node: step.node, pid: 100 + index, logFile: `/l${index}`, rank: index } };
  },
  record: () => {
    throw new Error('internal: not reached');
  },
  watch: () => {
    throw new Error('internal: not reached');
  },
  joined: () => ({ nodes: 0, gpus: 0, complete: false }) as never,
  stop: async (launched: GroupLaunch[]) => {
    asked.push(`stop ${launched.map((l) => l.node).join(',')}`);
  },
};
vi.mock('../../src/engine/cluster/index.js', async (orig) => ({
  ...(await orig<typeof import('../../src/engine/cluster/index.js')>()),
  executorFor: (): ClusterExecutor => ({
    kind: 'native',
    placement: () => placement,
    stop: async () => ({}) as never,
    status: async () => ({}) as never,
  }),
}));

const { serve } = await import('../../src/engine/serve.js');
const { planCluster, toClusterPlan } = await import('../../src/engine/cluster/plan.js');
const { NodesFile } = await import('../../src/profiles/schema.js');
const { tempDirs } = await import('../helpers.js');
const dirs = tempDirs('serve-nodes-abandon-');

describe('serve over nodes: a throw while the ranks launch', () => {
  it('stops every rank that started (not the one that threw), says stopping, and the throw goes on', async () => {
    const nf = NodesFile.parse({
      head: { name: 'n0', address: '10.9.3.1', interface: 'eth0', gpus: 8 },
      workers: [1, 2, 3].map((i) => ({ name: `n${i}`, address: `10.9.3.${i + 1}`, interface: 'eth0', gpus: 8 })),
    });
    const opts = {
      nodesFile: '/abs/nodes.yaml',
      set: ['parallel.executor=mp'],
      engine: 'sim' as const,
      vllmBin: 'vllm',
      prewarm: false,
    };
    const plan = toClusterPlan(planCluster('qwen3-200b', nf, opts), { ...opts, stateDir: dirs() });
    const events: Array<{ type: string }> = [];
    await expect(serve(plan, { onEvent: (e) => events.push(e), secrets: {} })).rejects.toThrow(
      'internal: rank 2 launch threw',
    );
    expect(asked.filter((a) => a.startsWith('launch')).sort()).toEqual(['launch n0', 'launch n1', 'launch n3']);
    expect(asked.at(-1)).toBe('stop n0,n1,n3');
    expect(events.filter((e) => e.type === 'launched')).toHaveLength(3);
    expect(events.at(-1)).toEqual({ type: 'stopping', why: 'failed', replicas: 3 });
  });
});
