// Several replicas of a CPU build of vLLM on one host: vLLM's CPU backend would bind each one's
// OpenMP threads to the same cores it picks by itself, so sparkctl renders VLLM_CPU_OMP_THREADS_BIND
// =nobind for them, unless the profile binds them itself. A GPU build, one replica or the simulator
// are untouched. The CPU build is known by the version of the vLLM that runs (its local label).
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { loadProfile, loadPlatform } from '../../src/profiles/load.js';
import { cpuBuild, renderReplicas } from '../../src/profiles/render.js';
import { hostFromPlatform } from '../../src/profiles/validate.js';
import { resolveLoaded } from '../../src/profiles/resolve.js';
import { buildServePlan } from '../../src/engine/plan.js';
import { ROOT } from '../helpers.js';

const dir = join(ROOT, 'test', 'real-vllm', 'profiles');
const tiny = (sets: string[] = []) => loadProfile('tiny', { profilesDir: dir, sets });
const host = hostFromPlatform(loadPlatform('hopper-cuda13'), 4);
const bind = (sets: string[], cpu: boolean | undefined) =>
  renderReplicas(tiny(sets).profile, host, { executable: ['vllm'], stateDir: '/tmp/s', cpuBuild: cpu }).map(
    (r) => r.env.VLLM_CPU_OMP_THREADS_BIND,
  );

describe('a CPU build of vLLM by its version', () => {
  it.each([
    ['0.27.2.dev0+g6adad0876.cpu', true],
    ['0.11.0+cpu', true],
    ['0.11.0+CPU', true],
    ['0.27.2.dev0+g6adad0876', false],
    ['0.11.0', false],
    ['0.11.0+cu128', false],
    // "cpu" must be a segment of the local label, not a part of one (nor in the public version)
    ['0.11.0+cpuinfo', false],
    [undefined, false],
  ])('%s -> %s', (v, want) => expect(cpuBuild(v)).toBe(want));
});

describe('VLLM_CPU_OMP_THREADS_BIND for several CPU replicas on one host', () => {
  it.each([
    // sets, CPU build, the variable per replica
    [['parallel.replicas=2'], true, ['nobind', 'nobind']],
    [['parallel.replicas=3'], true, ['nobind', 'nobind', 'nobind']],
    [['parallel.replicas=1'], true, [undefined]],
    [['parallel.replicas=2'], false, [undefined, undefined]],
    [['parallel.replicas=2'], undefined, [undefined, undefined]],
    // the profile's own binding wins
    [['parallel.replicas=2', 'env.VLLM_CPU_OMP_THREADS_BIND=0|1'], true, ['0|1', '0|1']],
  ] as const)('%j, cpu %s -> %j', (sets, cpu, want) => {
    expect(bind([...sets], cpu)).toEqual(want);
  });

  it('serve decides it from the version of the vLLM that runs, for the real engine only', () => {
    const r = resolveLoaded(tiny(['parallel.replicas=2']), { gpus: 4 });
    const env = (engine: 'vllm' | 'sim', installedVllm?: string) =>
      buildServePlan(r, { engine, vllmBin: 'vllm', prewarm: false, installedVllm }).replicas.map(
        (x) => x.env.VLLM_CPU_OMP_THREADS_BIND,
      );
    expect(env('vllm', '0.27.2.dev0+g6adad0876.cpu')).toEqual(['nobind', 'nobind']);
    expect(env('vllm', '0.27.2')).toEqual([undefined, undefined]);
    expect(env('vllm')).toEqual([undefined, undefined]);
    expect(env('sim', '0.27.2.dev0+g6adad0876.cpu')).toEqual([undefined, undefined]);
  });
});
