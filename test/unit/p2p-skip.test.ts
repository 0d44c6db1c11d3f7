// vLLM's P2P check is skipped only on preflight's evidence (engine/plan.ts withP2p): its gpu.topology
// check passed (every pair of each TP group on NVLink). Otherwise it is left to vLLM, and said why.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { withP2p } from '../../src/engine/plan.js';
import { loadProfile } from '../../src/profiles/load.js';
import type { ReplicaPlan } from '../../src/profiles/render.js';
import { ROOT } from '../helpers.js';

const profile = (sets: string[]) =>
  loadProfile('tiny', { profilesDir: join(ROOT, 'test', 'real-vllm', 'profiles'), sets }).profile;
const NV = { status: 'pass', observed: 'GPU0-GPU1 NV18' };

describe('the P2P check, skipped only where preflight read the topology', () => {
  it.each([
    // sets, preflight's topology -> skipped, VLLM_SKIP_P2P_CHECK, the note
    [
      ['parallel.tensor=2'],
      NV,
      true,
      '1',
      /^P2P check skipped \(VLLM_SKIP_P2P_CHECK=1\): preflight read the topology, every TP pair on NVLink \(GPU0-GPU1 NV18\)$/,
    ],
    [
      ['parallel.tensor=2'],
      undefined,
      false,
      undefined,
      /^P2P check left to vLLM: preflight did not read the topology/,
    ],
    [
      ['parallel.tensor=2'],
      { status: 'warn', observed: 'GPU0-GPU1 over PCIe (PIX)' },
      false,
      undefined,
      /gpu\.topology was warn: GPU0-GPU1 over PCIe \(PIX\)$/,
    ],
    [
      ['parallel.tensor=2'],
      { status: 'fail', observed: 'GPU0-GPU1 cross NUMA nodes (SYS)' },
      false,
      undefined,
      /was fail/,
    ],
    [
      ['parallel.tensor=2'],
      { status: 'skip', observed: 'nvidia-smi topo -m gave nothing' },
      false,
      undefined,
      /was skip/,
    ],
    // the profile's own setting wins, said
    [
      ['parallel.tensor=2', 'env.VLLM_SKIP_P2P_CHECK="0"'],
      NV,
      false,
      undefined,
      /the profile sets VLLM_SKIP_P2P_CHECK=0 itself/,
    ],
  ] as const)('%j with %j', (sets, topology, skip, env, note) => {
    const replicas = [{ env: {} }, { env: {} }] as unknown as ReplicaPlan[];
    const r = withP2p(profile([...sets]), replicas, { engine: 'vllm', topology });
    expect(r?.skip).toBe(skip);
    expect(r?.note).toMatch(note);
    for (const x of replicas) expect(x.env.VLLM_SKIP_P2P_CHECK).toBe(env);
  });
  it('one GPU a replica: no all-reduce, nothing said', () => {
    expect(withP2p(profile([]), [], { engine: 'vllm', topology: NV })).toBeUndefined();
  });
});
