import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
// @ts-expect-error no types shipped
import parsePrometheus from 'parse-prometheus-text-format';
import { startSim, cli, freePort, sleep, type SimHandle } from '../helpers.js';

type Family = {
  name: string;
  type: string;
  metrics: Array<{ value?: string; labels?: Record<string, string>; buckets?: Record<string, string> }>;
};
const metrics = async (url: string): Promise<Map<string, Family>> => {
  const text = await (await fetch(`${url}/metrics`)).text();
  return new Map((parsePrometheus(text) as Family[]).map((f) => [f.name, f]));
};
const value = (m: Map<string, Family>, name: string) => Number(m.get(name)?.metrics[0]?.value ?? NaN);

describe('simulator: HTTP surface with real clients', () => {
  let sim: SimHandle;
  const KEY = 'sk-sim-test-key';
  beforeAll(async () => {
    sim = await startSim(
      [
        '--tensor-parallel-size',
        '2',
        '--max-model-len',
        '4096',
        '--served-model-name',
        'qwen-test',
        '--sim-time-factor',
        '0.05',
        '--sim-platform',
        'dgx-a100-os6',
      ],
      {
        env: { VLLM_API_KEY: KEY },
      },
    );
  });
  afterAll(async () => sim?.stop());

  it('printed vLLM start-up lines in order with planner values', () => {
    const out = sim.output();
    const order = [
      'non-default args:',
      'Using max model len 4096',
      'Starting to load model',
      'Loading safetensors checkpoint shards: 100%',
      'Model loading took',
      'Available KV cache memory',
      'GPU KV cache size:',
      'Maximum concurrency for 4,096 tokens per request',
      'Capturing CUDA graphs',
      'init engine',
      'Starting vLLM API server 0 on http://127.0.0.1',
      'Application startup complete.',
    ];
    let at = -1;
    for (const line of order) {
      const i = out.indexOf(line);
      expect(i, line).toBeGreaterThan(at);
      at = i;
    }
  });

  it('OpenAI SDK: models, chat, streaming with usage, completions', async () => {
    const client = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: KEY, maxRetries: 0 });
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['qwen-test']);
    const chat = await client.chat.completions.create({
      model: 'qwen-test',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 5,
    });
    expect(chat.choices[0]!.message.content!.split(' ')).toHaveLength(5);
    expect(chat.usage).toMatchObject({ completion_tokens: 5, prompt_tokens: 6 });
    const stream = await client.chat.completions.create({
      model: 'qwen-test',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text.split(' ')).toHaveLength(4);
    expect(usage).toMatchObject({ completion_tokens: 4 });
    const comp = await client.completions.create({ model: 'qwen-test', prompt: 'abcdefgh', max_tokens: 2 });
    expect(comp.usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 2 });
  });

  it('Anthropic SDK: messages and streaming events', async () => {
    const client = new Anthropic({ baseURL: sim.url, authToken: KEY, apiKey: null, maxRetries: 0 });
    const msg = await client.messages.create({
      model: 'qwen-test',
      max_tokens: 3,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(msg.content[0]).toMatchObject({ type: 'text' });
    expect(msg.usage.output_tokens).toBe(3);
    const events: string[] = [];
    const stream = client.messages.stream({
      model: 'qwen-test',
      max_tokens: 3,
      messages: [{ role: 'user', content: 'hi' }],
    });
    for await (const ev of stream) events.push(ev.type);
    expect(events[0]).toBe('message_start');
    expect(events).toContain('content_block_delta');
    expect(events.at(-1)).toBe('message_stop');
  });

  it('401 on /v1 without the key; /health, /metrics and /version stay open', async () => {
    const bad = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await expect(bad.models.list()).rejects.toMatchObject({ status: 401 });
    const anth = new Anthropic({ baseURL: sim.url, apiKey: 'wrong', maxRetries: 0 });
    await expect(
      anth.messages.create({ model: 'qwen-test', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toMatchObject({ status: 401 });
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
    expect((await fetch(`${sim.url}/metrics`)).status).toBe(200);
    expect(await (await fetch(`${sim.url}/version`)).json()).toEqual({ version: '0.17.0' });
  });

  it('errors in OpenAI shape: context length, unknown model, bad JSON', async () => {
    const h = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
    const long = await fetch(`${sim.url}/v1/completions`, {
      method: 'POST',
      headers: h,
      body: JSON.stringify({ model: 'qwen-test', prompt: 'x'.repeat(16000), max_tokens: 200 }),
    });
    expect(long.status).toBe(400);
    const lj = await long.json();
    // vLLM's words (checked against the real server in test/real-vllm): output tokens, then the least prompt that
    // overflows.
    expect(lj.error).toMatchObject({ type: 'BadRequestError', param: 'input_tokens', code: 400 });
    expect(lj.error.message).toMatch(
      /maximum context length is 4096 tokens\. However, you requested 200 output tokens and your prompt contains at least 3897 input tokens/,
    );
    const unknown = await fetch(`${sim.url}/v1/completions`, {
      method: 'POST',
      headers: h,
      body: JSON.stringify({ model: 'nope', prompt: 'x' }),
    });
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error).toMatchObject({ type: 'NotFoundError', code: 404 });
    const badJson = await fetch(`${sim.url}/v1/chat/completions`, { method: 'POST', headers: h, body: '{nope' });
    expect(badJson.status).toBe(400);
    // FastAPI's request validation, as vLLM answers it: type "Bad Request", param body.<position>.
    expect((await badJson.json()).error).toMatchObject({ type: 'Bad Request', param: 'body.1', code: 400 });
  });

  it('/tokenize counts with the documented tokenizer (4 bytes a token)', async () => {
    const r = await fetch(`${sim.url}/tokenize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'abcdefghi' }),
    });
    expect(await r.json()).toMatchObject({ count: 3, max_model_len: 4096 });
  });

  it('/metrics parses and its counters and histograms move with traffic', async () => {
    const before = await metrics(sim.url);
    const client = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: KEY, maxRetries: 0 });
    await client.completions.create({ model: 'qwen-test', prompt: 'abcd'.repeat(10), max_tokens: 7 });
    const after = await metrics(sim.url);
    expect(value(after, 'vllm:generation_tokens_total') - value(before, 'vllm:generation_tokens_total')).toBe(7);
    expect(value(after, 'vllm:prompt_tokens_total') - value(before, 'vllm:prompt_tokens_total')).toBe(10);
    const ttft = after.get('vllm:time_to_first_token_seconds')!;
    expect(ttft.type).toBe('HISTOGRAM');
    const count = (f: Family) => Number(f.metrics[0]!.buckets!['+Inf']);
    expect(count(ttft)).toBe(count(before.get('vllm:time_to_first_token_seconds')!) + 1);
    for (const n of [
      'vllm:num_requests_running',
      'vllm:num_requests_waiting',
      'vllm:kv_cache_usage_perc',
      'vllm:num_preemptions_total',
      'vllm:request_success_total',
      'vllm:inter_token_latency_seconds',
      'vllm:e2e_request_latency_seconds',
      'vllm:request_queue_time_seconds',
    ]) {
      expect(after.has(n), n).toBe(true);
    }
    expect(after.get('vllm:num_requests_running')!.metrics[0]!.labels).toMatchObject({
      model_name: 'qwen-test',
      engine: '0',
    });
  });
});

describe('simulator: timing model', () => {
  it('the first request of a new prompt-length bucket is cold, the next warm', async () => {
    // The cold penalty (3 s) dwarfs what a loaded host adds to one request, so the warm one's bound
    // (half the penalty) holds however busy the machine is: it tests the penalty, not the host.
    const sim = await startSim(['--sim-cold-ms', '3000', '--sim-seed', '7']);
    try {
      const t = async (prompt: string) => {
        const s = performance.now();
        await fetch(`${sim.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ prompt, max_tokens: 1 }),
        });
        return performance.now() - s;
      };
      const cold = await t('a'.repeat(512));
      const warm = await t('b'.repeat(512));
      expect(cold).toBeGreaterThan(2950);
      expect(warm).toBeLessThan(1500);
    } finally {
      await sim.stop();
    }
  });

  it('requests beyond max num seqs wait, and show in num_requests_waiting', async () => {
    const sim = await startSim(['--max-num-seqs', '2', '--sim-decode-ms', '100', '--sim-cold-ms', '0']);
    try {
      const reqs = Array.from({ length: 5 }, () =>
        fetch(`${sim.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ prompt: 'x', max_tokens: 5 }),
        }),
      );
      await sleep(150);
      const m = await metrics(sim.url);
      expect(value(m, 'vllm:num_requests_running')).toBe(2);
      expect(value(m, 'vllm:num_requests_waiting')).toBe(3);
      expect(value(m, 'vllm:kv_cache_usage_perc')).toBeGreaterThan(0);
      await Promise.all(reqs);
    } finally {
      await sim.stop();
    }
  });

  it('is deterministic with --sim-seed', async () => {
    const a = await startSim(['--sim-seed', '42', '--sim-time-factor', '0']);
    const b = await startSim(['--sim-seed', '42', '--sim-time-factor', '0']);
    try {
      const text = async (s: SimHandle) =>
        (
          await (
            await fetch(`${s.url}/v1/completions`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ prompt: 'x', max_tokens: 8 }),
            })
          ).json()
        ).choices[0].text;
      expect(await text(a)).toBe(await text(b));
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});

describe('simulator: faults (names are an interface)', () => {
  const startFault = (fault: string, extra: string[] = [], waitReady = false) =>
    startSim(['--sim-fault', fault, ...extra], { waitReady });

  it('refuses connections before ready (hang-at-load never becomes ready and stops logging)', async () => {
    const sim = await startFault('hang-at-load', ['--sim-load-seconds', '0.4']);
    try {
      // until it has logged half the shards (a loaded machine may take seconds to start node), then some more
      for (const t0 = Date.now(); !sim.output().includes('shards:  50%') && Date.now() - t0 < 15_000; ) await sleep(50);
      await sleep(800);
      await expect(fetch(`${sim.url}/health`)).rejects.toThrow();
      const len = sim.output().length;
      expect(sim.output()).toContain('Loading safetensors checkpoint shards:  50%');
      await sleep(400);
      expect(sim.output().length).toBe(len);
      expect(sim.proc.exitCode).toBeNull();
    } finally {
      await sim.stop();
    }
  });

  it.each([
    ['oom-at-start', /torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate/],
    ['kv-too-small', /the estimated maximum model length is \d+/],
    ['port-in-use', /OSError: \[Errno 98\] Address already in use/],
  ])('%s prints vLLM lines and exits 1', async (fault, line) => {
    const sim = await startFault(fault);
    const r = await sim.proc;
    expect(r.exitCode).toBe(1);
    expect(sim.output()).toMatch(line);
  });

  it('a real port conflict gives the same error', async () => {
    const first = await startSim([]);
    try {
      const r = await cli([
        'sim',
        'serve',
        'Qwen/Qwen3.5-9B',
        '--host',
        '127.0.0.1',
        '--port',
        String(first.port),
        '--sim-load-seconds',
        '0.1',
      ]);
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toContain('Address already in use');
    } finally {
      await first.stop();
    }
  });

  it('exit-after:S prints an NCCL error and exits 1', async () => {
    const sim = await startFault('exit-after:0.5');
    const r = await sim.proc;
    expect(r.exitCode).toBe(1);
    expect(sim.output()).toMatch(/unhandled system error/);
  });

  it('engine-dead-after:N: /health 503 and generations fail', async () => {
    const sim = await startSim(['--sim-time-factor', '0'], { env: { SPARKCTL_SIM_FAULT: 'engine-dead-after:1' } });
    try {
      const gen = () =>
        fetch(`${sim.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ prompt: 'x', max_tokens: 1 }),
        });
      expect((await gen()).status).toBe(200);
      expect((await fetch(`${sim.url}/health`)).status).toBe(200);
      const dead = await gen();
      expect(dead.status).toBe(500);
      expect((await dead.json()).error.message).toContain('EngineDeadError');
      expect((await fetch(`${sim.url}/health`)).status).toBe(503);
    } finally {
      await sim.stop();
    }
  });

  it('zombie-after:N: /health still 200, generations never finish', async () => {
    const sim = await startSim(['--sim-time-factor', '0', '--sim-fault', 'zombie-after:0']);
    try {
      await expect(
        fetch(`${sim.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ prompt: 'x', max_tokens: 1 }),
          signal: AbortSignal.timeout(500),
        }),
      ).rejects.toThrow();
      expect((await fetch(`${sim.url}/health`)).status).toBe(200);
    } finally {
      await sim.stop();
    }
  });

  it('slow:MS adds to every token', async () => {
    const sim = await startSim([
      '--sim-time-factor',
      '1',
      '--sim-cold-ms',
      '0',
      '--sim-decode-ms',
      '1',
      '--sim-prefill-tps',
      '1000000',
      '--sim-fault',
      'slow:50',
    ]);
    try {
      const s = performance.now();
      await fetch(`${sim.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'x', max_tokens: 4 }),
      });
      expect(performance.now() - s).toBeGreaterThan(4 * 50 - 10);
    } finally {
      await sim.stop();
    }
  });

  it('--sim-error-rate 1 with rate_limit: 429 that the OpenAI SDK sees', async () => {
    const sim = await startSim(['--sim-time-factor', '0', '--sim-error-rate', '1', '--sim-error-types', 'rate_limit']);
    try {
      const client = new OpenAI({ baseURL: `${sim.url}/v1`, apiKey: 'x', maxRetries: 0 });
      await expect(
        client.completions.create({ model: 'Qwen/Qwen3.5-9B', prompt: 'x', max_tokens: 1 }),
      ).rejects.toMatchObject({ status: 429 });
    } finally {
      await sim.stop();
    }
  });

  it('rejects a flag vLLM would reject, with vLLM words and exit 2', async () => {
    const port = await freePort();
    const r = await cli(['sim', 'serve', 'Qwen/Qwen3.5-9B', '--port', String(port), '--disable-log-requests']);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('unrecognized arguments: --disable-log-requests');
    const old = await cli(
      [
        'sim',
        'serve',
        'Qwen/Qwen3.5-9B',
        '--port',
        String(port),
        '--disable-log-requests',
        '--sim-fault',
        'port-in-use',
      ],
      { env: { SPARKCTL_SIM_VLLM_VERSION: '0.11.0' } },
    );
    expect(old.stderr).not.toContain('unrecognized arguments');
  });

  // vLLM 0.27's shutdown (launcher.py, v1/engine/core.py): abort unless --shutdown-timeout N > 0.
  const slow = ['--sim-cold-ms', '0', '--sim-decode-ms', '100', '--sim-prefill-tps', '1000000'];
  const v025 = { env: { SPARKCTL_SIM_VLLM_VERSION: '0.25.0' } };
  const complete = (url: string) =>
    fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'x', max_tokens: 5 }),
    });

  it('SIGTERM with --shutdown-timeout drains a running request, logs mode=drain and its count, then exits 0', async () => {
    const sim = await startSim([...slow, '--shutdown-timeout', '5'], v025);
    const req = complete(sim.url);
    await sleep(100);
    sim.proc.kill('SIGTERM');
    const res = await req;
    expect(res.status).toBe(200);
    expect((await res.json()).usage.completion_tokens).toBe(5);
    expect((await sim.proc).exitCode).toBe(0);
    const out = sim.output();
    expect(out).toContain('[shutdown] API server: stopping engine client mode=drain timeout=5s');
    expect(out).toContain('[shutdown] EngineCore: draining in-flight requests count=1 timeout=5s');
    expect(out).toContain('[shutdown] EngineCore: request processing complete');
  });

  it('SIGTERM without --shutdown-timeout aborts the running request (vLLM mode=abort) and exits at once', async () => {
    const sim = await startSim(slow, v025);
    const req = complete(sim.url);
    await sleep(100);
    const t0 = performance.now();
    sim.proc.kill('SIGTERM');
    const res = await req;
    expect(res.status).not.toBe(200);
    expect((await sim.proc).exitCode).toBe(0);
    expect(performance.now() - t0).toBeLessThan(300);
    const out = sim.output();
    expect(out).toContain('[shutdown] API server: stopping engine client mode=abort timeout=0s');
    expect(out).toContain('[shutdown] EngineCore: aborting in-flight requests count=1');
    expect(out).not.toContain('draining');
  });

  it('a vLLM without --shutdown-timeout in its table: the flag is refused, and SIGTERM logs no [shutdown] lines', async () => {
    const port = await freePort();
    const r = await cli(['sim', 'serve', 'Qwen/Qwen3.5-9B', '--port', String(port), '--shutdown-timeout', '5'], {
      env: { SPARKCTL_SIM_VLLM_VERSION: '0.16.0' },
    });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('unrecognized arguments: --shutdown-timeout');
    const sim = await startSim(slow, { env: { SPARKCTL_SIM_VLLM_VERSION: '0.16.0' } });
    sim.proc.kill('SIGTERM');
    expect((await sim.proc).exitCode).toBe(0);
    expect(sim.output()).not.toContain('[shutdown]');
  });
});
