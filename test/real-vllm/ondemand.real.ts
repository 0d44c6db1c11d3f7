// Models on demand with the real vLLM CPU build behind the gateway's real HAProxy: the tiny Qwen3
// served as two models (tiny, and tiny-b: its copy with its own served name) that do not fit the
// given memory together: `--gpu-memory 3GiB`, each needing about 2.05 GiB by the plan (weights, its
// KV cache of 32 MiB: the profile's kvCacheMemoryBytes, which sparkctl passes as
// --kv-cache-memory-bytes and for which it keeps the legacy VLLM_CPU_KVCACHE_SPACE out of the
// server's environment; the 1.5 GiB reserve; the CUDA context). Nothing runs at first. Requests
// alternate: tiny (started), tiny-b while tiny streams (no room: tiny has a request in flight, so it
// is not stopped: 503 + Retry-After at once, the stream finishes), tiny-b again (tiny stopped, tiny-b
// started), every other request answered. The CPU build has no sleep mode: eviction by sleep is
// tested on the simulator (test/e2e/gateway-ondemand.test.ts). Two vLLM starts in all.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { cli, tempDir, freePortRange, ROOT } from '../helpers.js';
import { realVllmUnavailable, PROFILES, oneRealVllmAtATime, VLLM_BIN, CPU_VLLM, copyTinyPair, endGatewaySuite } from './real.js';

const why = realVllmUnavailable() ?? (existsSync('/usr/sbin/haproxy') ? undefined : 'no /usr/sbin/haproxy (apt-get install haproxy)');
if (why) console.warn(`real-vLLM on-demand suite skipped: ${why}`);
const MIN = 60_000;
let state: string;
let marker: string;
let base: number;
const env = () => ({ SPARKCTL_STATE_DIR: state, SPARKCTL_TEST_CASE: marker });
const sparkctl = (args: string[], timeout = 60_000) => cli(args, { env: env(), cwd: ROOT, timeout });

async function ask(model: string, o: { stream?: boolean; maxTokens?: number; onFirst?: () => void } = {}) {
  const r = await fetch(`http://127.0.0.1:${base}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, prompt: 'hello there', max_tokens: o.maxTokens ?? 3, ignore_eos: true, temperature: 0, stream: Boolean(o.stream) }),
    signal: AbortSignal.timeout(15 * MIN),
  });
  let text = '';
  if (o.stream && r.body) {
    const dec = new TextDecoder();
    for await (const c of r.body as unknown as AsyncIterable<Uint8Array>) {
      if (!text) o.onFirst?.();
      text += dec.decode(c, { stream: true });
    }
  } else text = await r.text();
  return { status: r.status, retryAfter: r.headers.get('retry-after'), text, done: o.stream ? text.includes('data: [DONE]') : r.status === 200 };
}

interface Swap {
  profile: string;
  what: 'start' | 'evict';
  ok: boolean;
  ms: number;
  reason: string;
}

describe.skipIf(Boolean(why)).sequential('real vLLM: two models that do not fit together, swapped on demand by the gateway', () => {
  oneRealVllmAtATime('real vLLM models on demand');
  beforeAll(async () => {
    state = tempDir('sparkctl-real-ondemand-');
    marker = randomUUID();
    base = await freePortRange(8);
    const dir = join(state, 'profiles');
    mkdirSync(dir);
    copyTinyPair(PROFILES, dir);
    const common = ['--profiles', dir, '--engine', 'vllm', '--vllm-bin', VLLM_BIN, '--skip-preflight', '--no-prewarm', ...CPU_VLLM];
    const cfg = join(state, 'gateway.yaml');
    writeFileSync(
      cfg,
      JSON.stringify({
        gateway: {
          port: base,
          checkIntervalMs: 500,
          models: { tiny: { serve: [...common, '--set', `server.port=${base + 3}`] }, 'tiny-b': { serve: [...common, '--set', `server.port=${base + 4}`] } },
          onDemand: { gpuMemory: '3GiB', startTimeout: '14m', evict: 'stop' },
        },
      }),
    );
    const up = await sparkctl(['gateway', 'up', '--config', cfg, '--json']);
    expect(up.exitCode, up.stderr + up.stdout).toBe(0);
  });
  afterAll(() => endGatewaySuite(sparkctl, state, marker), 3 * MIN);

  it(
    'alternating requests: tiny started; tiny-b while tiny streams is refused at once (tiny not stopped); tiny-b again swaps them; every other request answered',
    async () => {
      const t0 = Date.now();
      const a = await ask('tiny-qwen3');
      expect(a.status, a.text).toBe(200);
      const startA = Date.now() - t0;

      // a stream on tiny in flight; tiny-b asked for meanwhile: the only room is tiny's, which has a request in flight
      let first!: () => void;
      const firstChunk = new Promise<void>((r) => {
        first = r;
      });
      const stream = ask('tiny-qwen3', { stream: true, maxTokens: 400, onFirst: () => first() });
      await firstChunk;
      const t1 = Date.now();
      const refused = await ask('tiny-b');
      const refusedMs = Date.now() - t1;
      const s = await stream;
      expect(refused.status, refused.text).toBe(503);
      expect(Number(refused.retryAfter)).toBeGreaterThan(0);
      expect(JSON.parse(refused.text).error.message).toMatch(/room|in flight|busy/i);
      // the stream was not cut: tiny was not stopped under it
      expect(s.status).toBe(200);
      expect(s.done, s.text.slice(-300)).toBe(true);

      // tiny idle now: tiny-b again stops tiny and starts tiny-b
      const t2 = Date.now();
      const b = await ask('tiny-b');
      expect(b.status, b.text).toBe(200);
      const swapB = Date.now() - t2;

      const swaps = readFileSync(join(state, 'gateway', 'swaps.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Swap);
      const done = swaps.filter((x) => x.ok).map((x) => `${x.what} ${x.profile}`);
      expect(done).toEqual(['start tiny', 'evict tiny', 'start tiny-b']);
      const st = JSON.parse((await sparkctl(['gateway', 'status', '--json'])).stdout);
      const byProfile = Object.fromEntries(st.models.map((m: { profile: string }) => [m.profile, m]));
      expect(byProfile.tiny).toMatchObject({ state: 'stopped', onDemand: { starts: 1, evictions: 1 } });
      expect(byProfile['tiny-b']).toMatchObject({ state: 'running', onDemand: { starts: 1, evictions: 0 } });
      // the answers' own usage, per model: tiny's JSON answer (3 tokens) and its stream (no usage asked: counted apart)
      expect(byProfile.tiny.usage).toMatchObject({ withUsage: 1, completion: 3, streamsWithoutUsage: 1 });
      console.log(
        `real on-demand: tiny cold start to answer ${Math.round(startA / 1000)} s; tiny-b refused in ${refusedMs} ms while tiny streamed; tiny stopped + tiny-b started to answer ${Math.round(swapB / 1000)} s (${swaps
          .map((x) => `${x.what} ${x.profile} ${x.ms} ms`)
          .join(', ')})`,
      );
    },
    30 * MIN,
  );
});
