// One plan type: a plan on this host and a plan over nodes share PlanCore (engine/plan.ts) and differ
// by their placement, so engine/serve.ts `serve` runs either. Pure: planned from shipped profiles and
// a nodes file built here, nothing started.
import { describe, it, expect } from 'vitest';
import { loadProfile } from '../../src/profiles/load.js';
import { resolveLoaded } from '../../src/profiles/resolve.js';
import { buildServePlan, type PlanCore } from '../../src/engine/plan.js';
import { planCluster, toClusterPlan } from '../../src/engine/cluster/plan.js';
import { NodesFile } from '../../src/profiles/schema.js';
import { groupsOf, endpointsOf, type ServerGroup } from '../../src/engine/groups.js';

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

const CORE: Array<keyof PlanCore> = [
  'placement',
  'profile',
  'engine',
  'stateDir',
  'servedName',
  'readyTimeoutMs',
  'stallTimeoutMs',
];

type Row = [
  string,
  () => PlanCore & { groups: number },
  { placement: 'local' | 'nodes'; profile: string; groups: number; readyTimeoutMs?: number },
];

const cluster = (profile: string, nf: ReturnType<typeof nodes>, sets: string[], readyTimeout?: number) => {
  const opts = {
    nodesFile: '/abs/nodes.yaml',
    set: sets,
    engine: 'sim' as const,
    vllmBin: 'vllm',
    prewarm: false,
    readyTimeout,
  };
  const plan = toClusterPlan(planCluster(profile, nf, opts), { ...opts, stateDir: '/state' });
  return { ...plan, groups: groupsOf(plan).length };
};
const local = (profile: string, sets: string[], readyTimeout?: number) => {
  const plan = buildServePlan(resolveLoaded(loadProfile(profile, { sets })), {
    engine: 'sim',
    vllmBin: 'vllm',
    prewarm: false,
    stateDir: '/state',
    readyTimeout,
  });
  return { ...plan, groups: groupsOf(plan).length };
};

describe('placement: one plan type for one host and for nodes', () => {
  it.each<Row>([
    [
      'one host, one replica: one group on the local node',
      () => local('qwen-dev', []),
      { placement: 'local', profile: 'qwen-dev', groups: 1 },
    ],
    [
      'one host, two replicas: two groups on the local node',
      () => local('qwen-dev', ['parallel.replicas=2', 'parallel.firstGpu=0']),
      { placement: 'local', profile: 'qwen-dev', groups: 2 },
    ],
    [
      'one host, --ready-timeout',
      () => local('qwen-dev', [], 12_000),
      { placement: 'local', profile: 'qwen-dev', groups: 1, readyTimeoutMs: 12_000 },
    ],
    [
      'native over 2 nodes: a group (rank) on each node',
      () => cluster('gpt-oss-120b-2spark', nodes(1, 2), []),
      { placement: 'nodes', profile: 'gpt-oss-120b-2spark', groups: 2 },
    ],
    [
      'Ray over 4 nodes: a group on each node (the head holds Ray and vLLM)',
      () => cluster('qwen3-200b', nodes(8, 4), []),
      { placement: 'nodes', profile: 'qwen3-200b', groups: 4 },
    ],
    [
      'over nodes, --ready-timeout',
      () => cluster('gpt-oss-120b-2spark', nodes(1, 2), [], 34_000),
      { placement: 'nodes', profile: 'gpt-oss-120b-2spark', groups: 2, readyTimeoutMs: 34_000 },
    ],
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

// The one view serve walks: every group of a plan, placed on a node and run by a Runtime, with what
// differs between the placements as data (when it starts, what runs before it, whether it serves).
type G = Pick<ServerGroup, 'server' | 'role' | 'runtime' | 'starts' | 'vllm' | 'ready'> & {
  node: string;
  before?: string;
  port?: boolean;
};
const clusterPlan = (profile: string, nf: ReturnType<typeof nodes>, sets: string[]) => {
  const opts = { nodesFile: '/abs/nodes.yaml', set: sets, engine: 'sim' as const, vllmBin: 'vllm', prewarm: false };
  return toClusterPlan(planCluster(profile, nf, opts), { ...opts, stateDir: '/state' });
};
const localPlan = (profile: string, sets: string[]) =>
  buildServePlan(resolveLoaded(loadProfile(profile, { sets })), {
    engine: 'sim',
    vllmBin: 'vllm',
    prewarm: false,
    stateDir: '/state',
  });
const seen = (g: ServerGroup): G => ({
  server: g.server,
  node: g.node.kind === 'local' ? 'local' : g.node.name,
  role: g.role,
  runtime: g.runtime,
  starts: g.starts,
  vllm: g.vllm,
  ready: g.ready,
  ...(g.before ? { before: g.before } : {}),
  port: g.port !== undefined,
});
const replica = (server: string, starts: G['starts'], runtime: G['runtime'] = 'host'): G => ({
  server,
  node: 'local',
  role: 'replica',
  runtime,
  starts,
  vllm: true,
  ready: true,
  port: true,
});
const rank = (server: string, node: string, head: boolean, o: { ray?: boolean; runtime?: G['runtime'] } = {}): G => ({
  server,
  node,
  role: head ? 'head' : 'worker',
  runtime: o.runtime ?? 'host',
  starts: head ? 'first' : 'after-head',
  vllm: head || !o.ray,
  ready: head,
  ...(o.ray ? { before: 'ray-start' } : {}),
  port: head,
});

describe('groupsOf: a plan is its server groups, each placed on a node', () => {
  it.each<[string, () => Parameters<typeof groupsOf>[0], G[]]>([
    ['one replica on this host', () => localPlan('qwen-dev', []), [replica('qwen-dev-0', 'first')]],
    [
      'two replicas on this host: the second after the first',
      () => localPlan('qwen-dev', ['parallel.replicas=2', 'parallel.firstGpu=0']),
      [replica('qwen-dev-0', 'first'), replica('qwen-dev-1', 'after-previous')],
    ],
    [
      'a replica in a container',
      () => localPlan('qwen-dev', ['engine.runtime=container', 'engine.vllmVersion=0.11.0']),
      [replica('qwen-dev-0', 'first', 'container')],
    ],
    [
      "native over 2 nodes: a vLLM rank per node, the workers after the head; only the head's API serves",
      () => clusterPlan('gpt-oss-120b-2spark', nodes(1, 2), []),
      [rank('gpt-oss-120b-2spark-0', 'n0', true), rank('gpt-oss-120b-2spark-0', 'n1', false)],
    ],
    [
      "Ray over 4 nodes: ray start before every group, vLLM in the head's alone",
      () => clusterPlan('qwen3-200b', nodes(8, 4), []),
      [
        rank('qwen3-200b-0', 'n0', true, { ray: true }),
        ...['n1', 'n2', 'n3'].map((n) => rank('qwen3-200b-0', n, false, { ray: true })),
      ],
    ],
    [
      'Ray in containers over 2 nodes',
      () => clusterPlan('qwen3-200b', nodes(16, 2), ['engine.runtime=container', 'engine.vllmVersion=0.11.0']),
      [
        rank('qwen3-200b-0', 'n0', true, { ray: true, runtime: 'container' }),
        rank('qwen3-200b-0', 'n1', false, { ray: true, runtime: 'container' }),
      ],
    ],
  ])('%s', (_, make, want) => {
    const plan = make();
    const groups = groupsOf(plan);
    expect(groups.map(seen)).toEqual(want);
    // every group is the plan's own, in its start order (a view, not a copy)
    if (plan.placement === 'local') expect(groups.map((g) => 'replica' in g.of && g.of.replica)).toEqual(plan.replicas);
    else expect(groups.map((g) => 'step' in g.of && g.of.step)).toEqual(plan.steps);
    // the endpoints are the groups that answer: one per replica here, the head's alone over nodes
    expect(endpointsOf(plan).map((g) => g.port)).toEqual(
      plan.placement === 'local' ? plan.replicas.map((r) => r.port) : [plan.replica.port],
    );
  });
});
