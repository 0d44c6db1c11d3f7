// engine.kvCacheMemoryBytes: rendered as --kv-cache-memory-bytes, and VLLM_CPU_KVCACHE_SPACE (which
// vLLM's CPU backend lets silently win over the flag) is kept out of the server's environment.
import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { loadProfile, loadPlatform } from '../../src/profiles/load.js';
import { renderReplicas, engineArgs } from '../../src/profiles/render.js';
import { validateProfile, hostFromPlatform } from '../../src/profiles/validate.js';
import { ROOT } from '../helpers.js';

const dir = join(ROOT, 'test', 'real-vllm', 'profiles');
const tiny = (sets: string[] = []) => loadProfile('tiny', { profilesDir: dir, sets }).profile;
const host = hostFromPlatform(loadPlatform('hopper-cuda13'), 1);

describe('KV cache size in bytes (CPU backend)', () => {
  it.each([
    [[], ['--kv-cache-memory-bytes', '33554432'], ['VLLM_CPU_KVCACHE_SPACE']],
    [['engine.kvCacheMemoryBytes=65536'], ['--kv-cache-memory-bytes', '65536'], ['VLLM_CPU_KVCACHE_SPACE']],
  ])('--set %j -> %j, unset %j', (sets, flag, unset) => {
    const p = tiny(sets as string[]);
    const args = engineArgs(p);
    const i = args.indexOf('--kv-cache-memory-bytes');
    expect(args.slice(i, i + 2)).toEqual(flag);
    expect(renderReplicas(p, host, { executable: ['vllm'], stateDir: '/tmp/s' })[0]!.unsetEnv).toEqual(unset);
  });

  it('without the size nothing is rendered and nothing unset (a GPU profile is untouched)', () => {
    const p = loadProfile('qwen3.5-9b').profile;
    expect(engineArgs(p)).not.toContain('--kv-cache-memory-bytes');
    expect(
      renderReplicas(p, hostFromPlatform(loadPlatform('dgx-a100-os6')), {
        executable: ['vllm'],
        stateDir: '/tmp/s',
      })[0]!.unsetEnv,
    ).toEqual([]);
  });

  it('the variable in the profile env as well is refused: it would win', () => {
    const errs = validateProfile(tiny(['env.VLLM_CPU_KVCACHE_SPACE="1"']), host).filter((x) => x.severity === 'error');
    expect(errs.map((e) => e.path)).toEqual(['env.VLLM_CPU_KVCACHE_SPACE']);
    expect(errs[0]!.message).toContain('silently overrides engine.kvCacheMemoryBytes');
  });

  it('the tiny test profile is valid as shipped', () => {
    expect(validateProfile(tiny(), host).filter((x) => x.severity === 'error')).toEqual([]);
  });
});
