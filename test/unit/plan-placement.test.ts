// One plan type: a plan on this host and a plan over nodes share PlanCore (engine/plan.ts) and differ
// by their placement, so engine/serve.ts `serve` runs either. Pure: planned from shipped profiles and
// a nodes file built here, nothing started.
import { describe, it, expect } from 'vitest';
import { loadProfile } from '../../src/profiles/load.js';
import { resolveLoaded } from '../../src/profiles/resolve.js';
import { buildServePlan, type PlanCore } from '../../src/engine/plan.js';
import { planCluster, toClusterPlan } from '../../src/engine/cluster/plan.js';
import { NodesFile } from '../../src/profiles/schema.js';

const nodes = (gpus: number, n: number) =>
  NodesFile.parse({
    head: { name: 'n0', address: '10.0.0.1', interface: 'eth0', gpus },
    workers: Array.from({ length: n - 1 }, (_, i) => ({ name: `n${i + 1}`, address: `10.0.0.${i + 2}`, interface: 'eth0', gpus })),
  });

const CORE: Array<keyof PlanCore> = ['placement', 'profile', 'engine', 'stateDir', 'servedName', 'readyTimeoutMs', 'stallTimeoutMs'];

type Row = [string, () => PlanCore & { groups: number }, { placement: 'local' | 'nodes'; profile: string; groups: number; readyTimeoutMs?: number }];

const cluster = (profile: string, nf: ReturnType<typeof nodes>, sets: string[], readyTimeout?: number) => {
  const opts = { nodesFile: '/abs/nodes.yaml', set: sets, engine: 'sim' as const, vllmBin: 'vllm', prewarm: false, readyTimeout };
  const plan = toClusterPlan(planCluster(profile, nf, opts), { ...opts, stateDir: '/state' });
  return { ...plan, groups: plan.steps.length };
};
const local = (profile: string, sets: string[], readyTimeout?: number) => {
  const plan = buildServePlan(resolveLoaded(loadProfile(profile, { sets })), { engine: 'sim', vllmBin: 'vllm', prewarm: false, stateDir: '/state', readyTimeout });
  return { ...plan, groups: plan.replicas.length };
};

describe('placement: one plan type for one host and for nodes', () => {
  it.each<Row>([
    ['one host, one replica: one group on the local node', () => local('qwen-dev', []), { placement: 'local', profile: 'qwen-dev', groups: 1 }],
    ['one host, two replicas: two groups on the local node', () => local('qwen-dev', ['parallel.replicas=2', 'parallel.firstGpu=0']), { placement: 'local', profile: 'qwen-dev', groups: 2 }],
    ['one host, --ready-timeout', () => local('qwen-dev', [], 12_000), { placement: 'local', profile: 'qwen-dev', groups: 1, readyTimeoutMs: 12_000 }],
    ['native over 2 nodes: a group (rank) on each node', () => cluster('gpt-oss-120b-2spark', nodes(1, 2), []), { placement: 'nodes', profile: 'gpt-oss-120b-2spark', groups: 2 }],
    ['Ray over 4 nodes: a group on each node (the head holds Ray and vLLM)', () => cluster('qwen3-200b', nodes(8, 4), []), { placement: 'nodes', profile: 'qwen3-200b', groups: 4 }],
    ['over nodes, --ready-timeout', () => cluster('gpt-oss-120b-2spark', nodes(1, 2), [], 34_000), { placement: 'nodes', profile: 'gpt-oss-120b-2spark', groups: 2, readyTimeoutMs: 34_000 }],
  ])('%s', (_, make, want) => {
    const plan = make();
    for (const k of CORE) expect(plan[k], k).toBeDefined();
    expect(plan.placement).toBe(want.placement);
    // the profile itself, as resolved for the placement (not its name): serve reads the same fields either way
    expect(plan.profile.name).toBe(want.profile);
    expect(plan.servedName).toBeTruthy();
    expect(plan.groups).toBe(want.groups);
    expect(plan.readyTimeoutMs).toBe(want.readyTimeoutMs ?? plan.profile.server.readyTimeoutSeconds * 1000);
    expect(plan.stallTimeoutMs).toBe(plan.profile.server.stallTimeoutSeconds * 1000);
    // the key is never in a plan as built: serve takes it from the run's secrets on either placement
    expect(JSON.stringify(plan)).not.toMatch(/apiKey"/);
  });
});
