// The simulator's Anthropic path as vLLM 0.27.2 answers it (checked against the real CPU build in
// test/real-vllm/claude-code.real.ts): refusals in vLLM's status, shape and words; answers that
// stop on their own; tool calls where the server parses them; the stream's event order.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import Anthropic from '@anthropic-ai/sdk';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startSim, tempDir, rmrf, sleep, type SimHandle } from '../helpers.js';

const READ = {
  name: 'Read',
  description: 'Reads a file',
  input_schema: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] },
};
const post = async (url: string, path: string, body: unknown) => {
  const r = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, type: r.headers.get('content-type') ?? '', text: await r.text() };
};
const events = (sse: string) =>
  sse
    .split('\n\n')
    .filter(Boolean)
    .map((e) => {
      const [ev, data] = e.split('\n');
      return { event: ev!.slice('event: '.length), data: JSON.parse(data!.slice('data: '.length)) };
    });

describe('simulator /v1/messages: vLLM on the Anthropic path', () => {
  let tools: SimHandle;
  let plain: SimHandle;
  let dir: string;
  beforeAll(async () => {
    dir = tempDir();
    const common = ['--max-model-len', '4096', '--served-model-name', 'm', '--sim-time-factor', '0'];
    tools = await startSim([...common, '--enable-auto-tool-choice', '--tool-call-parser', 'qwen3_coder'], {
      env: { SPARKCTL_SIM_REQUEST_LOG: join(dir, 'requests.jsonl') },
    });
    plain = await startSim(common);
  });
  afterAll(async () => {
    await tools?.stop();
    await plain?.stop();
    rmrf(dir);
  });

  it('refuses as vLLM does: limits as HTTP 500 internal_error naming max_completion_tokens, the request model as FastAPI 400', async () => {
    const hi = [{ role: 'user', content: 'hi' }];
    const tooMany = await post(tools.url, '/v1/messages', { model: 'm', max_tokens: 32000, messages: hi });
    expect(tooMany.status).toBe(500);
    expect(JSON.parse(tooMany.text)).toEqual({
      type: 'error',
      error: {
        type: 'internal_error',
        message:
          'max_completion_tokens=32000 cannot be greater than max_model_len=max_total_tokens=4096. Please request fewer output tokens. (parameter=max_completion_tokens, value=32000)',
      },
    });
    const long = await post(tools.url, '/v1/messages', {
      model: 'm',
      max_tokens: 4000,
      system: 'x'.repeat(1000),
      messages: hi,
    });
    expect(long.status).toBe(500);
    expect(JSON.parse(long.text).error.message).toMatch(
      /^This model's maximum context length is 4096 tokens\. However, you requested 4000 output tokens and your prompt contains at least 97 input tokens/,
    );
    // the tool definitions count: the same request without the system prompt but with 120 tools overflows too
    const withTools = await post(tools.url, '/v1/messages', {
      model: 'm',
      max_tokens: 3900,
      tools: Array(120).fill(READ),
      messages: hi,
    });
    expect(withTools.status).toBe(500);
    const noMax = await post(tools.url, '/v1/messages', { model: 'm', messages: hi });
    expect(noMax.status).toBe(400);
    expect(JSON.parse(noMax.text).error).toMatchObject({ type: 'Bad Request', param: 'body.max_tokens', code: 400 });
    expect((await post(tools.url, '/v1/messages', { model: 'm', max_tokens: 0, messages: hi })).text).toMatch(
      /max_tokens must be positive/,
    );
    const empty = await post(tools.url, '/v1/messages', { model: 'm', max_tokens: 5, messages: [] });
    expect([empty.status, JSON.parse(empty.text).error.type]).toEqual([500, 'internal_error']);
    const unknown = await post(tools.url, '/v1/messages', { model: 'nope', max_tokens: 5, messages: hi });
    expect([unknown.status, JSON.parse(unknown.text)]).toEqual([
      404,
      { type: 'error', error: { type: 'NotFoundError', message: 'The model `nope` does not exist.' } },
    ]);
  });

  it('tools on a server without --enable-auto-tool-choice: 400, what Claude Code shows as its API error', async () => {
    const r = await post(plain.url, '/v1/messages', {
      model: 'm',
      max_tokens: 5,
      tools: [READ],
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect([r.status, JSON.parse(r.text).error]).toEqual([
      400,
      {
        type: 'BadRequestError',
        message: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
      },
    ]);
    const none = await post(plain.url, '/v1/messages', {
      model: 'm',
      max_tokens: 5,
      tools: [READ],
      tool_choice: { type: 'none' },
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(none.status).toBe(200);
    const chat = await post(plain.url, '/v1/chat/completions', {
      model: 'm',
      max_tokens: 5,
      tools: [{ type: 'function', function: { name: 'f', parameters: {} } }],
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect([chat.status, JSON.parse(chat.text).error.type]).toEqual([400, 'BadRequestError']);
  });

  it('a text answer stops on its own (end_turn, fewer tokens than max_tokens), in vLLM event order', async () => {
    const r = await post(tools.url, '/v1/messages', {
      model: 'm',
      max_tokens: 3000,
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(r.type).toMatch(/^text\/event-stream/);
    const ev = events(r.text);
    const names = ev.map((e) => e.event);
    expect(names.slice(0, 2)).toEqual(['message_start', 'content_block_start']);
    expect(names.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
    expect(new Set(names.slice(2, -3))).toEqual(new Set(['content_block_delta']));
    expect(ev.every((e) => e.data.type === e.event)).toBe(true);
    const delta = ev.at(-2)!.data;
    expect(delta.delta).toEqual({ stop_reason: 'end_turn' });
    expect(delta.usage.output_tokens).toBe(names.length - 5);
    expect(delta.usage.output_tokens).toBeGreaterThanOrEqual(64);
    expect(delta.usage.output_tokens).toBeLessThan(3000);
    expect(ev[0]!.data.message).toMatchObject({
      type: 'message',
      role: 'assistant',
      content: [],
      stop_reason: null,
      usage: { output_tokens: 0 },
    });
    // max_tokens below the natural length: cut there, stop_reason max_tokens
    const cut = await post(tools.url, '/v1/messages', {
      model: 'm',
      max_tokens: 3,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(JSON.parse(cut.text)).toMatchObject({ stop_reason: 'max_tokens', usage: { output_tokens: 3 } });
    // ignore_eos runs to max_tokens (chat), as bench asks
    const chat = await post(tools.url, '/v1/chat/completions', {
      model: 'm',
      max_tokens: 300,
      ignore_eos: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(JSON.parse(chat.text)).toMatchObject({
      choices: [{ finish_reason: 'length' }],
      usage: { completion_tokens: 300 },
    });
    const free = await post(tools.url, '/v1/chat/completions', {
      model: 'm',
      max_tokens: 300,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(JSON.parse(free.text).choices[0].finish_reason).toBe('stop');
  });

  it('a turn that asks to read a file comes back as a tool_use block; the turn with its result quotes it', async () => {
    const client = new Anthropic({ baseURL: tools.url, apiKey: 'x', maxRetries: 0 });
    const ask = [{ role: 'user' as const, content: 'Read /tmp/q/notes.txt and tell me what it says' }];
    const msg = await client.messages.create({ model: 'm', max_tokens: 1000, tools: [READ as never], messages: ask });
    expect(msg.stop_reason).toBe('tool_use');
    expect(msg.content).toEqual([
      {
        type: 'tool_use',
        id: expect.stringMatching(/^chatcmpl-tool-/),
        name: 'Read',
        input: { file_path: '/tmp/q/notes.txt' },
      },
    ]);
    // streamed, through the SDK's own accumulator
    const s = client.messages.stream({ model: 'm', max_tokens: 1000, tools: [READ as never], messages: ask });
    const final = await s.finalMessage();
    expect(final.content[0]).toMatchObject({
      type: 'tool_use',
      name: 'Read',
      input: { file_path: '/tmp/q/notes.txt' },
    });
    expect(final.stop_reason).toBe('tool_use');
    const second = await client.messages.create({
      model: 'm',
      max_tokens: 1000,
      tools: [READ as never],
      messages: [
        ...ask,
        { role: 'assistant', content: msg.content as never },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: (msg.content[0] as { id: string }).id,
              content: '     1\tthe answer is 42',
            },
          ],
        },
      ],
    });
    expect(second.stop_reason).toBe('end_turn');
    expect((second.content[0] as { text: string }).text).toMatch(/^The tool returned: the answer is 42/);
    // the same on chat completions
    const chat = await post(tools.url, '/v1/chat/completions', {
      model: 'm',
      tools: [{ type: 'function', function: { name: 'Read', parameters: READ.input_schema } }],
      messages: ask,
    });
    const choice = JSON.parse(chat.text).choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    expect(JSON.parse(choice.message.tool_calls[0].function.arguments)).toEqual({ file_path: '/tmp/q/notes.txt' });
  });

  it('count_tokens and the request log', async () => {
    const c = await post(tools.url, '/v1/messages/count_tokens', {
      model: 'm',
      messages: [{ role: 'user', content: 'abcdefgh' }],
    });
    expect(JSON.parse(c.text)).toEqual({ input_tokens: 6, context_management: { original_input_tokens: 6 } });
    await sleep(700);
    const log = readFileSync(join(dir, 'requests.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(log.some((r) => r.url === '/v1/messages' && r.status === 500 && r.maxTokens === 32000)).toBe(true);
    expect(log.find((r) => r.url === '/v1/messages/count_tokens')).toMatchObject({
      method: 'POST',
      status: 200,
      promptTokens: 6,
      messages: 1,
    });
  });
});
