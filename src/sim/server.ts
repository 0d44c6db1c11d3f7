// The simulator's HTTP surface: vLLM's OpenAI-compatible server (and Anthropic /v1/messages).
import { createServer, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import type { SimTrace, RequestLog, RequestRecord } from './trace.js';
import { randomBytes, randomUUID } from 'node:crypto';
import { type Engine, EngineDead, type Metrics } from './engine.js';
import { countTokens, chatTokens, tokenIds, contentText, wordFor } from './tokenizer.js';
import { SleepRefused, collectiveRpc, type SimSleep } from './sleep.js';
import { naturalLength, pieces, toolCallFor, toolCallTokens, toolResultQuote, type ToolCall } from './answer.js';

interface ServerConfig {
  model: string;
  servedName: string;
  maxModelLen: number;
  vllmVersion: string;
  apiKey?: string;
  seed: number;
  errorRate: number;
  errorTypes: string[];
  log: (line: string) => void;
  /** SPARKCTL_SIM_TRACE: per streamed request, what was really sent when */
  trace?: SimTrace;
  /** --enable-auto-tool-choice */
  autoToolChoice?: boolean;
  /** --tool-call-parser: with autoToolChoice, a turn may come back as a tool call */
  toolCallParser?: string;
  /** SPARKCTL_SIM_REQUEST_LOG: every request's method, path, size and the fields a client's shape shows */
  requestLog?: RequestLog;
  /** sleep mode (src/sim/sleep.ts); its routes exist only in dev mode (VLLM_SERVER_DEV_MODE=1) */
  sleep?: SimSleep;
  /**
   * SPARKCTL_SIM_NUMERICS: the stand-in for what makes one build's greedy answers differ from another's
   * (kernels, a chat template): it enters the seed of every temperature-0 answer. Unset: ''.
   */
  numerics?: string;
}

/** FNV-1a of a string: a greedy request's seed from what it asks (the same prompt, the same answer). */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h >>> 0;
}

type Json = Record<string, any>;

const JSON_HEADERS = { 'content-type': 'application/json' };

function send(res: ServerResponse, status: number, body: unknown) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { ...JSON_HEADERS, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function openaiError(res: ServerResponse, status: number, type: string, message: string, param: string | null = null) {
  send(res, status, { error: { message, type, param, code: status } });
}

/** What FastAPI itself answers for an unknown path (404) or a known path with the wrong method (405). */
function detail(res: ServerResponse, status: 404 | 405) {
  send(res, status, { detail: status === 404 ? 'Not Found' : 'Method Not Allowed' });
}

const GET_PATHS = new Set(['/health', '/ping', '/version', '/metrics', '/v1/models']);
const POST_PATHS = new Set([
  '/tokenize',
  '/v1/completions',
  '/v1/chat/completions',
  '/v1/messages',
  '/v1/messages/count_tokens',
  '/ping',
]);

/** A request-validation error as vLLM's FastAPI handler words it (type "Bad Request", param "body.FIELD"). */
function validationError(res: ServerResponse, loc: string | number, type: string, msg: string) {
  const message = `1 validation error:\n  {'type': '${type}', 'loc': ('body', ${typeof loc === 'number' ? loc : `'${loc}'`}), 'msg': '${msg}', 'input': {}}`;
  send(res, 400, { error: { message, type: 'Bad Request', param: `body.${loc}`, code: 400 } });
}

function anthropicError(res: ServerResponse, status: number, type: string, message: string) {
  send(res, status, { type: 'error', error: { type, message } });
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () =>
      resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8')),
    );
    req.on('error', reject);
  });
}

// vLLM's random_uuid(): uuid4().hex. randomUUID draws from a cached entropy pool; randomBytes per
// request was 3-4 % of the simulator's CPU at its throughput limit.
const id = (prefix: string) => `${prefix}-${randomUUID().replaceAll('-', '')}`;
const now = () => Math.floor(Date.now() / 1000);

export class SimServer {
  server: Server;
  private counter = 0;
  private rng: number;
  /** vLLM's system_fingerprint: the version and a per-start id */
  private fingerprint: string;
  shuttingDown = false;

  constructor(
    readonly cfg: ServerConfig,
    readonly engine: Engine,
    readonly metrics: Metrics | undefined,
  ) {
    this.rng = cfg.seed >>> 0 || 1;
    this.fingerprint = `vllm-${cfg.vllmVersion}-${randomBytes(4).toString('hex')}`;
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((e) => {
        if (!res.headersSent) openaiError(res, 500, 'InternalServerError', String((e as Error).message));
        else res.end();
      });
    });
    this.server.keepAliveTimeout = 5000;
  }

  private random(): number {
    // mulberry32: deterministic with --sim-seed
    let t = (this.rng = (this.rng + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  private authorized(req: IncomingMessage, anthropic: boolean): boolean {
    if (!this.cfg.apiKey) return true;
    const h = req.headers.authorization;
    if (h === `Bearer ${this.cfg.apiKey}`) return true;
    return anthropic && req.headers['x-api-key'] === this.cfg.apiKey;
  }

  /** Request-level fault injection (--sim-error-rate): the errors clients must retry or report. */
  private injected(res: ServerResponse, anthropic: boolean): boolean {
    if (this.cfg.errorRate <= 0 || this.random() >= this.cfg.errorRate) return false;
    const type = this.cfg.errorTypes[Math.floor(this.random() * this.cfg.errorTypes.length)] ?? 'server_error';
    const [status, otype, atype, msg] =
      type === 'rate_limit'
        ? [429, 'RateLimitError', 'rate_limit_error', 'Rate limit reached (simulated)']
        : type === 'context_length'
          ? [
              400,
              'BadRequestError',
              'invalid_request_error',
              `This model's maximum context length is ${this.cfg.maxModelLen} tokens. (simulated)`,
            ]
          : [500, 'InternalServerError', 'api_error', 'Internal server error (simulated)'];
    if (anthropic) anthropicError(res, status, atype, msg);
    else openaiError(res, status, otype, msg);
    return true;
  }

  async handle(req: IncomingMessage, res: ServerResponse) {
    const arrived = performance.now();
    const url = req.url ?? '/';
    const path = url.includes('?') ? url.slice(0, url.indexOf('?')) : url;
    const log = this.cfg.requestLog;
    let seen: Partial<RequestRecord> = {};
    let bytes = 0;
    if (log)
      res.once('finish', () =>
        log.record({
          method: req.method ?? '?',
          url,
          status: res.statusCode,
          bytes,
          userAgent: req.headers['user-agent'],
          ...seen,
        }),
      );
    const sleep = this.cfg.sleep;
    if (
      sleep?.cfg.devMode &&
      (path === '/sleep' ||
        path === '/wake_up' ||
        path === '/is_sleeping' ||
        path === '/collective_rpc' ||
        path === '/reset_prefix_cache')
    )
      return this.sleepRoute(path, url, req, res, sleep);
    if (req.method === 'GET') return this.getRoute(path, req, res);
    if (req.method !== 'POST') return detail(res, GET_PATHS.has(path) || POST_PATHS.has(path) ? 405 : 404);
    if (!POST_PATHS.has(path)) return detail(res, GET_PATHS.has(path) ? 405 : 404);
    if (path === '/ping') {
      res.writeHead(200, { 'content-length': 0 });
      return void res.end();
    }
    const anthropic = path.startsWith('/v1/messages');
    if (path.startsWith('/v1/') && !this.authorized(req, anthropic)) {
      return anthropic
        ? anthropicError(res, 401, 'authentication_error', 'Unauthorized')
        : openaiError(res, 401, 'AuthenticationError', 'Unauthorized');
    }
    let body: Json;
    const raw = await readBody(req);
    bytes = Buffer.byteLength(raw);
    try {
      body = JSON.parse(raw);
      if (typeof body !== 'object' || body === null) throw new Error('not an object');
      if (log) seen = describe(body);
    } catch (e) {
      // FastAPI reports where the JSON broke: its character position (the end, for a truncated body).
      const pos = Number(/position (\d+)/.exec((e as Error).message)?.[1] ?? raw.length);
      return validationError(res, pos, 'json_invalid', 'JSON decode error');
    }
    return this.postRoute(path, body, req, res, arrived);
  }

  private async getRoute(path: string, req: IncomingMessage, res: ServerResponse) {
    switch (path) {
      case '/health':
        res.writeHead(this.engine.dead ? 503 : 200, { 'content-length': 0 });
        return void res.end();
      case '/ping':
        res.writeHead(200, { 'content-length': 0 });
        return void res.end();
      case '/version':
        return send(res, 200, { version: this.cfg.vllmVersion });
      case '/metrics': {
        if (!this.metrics) return send(res, 404, 'metrics disabled');
        const body = await this.metrics.registry.metrics();
        res.writeHead(200, { 'content-type': this.metrics.registry.contentType });
        return void res.end(body);
      }
      case '/v1/models': {
        if (!this.authorized(req, false)) return openaiError(res, 401, 'AuthenticationError', 'Unauthorized');
        const created = now();
        const permission = {
          id: id('modelperm'),
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
        };
        return send(res, 200, {
          object: 'list',
          data: [
            {
              id: this.cfg.servedName,
              object: 'model',
              created,
              owned_by: 'vllm',
              root: this.cfg.model,
              parent: null,
              max_model_len: this.cfg.maxModelLen,
              permission: [permission],
            },
          ],
        });
      }
    }
    return detail(res, POST_PATHS.has(path) ? 405 : 404);
  }

  /**
   * The POST routes, with the request's JSON body read and checked (not async: the generation is the one promise a
   * request waits on).
   */
  private postRoute(path: string, body: Json, req: IncomingMessage, res: ServerResponse, arrived: number) {
    switch (path) {
      case '/tokenize': {
        if (Array.isArray(body.messages)) {
          // as vLLM, messages go through the chat template: the same count usage.prompt_tokens reports
          const tokens = body.messages.flatMap((m: Json) => [
            151644,
            872,
            198,
            ...tokenIds(contentText(m?.content)),
            151645,
          ]);
          return send(res, 200, {
            count: chatTokens(body.messages),
            max_model_len: this.cfg.maxModelLen,
            tokens,
            token_strs: null,
          });
        }
        const tokens = tokenIds(typeof body.prompt === 'string' ? body.prompt : '');
        return send(res, 200, { count: tokens.length, max_model_len: this.cfg.maxModelLen, tokens, token_strs: null });
      }
      case '/v1/messages/count_tokens': {
        if (!Array.isArray(body.messages)) return validationError(res, 'messages', 'missing', 'Field required');
        const n = chatTokens(body.messages, body.system, body.tools);
        return send(res, 200, { input_tokens: n, context_management: { original_input_tokens: n } });
      }
      case '/v1/completions':
      case '/v1/chat/completions':
      case '/v1/messages':
        return this.generate(path, body, req, res, arrived);
    }
    return openaiError(res, 404, 'NotFoundError', `Not Found: ${path}`);
  }

  /**
   * The dev-mode sleep routes (vllm/entrypoints/serve/sleep/api_router.py): POST /sleep, POST /wake_up, GET
   * /is_sleeping.
   */
  private async sleepRoute(path: string, url: string, req: IncomingMessage, res: ServerResponse, sleep: SimSleep) {
    const want = path === '/is_sleeping' ? 'GET' : 'POST';
    if (req.method !== want) return detail(res, 405);
    const q = new URL(url, 'http://sim').searchParams;
    if (path === '/is_sleeping') return send(res, 200, { is_sleeping: sleep.sleeping });
    // the prefix cache's blocks: what a sleep already dropped (EngineCore.sleep resets it); nothing is held here
    if (path === '/reset_prefix_cache') return send(res, 200, { success: true });
    if (path === '/collective_rpc') {
      const raw = await readBody(req);
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch (e) {
        return send(res, 400, { detail: `JSON decode error: ${(e as Error).message}` });
      }
      const a = await collectiveRpc(sleep, body);
      if (a.status === 200) return send(res, 200, a.body);
      if (a.status === 400) return send(res, 400, { detail: a.message });
      return openaiError(res, 500, 'InternalServerError', a.message);
    }
    try {
      if (path === '/sleep') await sleep.sleep(Number(q.get('level') ?? '1'), q.get('mode') ?? 'abort');
      else await sleep.wake(q.getAll('tags'));
    } catch (e) {
      if (!(e instanceof SleepRefused)) throw e;
      return openaiError(res, 500, 'InternalServerError', e.message);
    }
    res.writeHead(200, { 'content-length': 0 });
    res.end();
  }

  /**
   * Checks a generation request as vLLM does, in its order and words, and sends the refusal.
   * Returns the prompt's tokens and the output budget, or undefined when it answered.
   * On /v1/messages vLLM's request model is checked first (FastAPI's 400, OpenAI-shaped), and the
   * limits after conversion to a chat request come back as HTTP 500 "internal_error", naming
   * max_completion_tokens (seen on the real 0.27.2: what Claude Code's SDK then retries).
   */
  private admitRequest(
    kind: Kind,
    body: Json,
    res: ServerResponse,
  ): { promptTokens: number; maxTokens: number } | undefined {
    const anthropic = kind === 'messages';
    const chat = kind === 'chat';
    const fail = (status: number, otype: string, atype: string, msg: string, param: string | null = null) =>
      anthropic ? anthropicError(res, status, atype, msg) : openaiError(res, status, otype, msg, param);
    if (this.shuttingDown)
      return void fail(503, 'ServiceUnavailableError', 'overloaded_error', 'server is shutting down');
    if (anthropic) {
      if (!Array.isArray(body.messages)) return void validationError(res, 'messages', 'missing', 'Field required');
      if (body.max_tokens === undefined) return void validationError(res, 'max_tokens', 'missing', 'Field required');
      if (!Number.isInteger(body.max_tokens))
        return void validationError(res, 'max_tokens', 'int_type', 'Input should be a valid integer');
      if (body.max_tokens < 1)
        return void validationError(res, 'max_tokens', 'value_error', 'Value error, max_tokens must be positive');
    }
    if (body.model !== undefined && body.model !== this.cfg.servedName) {
      return void fail(404, 'NotFoundError', 'NotFoundError', `The model \`${body.model}\` does not exist.`, 'model');
    }
    const promptTokens = this.promptTokensOf(kind, body, res, fail);
    if (promptTokens === undefined) return;
    const L = this.cfg.maxModelLen;
    const room = L - promptTokens;
    // vLLM's default output budget: what the context leaves (chat), 16 (completions).
    const maxTokens: number = body.max_tokens ?? body.max_completion_tokens ?? (chat ? Math.max(1, room) : 16);
    if (!Number.isInteger(maxTokens) || maxTokens < 1)
      return void fail(
        400,
        'BadRequestError',
        'invalid_request_error',
        `max_tokens must be at least 1, got ${maxTokens}. (parameter=max_tokens, value=${maxTokens})`,
        'max_tokens',
      );
    // vLLM's two refusals, in its words: max_tokens alone too large, then prompt + max_tokens.
    const field = anthropic ? 'max_completion_tokens' : 'max_tokens';
    const [status, otype, atype] = anthropic
      ? [500, '', 'internal_error']
      : [400, 'BadRequestError', 'invalid_request_error'];
    if (maxTokens > L) {
      return void fail(
        status,
        otype,
        atype,
        `${field}=${maxTokens} cannot be greater than max_model_len=max_total_tokens=${L}. Please request fewer output tokens. (parameter=${field}, value=${maxTokens})`,
        field,
      );
    }
    if (promptTokens + maxTokens > L) {
      const least = L - maxTokens + 1;
      return void fail(
        status,
        otype,
        atype,
        `This model's maximum context length is ${L} tokens. However, you requested ${maxTokens} output tokens and your prompt contains at least ${least} input tokens, for a total of at least ${L + 1} tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=${least})`,
        'input_tokens',
      );
    }
    return { promptTokens, maxTokens };
  }

  /**
   * The prompt's tokens, as the chat template counts them (chat, messages) or as sent (completions); undefined when it
   * answered a request with no prompt, an empty one or tools it cannot parse.
   */
  private promptTokensOf(kind: Kind, body: Json, res: ServerResponse, fail: Refuse): number | undefined {
    const anthropic = kind === 'messages';
    const chat = kind === 'chat';
    if (chat || anthropic) {
      if (!Array.isArray(body.messages)) return void validationError(res, 'messages', 'missing', 'Field required');
      const refused = this.toolChoiceRefused(body);
      if (refused) return void fail(400, 'BadRequestError', 'BadRequestError', refused);
      if (body.messages.length === 0) {
        if (anthropic)
          return void fail(
            500,
            '',
            'internal_error',
            'Cannot apply chat template to an empty conversation. Provide at least one message.',
          );
        return void fail(
          400,
          'BadRequestError',
          'invalid_request_error',
          'messages must not be empty. (parameter=messages)',
          'messages',
        );
      }
      return chatTokens(body.messages, anthropic ? body.system : undefined, body.tools);
    }
    const p = body.prompt;
    if ((typeof p !== 'string' && !Array.isArray(p)) || p.length === 0)
      return void fail(
        400,
        'BadRequestError',
        'invalid_request_error',
        'Either prompt or prompt_embeds must be provided and non-empty. (parameter=prompt)',
        'prompt',
      );
    return typeof p === 'string' ? countTokens(p) : p.length;
  }

  /** vLLM refuses a request with tools the server cannot parse calls for (its words, online_renderer.py). */
  private toolChoiceRefused(body: Json): string | undefined {
    if (this.cfg.toolCallParser || !Array.isArray(body.tools) || !body.tools.length) return undefined;
    const c = body.tool_choice;
    // A request with tools and no tool_choice means "auto" on both APIs.
    const choice =
      c === undefined || c === null
        ? 'auto'
        : typeof c === 'string'
          ? c
          : c.type === 'auto'
            ? 'auto'
            : c.type === 'any'
              ? 'required'
              : c.type === 'none'
                ? 'none'
                : c;
    if (choice === 'none') return undefined;
    if (choice === 'auto')
      return this.cfg.autoToolChoice
        ? undefined
        : '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set';
    const name = typeof choice === 'object' ? (choice.name ?? choice.function?.name) : undefined;
    return `tool_choice=${name !== undefined ? `function "${name}"` : `"${choice}"`} requires --tool-call-parser to be set`;
  }

  /** How the model answers: a tool call, or text that stops on its own (or at max_tokens). */
  private answerFor(kind: Kind, body: Json, seed: number, promptTokens: number, maxTokens: number): Answer {
    const tool =
      kind === 'completion' ? undefined : toolCallFor(body, !!(this.cfg.autoToolChoice && this.cfg.toolCallParser));
    if (tool && toolCallTokens(tool) <= maxTokens) return { n: toolCallTokens(tool), finish: 'tool', tool, quote: [] };
    const quote = kind === 'completion' ? undefined : toolResultQuote(body.messages);
    const q = quote ? pieces(quote) : [];
    const natural =
      body.ignore_eos === true ? Number.POSITIVE_INFINITY : Math.max(q.length, naturalLength(unit(seed), promptTokens));
    const n = Math.min(maxTokens, natural);
    return { n, finish: n < maxTokens ? 'stop' : 'length', quote: q };
  }

  private async generate(path: string, body: Json, _req: IncomingMessage, res: ServerResponse, arrived: number) {
    const kind: Kind = path === '/v1/messages' ? 'messages' : path === '/v1/chat/completions' ? 'chat' : 'completion';
    const admitted = this.admitRequest(kind, body, res);
    if (!admitted) return;
    if (this.injected(res, kind === 'messages')) return;
    const r = this.replyFor(kind, body, admitted.promptTokens, admitted.maxTokens, arrived);
    // Only a client that went away aborts: 'close' also follows every finished response, and an
    // abort() builds a DOMException with its stack (about 8 % of the CPU at the throughput limit).
    res.on('close', () => {
      if (!res.writableFinished) r.abort.abort();
    });
    try {
      if (body.stream === true) await this.streamed(r, body, res);
      else await this.whole(r, res);
    } catch (e) {
      const fail = (status: number, otype: string, atype: string, msg: string) =>
        r.anthropic ? anthropicError(res, status, atype, msg) : openaiError(res, status, otype, msg);
      if (e instanceof EngineDead) {
        this.cfg.log(`ERROR ${stamp()} [async_llm.py:420] vllm.v1.engine.exceptions.EngineDeadError: ${e.message}`);
        if (!res.headersSent) return fail(500, 'InternalServerError', 'api_error', `EngineDeadError: ${e.message}`);
      }
      if (!res.headersSent && !r.abort.signal.aborted)
        return fail(500, 'InternalServerError', 'api_error', (e as Error).message);
      res.end();
    }
  }

  /** What one admitted request is answered with: the answer, its ids and the words each API uses for how it ended. */
  private replyFor(kind: Kind, body: Json, promptTokens: number, maxTokens: number, arrived: number): Reply {
    ++this.counter;
    // Greedy decoding (temperature 0) answers the same prompt the same way every time, on every
    // replica of one build, as vLLM does; sampled answers vary from request to request.
    const greedy = body.temperature === 0;
    const seed = greedy
      ? fnv1a(`${this.cfg.numerics ?? ''}\0${JSON.stringify(body.prompt ?? body.messages ?? '')}`)
      : (this.cfg.seed + this.counter) >>> 0;
    const ans = this.answerFor(kind, body, seed, promptTokens, maxTokens);
    const anthropic = kind === 'messages';
    const chat = kind === 'chat';
    return {
      anthropic,
      chat,
      promptTokens,
      arrived,
      ans,
      abort: new AbortController(),
      created: now(),
      // vLLM's Messages API answers with the id of the chat completion it converted (chatcmpl-...).
      rid: id(chat || anthropic ? 'chatcmpl' : 'cmpl'),
      model: this.cfg.servedName,
      // woken from level 2 without reload_weights: empty weights make every logit equal, and token 0 ("!") wins each
      // step
      piece: this.cfg.sleep?.weightsDiscarded
        ? () => '!'
        : (i: number) => (i < ans.quote.length ? ans.quote[i]! : (i ? ' ' : '') + wordFor(seed, i)),
      finishReason: ans.finish === 'tool' ? 'tool_calls' : ans.finish,
      stopReason: ans.finish === 'tool' ? 'tool_use' : ans.finish === 'stop' ? 'end_turn' : 'max_tokens',
      counted: ans.finish === 'length' ? 'length' : 'stop',
      toolCall: ans.tool && {
        id: ans.tool.id,
        type: 'function',
        function: { name: ans.tool.name, arguments: JSON.stringify(ans.tool.input) },
      },
    };
  }

  /** A non-streamed answer, as each API shapes it. */
  private async whole(r: Reply, res: ServerResponse) {
    const { ans, promptTokens, rid, model } = r;
    const g = await this.engine.generate(promptTokens, ans.n, undefined, r.abort.signal, r.arrived);
    let text = '';
    if (!ans.tool) for (let i = 0; i < g.completionTokens; i++) text += r.piece(i);
    this.metrics?.success.inc({ finished_reason: r.counted });
    if (r.anthropic) {
      const content = ans.tool
        ? [{ type: 'tool_use', id: ans.tool.id, name: ans.tool.name, input: ans.tool.input }]
        : [{ type: 'text', text }];
      return send(res, 200, {
        id: rid,
        type: 'message',
        role: 'assistant',
        content,
        model,
        stop_reason: r.stopReason,
        usage: { input_tokens: promptTokens, output_tokens: g.completionTokens },
      });
    }
    // The fields vLLM sends, nulls included: clients (and sparkctl's shape checks) see the same keys.
    const usage = {
      prompt_tokens: promptTokens,
      total_tokens: promptTokens + g.completionTokens,
      completion_tokens: g.completionTokens,
      prompt_tokens_details: null,
    };
    const tail = {
      service_tier: null,
      system_fingerprint: this.fingerprint,
      kv_transfer_params: null,
      ec_transfer_params: null,
      metrics: null,
    };
    if (r.chat) return send(res, 200, this.chatCompletion(r, text, usage, tail));
    return send(res, 200, this.textCompletion(r, text, usage, tail));
  }

  /** A non-streamed chat completion: the message (its text, or the tool call) and vLLM's fields, nulls included. */
  private chatCompletion(r: Reply, text: string, usage: Json, tail: Json): Json {
    const message = {
      role: 'assistant',
      content: r.ans.tool ? null : text,
      refusal: null,
      annotations: null,
      audio: null,
      function_call: null,
      ...(r.toolCall ? { tool_calls: [r.toolCall] } : {}),
      reasoning: null,
    };
    const choice = {
      index: 0,
      message,
      logprobs: null,
      finish_reason: r.finishReason,
      stop_reason: null,
      token_ids: null,
      routed_experts: null,
    };
    return {
      id: r.rid,
      object: 'chat.completion',
      created: r.created,
      model: r.model,
      choices: [choice],
      usage,
      prompt_logprobs: null,
      prompt_token_ids: null,
      prompt_text: null,
      ...tail,
    };
  }

  /** A non-streamed text completion (/v1/completions), with vLLM's fields, nulls included. */
  private textCompletion(r: Reply, text: string, usage: Json, tail: Json): Json {
    const choice = {
      index: 0,
      text,
      logprobs: null,
      finish_reason: r.finishReason,
      stop_reason: null,
      token_ids: null,
      prompt_logprobs: null,
      prompt_token_ids: null,
      routed_experts: null,
    };
    return {
      id: r.rid,
      object: 'text_completion',
      created: r.created,
      model: r.model,
      choices: [choice],
      usage,
      ...tail,
    };
  }

  /**
   * A streamed answer: a chunk (or Messages event) per token as the engine makes it, then the usage chunk and [DONE].
   */
  private async streamed(r: Reply, body: Json, res: ServerResponse) {
    const { ans, promptTokens, rid, model } = r;
    this.engine.assertAlive();
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    const sse = (data: unknown, event?: string) =>
      res.write(`${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`);
    const includeUsage = body.stream_options?.include_usage === true;
    // continuous_usage_stats: usage (cumulative) on every chunk, as vLLM sends it
    const continuous = includeUsage && body.stream_options?.continuous_usage_stats === true;
    const usageAt = (k: number) =>
      continuous
        ? { usage: { prompt_tokens: promptTokens, completion_tokens: k, total_tokens: promptTokens + k } }
        : {};
    // vLLM puts system_fingerprint on the last chunk: the usage chunk when asked for, else the last text chunk.
    const fp = (last: boolean) => (last && !includeUsage ? { system_fingerprint: this.fingerprint } : {});
    const trace = this.cfg.trace;
    const sent: number[] = [];
    const onToken = (i: number) => {
      if (trace) sent.push(performance.now());
      const last = i === ans.n - 1;
      if (r.anthropic) return this.messagesEvent(sse, i, last, ans, r.piece, { rid, model, promptTokens });
      this.openaiChunk(r, i, last, { sse, usageAt, fp });
    };
    const g = await this.engine.generate(promptTokens, ans.n, onToken, r.abort.signal, r.arrived);
    this.metrics?.success.inc({ finished_reason: r.counted });
    if (trace && sent.length)
      trace.record({ ttftMs: sent[0]! - r.arrived, itlMs: sent.slice(1).map((t, k) => t - sent[k]!) });
    this.streamEnd(r, sse, res, includeUsage, g.completionTokens);
    res.end();
  }

  /**
   * A token of a streamed OpenAI answer: a chat delta (the role chunk before the first; a tool call whole, at the last
   * token) or a text completion chunk, the last one with its finish reason.
   */
  private openaiChunk(r: Reply, i: number, last: boolean, w: ChunkWriter) {
    const { ans, rid, model, created, chat } = r;
    const { sse, usageAt, fp } = w;
    // vLLM sends the role chunk with the first output (after prefill), not before it
    if (chat && i === 0)
      sse({
        id: rid,
        object: 'chat.completion.chunk',
        created,
        model,
        choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
        prompt_token_ids: null,
        prompt_text: null,
        ...usageAt(0),
      });
    const fin = last
      ? { finish_reason: r.finishReason, ...(chat ? { stop_reason: null } : {}) }
      : { finish_reason: null };
    if (chat) {
      // A parser buffers a tool call until it is whole, then sends it as one delta.
      if (ans.tool && !last) return;
      const delta = ans.tool ? { tool_calls: [{ index: 0, ...r.toolCall }] } : { content: r.piece(i) };
      sse({
        id: rid,
        object: 'chat.completion.chunk',
        created,
        model,
        choices: [{ index: 0, delta, logprobs: null, ...fin, token_ids: null }],
        ...usageAt(i + 1),
        ...fp(last),
      });
    } else
      sse({
        id: rid,
        object: 'text_completion',
        created,
        model,
        choices: [
          {
            index: 0,
            text: r.piece(i),
            logprobs: null,
            ...fin,
            stop_reason: null,
            prompt_token_ids: null,
            token_ids: null,
          },
        ],
        ...usageAt(i + 1),
        ...fp(last),
      });
  }

  /**
   * A streamed answer's close: the Messages API's block stop, message_delta (the stop reason and usage) and
   * message_stop; OpenAI's usage chunk when asked for, then [DONE].
   */
  private streamEnd(r: Reply, sse: Sse, res: ServerResponse, includeUsage: boolean, completionTokens: number) {
    const { promptTokens, rid, model, created, chat } = r;
    if (r.anthropic) {
      sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop');
      sse(
        {
          type: 'message_delta',
          delta: { stop_reason: r.stopReason },
          usage: { input_tokens: promptTokens, output_tokens: completionTokens },
        },
        'message_delta',
      );
      sse({ type: 'message_stop' }, 'message_stop');
    } else {
      if (includeUsage)
        sse({
          id: rid,
          object: chat ? 'chat.completion.chunk' : 'text_completion',
          created,
          model,
          choices: [],
          usage: {
            prompt_tokens: promptTokens,
            total_tokens: promptTokens + completionTokens,
            completion_tokens: completionTokens,
          },
          system_fingerprint: this.fingerprint,
        });
      res.write('data: [DONE]\n\n');
    }
  }

  /**
   * A token of a streamed Messages answer, in vLLM's event order (serving.py's stream converter):
   * message_start with the first output, then one content block (text deltas, or a tool_use block
   * whose input arrives as one input_json_delta once the parser has the whole call).
   */
  private messagesEvent(
    sse: (data: unknown, event?: string) => void,
    i: number,
    last: boolean,
    ans: Answer,
    piece: (i: number) => string,
    m: { rid: string; model: string; promptTokens: number },
  ) {
    if (i === 0) {
      sse(
        {
          type: 'message_start',
          message: {
            id: m.rid,
            type: 'message',
            role: 'assistant',
            content: [],
            model: m.model,
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: m.promptTokens, output_tokens: 0 },
          },
        },
        'message_start',
      );
      const block = ans.tool
        ? { type: 'tool_use', id: ans.tool.id, name: ans.tool.name, input: {} }
        : { type: 'text', text: '' };
      sse({ type: 'content_block_start', content_block: block, index: 0 }, 'content_block_start');
    }
    if (ans.tool) {
      if (last)
        sse(
          {
            type: 'content_block_delta',
            delta: { type: 'input_json_delta', partial_json: JSON.stringify(ans.tool.input) },
            index: 0,
          },
          'content_block_delta',
        );
      return;
    }
    sse(
      { type: 'content_block_delta', delta: { type: 'text_delta', text: piece(i) }, index: 0 },
      'content_block_delta',
    );
  }
}

type Kind = 'completion' | 'chat' | 'messages';

/** Writes one server-sent event (a Messages event with its name). */
type Sse = (data: unknown, event?: string) => void;

/**
 * What a streamed OpenAI answer's chunks are written with: the event writer, the usage after k tokens, the fingerprint.
 */
interface ChunkWriter {
  sse: Sse;
  usageAt: (k: number) => Json;
  fp: (last: boolean) => Json;
}

/** Sends a refusal in the request's API's shape: OpenAI's error type (and param), or Anthropic's. */
type Refuse = (status: number, otype: string, atype: string, msg: string, param?: string | null) => void;

/** What a request's body shows of its client, for the request log (sizes and names, never the text). */
function describe(body: Json): Partial<RequestRecord> {
  const names = Array.isArray(body.tools)
    ? body.tools.map((t: Json) => String(t?.name ?? t?.function?.name ?? '?'))
    : undefined;
  const messages = Array.isArray(body.messages) ? body.messages : undefined;
  return {
    model: body.model,
    maxTokens: body.max_tokens ?? body.max_completion_tokens,
    stream: body.stream === true,
    tools: names,
    promptTokens: messages
      ? chatTokens(messages, body.system, body.tools)
      : typeof body.prompt === 'string'
        ? countTokens(body.prompt)
        : undefined,
    systemChars: body.system === undefined ? undefined : contentText(body.system).length,
    toolsChars: body.tools === undefined ? undefined : JSON.stringify(body.tools).length,
    messages: messages?.length,
  };
}

/** One admitted request's answer and the words it is sent with (built once, read by whole() or streamed()). */
interface Reply {
  anthropic: boolean;
  chat: boolean;
  promptTokens: number;
  arrived: number;
  ans: Answer;
  abort: AbortController;
  created: number;
  rid: string;
  model: string;
  piece: (i: number) => string;
  finishReason: string;
  stopReason: string;
  counted: 'length' | 'stop';
  toolCall: { id: string; type: string; function: { name: string; arguments: string } } | undefined;
}

interface Answer {
  /** tokens the model generates */
  n: number;
  finish: 'stop' | 'length' | 'tool';
  tool?: ToolCall;
  /** the opening that quotes a tool's result, one piece a token */
  quote: string[];
}

/** A number in [0, 1) from a request's seed: where its answer stops on its own. */
function unit(seed: number): number {
  let t = (seed + 0x6d2b79f5) >>> 0;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

export function stamp(): string {
  const d = new Date();
  const p = (n: number) => String(n).padStart(2, '0');
  return `${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
