// Every reader of a server answer, fed random JSON and random mutations of real vLLM 0.27.2
// answers (test/fixtures/captures/vllm-0.27.2): none throws, none calls an answer good that a
// client could not use, and the probe ends each as a finding (never "healthy", never a crash).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import fc from 'fast-check';
import { createServer, type Server } from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { readChatStream, readMessagesStream } from '../../src/client/shapes.js';
import { completionAnswer, errorMessage, servedModels, tokenizeAnswer } from '../../src/client/answers.js';
import { parseVllmMetrics } from '../../src/client/metrics.js';
import { probe } from '../../src/health/probe.js';
import { claudeCodeCheck } from '../../src/health/client-check.js';
import { ROOT } from '../helpers.js';

const CAP = join(ROOT, 'test', 'fixtures', 'captures', 'vllm-0.27.2');
const cap = (f: string) => readFileSync(join(CAP, f), 'utf8');
const json = (f: string) => JSON.parse(cap(f));

type Path = Array<string | number>;
function paths(v: unknown, at: Path = []): Path[] {
  const out: Path[] = [at];
  if (Array.isArray(v)) v.forEach((x, i) => out.push(...paths(x, [...at, i])));
  else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) out.push(...paths(x, [...at, k]));
  return out;
}
/** v with the value at path replaced (or deleted, for undefined). */
function setAt(v: unknown, path: Path, to: unknown): unknown {
  if (!path.length) return to;
  const copy: any = Array.isArray(v) ? [...v] : { ...(v as object) };
  const [k, ...rest] = path;
  if (rest.length === 0 && to === undefined) {
    if (Array.isArray(copy)) copy.splice(k as number, 1);
    else delete copy[k as string];
  } else copy[k as string] = setAt(copy[k as string], rest, to);
  return copy;
}
/** Random mutations of a real answer: one to three values replaced by any JSON value, or removed. */
const mutationOf = (real: unknown) => {
  const ps = paths(real);
  return fc
    .array(fc.tuple(fc.nat(ps.length - 1), fc.option(fc.jsonValue(), { nil: undefined, freq: 3 })), {
      minLength: 1,
      maxLength: 3,
    })
    .map((ms) => ms.reduce((v, [i, to]) => setAt(v, ps[i]!, to), real));
};
const anyJson = fc.oneof(fc.jsonValue(), fc.anything());

const isCount = (n: unknown) => typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= 2 ** 31;
/**
 * What a client needs of a completion (the OpenAI SDK's types): choices, each with an index and a
 * finish_reason that is a string or null, the first with its text; usage counts whole where given.
 */
const usable = (j: any, object: string, text: (c: any) => boolean) =>
  !!j &&
  typeof j === 'object' &&
  !Array.isArray(j) &&
  (j.object === undefined || j.object === object) &&
  Array.isArray(j.choices) &&
  j.choices.length > 0 &&
  j.choices.every(
    (c: any) =>
      !!c &&
      typeof c === 'object' &&
      isCount(c.index) &&
      (c.finish_reason == null || typeof c.finish_reason === 'string') &&
      text(c),
  ) &&
  (j.usage == null ||
    (isCount(j.usage.prompt_tokens) &&
      isCount(j.usage.completion_tokens) &&
      (j.usage.total_tokens === undefined || isCount(j.usage.total_tokens))));
const completionUsable = (j: any) => usable(j, 'text_completion', (c) => typeof c.text === 'string');
/**
 * A probe's generation counts only when it ended for a normal reason (length, stop) with a token out (usage's count,
 * else any text).
 */
const generationRan = (j: any) => {
  const c = j.choices[0];
  const tokens = j.usage ? j.usage.completion_tokens : c.text.length ? 1 : 0;
  return (c.finish_reason === 'length' || c.finish_reason === 'stop') && tokens >= 1;
};
const RUNS = { numRuns: 300 };

describe('readers: the real answers are good; random and mutated ones are good only where a client could use them', () => {
  it('/v1/completions', () => {
    expect(completionAnswer(json('completion.json'), '').ok).toBe(true);
    fc.assert(
      fc.property(
        fc.oneof(anyJson, mutationOf(json('completion.json'))),
        (j) => !completionAnswer(j, JSON.stringify(j) ?? '').ok || completionUsable(j),
      ),
      RUNS,
    );
  });
  it('/v1/models', () => {
    expect(servedModels(json('models.json'), '').ok).toBe(true);
    fc.assert(
      fc.property(fc.oneof(anyJson, mutationOf(json('models.json'))), (j: any) => {
        const r = servedModels(j, '');
        return (
          !r.ok ||
          (Array.isArray(j.data) &&
            r.models.every(
              (m) =>
                typeof m.id === 'string' &&
                (m.max_model_len === undefined || (Number.isInteger(m.max_model_len) && m.max_model_len > 0)),
            ))
        );
      }),
      RUNS,
    );
  });
  it('/tokenize', () => {
    expect(tokenizeAnswer(json('tokenize.json'), '').ok).toBe(true);
    fc.assert(
      fc.property(
        fc.oneof(anyJson, mutationOf(json('tokenize.json'))),
        (j: any) => !tokenizeAnswer(j, '').ok || isCount(j.count),
      ),
      RUNS,
    );
  });
  it('/metrics: never a reading a server cannot have', () => {
    const real = cap('metrics.txt');
    expect(parseVllmMetrics(real).kvCacheUsage).toBe(0);
    const lines = real.split('\n');
    const mutated = fc
      .array(
        fc.tuple(
          fc.nat(lines.length - 1),
          fc.oneof(fc.string(), fc.constantFrom('NaN', '+Inf', '-1', '1e400', '-0', '2'), fc.double().map(String)),
        ),
        { minLength: 1, maxLength: 5 },
      )
      .map((ms) => {
        const l = [...lines];
        for (const [i, v] of ms) l[i] = /^vllm:/.test(l[i]!) ? l[i]!.replace(/\S+$/, v) : v;
        return l.join('\n');
      });
    fc.assert(
      fc.property(fc.oneof(fc.string(), mutated), (text) => {
        let m: ReturnType<typeof parseVllmMetrics>;
        try {
          m = parseVllmMetrics(text);
        } catch (e) {
          return e instanceof Error; // the probe reports it ("/metrics does not parse")
        }
        const ok = (v: number | undefined, max = Number.MAX_SAFE_INTEGER) =>
          v === undefined || (Number.isFinite(v) && v >= 0 && v <= max);
        return ok(m.kvCacheUsage, 1) && ok(m.running) && ok(m.waiting) && ok(m.preemptions);
      }),
      RUNS,
    );
  });
});

// The zod schemas these readers had before they were written by hand (the probe no longer loads
// zod): the hand-written ones must accept exactly the same answers.
const zCount = z
  .number()
  .int()
  .nonnegative()
  .max(2 ** 31);
const zUsage = z
  .object({ prompt_tokens: zCount, completion_tokens: zCount, total_tokens: zCount.optional() })
  .passthrough();
const ZOD = {
  models: z.object({
    data: z.array(z.object({ id: z.string(), max_model_len: z.number().int().positive().optional() }).passthrough()),
  }),
  completion: z
    .object({
      object: z.literal('text_completion').optional(),
      choices: z
        .array(z.object({ index: zCount, text: z.string(), finish_reason: z.string().nullish() }).passthrough())
        .nonempty(),
      usage: zUsage.nullish(),
    })
    .passthrough(),
  tokenize: z.object({ count: zCount }).passthrough(),
  error: z
    .object({ error: z.object({ message: z.string(), type: z.string().optional() }).passthrough() })
    .passthrough(),
};

describe('the hand-written readers accept exactly what their zod schemas accepted', () => {
  const same = (file: string, schema: z.ZodTypeAny, ours: (j: unknown) => boolean) =>
    fc.assert(
      fc.property(fc.oneof(anyJson, mutationOf(json(file))), (j) => ours(j) === schema.safeParse(j).success),
      { numRuns: 1000 },
    );
  it('/v1/models', () => same('models.json', ZOD.models, (j) => servedModels(j, '').ok));
  it('/v1/completions', () => same('completion.json', ZOD.completion, (j) => completionAnswer(j, '').ok));
  it('/tokenize', () => same('tokenize.json', ZOD.tokenize, (j) => tokenizeAnswer(j, '').ok));
  it('an error body', () => {
    const real = { error: { message: 'The model `x` does not exist.', type: 'NotFoundError', code: 404 } };
    fc.assert(
      fc.property(fc.oneof(anyJson, mutationOf(real)), (j) => {
        const z0 = ZOD.error.safeParse(j);
        return (
          errorMessage(j, 'the body') ===
          (z0.success ? z0.data.error.message : 'the body').replace(/\s+/g, ' ').slice(0, 300)
        );
      }),
      { numRuns: 1000 },
    );
  });
  it.each([
    ['{"data":"oops"}', { data: 'oops' }, 'data: expected an array, got a string'],
    ['an entry without an id', { data: [{ object: 'model' }] }, 'data.0.id: expected a string, got nothing'],
    ['a context of 0', { data: [{ id: 'm', max_model_len: 0 }] }, 'data.0.max_model_len: expected at least 1, got 0'],
    ['a list', [null], 'body: expected an object, got an array'],
  ])('/v1/models, %s: the first wrong field, named', (_n, j, want) => {
    const r = servedModels(j, JSON.stringify(j));
    expect(r.ok).toBe(false);
    expect(!r.ok && r.problem).toContain(`/v1/models answered a body of the wrong shape (${want})`);
  });
});

/** An SSE text mutated: an event's JSON changed or broken, an event dropped or repeated, the text cut. */
const sseMutation = (text: string) => {
  const evs = text.split('\n\n').filter(Boolean);
  return fc.oneof(
    fc
      .tuple(fc.nat(evs.length - 1), fc.jsonValue())
      .map(
        ([i, v]) =>
          evs.map((e, k) => (k === i ? e.replace(/data: .*/, `data: ${JSON.stringify(v)}`) : e)).join('\n\n') + '\n\n',
      ),
    fc.nat(evs.length - 1).map((i) => evs.filter((_, k) => k !== i).join('\n\n') + '\n\n'),
    fc.nat(evs.length - 1).map((i) => [...evs.slice(0, i + 1), evs[i], ...evs.slice(i + 1)].join('\n\n') + '\n\n'),
    fc.nat(text.length - 1).map((n) => text.slice(0, n)),
  );
};

describe('streams: read as the SDKs read them', () => {
  it('Messages (what Claude Code reads): the real stream is good; a mutated one is good only if it still starts, stops and closes its blocks', () => {
    const real = cap('messages-stream.sse');
    const r = readMessagesStream(real);
    expect(r).toMatchObject({ ok: true, value: { stopReason: 'end_turn', blocks: [{ type: 'text' }] } });
    fc.assert(
      fc.property(fc.oneof(fc.string(), sseMutation(real)), (text) => {
        const s = readMessagesStream(text);
        if (!s.ok) return typeof s.problem === 'string' && s.problem.length > 0;
        const types = text
          .split('\n\n')
          .filter(Boolean)
          .map(
            (e) =>
              JSON.parse(
                e
                  .split('\n')
                  .find((l) => l.startsWith('data: '))!
                  .slice(6),
              ).type,
          );
        return (
          types[0] === 'message_start' &&
          types.at(-1) === 'message_stop' &&
          types.filter((t) => t === 'content_block_start').length ===
            types.filter((t) => t === 'content_block_stop').length
        );
      }),
      RUNS,
    );
  });
  it('chat (what an OpenAI client reads): [DONE] last, the usage chunk before it', () => {
    const real = cap('chat-stream.sse');
    expect(readChatStream(real, true)).toMatchObject({
      ok: true,
      value: { finishReason: 'length', usage: { completion_tokens: 3 } },
    });
    fc.assert(
      fc.property(fc.oneof(fc.string(), sseMutation(real)), (text) => {
        const s = readChatStream(text, true);
        return (
          !s.ok ||
          (text.trimEnd().endsWith('data: [DONE]') &&
            s.value.finishReason !== null &&
            isCount(s.value.usage?.completion_tokens))
        );
      }),
      RUNS,
    );
  });
});

describe('the probe: a bad answer is a finding, never healthy, never a crash', () => {
  let server: Server;
  let url: string;
  let completion: unknown;
  let messages = '';
  beforeAll(async () => {
    const models = cap('models.json');
    server = createServer((req, res) => {
      const send = (status: number, body: string, type = 'application/json') => {
        res.writeHead(status, { 'content-type': type });
        res.end(body);
      };
      req.resume();
      req.on('end', () => {
        const path = (req.url ?? '').split('?')[0];
        if (path === '/health') return send(200, '');
        if (path === '/v1/models') return send(200, models);
        if (path === '/v1/completions') return send(200, JSON.stringify(completion) ?? 'null');
        if (path === '/metrics') return send(200, cap('metrics.txt'), 'text/plain');
        if (path === '/v1/messages') return send(200, messages, 'text/event-stream');
        send(404, '{"detail":"Not Found"}');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));
  const target = () => ({ name: 'fake', url, servedName: 'tiny/qwen3-code', engine: 'vllm' as const, gpus: [] });

  it('inference: a completion a client could not use never leaves the probe healthy', async () => {
    completion = json('completion.json');
    expect(
      (
        await probe(target() as never, {
          timeoutMs: 2000,
          kvCacheUsageMax: 0.9,
          waitingMax: 10,
          gpuMemoryHeadroomPct: 5,
          gpus: false,
        })
      ).state,
    ).toBe('healthy');
    await fc.assert(
      fc.asyncProperty(fc.oneof(anyJson, mutationOf(json('completion.json'))), async (j) => {
        completion = j;
        const r = await probe(target() as never, {
          timeoutMs: 2000,
          kvCacheUsageMax: 0.9,
          waitingMax: 10,
          gpuMemoryHeadroomPct: 5,
          gpus: false,
        });
        const step = r.steps.find((s) => s.step === 'inference');
        if (!completionUsable(j) || !generationRan(j))
          return r.state !== 'healthy' && step?.status === 'fail' && step.detail.length > 0;
        return step?.status === 'pass';
      }),
      { numRuns: 150 },
    );
  });

  it("Claude Code's stream: a broken one fails, saying what is wrong", async () => {
    const real = cap('messages-stream.sse');
    messages = real;
    expect((await claudeCodeCheck(target() as never, 'tiny/qwen3-code', 65_536, { timeoutMs: 2000 })).status).toBe(
      'warn',
    );
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string(), sseMutation(real)), async (text) => {
        messages = text;
        const c = await claudeCodeCheck(target() as never, 'tiny/qwen3-code', 65_536, { timeoutMs: 2000 });
        return readMessagesStream(text).ok
          ? c.status !== 'fail' || /max_tokens|stop_reason|a tool the request did not define/.test(c.detail)
          : c.status === 'fail' && /the stream Claude Code reads is broken/.test(c.detail);
      }),
      { numRuns: 150 },
    );
  });
});
