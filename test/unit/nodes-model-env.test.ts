// serve --nodes tells every node where the model is (src/engine/cluster/model-env.ts): each rank
// starts from an ssh login with its own HOME and none of sparkctl's variables, so the cache path this
// host resolved (where pull --nodes copies the model, the same path on every node), HF_HUB_OFFLINE
// when the model is whole here, model.path by its absolute path and the profile's env (its cache
// folders) are rendered into every node's launch: native and Ray, on the host and in a container
// (mounted at the same path). Before, a rank's env held only VLLM_HOST_IP and the NCCL/Gloo NIC,
// and a container on a node got neither the profile's env nor the head's cache.
import { describe, it, expect } from 'vitest';
import { planCluster, type ClusterInputs } from '../../src/engine/cluster/plan.js';
import { NodesFile } from '../../src/profiles/schema.js';
import type { NodeStep } from '../../src/engine/cluster/ray-plan.js';

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
const TOKEN = 'hf_NOTAREALTOKEN0123456789abcdefXYZ';
const HEAD_ENV = { HOME: '/home/op', HF_HUB_CACHE: '/srv/hf/hub', HF_TOKEN: TOKEN, HF_HOME: '/srv/hf-home' };

type Case = {
  name: string;
  profile: string;
  nf: NodesFile;
  sets?: string[];
  runtime?: 'container';
  env?: Record<string, string>;
  offline?: boolean;
  engine?: 'sim' | 'vllm';
  /** every rank's environment has these */
  env_has: Record<string, string>;
  env_lacks?: string[];
  /** every container run line mounts these (host:container:mode) */
  mounts?: string[];
  /** the model argument of every vLLM argv, and its served name */
  model?: [string, string];
};

const SPARKS = nodes(1, 2);
const RAY4 = nodes(8, 4);
const cases: Case[] = [
  {
    name: 'native, host, a Hub id: the head-resolved HF_HUB_CACHE and offline on both ranks',
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    offline: true,
    env_has: { HF_HUB_CACHE: '/srv/hf/hub', HF_HUB_OFFLINE: '1' },
  },
  {
    name: 'native, host, not whole here: the cache path, no offline',
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    offline: false,
    env_has: { HF_HUB_CACHE: '/srv/hf/hub' },
    env_lacks: ['HF_HUB_OFFLINE'],
  },
  {
    name: 'native, HF_HOME only here: its hub/ folder',
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    env: { HOME: '/home/op', HF_HOME: '/data/hf' },
    env_has: { HF_HUB_CACHE: '/data/hf/hub' },
  },
  {
    name: "native, no variable here: the operator's own ~/.cache (not the ssh login's)",
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    env: { HOME: '/home/op' },
    env_has: { HF_HUB_CACHE: '/home/op/.cache/huggingface/hub' },
  },
  {
    name: 'native, XDG_CACHE_HOME here',
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    env: { HOME: '/home/op', XDG_CACHE_HOME: '/xdg' },
    env_has: { HF_HUB_CACHE: '/xdg/huggingface/hub' },
  },
  {
    name: 'native, container: the cache mounted at the same path, --env on each run line',
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    runtime: 'container',
    offline: true,
    env_has: { HF_HUB_CACHE: '/srv/hf/hub', HF_HUB_OFFLINE: '1' },
    mounts: ['/srv/hf/hub:/srv/hf/hub:ro'],
  },
  {
    name: "native, the profile's env (a compile cache folder) on every rank, mounted read-write in a container",
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    runtime: 'container',
    sets: ['env.VLLM_CACHE_ROOT=/var/cache/vllm-shared'],
    env_has: { VLLM_CACHE_ROOT: '/var/cache/vllm-shared', HF_HUB_CACHE: '/srv/hf/hub' },
    mounts: ['/var/cache/vllm-shared:/var/cache/vllm-shared:rw', '/srv/hf/hub:/srv/hf/hub:ro'],
  },
  {
    name: "the profile's own HF_HUB_CACHE wins over this host's",
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    sets: ['env.HF_HUB_CACHE=/models/hub'],
    env_has: { HF_HUB_CACHE: '/models/hub' },
  },
  {
    name: "container.hfCache: the node's own folder is the container's cache, no HF_HUB_CACHE",
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    runtime: 'container',
    sets: ['container.hfCache=/data/hf'],
    env_has: {},
    env_lacks: ['HF_HUB_CACHE'],
    mounts: ['/data/hf:/root/.cache/huggingface:ro'],
  },
  {
    name: 'native, a relative model.path: by its absolute path here, the name kept',
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    sets: ['model.path=weights/oss'],
    env_has: {},
    env_lacks: ['HF_HUB_CACHE'],
    model: ['/work/models/weights/oss', 'gpt-oss-120b'],
  },
  {
    name: "Ray, host, a Hub id: every `ray start` (workers inherit the raylet's env)",
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    sets: ['parallel.executor=ray'],
    offline: true,
    env_has: { HF_HUB_CACHE: '/srv/hf/hub', HF_HUB_OFFLINE: '1' },
  },
  {
    name: "Ray, container: every node's container mounts the cache and carries the env",
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    runtime: 'container',
    sets: ['parallel.executor=ray', 'env.TORCHINDUCTOR_CACHE_DIR=/var/cache/inductor'],
    env_has: { HF_HUB_CACHE: '/srv/hf/hub', TORCHINDUCTOR_CACHE_DIR: '/var/cache/inductor' },
    mounts: ['/srv/hf/hub:/srv/hf/hub:ro', '/var/cache/inductor:/var/cache/inductor:rw'],
  },
  {
    name: 'Ray, container, model.path: mounted at its path on every node',
    profile: 'qwen3-200b',
    nf: RAY4,
    runtime: 'container',
    sets: ['engine.vllmVersion=0.11.0'],
    env_has: {},
    env_lacks: ['HF_HUB_CACHE'],
    mounts: ['/models/qwen3-200b:/models/qwen3-200b:ro'],
  },
  {
    name: 'the simulator reads the same cache (never offline: it loads no weights)',
    profile: 'gpt-oss-120b-2spark',
    nf: SPARKS,
    engine: 'sim',
    offline: true,
    env_has: { HF_HUB_CACHE: '/srv/hf/hub' },
    env_lacks: ['HF_HUB_OFFLINE'],
  },
];

/** A step's rank environment: its export line on the host, its --env flags in a container. */
function envOf(s: NodeStep): Record<string, string> {
  if (!s.container) return s.env;
  const run = s.argv[0]!;
  const out: Record<string, string> = {};
  run.forEach((a, i) => {
    if (a === '--env' && run[i + 1]?.includes('=')) {
      const [k, ...v] = run[i + 1]!.split('=');
      out[k!] = v.join('=');
    }
  });
  return out;
}
const mountsOf = (s: NodeStep) =>
  s.argv[0]!.flatMap((a, i, all) =>
    a === '--volume' ? [all[i + 1]!.replace(/:ro$/, ':ro').replace(/^([^:]+:[^:]+)$/, '$1:rw')] : [],
  );

describe('serve --nodes: where the model is, on every node', () => {
  it.each(cases)('$name', (c) => {
    const sets = [...(c.sets ?? []), ...(c.runtime ? [`engine.runtime=${c.runtime}`] : [])];
    const opts: ClusterInputs = {
      nodesFile: '/abs/nodes.yaml',
      set: sets,
      engine: c.engine ?? 'vllm',
      vllmBin: 'vllm',
      prewarm: false,
      offline: c.offline,
      here: { env: c.env ?? HEAD_ENV, cwd: '/work/models' },
    };
    const pc = planCluster(c.profile, c.nf, opts);
    expect(pc.steps.length).toBe(c.nf.workers.length + 1);
    for (const s of pc.steps) {
      const env = envOf(s);
      expect(env, s.node).toMatchObject(c.env_has);
      for (const k of c.env_lacks ?? []) expect(env[k], `${s.node} ${k}`).toBeUndefined();
      // the node's own address stays its own
      expect(env.VLLM_HOST_IP).toBe(
        c.nf.head.name === s.node ? c.nf.head.address : c.nf.workers.find((w) => w.name === s.node)!.address,
      );
      if (c.runtime) {
        expect(s.container, s.node).toBeDefined();
        const m = mountsOf(s);
        for (const want of c.mounts ?? []) expect(m, s.node).toContain(want);
        // no folder mounted twice at one target (docker refuses a duplicate mount point)
        const targets = m.map((x) => x.split(':')[1]);
        expect(new Set(targets).size, m.join(' ')).toBe(targets.length);
      } else expect(s.container).toBeUndefined();
      if (c.model) {
        const v = s.argv.find((a) => a.includes('serve'))!;
        const at = v.indexOf('serve') + 1;
        expect(v[at]).toBe(c.model[0]);
        expect(v[v.indexOf('--served-model-name') + 1]).toBe(c.model[1]);
      }
    }
    // a secret of this host's environment never reaches a node's launch (argv or env)
    expect(JSON.stringify(pc.steps)).not.toContain(TOKEN);
    expect(JSON.stringify(pc.steps)).not.toContain('HF_TOKEN');
  });

  it('the dry-run envelope says where the model is read, and each note is one line', () => {
    const pc = planCluster('gpt-oss-120b-2spark', SPARKS, {
      nodesFile: '/abs/nodes.yaml',
      engine: 'vllm',
      vllmBin: 'vllm',
      prewarm: false,
      offline: true,
      here: { env: HEAD_ENV, cwd: '/' },
    });
    expect(pc.model.env).toEqual({ HF_HUB_CACHE: '/srv/hf/hub', HF_HUB_OFFLINE: '1' });
    expect(pc.model.notes.join('\n')).toMatch(
      /HF_HUB_CACHE=\/srv\/hf\/hub on every node: this host's cache, where pull --nodes copies it/,
    );
    for (const n of pc.model.notes) expect(n).not.toContain('\n');
  });
});
