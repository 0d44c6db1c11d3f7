// The simulator's HTTP server (src/sim/server.ts) in this process, on a free port of 127.0.0.1, with
// a real engine whose time model is switched off (time factor 0: every answer at once). What the
// end-to-end tests (test/e2e/sim*.test.ts) see through SDKs, pinned here to the byte: FastAPI's 404
// and 405, the key (Bearer, and x-api-key on the Anthropic path only), the validation error of a body
// that is not a JSON object (with the position it broke at), vLLM's refusals in its words and shapes
// (each naming the field, the value and what to change), the exact answers and stream chunks,
// injected faults, a dead engine, /tokenize and count_tokens agreeing with usage, the request log
// (names and sizes, never the text), the trace, and the dev-mode sleep routes' refusals. Clients and
// sparkctl's own checks read these shapes: a change to one is a change of the interface.
import { describe, it, expect, afterEach, vi } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SimServer, stamp } from '../../src/sim/server.js';
import { Engine, createMetrics, type Metrics } from '../../src/sim/engine.js';
import { SimSleep } from '../../src/sim/sleep.js';
import { RequestLog, SimTrace } from '../../src/sim/trace.js';
import { tokenIds } from '../../src/sim/tokenizer.js';
import { freePort, tempDirs } from '../helpers.js';

type Cfg = ConstructorParameters<typeof SimServer>[0];
// biome-ignore lint/suspicious/noExplicitAny: a server's answer, read by the tests at any depth
type Json = Record<string, any>;

const L = 4096;
const INSTANT = { prefillTps: 1e9, decodeMs: 0, batchSlowdown: 0, coldMs: 0, timeFactor: 0, slowMs: 0 };
const READ = {
  name: 'Read',
  description: 'Reads a file',
  input_schema: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] },
};
const OPENAI_READ = { type: 'function', function: { name: 'Read', parameters: READ.input_schema } };
const ASK = [{ role: 'user', content: 'Read /tmp/q/notes.txt and tell me what it says' }];
const HI = [{ role: 'user', content: 'hi' }];

const servers: SimServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.server.closeAllConnections();
    await new Promise((r) => s.server.close(r));
  }
});

interface Served {
  sim: SimServer;
  engine: Engine;
  url: string;
  /** the lines the server logged (cfg.log) */
  logged: string[];
}

/** A SimServer listening on 127.0.0.1, closed after the test. */
async function serve(
  over: Partial<Cfg> = {},
  opts: { metrics?: boolean; faults?: ConstructorParameters<typeof Engine>[3]; sleep?: 'dev' | 'dev-enabled' } = {},
): Promise<Served> {
  const metrics: Metrics | undefined = opts.metrics ? await createMetrics(over.servedName ?? 'm') : undefined;
  const engine = new Engine(
    { maxNumSeqs: 8, kvTokens: 1_000_000, maxModelLen: L },
    INSTANT,
    metrics,
    opts.faults ?? {},
  );
  const logged: string[] = [];
  const sleep = opts.sleep
    ? new SimSleep(
        {
          enabled: opts.sleep === 'dev-enabled',
          devMode: true,
          weightsBytes: 1e9,
          kvBytes: 1e9,
          linkGBs: 20,
          reloadMs: 0,
          timeFactor: 0,
          log: (where, msg) => logged.push(`${where} ${msg}`),
        },
        engine,
        metrics,
      )
    : undefined;
  const sim = new SimServer(
    {
      model: 'org/base-model',
      servedName: 'm',
      maxModelLen: L,
      vllmVersion: '0.17.0',
      seed: 1,
      errorRate: 0,
      errorTypes: [],
      log: (line) => logged.push(line),
      sleep,
      ...over,
    },
    engine,
    metrics,
  );
  const port = await freePort();
  await new Promise<void>((r) => sim.server.listen(port, '127.0.0.1', r));
  servers.push(sim);
  return { sim, engine, url: `http://127.0.0.1:${port}`, logged };
}

interface Answer {
  status: number;
  type: string | null;
  text: string;
  json: Json;
}

async function call(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const r = await fetch(`${url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json: Json = {};
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON: the test reads text */
  }
  return { status: r.status, type: r.headers.get('content-type'), text, json };
}
const post = (url: string, path: string, body: unknown, headers?: Record<string, string>) =>
  call(url, 'POST', path, body, headers);

/** The data of each server-sent event, with its event name (Messages) if it has one. */
const events = (text: string) =>
  text
    .split('\n\n')
    .filter(Boolean)
    .map((block) => {
      const lines = block.split('\n');
      const ev = lines.find((l) => l.startsWith('event: '))?.slice(7);
      const data = lines.find((l) => l.startsWith('data: '))!.slice(6);
      return { event: ev, data: data === '[DONE]' ? '[DONE]' : JSON.parse(data) };
    });

/** FastAPI's request-validation error as vLLM answers it (type "Bad Request", param body.LOC). */
const validation = (loc: string | number, type: string, msg: string) => ({
  error: {
    message: `1 validation error:\n  {'type': '${type}', 'loc': ('body', ${typeof loc === 'number' ? loc : `'${loc}'`}), 'msg': '${msg}', 'input': {}}`,
    type: 'Bad Request',
    param: `body.${loc}`,
    code: 400,
  },
});
const openai = (code: number, type: string, message: string, param: string | null = null) => ({
  error: { message, type, param, code },
});
const anthropic = (type: string, message: string) => ({ type: 'error', error: { type, message } });

describe('routes as FastAPI answers them', () => {
  it.each([
    ['GET', '/nope', 404, 'Not Found'],
    ['POST', '/nope', 404, 'Not Found'],
    ['DELETE', '/nope', 404, 'Not Found'],
    ['GET', '/v1/completions', 405, 'Method Not Allowed'],
    ['GET', '/tokenize', 405, 'Method Not Allowed'],
    ['POST', '/health', 405, 'Method Not Allowed'],
    ['POST', '/v1/models', 405, 'Method Not Allowed'],
    ['PUT', '/v1/chat/completions', 405, 'Method Not Allowed'],
    ['PATCH', '/metrics', 405, 'Method Not Allowed'],
    // the sleep routes exist only in dev mode (VLLM_SERVER_DEV_MODE=1)
    ['POST', '/sleep', 404, 'Not Found'],
    ['GET', '/is_sleeping', 404, 'Not Found'],
  ])('%s %s: %i {"detail": "%s"}', async (method, path, status, detail) => {
    const { url } = await serve();
    const r = await call(url, method, path);
    expect([r.status, r.type, r.json]).toEqual([status, 'application/json', { detail }]);
  });

  it('/ping (GET and POST) and /health answer 200 with no body; a query is not part of the path', async () => {
    const { url } = await serve();
    for (const [method, path] of [
      ['GET', '/ping'],
      ['POST', '/ping'],
      ['GET', '/health'],
      ['GET', '/health?probe=1'],
    ] as const) {
      const r = await call(url, method, path);
      expect([method, path, r.status, r.text]).toEqual([method, path, 200, '']);
    }
    expect((await call(url, 'GET', '/version')).json).toEqual({ version: '0.17.0' });
  });

  it('/metrics: the registry in Prometheus text, zero before traffic; without metrics a 404 that says so', async () => {
    const { url } = await serve({}, { metrics: true });
    const r = await call(url, 'GET', '/metrics');
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(r.text).toMatch(/^vllm:num_requests_running\{model_name="m",engine="0"\} 0$/m);
    expect(r.text).toMatch(/^vllm:request_success_total\{finished_reason="length",model_name="m",engine="0"\} 0$/m);
    await post(url, '/v1/completions', { prompt: 'abcd', max_tokens: 3 });
    const after = (await call(url, 'GET', '/metrics')).text;
    expect(after).toMatch(/^vllm:request_success_total\{finished_reason="length",model_name="m",engine="0"\} 1$/m);
    expect(after).toMatch(/^vllm:generation_tokens_total\{model_name="m",engine="0"\} 3$/m);
    const off = await serve();
    expect([(await call(off.url, 'GET', '/metrics')).status, (await call(off.url, 'GET', '/metrics')).text]).toEqual([
      404,
      'metrics disabled',
    ]);
  });

  it('/v1/models: the served name, the model it is rooted at, max_model_len, and a permission record', async () => {
    const { url } = await serve();
    const r = await call(url, 'GET', '/v1/models');
    const created = r.json.data[0].created;
    expect(Math.abs(created - Date.now() / 1000)).toBeLessThan(5);
    expect(r.json).toEqual({
      object: 'list',
      data: [
        {
          id: 'm',
          object: 'model',
          created,
          owned_by: 'vllm',
          root: 'org/base-model',
          parent: null,
          max_model_len: L,
          permission: [
            {
              id: expect.stringMatching(/^modelperm-[0-9a-f]{32}$/),
              object: 'model_permission',
              created,
              allow_create_engine: false,
              allow_sampling: true,
              allow_logprobs: true,
              allow_search_indices: false,
              allow_view: true,
              allow_fine_tuning: false,
              organization: '*',
              group: null,
              is_blocking: false,
            },
          ],
        },
      ],
    });
  });
});

describe('the API key (VLLM_API_KEY / --api-key)', () => {
  const KEY = 'sk-sim-unit';
  it('/v1/*: only "Bearer KEY" on the OpenAI paths, x-api-key too on the Anthropic ones, each refusal in its shape', async () => {
    const { url } = await serve({ apiKey: KEY });
    const unauthorized = openai(401, 'AuthenticationError', 'Unauthorized');
    expect((await call(url, 'GET', '/v1/models')).json).toEqual(unauthorized);
    expect((await call(url, 'GET', '/v1/models', undefined, { authorization: `Bearer ${KEY}x` })).status).toBe(401);
    expect((await call(url, 'GET', '/v1/models', undefined, { authorization: `bearer ${KEY}` })).status).toBe(401);
    expect((await call(url, 'GET', '/v1/models', undefined, { authorization: `Bearer ${KEY}` })).status).toBe(200);
    const chat = { messages: HI, max_tokens: 1 };
    const viaHeader = await post(url, '/v1/chat/completions', chat, { 'x-api-key': KEY });
    expect([viaHeader.status, viaHeader.json]).toEqual([401, unauthorized]);
    const msg = { messages: HI, max_tokens: 1 };
    const none = await post(url, '/v1/messages', msg);
    expect([none.status, none.json]).toEqual([401, anthropic('authentication_error', 'Unauthorized')]);
    expect((await post(url, '/v1/messages', msg, { 'x-api-key': KEY })).status).toBe(200);
    expect((await post(url, '/v1/messages', msg, { authorization: `Bearer ${KEY}` })).status).toBe(200);
    expect((await post(url, '/v1/messages/count_tokens', msg, { 'x-api-key': 'wrong' })).status).toBe(401);
  });

  it('the key is checked before the body is read (a broken body without it is a 401, not a 400); /tokenize stays open', async () => {
    const { url } = await serve({ apiKey: KEY });
    expect((await post(url, '/v1/completions', '{nope')).status).toBe(401);
    expect((await post(url, '/tokenize', { prompt: 'abcd' })).json).toMatchObject({ count: 1 });
    for (const path of ['/health', '/version', '/ping']) expect((await call(url, 'GET', path)).status).toBe(200);
  });
});

describe('a body that is not a JSON object: FastAPI 400 naming where it broke', () => {
  it.each([
    ['{nope', 1],
    ['{"a":1,}', 7],
    ['{"a":1}x', 7],
    ['{"prompt":"a\u0001b"}', 12],
    // truncated or empty: the end
    ['{"prompt":', 10],
    ['', 0],
    // JSON, but not an object
    ['42', 2],
    ['null', 4],
    ['"x"', 3],
  ])('%j: position %i', async (raw, pos) => {
    const { url } = await serve();
    for (const path of ['/v1/completions', '/v1/chat/completions', '/v1/messages', '/tokenize']) {
      const r = await post(url, path, raw);
      expect([path, r.status, r.json]).toEqual([path, 400, validation(pos, 'json_invalid', 'JSON decode error')]);
    }
  });
});

describe("generation refusals in vLLM's words (field, value, fix)", () => {
  const long = (tokens: number) => 'x'.repeat(4 * tokens);
  it.each<[string, string, Json, number, Json]>([
    [
      'no prompt',
      '/v1/completions',
      {},
      400,
      openai(
        400,
        'BadRequestError',
        'Either prompt or prompt_embeds must be provided and non-empty. (parameter=prompt)',
        'prompt',
      ),
    ],
    [
      'a prompt that is a number',
      '/v1/completions',
      { prompt: 7 },
      400,
      openai(
        400,
        'BadRequestError',
        'Either prompt or prompt_embeds must be provided and non-empty. (parameter=prompt)',
        'prompt',
      ),
    ],
    [
      'max_tokens 0',
      '/v1/completions',
      { prompt: 'x', max_tokens: 0 },
      400,
      openai(
        400,
        'BadRequestError',
        'max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)',
        'max_tokens',
      ),
    ],
    [
      'max_tokens over max_model_len',
      '/v1/completions',
      { prompt: 'x', max_tokens: L + 1 },
      400,
      openai(
        400,
        'BadRequestError',
        'max_tokens=4097 cannot be greater than max_model_len=max_total_tokens=4096. Please request fewer output tokens. (parameter=max_tokens, value=4097)',
        'max_tokens',
      ),
    ],
    [
      'max_completion_tokens where max_tokens is absent',
      '/v1/chat/completions',
      { messages: HI, max_completion_tokens: 5000 },
      400,
      openai(
        400,
        'BadRequestError',
        'max_tokens=5000 cannot be greater than max_model_len=max_total_tokens=4096. Please request fewer output tokens. (parameter=max_tokens, value=5000)',
        'max_tokens',
      ),
    ],
    [
      'prompt + max_tokens one over',
      '/v1/completions',
      { prompt: long(4000), max_tokens: 97 },
      400,
      openai(
        400,
        'BadRequestError',
        "This model's maximum context length is 4096 tokens. However, you requested 97 output tokens and your prompt contains at least 4000 input tokens, for a total of at least 4097 tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=4000)",
        'input_tokens',
      ),
    ],
    [
      'chat without max_tokens and a prompt that fills the context: the default budget (what is left) is 1',
      '/v1/chat/completions',
      { messages: [{ role: 'user', content: long(L - 4) }] },
      400,
      openai(
        400,
        'BadRequestError',
        "This model's maximum context length is 4096 tokens. However, you requested 1 output tokens and your prompt contains at least 4096 input tokens, for a total of at least 4097 tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=4096)",
        'input_tokens',
      ),
    ],
    [
      'an unknown model',
      '/v1/completions',
      { model: 'other', prompt: 'x' },
      404,
      openai(404, 'NotFoundError', 'The model `other` does not exist.', 'model'),
    ],
    [
      'chat without messages',
      '/v1/chat/completions',
      { max_tokens: 1 },
      400,
      validation('messages', 'missing', 'Field required'),
    ],
    [
      'chat with no message',
      '/v1/chat/completions',
      { messages: [], max_tokens: 1 },
      400,
      openai(400, 'BadRequestError', 'messages must not be empty. (parameter=messages)', 'messages'),
    ],
    // the Messages API's request model first (FastAPI, OpenAI-shaped), messages before max_tokens
    ['messages: neither field', '/v1/messages', {}, 400, validation('messages', 'missing', 'Field required')],
    [
      'messages: no max_tokens',
      '/v1/messages',
      { messages: HI },
      400,
      validation('max_tokens', 'missing', 'Field required'),
    ],
    [
      'messages: max_tokens a string',
      '/v1/messages',
      { messages: HI, max_tokens: '5' },
      400,
      validation('max_tokens', 'int_type', 'Input should be a valid integer'),
    ],
    [
      'messages: max_tokens a fraction',
      '/v1/messages',
      { messages: HI, max_tokens: 1.5 },
      400,
      validation('max_tokens', 'int_type', 'Input should be a valid integer'),
    ],
    [
      'messages: max_tokens negative',
      '/v1/messages',
      { messages: HI, max_tokens: -1 },
      400,
      validation('max_tokens', 'value_error', 'Value error, max_tokens must be positive'),
    ],
  ])('%s', async (_what, path, body, status, answer) => {
    const { url } = await serve();
    const r = await post(url, path, body);
    expect([r.status, r.json]).toEqual([status, answer]);
  });

  it('the boundary: prompt + max_tokens = max_model_len is served', async () => {
    const { url } = await serve();
    const r = await post(url, '/v1/completions', { prompt: long(4000), max_tokens: 96, ignore_eos: true });
    expect([r.status, r.json.usage]).toEqual([
      200,
      { prompt_tokens: 4000, completion_tokens: 96, total_tokens: 4096, prompt_tokens_details: null },
    ]);
    // chat's default budget is what the context leaves: one token here
    const one = await post(url, '/v1/chat/completions', { messages: [{ role: 'user', content: long(L - 5) }] });
    expect([one.status, one.json.usage.completion_tokens, one.json.choices[0].finish_reason]).toEqual([
      200,
      1,
      'length',
    ]);
  });

  it('a model name of control characters is echoed JSON-escaped, never as raw bytes', async () => {
    const { url } = await serve();
    const name = 'a\u001b[31mb\r\nc\u0000';
    const r = await post(url, '/v1/completions', { model: name, prompt: 'x' });
    expect(r.json).toEqual(openai(404, 'NotFoundError', `The model \`${name}\` does not exist.`, 'model'));
    expect(r.text).not.toMatch(/[\u0000-\u001f]/);
  });

  it.each<[string, string, Json, string]>([
    [
      'chat',
      '/v1/chat/completions',
      { tool_choice: 'required' },
      'tool_choice="required" requires --tool-call-parser to be set',
    ],
    [
      'chat',
      '/v1/chat/completions',
      { tool_choice: { type: 'function', function: { name: 'Read' } } },
      'tool_choice=function "Read" requires --tool-call-parser to be set',
    ],
    [
      'chat',
      '/v1/chat/completions',
      { tool_choice: 'auto' },
      '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    ],
    [
      'messages',
      '/v1/messages',
      { tool_choice: { type: 'any' } },
      'tool_choice="required" requires --tool-call-parser to be set',
    ],
    [
      'messages',
      '/v1/messages',
      { tool_choice: { type: 'tool', name: 'Read' } },
      'tool_choice=function "Read" requires --tool-call-parser to be set',
    ],
  ])('tools on a server without a parser, %s %j: 400 %s', async (api, path, choice, message) => {
    const { url } = await serve();
    const tools = api === 'chat' ? [OPENAI_READ] : [READ];
    const r = await post(url, path, { messages: HI, max_tokens: 5, tools, ...choice });
    expect([r.status, r.json]).toEqual([
      400,
      api === 'chat' ? openai(400, 'BadRequestError', message) : anthropic('BadRequestError', message),
    ]);
  });

  it('no refusal for an empty tools list, for "auto" with --enable-auto-tool-choice, or for any with a parser', async () => {
    const bare = await serve();
    expect((await post(bare.url, '/v1/chat/completions', { messages: HI, max_tokens: 2, tools: [] })).status).toBe(200);
    const auto = await serve({ autoToolChoice: true });
    const ask = { messages: HI, max_tokens: 2, tools: [OPENAI_READ] };
    expect((await post(auto.url, '/v1/chat/completions', ask)).status).toBe(200);
    expect((await post(auto.url, '/v1/chat/completions', { ...ask, tool_choice: 'required' })).status).toBe(400);
    const parsed = await serve({ toolCallParser: 'qwen3_coder' });
    const body = { messages: HI, max_tokens: 2, tools: [OPENAI_READ], tool_choice: 'required' };
    expect((await post(parsed.url, '/v1/chat/completions', body)).status).toBe(200);
  });

  it('shutting down: 503 in each API shape; /health stays 200', async () => {
    const { sim, url } = await serve();
    sim.shuttingDown = true;
    const c = await post(url, '/v1/completions', { prompt: 'x', max_tokens: 1 });
    expect([c.status, c.json]).toEqual([503, openai(503, 'ServiceUnavailableError', 'server is shutting down')]);
    const m = await post(url, '/v1/messages', { messages: HI, max_tokens: 1 });
    expect([m.status, m.json]).toEqual([503, anthropic('overloaded_error', 'server is shutting down')]);
    expect((await call(url, 'GET', '/health')).status).toBe(200);
  });
});

describe('answers: the exact shapes, nulls included', () => {
  const FINGERPRINT = /^vllm-0\.17\.0-[0-9a-f]{8}$/;
  const words = (n: number) => new RegExp(`^\\w+( \\w+){${n - 1}}$`);

  it('a text completion', async () => {
    const { url } = await serve();
    const r = await post(url, '/v1/completions', { prompt: 'abcdefgh', max_tokens: 3 });
    expect(r.json).toEqual({
      id: expect.stringMatching(/^cmpl-[0-9a-f]{32}$/),
      object: 'text_completion',
      created: expect.any(Number),
      model: 'm',
      choices: [
        {
          index: 0,
          text: expect.stringMatching(words(3)),
          logprobs: null,
          finish_reason: 'length',
          stop_reason: null,
          token_ids: null,
          prompt_logprobs: null,
          prompt_token_ids: null,
          routed_experts: null,
        },
      ],
      usage: { prompt_tokens: 2, total_tokens: 5, completion_tokens: 3, prompt_tokens_details: null },
      service_tier: null,
      system_fingerprint: expect.stringMatching(FINGERPRINT),
      kv_transfer_params: null,
      ec_transfer_params: null,
      metrics: null,
    });
  });

  it('a chat completion', async () => {
    const { url } = await serve();
    const r = await post(url, '/v1/chat/completions', { messages: [{ role: 'user', content: 'abcd' }], max_tokens: 2 });
    expect(r.json).toEqual({
      id: expect.stringMatching(/^chatcmpl-[0-9a-f]{32}$/),
      object: 'chat.completion',
      created: expect.any(Number),
      model: 'm',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: expect.stringMatching(words(2)),
            refusal: null,
            annotations: null,
            audio: null,
            function_call: null,
            reasoning: null,
          },
          logprobs: null,
          finish_reason: 'length',
          stop_reason: null,
          token_ids: null,
          routed_experts: null,
        },
      ],
      usage: { prompt_tokens: 5, total_tokens: 7, completion_tokens: 2, prompt_tokens_details: null },
      prompt_logprobs: null,
      prompt_token_ids: null,
      prompt_text: null,
      service_tier: null,
      system_fingerprint: expect.stringMatching(FINGERPRINT),
      kv_transfer_params: null,
      ec_transfer_params: null,
      metrics: null,
    });
  });

  it("a message: the converted chat completion's id, the system prompt and tools counted in input_tokens", async () => {
    const { url } = await serve();
    const r = await post(url, '/v1/messages', { messages: HI, system: 'abcdefgh', max_tokens: 3 });
    expect(r.json).toEqual({
      id: expect.stringMatching(/^chatcmpl-[0-9a-f]{32}$/),
      type: 'message',
      role: 'assistant',
      content: [{ type: 'text', text: expect.stringMatching(words(3)) }],
      model: 'm',
      stop_reason: 'max_tokens',
      // hi: 1 + 4; the system prompt: 2 + 4
      usage: { input_tokens: 11, output_tokens: 3 },
    });
  });

  it('completions: 16 tokens when max_tokens is absent; a prompt of token ids counts one each', async () => {
    const { url } = await serve();
    const r = await post(url, '/v1/completions', { prompt: [1, 2, 3] });
    expect([r.json.usage.prompt_tokens, r.json.usage.completion_tokens, r.json.choices[0].finish_reason]).toEqual([
      3,
      16,
      'length',
    ]);
  });

  it('the fingerprint is one per start: the same on every answer of a server, another on the next server', async () => {
    const a = await serve();
    const b = await serve();
    const fp = async (url: string) =>
      (await post(url, '/v1/completions', { prompt: 'x', max_tokens: 1 })).json.system_fingerprint;
    const [a1, a2, b1] = [await fp(a.url), await fp(a.url), await fp(b.url)];
    expect(a1).toBe(a2);
    expect(b1).not.toBe(a1);
  });

  it('greedy (temperature 0) answers one prompt one way on every replica of a build; sampled ones vary', async () => {
    const a = await serve({ seed: 1 });
    const b = await serve({ seed: 99 });
    const other = await serve({ seed: 1, numerics: 'another build' });
    const text = async (url: string, extra: Json = {}) =>
      (await post(url, '/v1/completions', { prompt: 'same', max_tokens: 16, ...extra })).json.choices[0].text;
    const greedy = await text(a.url, { temperature: 0 });
    expect(await text(a.url, { temperature: 0 })).toBe(greedy);
    expect(await text(b.url, { temperature: 0 })).toBe(greedy);
    expect(await text(other.url, { temperature: 0 })).not.toBe(greedy);
    expect(await text(a.url)).not.toBe(await text(a.url));
  });

  it('a tool call that would not fit max_tokens is answered in text, cut at max_tokens', async () => {
    const { url } = await serve({ autoToolChoice: true, toolCallParser: 'qwen3_coder' });
    const fits = await post(url, '/v1/chat/completions', { messages: ASK, tools: [OPENAI_READ], max_tokens: 100 });
    expect(fits.json.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: null } });
    const cut = await post(url, '/v1/chat/completions', { messages: ASK, tools: [OPENAI_READ], max_tokens: 5 });
    expect(cut.json.choices[0].finish_reason).toBe('length');
    expect(cut.json.choices[0].message.tool_calls).toBeUndefined();
    expect(cut.json.choices[0].message.content).toMatch(words(5));
  });
});

describe('streams: chunk by chunk as vLLM sends them', () => {
  const chat = (extra: Json = {}) => ({
    messages: [{ role: 'user', content: 'abcd' }],
    max_tokens: 3,
    stream: true,
    ...extra,
  });

  it('chat with include_usage: the role chunk, a chunk a token (the last with its reason), the usage chunk, [DONE]', async () => {
    const { url } = await serve();
    const r = await post(url, '/v1/chat/completions', chat({ stream_options: { include_usage: true } }));
    expect(r.type).toBe('text/event-stream; charset=utf-8');
    const ev = events(r.text).map((e) => e.data);
    expect(ev).toHaveLength(6);
    const id = ev[0].id;
    expect(id).toMatch(/^chatcmpl-[0-9a-f]{32}$/);
    const head = { id, object: 'chat.completion.chunk', created: expect.any(Number), model: 'm' };
    expect(ev[0]).toEqual({
      ...head,
      choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
      prompt_token_ids: null,
      prompt_text: null,
    });
    for (const i of [1, 2])
      expect(ev[i]).toEqual({
        ...head,
        choices: [
          { index: 0, delta: { content: expect.any(String) }, logprobs: null, finish_reason: null, token_ids: null },
        ],
      });
    expect(ev[3]).toEqual({
      ...head,
      choices: [
        {
          index: 0,
          delta: { content: expect.any(String) },
          logprobs: null,
          finish_reason: 'length',
          stop_reason: null,
          token_ids: null,
        },
      ],
    });
    expect(ev[4]).toEqual({
      ...head,
      choices: [],
      usage: { prompt_tokens: 5, total_tokens: 8, completion_tokens: 3 },
      system_fingerprint: expect.stringMatching(/^vllm-0\.17\.0-[0-9a-f]{8}$/),
    });
    expect(ev[5]).toBe('[DONE]');
    expect(
      ev
        .slice(1, 4)
        .map((c) => c.choices[0].delta.content)
        .join(''),
    ).toMatch(/^\w+ \w+ \w+$/);
  });

  it('without include_usage: no usage chunk, the fingerprint on the last token chunk', async () => {
    const { url } = await serve();
    const ev = events((await post(url, '/v1/chat/completions', chat())).text).map((e) => e.data);
    expect(ev).toHaveLength(5);
    expect(ev.slice(0, 3).some((c) => 'system_fingerprint' in c || 'usage' in c)).toBe(false);
    expect(ev[3].system_fingerprint).toMatch(/^vllm-0\.17\.0-/);
    expect(ev[4]).toBe('[DONE]');
  });

  it('continuous_usage_stats: cumulative usage on every chunk, 0 on the role chunk', async () => {
    const { url } = await serve();
    const body = chat({ stream_options: { include_usage: true, continuous_usage_stats: true } });
    const ev = events((await post(url, '/v1/chat/completions', body)).text).map((e) => e.data);
    expect(ev.slice(0, 5).map((c) => c.usage)).toEqual(
      [0, 1, 2, 3, 3].map((k) => ({
        prompt_tokens: 5,
        completion_tokens: k,
        total_tokens: 5 + k,
      })),
    );
  });

  it('a text completion streams text_completion chunks, one a token, no role chunk', async () => {
    const { url } = await serve();
    const r = await post(url, '/v1/completions', { prompt: 'abcd', max_tokens: 2, stream: true });
    const ev = events(r.text).map((e) => e.data);
    const chunk = (finish: string | null) => ({
      id: expect.stringMatching(/^cmpl-[0-9a-f]{32}$/),
      object: 'text_completion',
      created: expect.any(Number),
      model: 'm',
      choices: [
        {
          index: 0,
          text: expect.any(String),
          logprobs: null,
          finish_reason: finish,
          stop_reason: null,
          prompt_token_ids: null,
          token_ids: null,
        },
      ],
    });
    expect(ev).toEqual([
      chunk(null),
      { ...chunk('length'), system_fingerprint: expect.stringMatching(/^vllm-/) },
      '[DONE]',
    ]);
  });

  it('a chat tool call: buffered until whole, sent as one delta with finish_reason tool_calls', async () => {
    const { url } = await serve({ autoToolChoice: true, toolCallParser: 'qwen3_coder' });
    const r = await post(url, '/v1/chat/completions', {
      messages: ASK,
      tools: [OPENAI_READ],
      max_tokens: 100,
      stream: true,
    });
    const ev = events(r.text).map((e) => e.data);
    expect(ev).toHaveLength(3);
    expect(ev[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    expect(ev[1].choices[0]).toEqual({
      index: 0,
      delta: {
        tool_calls: [
          {
            index: 0,
            id: expect.stringMatching(/^chatcmpl-tool-[0-9a-f]{32}$/),
            type: 'function',
            function: { name: 'Read', arguments: '{"file_path":"/tmp/q/notes.txt"}' },
          },
        ],
      },
      logprobs: null,
      finish_reason: 'tool_calls',
      stop_reason: null,
      token_ids: null,
    });
    expect(ev[2]).toBe('[DONE]');
  });

  it('a Messages tool_use block: its input arrives as one input_json_delta, then stop_reason tool_use', async () => {
    const { url } = await serve({ autoToolChoice: true, toolCallParser: 'qwen3_coder' });
    const r = await post(url, '/v1/messages', { messages: ASK, tools: [READ], max_tokens: 100, stream: true });
    const ev = events(r.text);
    expect(ev.map((e) => e.event)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(ev[1]!.data).toEqual({
      type: 'content_block_start',
      content_block: { type: 'tool_use', id: expect.stringMatching(/^chatcmpl-tool-/), name: 'Read', input: {} },
      index: 0,
    });
    expect(ev[2]!.data).toEqual({
      type: 'content_block_delta',
      delta: { type: 'input_json_delta', partial_json: '{"file_path":"/tmp/q/notes.txt"}' },
      index: 0,
    });
    expect(ev[4]!.data).toMatchObject({ delta: { stop_reason: 'tool_use' } });
    expect(ev[4]!.data.usage.output_tokens).toBeGreaterThan(1);
  });
});

describe('--sim-error-rate: injected faults after the request is admitted', () => {
  it.each([
    ['rate_limit', 429, 'RateLimitError', 'rate_limit_error', 'Rate limit reached (simulated)'],
    [
      'context_length',
      400,
      'BadRequestError',
      'invalid_request_error',
      "This model's maximum context length is 4096 tokens. (simulated)",
    ],
    ['server_error', 500, 'InternalServerError', 'api_error', 'Internal server error (simulated)'],
    // a type it does not know: the server error
    ['no-such-type', 500, 'InternalServerError', 'api_error', 'Internal server error (simulated)'],
  ])('%s: %i', async (type, status, otype, atype, message) => {
    const { url } = await serve({ errorRate: 1, errorTypes: [type] });
    const c = await post(url, '/v1/completions', { prompt: 'x', max_tokens: 1 });
    expect([c.status, c.json]).toEqual([status, openai(status, otype, message)]);
    const m = await post(url, '/v1/messages', { messages: HI, max_tokens: 1 });
    expect([m.status, m.json]).toEqual([status, anthropic(atype, message)]);
  });

  it('an invalid request gets its own refusal, not an injected one; the other routes are never faulted', async () => {
    const { url } = await serve({ errorRate: 1, errorTypes: ['rate_limit'] });
    expect((await post(url, '/v1/completions', { prompt: 'x', max_tokens: 0 })).status).toBe(400);
    expect((await post(url, '/tokenize', { prompt: 'x' })).status).toBe(200);
    expect((await post(url, '/v1/messages/count_tokens', { messages: HI })).status).toBe(200);
    expect((await call(url, 'GET', '/v1/models')).status).toBe(200);
  });

  it('with --sim-seed the faults fall on the same requests, on every start', async () => {
    const statuses = async () => {
      const { url } = await serve({ seed: 7, errorRate: 0.5, errorTypes: ['rate_limit', 'server_error'] });
      const out: number[] = [];
      for (let i = 0; i < 16; i++)
        out.push((await post(url, '/v1/completions', { prompt: 'x', max_tokens: 1 })).status);
      return out;
    };
    const first = await statuses();
    expect(new Set(first)).toEqual(new Set([200, 429, 500]));
    expect(await statuses()).toEqual(first);
  });
});

describe('a dead engine', () => {
  it("500 EngineDeadError in each API's shape, vLLM's log line, /health 503", async () => {
    const { url, logged } = await serve({}, { faults: { deadAfter: 0 } });
    const c = await post(url, '/v1/completions', { prompt: 'x', max_tokens: 1 });
    const why = 'EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.';
    expect([c.status, c.json]).toEqual([500, openai(500, 'InternalServerError', why)]);
    const m = await post(url, '/v1/messages', { messages: HI, max_tokens: 1 });
    expect([m.status, m.json]).toEqual([500, anthropic('api_error', why)]);
    expect(logged).toHaveLength(2);
    expect(logged[0]).toMatch(
      /^ERROR \d\d-\d\d \d\d:\d\d:\d\d \[async_llm\.py:420\] vllm\.v1\.engine\.exceptions\.EngineDeadError: EngineCore encountered an issue\. See stack trace \(above\) for the root cause\.$/,
    );
    expect((await call(url, 'GET', '/health')).status).toBe(503);
  });

  it('a stream to an engine already dead: 500 before any header, as vLLM checks engine_client.errored first', async () => {
    const { url } = await serve({}, { faults: { deadAfter: 0 } });
    await post(url, '/v1/completions', { prompt: 'x', max_tokens: 1 }); // the engine dies here
    const why = 'EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.';
    const c = await post(url, '/v1/chat/completions', { messages: HI, max_tokens: 4, stream: true });
    expect([c.status, c.json]).toEqual([500, openai(500, 'InternalServerError', why)]);
    const m = await post(url, '/v1/messages', { messages: HI, max_tokens: 4, stream: true });
    expect([m.status, m.json]).toEqual([500, anthropic('api_error', why)]);
  });
});

describe('/tokenize and count_tokens agree with what usage reports', () => {
  it('/tokenize of messages: the chat template around each (its ids), the count usage.prompt_tokens gives', async () => {
    const { url } = await serve();
    const messages = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'abcdefgh' },
    ];
    const t = await post(url, '/tokenize', { messages });
    expect(t.json).toEqual({
      count: 12,
      max_model_len: L,
      tokens: [
        ...[151644, 872, 198, ...tokenIds('be brief'), 151645],
        ...[151644, 872, 198, ...tokenIds('abcdefgh'), 151645],
      ],
      token_strs: null,
    });
    const chat = await post(url, '/v1/chat/completions', { messages, max_tokens: 1 });
    expect(chat.json.usage.prompt_tokens).toBe(t.json.count);
  });

  it('/tokenize of a prompt: 4 bytes a token; anything but a string is no prompt', async () => {
    const { url } = await serve();
    expect((await post(url, '/tokenize', { prompt: 'abcdefghi' })).json).toEqual({
      count: 3,
      max_model_len: L,
      tokens: tokenIds('abcdefghi'),
      token_strs: null,
    });
    expect((await post(url, '/tokenize', { prompt: ['a'] })).json).toEqual({
      count: 0,
      max_model_len: L,
      tokens: [],
      token_strs: null,
    });
  });

  it("count_tokens: messages, system and tools, as the message's input_tokens; no messages is FastAPI's 400", async () => {
    const { url } = await serve();
    const body = { messages: HI, system: 'abcdefgh', tools: [READ] };
    const c = await post(url, '/v1/messages/count_tokens', body);
    const m = await post(url, '/v1/messages', { ...body, tool_choice: { type: 'none' }, max_tokens: 1 });
    expect(c.json).toEqual({
      input_tokens: m.json.usage.input_tokens,
      context_management: { original_input_tokens: m.json.usage.input_tokens },
    });
    expect(c.json.input_tokens).toBeGreaterThan(11);
    const none = await post(url, '/v1/messages/count_tokens', { system: 'x' });
    expect([none.status, none.json]).toEqual([400, validation('messages', 'missing', 'Field required')]);
  });
});

describe('the request log and the trace', () => {
  const dir = tempDirs('sparkctl-sim-server-');

  it('a line a request: method, the url with its query, status, sizes and names, never the text', async () => {
    const file = join(dir(), 'requests.jsonl');
    const requestLog = new RequestLog(file);
    const { url } = await serve({ requestLog });
    const secret = 'the prompt words stay out of the log';
    const chat = {
      model: 'm',
      max_tokens: 2,
      system: 'sys!',
      tools: [OPENAI_READ],
      messages: [{ role: 'user', content: secret }],
    };
    await post(url, '/v1/chat/completions?beta=true', { ...chat, tool_choice: 'none' }, { 'user-agent': 'ua/1' });
    await post(url, '/v1/completions', '{nope', { 'user-agent': 'ua/2' });
    await call(url, 'GET', '/health');
    requestLog.flush();
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toEqual([
      {
        t: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        method: 'POST',
        url: '/v1/chat/completions?beta=true',
        status: 200,
        bytes: Buffer.byteLength(JSON.stringify({ ...chat, tool_choice: 'none' })),
        userAgent: 'ua/1',
        model: 'm',
        maxTokens: 2,
        stream: false,
        tools: ['Read'],
        promptTokens: expect.any(Number),
        systemChars: 4,
        toolsChars: JSON.stringify([OPENAI_READ]).length,
        messages: 1,
      },
      { t: expect.any(String), method: 'POST', url: '/v1/completions', status: 400, bytes: 5, userAgent: 'ua/2' },
      { t: expect.any(String), method: 'GET', url: '/health', status: 200, bytes: 0, userAgent: expect.any(String) },
    ]);
    expect(readFileSync(file, 'utf8')).not.toContain(secret);
  });

  it('the trace: a record a streamed request (time to first token, a gap a later token); none for a whole answer', async () => {
    const file = join(dir(), 'trace.jsonl');
    const trace = new SimTrace(file);
    const { url } = await serve({ trace });
    await post(url, '/v1/completions', { prompt: 'x', max_tokens: 4, stream: true });
    await post(url, '/v1/completions', { prompt: 'x', max_tokens: 4 });
    trace.flush();
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toEqual([
      { ttftMs: expect.any(Number), itlMs: [expect.any(Number), expect.any(Number), expect.any(Number)] },
    ]);
    expect(lines[0].ttftMs).toBeGreaterThanOrEqual(0);
  });
});

describe('the dev-mode sleep routes: wrong methods and refused arguments', () => {
  it.each<[string, string, 'dev' | 'dev-enabled', number, Json | string]>([
    ['GET', '/sleep', 'dev-enabled', 405, { detail: 'Method Not Allowed' }],
    ['GET', '/wake_up', 'dev-enabled', 405, { detail: 'Method Not Allowed' }],
    ['POST', '/is_sleeping', 'dev-enabled', 405, { detail: 'Method Not Allowed' }],
    ['GET', '/is_sleeping', 'dev', 200, { is_sleeping: false }],
    ['POST', '/reset_prefix_cache', 'dev', 200, { success: true }],
    [
      'POST',
      '/sleep?level=3',
      'dev-enabled',
      500,
      openai(500, 'InternalServerError', 'invalid sleep level 3: expected 1 or 2'),
    ],
    [
      'POST',
      '/sleep?mode=later',
      'dev-enabled',
      500,
      openai(500, 'InternalServerError', 'pause mode "later" is not simulated (abort or wait)'),
    ],
    [
      'POST',
      '/wake_up?tags=gpu',
      'dev-enabled',
      500,
      openai(500, 'InternalServerError', 'unknown wake_up tag "gpu": expected weights or kv_cache'),
    ],
    ['POST', '/sleep?level=1', 'dev-enabled', 200, ''],
  ])('%s %s (%s): %i', async (method, path, mode, status, answer) => {
    const { url } = await serve({}, { sleep: mode });
    const r = await call(url, method, path);
    expect([r.status, typeof answer === 'string' ? r.text : r.json]).toEqual([status, answer]);
  });

  it('POST /collective_rpc: a broken body, no method, an unknown method (its name cut to 100 characters)', async () => {
    const { url } = await serve({}, { sleep: 'dev-enabled' });
    const broken = await post(url, '/collective_rpc', '{nope');
    expect([broken.status, broken.json]).toEqual([
      400,
      { detail: "JSON decode error: Expected property name or '}' in JSON at position 1" },
    ]);
    for (const body of [{}, [], null, { method: null }]) {
      const r = await post(url, '/collective_rpc', body);
      expect([r.status, r.json]).toEqual([400, { detail: "Missing 'method' in request body" }]);
    }
    const odd = await post(url, '/collective_rpc', { method: `x${'y'.repeat(500)}\n` });
    expect([odd.status, odd.json]).toEqual([
      500,
      openai(500, 'InternalServerError', `'Worker' object has no attribute "x${'y'.repeat(99)}"`),
    ]);
    const ok = await post(url, '/collective_rpc', { method: 'reload_weights' });
    expect([ok.status, ok.json]).toEqual([200, { results: [null] }]);
  });
});

describe('stamp(): the time in vLLM log lines', () => {
  afterEach(() => vi.useRealTimers());
  it.each([
    [new Date(2026, 0, 5, 3, 4, 9), '01-05 03:04:09'],
    [new Date(2026, 11, 31, 23, 59, 59), '12-31 23:59:59'],
    [new Date(2027, 9, 10, 12, 0, 0), '10-10 12:00:00'],
  ])('%s -> %s (local time, no year)', (at, text) => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(at);
    expect(stamp()).toBe(text);
  });
});
