// What the comparison sends one server: the deep probe, each golden prompt greedily (temperature 0,
// a fixed seed: the same answer every time on one vLLM; a chat prompt through the chat template), the
// chat template's own output for fixed conversations (/tokenize), and a short closed-loop bench. The same
// requests, in the same order, to current and canary; every answer read through the same bounded,
// shape-checked client as the probe (a bad answer is a failed check, never a pass).
import { http } from '../client/http.js';
import { completionAnswer, errorMessage } from '../client/answers.js';
import { probe, type ProbeSettings } from '../health/probe.js';
import type { Target } from '../health/target.js';
import { runBench } from '../bench/runner.js';
import type { RequestOutput } from '../bench/metrics.js';
import type { Measured } from './judge.js';
import { shownEscaped } from '../util/control.js';

/**
 * A server's words as the comparison keeps them (in the verdict, the upgrade's record and history): short, each control
 * character escaped.
 */
const said = (s: string, max = 300) => shownEscaped(s.length > max ? `${s.slice(0, max)}...` : s);

interface GoldenPrompt {
  name: string;
  prompt: string;
  maxTokens: number;
  /** sent as one user message to /v1/chat/completions: the server's chat template shapes what the model sees */
  chat?: boolean;
  /**
   * sent to /v1/chat/completions with GOLDEN_TOOLS (tool_choice auto): the tool calls the server's parser reads out of
   * the answer are compared with its text
   */
  tools?: boolean;
}

/**
 * When the profile names none: plain prompts a chat or code model answers in a few dozen tokens, and one
 * chat turn (a raw completion never goes through the chat template: an image whose template changed
 * answers every completion exactly as before, found by a real run with a changed template).
 */
export const DEFAULT_GOLDEN: GoldenPrompt[] = [
  { name: 'arithmetic', prompt: 'Question: what is 17 times 23? Answer:', maxTokens: 24 },
  { name: 'list', prompt: 'The three primary colours are', maxTokens: 24 },
  { name: 'code', prompt: 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n', maxTokens: 48 },
  { name: 'chat', prompt: 'Name the three primary colours, one per line.', maxTokens: 24, chat: true },
];

/**
 * The tool a tool-call golden prompt offers (OpenAI's shape, as vLLM takes it): reading a file, the
 * call agents make most. What is compared is the call the server's tool-call parser reads out of the
 * greedy answer: a parser or template change that breaks tool calling (no call, another name, other
 * arguments) is a difference, where the text alone would show an empty reply on both sides.
 */
const GOLDEN_TOOLS = [
  {
    type: 'function',
    function: {
      name: 'read_file',
      description: 'Read a text file and return its contents.',
      parameters: {
        type: 'object',
        properties: { path: { type: 'string', description: 'absolute path of the file' } },
        required: ['path'],
      },
    },
  },
];
/** The default tool-call golden prompt: added where the profile turns tool calling on (engine.toolCallParser). */
export const TOOL_GOLDEN: GoldenPrompt = {
  name: 'tool-call',
  prompt: 'Read the file /etc/hostname and tell me what it says.',
  maxTokens: 64,
  tools: true,
};

/**
 * The golden prompts when the profile names none: DEFAULT_GOLDEN, and a tool call where the server parses them (a
 * server without a parser refuses tools).
 */
export function defaultGolden(profile: { engine: { toolCallParser?: string } }): GoldenPrompt[] {
  return profile.engine.toolCallParser ? [...DEFAULT_GOLDEN, TOOL_GOLDEN] : DEFAULT_GOLDEN;
}

/**
 * The chat template's own output: these conversations rendered by the server (POST /tokenize with
 * messages and the generation prompt, as vLLM renders a chat request) and compared token for token.
 * One user turn alone (where a template adds a default system prompt), and a whole conversation.
 */
const TEMPLATE_CONVERSATIONS: Array<{ name: string; messages: Array<{ role: string; content: string }> }> = [
  { name: 'one user turn', messages: [{ role: 'user', content: 'What is the capital of France?' }] },
  {
    name: 'a conversation',
    messages: [
      { role: 'system', content: 'You answer in one short sentence.' },
      { role: 'user', content: 'What is the capital of France?' },
      { role: 'assistant', content: 'Paris.' },
      { role: 'user', content: 'And of Italy?' },
    ],
  },
];
/** More tokens than a rendered template of these conversations can have: a longer list is a bad answer. */
const MAX_TEMPLATE_TOKENS = 16_384;

export interface MeasureSettings {
  probe: ProbeSettings;
  golden: GoldenPrompt[];
  /** the short bench: requests measured (after one warm-up), tokens each, in flight at once */
  bench: { requests: number; outputTokens: number; concurrency: number };
  timeoutMs: number;
  signal?: AbortSignal;
}

/** More tool calls than one answer to one question makes; a longer list is a bad answer. */
const MAX_TOOL_CALLS = 16;
const MAX_TOOL_ARGS = 64 * 1024;

/**
 * Arguments as compared: JSON (as a parser writes it) with its keys sorted and no spacing, so only what the call says
 * counts; other text as it came.
 */
function canonicalArgs(args: string): string {
  const sortKeys = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sortKeys)
      : v && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v as object)
              .sort()
              .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
          )
        : v;
  try {
    return JSON.stringify(sortKeys(JSON.parse(args)));
  } catch {
    return args;
  }
}

/**
 * The text of a /v1/chat/completions answer's first choice, or what is wrong with the answer. Tool calls
 * the server parsed out of the answer follow the text, one `[tool call NAME ARGUMENTS]` each (their IDs,
 * random per request, left out): a reply of only tool calls has content null, and would otherwise compare
 * as empty text on both sides whatever the calls said.
 */
export function chatText(json: unknown, body: string): { text: string } | { problem: string } {
  const bad = (what: string) => ({
    problem: `/v1/chat/completions answered a body of the wrong shape (${what}): ${JSON.stringify(body.slice(0, 80))}`,
  });
  const choices = (json as { choices?: unknown } | null)?.choices;
  if (typeof json !== 'object' || json === null || !Array.isArray(choices) || !choices.length)
    return bad('choices: expected a non-empty array');
  const msg = (choices[0] as { message?: unknown } | null)?.message as
    | { content?: unknown; tool_calls?: unknown }
    | undefined;
  if (typeof msg !== 'object' || msg === null) return bad('choices.0.message: expected an object');
  // a reply of only tool calls or only reasoning has content null
  if (msg.content !== null && msg.content !== undefined && typeof msg.content !== 'string')
    return bad('choices.0.message.content: expected a string or null');
  const text = typeof msg.content === 'string' ? msg.content : '';
  const calls = msg.tool_calls;
  if (calls === undefined || calls === null) return { text };
  if (!Array.isArray(calls) || calls.length > MAX_TOOL_CALLS)
    return bad(`choices.0.message.tool_calls: expected a list of at most ${MAX_TOOL_CALLS}`);
  const shown: string[] = [];
  for (const [i, c] of calls.entries()) {
    const f = (c as { function?: unknown } | null)?.function as { name?: unknown; arguments?: unknown } | undefined;
    if (typeof f !== 'object' || f === null || typeof f.name !== 'string' || !f.name || f.name.length > 256)
      return bad(`choices.0.message.tool_calls.${i}.function.name: expected a name`);
    if (typeof f.arguments !== 'string' || f.arguments.length > MAX_TOOL_ARGS)
      return bad(
        `choices.0.message.tool_calls.${i}.function.arguments: expected a string of at most ${MAX_TOOL_ARGS} characters`,
      );
    shown.push(`[tool call ${f.name} ${canonicalArgs(f.arguments)}]`);
  }
  return { text: [text, ...shown].filter(Boolean).join('\n') };
}

async function greedy(
  t: Target,
  g: GoldenPrompt,
  s: MeasureSettings,
): Promise<{ name: string; text?: string; error?: string }> {
  const common = { model: t.servedName, max_tokens: g.maxTokens, temperature: 0, seed: 0, stream: false };
  const chat = g.chat || g.tools;
  const messages = [{ role: 'user', content: g.prompt }];
  const body = g.tools
    ? { ...common, messages, tools: GOLDEN_TOOLS, tool_choice: 'auto' }
    : chat
      ? { ...common, messages }
      : { ...common, prompt: g.prompt };
  const r = await http(`${t.url}/v1/${chat ? 'chat/completions' : 'completions'}`, {
    body,
    timeoutMs: s.timeoutMs,
    apiKey: t.apiKey,
    signal: s.signal,
  });
  if (!r.ok) return { name: g.name, error: said(`${r.error}: ${r.message}`) };
  if (r.status !== 200) return { name: g.name, error: said(`HTTP ${r.status}: ${errorMessage(r.json, r.body)}`) };
  if (chat) {
    const a = chatText(r.json, r.body);
    return 'problem' in a ? { name: g.name, error: said(a.problem) } : { name: g.name, text: a.text };
  }
  const a = completionAnswer(r.json, r.body);
  if (!a.ok) return { name: g.name, error: said(a.problem) };
  return { name: g.name, text: a.value.choices[0].text };
}

/** The token IDs of a /tokenize answer, or what is wrong with it (a bounded list of whole, non-negative numbers). */
export function templateTokens(json: unknown, body: string): { tokens: number[] } | { problem: string } {
  const tokens = (json as { tokens?: unknown } | null)?.tokens;
  const bad = (what: string) => ({
    problem: `/tokenize answered a body of the wrong shape (tokens: ${what}): ${JSON.stringify(body.slice(0, 80))}`,
  });
  if (typeof json !== 'object' || json === null || !Array.isArray(tokens)) return bad('expected an array');
  if (!tokens.length || tokens.length > MAX_TEMPLATE_TOKENS)
    return bad(`expected 1 to ${MAX_TEMPLATE_TOKENS} token IDs, got ${tokens.length}`);
  if (!tokens.every((x) => typeof x === 'number' && Number.isInteger(x) && x >= 0 && x < 2 ** 31))
    return bad('expected whole, non-negative token IDs');
  return { tokens: tokens as number[] };
}

/** One conversation rendered by the server's chat template, as token IDs. */
async function rendered(
  t: Target,
  conv: (typeof TEMPLATE_CONVERSATIONS)[number],
  s: MeasureSettings,
): Promise<{ name: string; tokens?: number[]; error?: string }> {
  const body = { model: t.servedName, messages: conv.messages, add_generation_prompt: true };
  const r = await http(`${t.url}/tokenize`, {
    body,
    timeoutMs: s.timeoutMs,
    apiKey: t.apiKey,
    signal: s.signal,
    maxBytes: 1024 * 1024,
  });
  if (!r.ok) return { name: conv.name, error: said(`${r.error}: ${r.message}`) };
  if (r.status !== 200) return { name: conv.name, error: said(`HTTP ${r.status}: ${errorMessage(r.json, r.body)}`) };
  const a = templateTokens(r.json, r.body);
  return 'problem' in a ? { name: conv.name, error: said(a.problem) } : { name: conv.name, tokens: a.tokens };
}

const median = (xs: number[]) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (!s.length) return Number.NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const BENCH_PROMPT = 'Write a short paragraph about keeping GPU servers healthy at night. '.repeat(4);

/**
 * Requests of the short bench to one server: `n` measured (after `warmup` unmeasured), `s.bench.concurrency` at once.
 */
async function benchRun(
  t: Target,
  s: MeasureSettings,
  n: number,
  warmup: number,
): Promise<{ outputs: RequestOutput[]; durationS: number }> {
  const r = await runBench({
    url: t.url,
    model: t.servedName ?? '',
    apiKey: t.apiKey,
    endpoint: 'completions',
    stream: true,
    dataset: [{ prompt: BENCH_PROMPT, promptLen: 64, outputLen: s.bench.outputTokens }],
    maxRequests: n,
    rate: Number.POSITIVE_INFINITY,
    burstiness: 1,
    seed: 0,
    concurrency: s.bench.concurrency,
    warmup,
    requestTimeoutMs: s.timeoutMs,
    ignoreEos: true,
    continuousUsage: false,
    stop: s.signal,
  });
  return { outputs: r.outputs, durationS: r.durationS };
}

/** One side's bench figures from its requests and the seconds they took (summed over its rounds). */
function benchFigures(outputs: RequestOutput[], durationS: number): NonNullable<Measured['bench']> {
  const ok = outputs.filter((o) => o.success);
  const out = ok.reduce((n, o) => n + o.outputTokens, 0);
  return {
    requests: outputs.length,
    failed: outputs.length - ok.length,
    ttftP50Ms: median(ok.map((o) => o.ttft * 1000)),
    // per request, (last token - first token) / (tokens - 1): unlike the gap between SSE events, it does
    // not change when a version streams several tokens per event (near zero when a server sends nearly
    // all of them in its first event: the judge's TPOT floor)
    tpotP50Ms: median(
      ok.filter((o) => o.outputTokens > 1).map((o) => ((o.latency - o.ttft) * 1000) / (o.outputTokens - 1)),
    ),
    outputTokensPerS: durationS > 0 ? out / durationS : Number.NaN,
  };
}

async function shortBench(t: Target, s: MeasureSettings): Promise<Measured['bench']> {
  const r = await benchRun(t, s, s.bench.requests, 1);
  return benchFigures(r.outputs, r.durationS);
}

/**
 * The short bench of two servers side by side, in rounds that take turns: current then canary, canary
 * then current, and so on (A B, B A, ...), `concurrency` requests a round, each side's first round after
 * one warm-up request. What the host does meanwhile (another job starting, a page cache flush, a noisy
 * neighbour on the CPU that feeds the GPU) falls on both sides alike, where one side's whole bench and
 * then the other's put a burst of load on one of them only: an identical canary measured 1.5x slower
 * to its first token that way failed its comparison on a loaded host (CI, 2026-12-05).
 */
export async function benchSideBySide(
  a: Target,
  b: Target,
  s: MeasureSettings,
): Promise<{ a: Measured['bench']; b: Measured['bench'] }> {
  const per = Math.max(1, s.bench.concurrency);
  const sides = [
    { t: a, outputs: [] as RequestOutput[], durationS: 0 },
    { t: b, outputs: [] as RequestOutput[], durationS: 0 },
  ];
  for (let done = 0, round = 0; done < s.bench.requests; round++) {
    const n = Math.min(per, s.bench.requests - done);
    for (const side of round % 2 ? [sides[1]!, sides[0]!] : sides) {
      if (s.signal?.aborted) break;
      const r = await benchRun(side.t, s, n, round === 0 ? 1 : 0);
      side.outputs.push(...r.outputs);
      side.durationS += r.durationS;
    }
    done += n;
  }
  return {
    a: benchFigures(sides[0]!.outputs, sides[0]!.durationS),
    b: benchFigures(sides[1]!.outputs, sides[1]!.durationS),
  };
}

/** Probe, golden prompts and the chat template (one at a time, in order): what one server answers, its speed aside. */
async function answers(t: Target, vllmVersion: string, s: MeasureSettings): Promise<Measured> {
  const p = await probe(t, s.probe);
  const golden = [];
  for (const g of s.golden) golden.push(await greedy(t, g, s));
  const chatTemplate = [];
  for (const conv of TEMPLATE_CONVERSATIONS) chatTemplate.push(await rendered(t, conv, s));
  return {
    url: t.url,
    vllmVersion,
    probe: {
      state: p.state,
      failed: p.steps.filter((x) => x.status === 'fail').map((x) => said(`${x.step}: ${x.detail}`)),
    },
    golden,
    chatTemplate,
  };
}

/**
 * Probe, golden prompts, chat template, then the bench: one server's side of the comparison, alone (the other side is
 * not running at the same time).
 */
export async function measure(t: Target, vllmVersion: string, s: MeasureSettings): Promise<Measured> {
  const m = await answers(t, vllmVersion, s);
  try {
    return withBench(m, await shortBench(t, s));
  } catch (e) {
    return withBench(m, undefined, said((e as Error).message));
  }
}

/** A side's answers with its bench (or why it has none), keys in the order the record has always had. */
function withBench(m: Measured, bench: Measured['bench'], benchError?: string): Measured {
  return {
    url: m.url,
    vllmVersion: m.vllmVersion,
    probe: m.probe,
    bench,
    benchError,
    golden: m.golden,
    chatTemplate: m.chatTemplate,
  };
}

/**
 * Both sides while both run: each one's answers (current first), then the bench side by side in turns
 * (benchSideBySide).
 */
export async function measureBoth(
  cur: Target,
  curVersion: string,
  can: Target,
  canVersion: string,
  s: MeasureSettings,
  onSide?: (side: 'current' | 'canary', url: string) => void,
): Promise<{ current: Measured; candidate: Measured }> {
  onSide?.('current', cur.url);
  const current = await answers(cur, curVersion, s);
  onSide?.('canary', can.url);
  return measureBeside(cur, current, can, canVersion, s);
}

/**
 * The canary's answers, then the bench of both in turns, where the current side's answers were read
 * before the canary started (a multi-node canary on spare nodes: the running server is measured first,
 * so that one unfit to compare against stops the upgrade before anything starts). Its bench is taken
 * again here, beside the canary's: the one read alone is replaced.
 */
export async function measureBeside(
  cur: Target,
  current: Measured,
  can: Target,
  canVersion: string,
  s: MeasureSettings,
): Promise<{ current: Measured; candidate: Measured }> {
  const candidate = await answers(can, canVersion, s);
  try {
    const b = await benchSideBySide(cur, can, s);
    return { current: withBench(current, b.a), candidate: withBench(candidate, b.b) };
  } catch (e) {
    const why = said((e as Error).message);
    return { current: withBench(current, undefined, why), candidate: withBench(candidate, undefined, why) };
  }
}
