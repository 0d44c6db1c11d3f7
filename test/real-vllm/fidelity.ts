// One short script of requests, run against the simulator and against the real vLLM, reduced to the
// shapes sparkctl relies on: status codes, content types, JSON keys and types (not values), error
// bodies, SSE framing and the usage chunk, /metrics families and their labels.
// @ts-expect-error no types shipped
import parsePrometheus from 'parse-prometheus-text-format';

export interface Observed {
  step: string;
  status: number;
  contentType: string;
  /** the body reduced to its shape */
  shape: unknown;
}

/** Where the simulator answered otherwise than the real server: status, content type or shape, step by step. */
export function shapeDiffs(real: Observed[], simulated: Observed[]): string[] {
  const diffs: string[] = [];
  for (const r of real) {
    const s = simulated.find((x) => x.step === r.step);
    if (!s) {
      diffs.push(`${r.step}: the simulator has no such step`);
      continue;
    }
    for (const k of ['status', 'contentType', 'shape'] as const) {
      const a = JSON.stringify(r[k]);
      const b = JSON.stringify(s[k]);
      if (a !== b) diffs.push(`${r.step} ${k}: real ${a} | sim ${b}`);
    }
  }
  return diffs;
}

/** JSON -> its shape: object keys (sorted) with the shapes of their values; arrays by their first element. */
export function shapeOf(v: unknown, depth = 0): unknown {
  if (v === null) return 'null';
  if (Array.isArray(v)) return v.length ? [shapeOf(v[0], depth + 1)] : [];
  if (typeof v === 'object') {
    if (depth > 6) return 'object';
    const o: Record<string, unknown> = {};
    for (const k of Object.keys(v as object).sort()) o[k] = shapeOf((v as Record<string, unknown>)[k], depth + 1);
    return o;
  }
  return typeof v;
}

const ctype = (r: Response) => (r.headers.get('content-type') ?? '').split(';')[0]!.trim();

async function bodyShape(r: Response): Promise<unknown> {
  const text = await r.text();
  if (!text) return 'empty';
  try {
    const j = JSON.parse(text);
    // Error bodies: the type and code values too (clients and bench branch on them), not only the keys.
    if (j && typeof j === 'object' && j.error && typeof j.error === 'object')
      return { ...(shapeOf(j) as object), errorType: j.error.type, errorCode: j.error.code };
    return shapeOf(j);
  } catch {
    return 'text';
  }
}

/** Two shapes as one: the union of object keys (how many tokens share a chunk varies with speed). */
function mergeShape(a: unknown, b: unknown): unknown {
  if (a === undefined) return b;
  if (b === undefined) return a;
  if (Array.isArray(a) && Array.isArray(b)) return a.length || b.length ? [mergeShape(a[0], b[0])] : [];
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const o: Record<string, unknown> = {};
    for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort())
      o[k] = mergeShape((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]);
    return o;
  }
  return a === b ? a : [a, b].sort().join('|');
}

/**
 * SSE stream -> framing facts: every event a `data: ` line ended by a blank line, [DONE] last; the
 * chat role chunk; the text chunks' shape (merged: a fast server sends several tokens per chunk, so
 * which chunk is "last" varies; finish_reason is counted apart); the usage chunk.
 */
export function sseShape(text: string) {
  const events = text.split('\n\n').filter((e) => e.length);
  const framed = events.every((e) => e.startsWith('data: ') && !e.includes('\n'));
  const datas = events.map((e) => e.slice('data: '.length));
  const done = datas[datas.length - 1] === '[DONE]';
  const chunks = datas.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d) as Record<string, any>);
  const role = chunks[0]?.choices?.[0]?.delta?.role !== undefined ? chunks[0] : undefined;
  const usage = chunks.filter((c) => c.usage);
  const content = chunks.filter((c) => c !== role && c.choices?.length);
  const finishReasons = content.filter((c) => c.choices[0].finish_reason !== null).length;
  let textChunk: unknown;
  for (const c of content) {
    const { finish_reason: _f, ...choice } = c.choices[0];
    const { system_fingerprint: _s, ...rest } = c;
    textChunk = mergeShape(textChunk, shapeOf({ ...rest, choices: [choice] }));
  }
  const last = chunks[chunks.length - 1];
  return {
    framed,
    done,
    endsWithNewlines: text.endsWith('\n\n'),
    roleChunk: role ? shapeOf(role) : 'none',
    textChunk,
    finishReasons,
    /** vLLM puts system_fingerprint on the last chunk before [DONE] */
    fingerprintOnLast: typeof last?.system_fingerprint === 'string',
    usageChunks: usage.length,
    usageLast: usage.length ? last === usage[0] : false,
    usageChunk: usage.length ? shapeOf(usage[0]) : 'none',
    usageChoices: usage.length ? usage[0]!.choices.length : -1,
  };
}

/** The metrics sparkctl reads (probe, bench, cost), their type and label names. */
export function metricFamilies(text: string, names: string[]) {
  const fams = parsePrometheus(text) as Array<{
    name: string;
    type: string;
    metrics: Array<{ labels?: Record<string, string> }>;
  }>;
  const out: Record<string, { type: string; labels: string[]; finishedReasons?: string[] } | 'missing'> = {};
  for (const n of names) {
    const f = fams.find((x) => x.name === n);
    if (!f) {
      out[n] = 'missing';
      continue;
    }
    const labels = [...new Set(f.metrics.flatMap((m) => Object.keys(m.labels ?? {})))].filter((l) => l !== 'le').sort();
    out[n] = { type: f.type, labels };
    if (labels.includes('finished_reason'))
      out[n].finishedReasons = [...new Set(f.metrics.map((m) => m.labels!.finished_reason!))].sort();
  }
  return out;
}

export const METRICS_SPARKCTL_READS = [
  'vllm:num_requests_running',
  'vllm:num_requests_waiting',
  'vllm:kv_cache_usage_perc',
  'vllm:prompt_tokens_total',
  'vllm:generation_tokens_total',
  'vllm:num_preemptions_total',
  'vllm:request_success_total',
  'vllm:time_to_first_token_seconds',
  'vllm:inter_token_latency_seconds',
  'vllm:e2e_request_latency_seconds',
  'vllm:request_queue_time_seconds',
];

/** The script. `model` is the served name; the server's max model len is 512. */
export async function runScript(url: string, model: string): Promise<Observed[]> {
  const out: Observed[] = [];
  const json = (body: unknown) => ({
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const step = async (
    name: string,
    path: string,
    init?: RequestInit,
    reduce: (r: Response) => Promise<unknown> = bodyShape,
  ) => {
    const r = await fetch(`${url}${path}`, { ...init, signal: AbortSignal.timeout(60_000) });
    out.push({ step: name, status: r.status, contentType: ctype(r), shape: await reduce(r) });
  };
  await step('GET /health', '/health');
  await step('GET /version', '/version');
  await step('GET /v1/models', '/v1/models');
  await step('POST /tokenize', '/tokenize', json({ model, prompt: 'hello world', add_special_tokens: false }));
  await step('completion', '/v1/completions', json({ model, prompt: 'hello', max_tokens: 3, temperature: 0 }));
  await step(
    'chat completion',
    '/v1/chat/completions',
    json({ model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 3, temperature: 0 }),
  );
  await step(
    'completion, streamed with usage',
    '/v1/completions',
    json({
      model,
      prompt: 'hello',
      max_tokens: 3,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
    async (r) => sseShape(await r.text()),
  );
  await step(
    'chat, streamed with usage',
    '/v1/chat/completions',
    json({
      model,
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 3,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
    async (r) => sseShape(await r.text()),
  );
  await step(
    'completion, streamed without usage',
    '/v1/completions',
    json({ model, prompt: 'hello', max_tokens: 2, temperature: 0, stream: true }),
    async (r) => sseShape(await r.text()),
  );
  await step('unknown model', '/v1/completions', json({ model: 'no-such-model', prompt: 'hello', max_tokens: 1 }));
  await step(
    'unknown model (chat)',
    '/v1/chat/completions',
    json({ model: 'no-such-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: 1 }),
  );
  await step(
    'prompt + max_tokens above max model len',
    '/v1/completions',
    json({ model, prompt: 'hello', max_tokens: 4096 }),
  );
  await step('max_tokens 0', '/v1/completions', json({ model, prompt: 'hello', max_tokens: 0 }));
  await step('completion without a prompt', '/v1/completions', json({ model, max_tokens: 1 }));
  await step('chat without messages', '/v1/chat/completions', json({ model, max_tokens: 1 }));
  await step('body not JSON', '/v1/completions', json('{"model": '));
  await step('unknown path', '/v1/nope');
  await step('GET on a POST endpoint', '/v1/completions');
  await step('GET /metrics', '/metrics', undefined, async (r) =>
    metricFamilies(await r.text(), METRICS_SPARKCTL_READS),
  );
  return out;
}

/**
 * An Anthropic Messages stream -> its framing facts: every event an `event:` line and a `data:` line
 * whose type matches, the order of event names (runs of deltas as one), and each event type's
 * shape (merged over its events: how many deltas come varies).
 */
export function messagesSseShape(text: string) {
  const raw = text.split('\n\n').filter((e) => e.length);
  const framed = raw.every((e) => /^event: [a-z_]+\ndata: .*$/.test(e));
  const events = raw.map((e) => {
    const [ev, data] = e.split('\n');
    return {
      event: ev!.slice('event: '.length),
      data: JSON.parse(data!.slice('data: '.length)) as Record<string, any>,
    };
  });
  const order = events
    .map((e) => e.event)
    .filter((n, i, a) => !(n === 'content_block_delta' && a[i - 1] === 'content_block_delta'));
  const shapes: Record<string, unknown> = {};
  for (const e of events) shapes[e.event] = mergeShape(shapes[e.event], shapeOf(e.data));
  return {
    framed,
    typesMatch: events.every((e) => e.data.type === e.event),
    order,
    shapes,
    stopReasons: events.filter((e) => e.event === 'message_delta').map((e) => typeof e.data.delta?.stop_reason),
  };
}

/**
 * The /v1/messages script (vLLM's Anthropic path, what Claude Code talks to), for a server of
 * 65,536 tokens that parses tool calls. Error bodies keep their message text: the limits' words are
 * independent of the tokenizer (the least overflowing prompt is max_model_len - max_tokens + 1).
 */
export async function runMessagesScript(url: string, model: string): Promise<Observed[]> {
  const out: Observed[] = [];
  const post = (body: unknown) => ({
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const withText = async (r: Response) => {
    const text = await r.text();
    try {
      const j = JSON.parse(text);
      return {
        ...(shapeOf(j) as object),
        errorType: j?.error?.type,
        errorCode: j?.error?.code,
        message:
          typeof j?.error?.message === 'string' && !j.error.message.includes("'input'") ? j.error.message : undefined,
      };
    } catch {
      return text ? 'text' : 'empty';
    }
  };
  const step = async (
    name: string,
    path: string,
    init?: RequestInit,
    reduce: (r: Response) => Promise<unknown> = withText,
  ) => {
    const r = await fetch(`${url}${path}`, { ...init, signal: AbortSignal.timeout(120_000) });
    out.push({ step: name, status: r.status, contentType: ctype(r), shape: await reduce(r) });
  };
  // Greedy, so the tiny random model's few tokens are the same every run: sampled, they were at times
  // only tokens that decode to nothing, and the real server then streamed no content block at all.
  const hi = [{ role: 'user', content: 'hello there, how are you today?' }];
  const read = {
    name: 'Read',
    description: 'Reads a file',
    input_schema: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] },
  };
  const sse = async (r: Response) => messagesSseShape(await r.text());
  await step('message', '/v1/messages', post({ model, max_tokens: 3, temperature: 0, messages: hi }), async (r) =>
    shapeOf(await r.json()),
  );
  await step(
    'message, streamed',
    '/v1/messages?beta=true',
    post({ model, max_tokens: 3, temperature: 0, stream: true, messages: hi }),
    sse,
  );
  await step(
    'message with system blocks and tools, streamed',
    '/v1/messages?beta=true',
    post({
      model,
      max_tokens: 3,
      temperature: 0,
      stream: true,
      system: [{ type: 'text', text: 'You are terse.' }],
      tools: [read],
      messages: hi,
    }),
    sse,
  );
  await step(
    "the turn after a tool ran (Claude Code's second request), streamed",
    '/v1/messages?beta=true',
    post({
      model,
      max_tokens: 3,
      temperature: 0,
      stream: true,
      tools: [read],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Read /tmp/notes.txt' }] },
        {
          role: 'assistant',
          content: [{ type: 'tool_use', id: 'toolu_01', name: 'Read', input: { file_path: '/tmp/notes.txt' } }],
        },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: '     1\tthe secret is 42' }],
        },
        { role: 'system', content: 'a note Claude Code appends' },
      ],
    }),
    sse,
  );
  await step('max_tokens above max model len', '/v1/messages', post({ model, max_tokens: 70_000, messages: hi }));
  await step(
    'max_tokens above max model len, streamed',
    '/v1/messages',
    post({ model, max_tokens: 70_000, stream: true, messages: hi }),
  );
  await step(
    'prompt + max_tokens above max model len',
    '/v1/messages',
    post({ model, max_tokens: 65_530, messages: hi }),
  );
  await step(
    'prompt + max_tokens above max model len, streamed',
    '/v1/messages',
    post({ model, max_tokens: 65_530, stream: true, messages: hi }),
  );
  await step('no max_tokens', '/v1/messages', post({ model, messages: hi }));
  await step('max_tokens 0', '/v1/messages', post({ model, max_tokens: 0, messages: hi }));
  await step('no messages', '/v1/messages', post({ model, max_tokens: 3 }));
  await step('empty messages', '/v1/messages', post({ model, max_tokens: 3, temperature: 0, messages: [] }));
  await step(
    'unknown model',
    '/v1/messages',
    post({ model: 'no-such-model', max_tokens: 3, temperature: 0, messages: hi }),
  );
  await step('body not JSON', '/v1/messages', post('{"model": '));
  await step('count_tokens', '/v1/messages/count_tokens', post({ model, messages: hi }));
  await step("HEAD / (Claude Code's first call)", '/', { method: 'HEAD' });
  return out;
}
