// The answers every probe reads (/v1/models, a 1-token completion, an error body, /tokenize),
// checked by hand rather than with zod: a cron probe starts a process every few minutes, and zod
// with its schemas is a fifth of a probe's start-up. They accept exactly what the zod schemas of
// client/shapes.ts accepted (a property test holds the two side by side); a bad answer is a finding
// about that server, named by the first field that is wrong, never a crash.

/** The first thing wrong with a value: where (a path) and what. */
interface Wrong {
  path: Array<string | number>;
  message: string;
}
type Check = (v: unknown, path: Array<string | number>) => Wrong | undefined;

/** What a value is, for a message: "a string", "an array", "null", "nothing" (a field left out). */
const kind = (v: unknown): string => {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (typeof v === 'number' && Number.isNaN(v)) return 'not a number';
  const k = Array.isArray(v) ? 'array' : v instanceof Date ? 'date' : typeof v;
  return `${/^[aeiou]/.test(k) ? 'an' : 'a'} ${k}`;
};

/** A plain record (what zod calls an object: not null, an array, a date, a map, a set or a promise). */
const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' &&
  v !== null &&
  !Array.isArray(v) &&
  !(v instanceof Date) &&
  !(v instanceof Map) &&
  !(v instanceof Set) &&
  typeof (v as { then?: unknown }).then !== 'function';

const wrong = (path: Array<string | number>, message: string): Wrong => ({ path, message });

const str: Check = (v, p) => (typeof v === 'string' ? undefined : wrong(p, `expected a string, got ${kind(v)}`));

/** A whole number within [min, max] (a JSON number: NaN and the infinities are not numbers here). */
const int =
  (min: number, max = Number.POSITIVE_INFINITY): Check =>
  (v, p) => {
    if (typeof v !== 'number' || Number.isNaN(v)) return wrong(p, `expected a number, got ${kind(v)}`);
    if (!Number.isFinite(v))
      return wrong(p, `expected a whole number, got one past the largest a double holds (${v > 0 ? '' : '-'}1.8e308)`);
    if (!Number.isInteger(v)) return wrong(p, `expected a whole number, got ${v}`);
    if (v < min) return wrong(p, `expected at least ${min}, got ${v}`);
    if (v > max) return wrong(p, `expected at most ${max}, got ${v}`);
    return undefined;
  };

const optional =
  (c: Check): Check =>
  (v, p) =>
    v === undefined ? undefined : c(v, p);
const nullish =
  (c: Check): Check =>
  (v, p) =>
    v === undefined || v === null ? undefined : c(v, p);
const literal =
  (want: string): Check =>
  (v, p) =>
    v === want ? undefined : wrong(p, `expected "${want}", got ${typeof v === 'string' ? JSON.stringify(v) : kind(v)}`);

/** A record with these fields (others are kept and not checked). */
const record =
  (fields: Record<string, Check>): Check =>
  (v, p) => {
    if (!isRecord(v)) return wrong(p, `expected an object, got ${kind(v)}`);
    for (const [k, c] of Object.entries(fields)) {
      const w = c(v[k], [...p, k]);
      if (w) return w;
    }
    return undefined;
  };

const list =
  (item: Check, minLength = 0): Check =>
  (v, p) => {
    if (!Array.isArray(v)) return wrong(p, `expected an array, got ${kind(v)}`);
    if (v.length < minLength) return wrong(p, `expected at least ${minLength} item(s), got ${v.length}`);
    for (const [i, x] of v.entries()) {
      const w = item(x, [...p, i]);
      if (w) return w;
    }
    return undefined;
  };

export type Checked<T> = { ok: true; value: T } | { ok: false; problem: string };

const shapeProblem = (what: string, w: Wrong, body: string) =>
  `${what} answered a body of the wrong shape (${w.path.join('.') || 'body'}: ${w.message}): ${JSON.stringify(body.slice(0, 80))}`;

function checked<T>(check: Check, json: unknown, body: string, what: string): Checked<T> {
  const w = check(json, []);
  return w ? { ok: false, problem: shapeProblem(what, w, body) } : { ok: true, value: json as T };
}

// ---- /v1/models ----------------------------------------------------------------------------

export type ServedModel = { id: string; max_model_len?: number };
const ModelList = record({ data: list(record({ id: str, max_model_len: optional(int(1)) })) });

/** The models of a /v1/models answer, or what is wrong with it. */
export function servedModels(
  json: unknown,
  body: string,
): { ok: true; models: ServedModel[] } | { ok: false; problem: string } {
  const w = ModelList(json, []);
  if (w) return { ok: false, problem: shapeProblem('/v1/models', w, body) };
  return { ok: true, models: ((json as { data: ServedModel[] }).data ?? []).map((m) => ({ ...m })) };
}

// ---- generations: what a real client would refuse is refused here too ------------------------

/** A token count: a whole number, not negative, not beyond any context a server has (2^31). */
const count = int(0, 2 ** 31);
const finish = nullish(str);
const OpenAIUsage = record({ prompt_tokens: count, completion_tokens: count, total_tokens: optional(count) });

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
  [k: string]: unknown;
}
export interface CompletionAnswer {
  object?: 'text_completion';
  choices: [
    { index: number; text: string; finish_reason?: string | null; [k: string]: unknown },
    ...Array<{ index: number; text: string; finish_reason?: string | null; [k: string]: unknown }>,
  ];
  usage?: Usage | null;
  [k: string]: unknown;
}
const Completion = record({
  object: optional(literal('text_completion')),
  choices: list(record({ index: count, text: str, finish_reason: finish }), 1),
  usage: nullish(OpenAIUsage),
});

/** A /v1/completions answer: a non-empty list of text choices, usage counts whole and bounded. */
export const completionAnswer = (json: unknown, body: string): Checked<CompletionAnswer> =>
  checked(Completion, json, body, '/v1/completions');

/** /tokenize: the count prewarm sizes its prompts with. */
export const tokenizeAnswer = (json: unknown, body: string): Checked<{ count: number; [k: string]: unknown }> =>
  checked(record({ count }), json, body, '/tokenize');

const ErrorBody = record({ error: record({ message: str, type: optional(str) }) });

/**
 * The message of an error body, OpenAI ({error: {message}}) or Anthropic ({type: error, error: {type, message}})
 * shaped.
 */
export function errorMessage(json: unknown, body: string): string {
  const text = ErrorBody(json, []) ? body : (json as { error: { message: string } }).error.message;
  return text.replace(/\s+/g, ' ').slice(0, 300);
}
