// vLLM's sleep mode on GB10 (DGX Spark): level 1 sleeps, wake_up kills the EngineCore (vllm issue #50011; the fix is
// vLLM PR #57629). sleep, wake and the gateway's idle sleep refuse it on a Spark unless the owner says the installed
// vLLM carries the fix. The refusal is decided before any request: no server is needed (the port below is closed).
import { describe, it, expect } from 'vitest';
import { createServer } from 'node:net';
import { unifiedSleepRefusal, sleepInstance, wakeInstance, GB10_SLEEP } from '../../src/engine/sleep.js';
import { modelsOf, type ServedInstance } from '../../src/gateway/plan.js';
import type { Instance } from '../../src/engine/registry.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { unifiedKvBytes } from '../../src/profiles/unified-kv.js';
import { loadPlatform } from '../../src/profiles/platforms.js';
import { Profile } from '../../src/profiles/schema.js';
import { planMemory, GIB } from '../../src/profiles/planner.js';
import { parseModelConfig } from '../../src/model/facts.js';
import { parsePythonJson } from '../../src/model/json.js';
import { FIXTURES } from '../helpers.js';

const spark = { platform: 'dgx-spark-gb10', vllm: { asked: 'auto', resolved: '0.28.0', how: 'installed' as const } };

/** A port nothing listens on (taken, then released). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('sleep mode on a DGX Spark', () => {
  it.each<[string, { launch?: { platform?: string; vllm?: { resolved?: string } } }, Record<string, string>, boolean]>([
    ['a Spark, vLLM 0.28.0', { launch: spark }, {}, true],
    ['a Spark, the version not recorded', { launch: { platform: 'dgx-spark-gb10' } }, {}, true],
    ['a Spark whose owner says the vLLM carries the fix', { launch: spark }, { [GB10_SLEEP.override]: '1' }, false],
    ['an H200 host', { launch: { platform: 'hopper-cuda13', vllm: { resolved: '0.28.0' } } }, {}, false],
    ['an entry written before the platform was kept', {}, {}, false],
  ])('%s', (_n, inst, env, refused) => {
    const why = unifiedSleepRefusal(inst, env);
    expect(!!why).toBe(refused);
    if (why) expect(why).toMatch(/issue #50011.*PR #57629.*SPARKCTL_GB10_SLEEP_FIXED=1/);
  });
  it('sleep and wake refuse on a Spark before sending anything; elsewhere they go to the server (here: unreachable)', async () => {
    const port = await closedPort();
    const inst = {
      name: 'q-0',
      host: '127.0.0.1',
      port,
      servedName: 'q',
      argv: ['--enable-sleep-mode'],
      launch: spark,
    } as unknown as Instance;
    const s = await sleepInstance(inst, 1, { timeoutMs: 2000 });
    expect(s).toMatchObject({ result: 'unsupported', ms: 0 });
    expect(s.detail).toMatch(/crashes when it wakes/);
    const h200 = { ...inst, launch: { ...spark, platform: 'hopper-cuda13' } } as unknown as Instance;
    expect((await sleepInstance(h200, 1, { timeoutMs: 2000 })).result).toBe('unreachable');
    // wake reads /is_sleeping first (unreachable here); the refusal stands for a sleeping Spark server
    expect((await wakeInstance(inst, { timeoutMs: 2000 })).result).toBe('unreachable');
  });
  it('the gateway gives a Spark model without the fix no sleep mode (no idle sleep, no waker, no eviction by sleep)', () => {
    const base: ServedInstance = {
      name: 'q-0',
      profile: 'q',
      servedName: 'q',
      host: '127.0.0.1',
      port: 8000,
      argv: ['--enable-sleep-mode'],
    };
    expect(modelsOf([{ ...base, launch: spark }]).models[0]!.sleepMode).toBe(false);
    expect(modelsOf([{ ...base, launch: { platform: 'hopper-cuda13' } }]).models[0]!.sleepMode).toBe(true);
  });
});

describe("serve on a DGX Spark fixes the KV cache in bytes (vLLM's profiling on unified memory counts the page cache against it)", () => {
  const sparkPlatform = loadPlatform('dgx-spark-gb10');
  const gpt = parseModelConfig(
    parsePythonJson(readFileSync(join(FIXTURES, 'models', 'gpt-oss-120b', 'config.json'), 'utf8')),
  );
  const profile = (engine: Record<string, unknown>) =>
    Profile.parse({
      name: 'gpt',
      model: { id: 'openai/gpt-oss-120b' },
      engine: { maxModelLen: 65536, gpuMemoryUtilization: 0.8, ...engine },
    });
  it('the planned KV bytes, where the target vLLM takes --kv-cache-memory-bytes (0.11 on)', () => {
    const p = profile({ vllmVersion: '0.28.0' });
    const u = unifiedKvBytes(p, sparkPlatform, 121.7 * GIB, gpt);
    expect(u?.bytes).toBe(Math.floor(planMemory(p, 121.7 * GIB, gpt).availableKvBytes));
    // 0.8 x 121.7 GiB less 60.7 GiB of weights less the 2 GiB reserve
    expect(u!.bytes / GIB).toBeCloseTo(0.8 * 121.7 - 60.69 - 2, 1);
    expect(u?.note).toMatch(/PR #286/);
  });
  it.each<[string, Profile, typeof sparkPlatform]>([
    ['a vLLM without the flag (0.10)', profile({ vllmVersion: '0.10.0' }), sparkPlatform],
    ['a version not resolved', profile({}), sparkPlatform],
    ['a profile that sets it', profile({ vllmVersion: '0.28.0', kvCacheMemoryBytes: 1 << 30 }), sparkPlatform],
    ['an H200 (memory of its own)', profile({ vllmVersion: '0.28.0' }), loadPlatform('hopper-cuda13')],
  ])('none for %s', (_n, p, platform) => {
    expect(unifiedKvBytes(p, platform, 121.7 * GIB, gpt)).toBeUndefined();
  });
});
