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
import { cli, tempDir, freePortRange, ROOT, waitFor } from '../helpers.js';
import {
  realVllmUnavailable,
  PROFILES,
  oneRealVllmAtATime,
  VLLM_BIN,
  CPU_VLLM,
  copyTinyPair,
  endGatewaySuite,
} from './real.js';

const why =
  realVllmUnavailable() ??
  (existsSync('/usr/sbin/haproxy') ? undefined : 'no /usr/sbin/haproxy (apt-get install haproxy)');
if (why) console.warn(`real-vLLM on-demand suite skipped: ${why}`);
const MIN = 60_000;
let state: string;
let marker: string;
let base: number;
const env = () => ({ SPARKCTL_STATE_DIR: state, SPARKCTL_TEST_CASE: marker });
const sparkctl = (args: string[], timeout = 60_000) => cli(args, { env: env(), cwd: ROOT, timeout });

async function ask(
  model: string,
  o: { stream?: boolean; maxTokens?: number; onFirst?: () => void; until?: (text: string) => boolean } = {},
) {
  const r = await fetch(`http://127.0.0.1:${base}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model,
      prompt: 'hello there',
      max_tokens: o.maxTokens ?? 3,
      ignore_eos: true,
      temperature: 0,
      stream: Boolean(o.stream),
    }),
    signal: AbortSignal.timeout(15 * MIN),
  });
  let text = '';
  if (o.stream && r.body) {
    const dec = new TextDecoder();
    const reader = (r.body as ReadableStream<Uint8Array>).getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!text) o.onFirst?.();
      text += dec.decode(value, { stream: true });
      // the client leaves (the real server aborts its request on a disconnect)
      if (o.until?.(text)) {
        await reader.cancel();
        break;
      }
    }
  } else text = await r.text();
  return {
    status: r.status,
    retryAfter: r.headers.get('retry-after'),
    text,
    done: o.stream ? text.includes('data: [DONE]') : r.status === 200,
    endedAt: Date.now(),
  };
}

interface Swap {
  profile: string;
  what: 'start' | 'evict';
  ok: boolean;
  ms: number;
  reason: string;
}

describe
  .skipIf(Boolean(why))
  .sequential('real vLLM: two models that do not fit together, swapped on demand by the gateway', () => {
    oneRealVllmAtATime('real vLLM models on demand');
    beforeAll(async () => {
      state = tempDir('sparkctl-real-ondemand-');
      marker = randomUUID();
      base = await freePortRange(8);
      const dir = join(state, 'profiles');
      mkdirSync(dir);
      copyTinyPair(PROFILES, dir);
      // the model's whole 2048 tokens: the stream below must outlive a loaded host's delays (CI: 400 tokens may have
      // ended first)
      const common = [
        '--profiles',
        dir,
        '--engine',
        'vllm',
        '--vllm-bin',
        VLLM_BIN,
        '--skip-preflight',
        '--no-prewarm',
        ...CPU_VLLM,
        '--set',
        'engine.maxModelLen=2048',
      ];
      const cfg = join(state, 'gateway.yaml');
      writeFileSync(
        cfg,
        JSON.stringify({
          gateway: {
            port: base,
            checkIntervalMs: 500,
            models: {
              tiny: { serve: [...common, '--set', `server.port=${base + 3}`] },
              'tiny-b': { serve: [...common, '--set', `server.port=${base + 4}`] },
            },
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

        // a stream on tiny in flight; tiny-b asked for meanwhile: the only room is tiny's, which has a request in
        // flight
        let first!: () => void;
        const firstChunk = new Promise<void>((r) => {
          first = r;
        });
        // 2000 tokens: the stream outlives a loaded host's delays (CI: a 400-token one may have ended before tiny-b's
        // plan read the count); once it has gone on 40 tokens past the refusal, the client leaves (no 80 s wait for the
        // rest)
        let answered = false;
        let atRefusal = 0;
        const tokens = (t: string) => (t.match(/^data: \{/gm) ?? []).length;
        const stream = ask('tiny-qwen3', {
          stream: true,
          maxTokens: 2000,
          onFirst: () => first(),
          until: (t) => {
            if (answered && !atRefusal) atRefusal = tokens(t);
            return answered && tokens(t) >= atRefusal + 40;
          },
        });
        await firstChunk;
        const t1 = Date.now();
        const refused = await ask('tiny-b');
        const refusedMs = Date.now() - t1;
        answered = true;
        const s = await stream;
        const streamedMs = s.endedAt - t1;
        // (CI, twice: no refusal came; tiny-b was swapped in, and the stream, 2000 tokens at about 11 ms each, ended
        // 1.8 s later: the keeper counted nothing in flight and stopped tiny under it. What the keeper did meanwhile,
        // and what it logged, is said with it)
        const swapsSoFar = () =>
          existsSync(join(state, 'gateway', 'swaps.jsonl'))
            ? readFileSync(join(state, 'gateway', 'swaps.jsonl'), 'utf8').trim()
            : 'no swaps yet';
        const keeperLog = () => {
          const f = join(state, 'logs', 'gateway-keeper.log');
          return existsSync(f) ? readFileSync(f, 'utf8').trim().split('\n').slice(-15).join('\n') : 'no keeper log';
        };
        expect(
          refused.status,
          `${refused.text} (the stream ended ${streamedMs} ms after tiny-b was asked for, done: ${s.done}, its end: ${s.text.slice(-300)}); swaps: ${swapsSoFar()}; keeper log:\n${keeperLog()}`,
        ).toBe(503);
        expect(Number(refused.retryAfter)).toBeGreaterThan(0);
        expect(JSON.parse(refused.text).error.message).toMatch(/room|in flight|busy/i);
        // the stream was not cut: tiny was not stopped under it (it went on past the refusal, and ended only when the
        // client left)
        expect(s.status).toBe(200);
        expect(
          s.done,
          `the stream ended whole ${streamedMs} ms after tiny-b was asked for; the refusal came in ${refusedMs} ms: ${refused.text}; swaps: ${swapsSoFar()}; ${s.text.slice(-200)}`,
        ).toBe(false);
        expect(s.text).not.toMatch(/"error"/);
        expect(tokens(s.text) - atRefusal, s.text.slice(-300)).toBeGreaterThanOrEqual(40);

        // the client left: the real vLLM aborts the request (and HAProxy ends the session) a moment later; until then
        // tiny still has it in flight, and the gateway rightly says so with a 503 and Retry-After
        const running = async () => {
          const m = await (await fetch(`http://127.0.0.1:${base + 3}/metrics`, { signal: AbortSignal.timeout(10_000) }))
            .text()
            .catch(() => '');
          return Number(/^vllm:num_requests_running\{[^}]*\} (\S+)$/m.exec(m)?.[1] ?? Number.NaN);
        };
        expect(
          await waitFor(async () => (await running()) === 0, 30_000, 250),
          'tiny aborted the stream its client left',
        ).toBe(true);

        // tiny idle now: tiny-b again stops tiny and starts tiny-b (a refusal while HAProxy still counts the left
        // stream is retried after its Retry-After)
        const t2 = Date.now();
        let b = await ask('tiny-b');
        if (b.status === 503 && /in flight/.test(b.text)) {
          await new Promise((r) => setTimeout(r, Number(b.retryAfter ?? 1) * 1000));
          b = await ask('tiny-b');
        }
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
        // the answers' own usage, per model: tiny's JSON answer (3 tokens) and its stream (no usage asked: counted
        // apart)
        expect(byProfile.tiny.usage).toMatchObject({ withUsage: 1, completion: 3, streamsWithoutUsage: 1 });
        console.log(
          `real on-demand: tiny cold start to answer ${Math.round(startA / 1000)} s; tiny-b refused in ${refusedMs} ms while tiny streamed (${streamedMs} ms more); tiny stopped + tiny-b started to answer ${Math.round(swapB / 1000)} s (${swaps
            .map((x) => `${x.what} ${x.profile} ${x.ms} ms`)
            .join(', ')})`,
        );
      },
      30 * MIN,
    );
  });
