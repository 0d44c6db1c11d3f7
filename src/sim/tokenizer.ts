// The simulator's one approximate tokenizer, documented in docs/simulator.md:
// one token per 4 UTF-8 bytes of text, rounded up (at least 1 for non-empty text);
// chat messages add 4 tokens each for the chat template. Token ids are a stable hash of each 4-byte piece.
export function countTokens(text: string): number {
  if (!text) return 0;
  return Math.ceil(Buffer.byteLength(text, 'utf8') / 4);
}

export function tokenIds(text: string): number[] {
  const bytes = Buffer.from(text, 'utf8');
  const ids: number[] = [];
  for (let i = 0; i < bytes.length; i += 4) {
    let h = 2166136261;
    for (let j = i; j < Math.min(i + 4, bytes.length); j++) h = Math.imul(h ^ bytes[j]!, 16777619);
    ids.push((h >>> 0) % 151_643);
  }
  return ids;
}

type Block = { type?: string; text?: string; thinking?: string; input?: unknown; content?: unknown; name?: string };
type Content = string | Block[] | null | undefined;
/**
 * The text a message's content stands for in the prompt: text and thinking blocks, a tool call's
 * name and arguments (JSON), a tool result's content. What a chat template renders of them, to
 * within a few tokens of markup.
 */
export function contentText(c: Content | unknown): string {
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return '';
  let s = '';
  for (const p of c as Block[]) {
    if (!p || typeof p !== 'object') continue;
    if (typeof p.text === 'string') s += p.text;
    else if (typeof p.thinking === 'string') s += p.thinking;
    else if (p.type === 'tool_use') s += `${typeof p.name === 'string' ? p.name : ''}${JSON.stringify(p.input ?? {})}`;
    else if (p.type === 'tool_result') s += contentText(p.content);
  }
  return s;
}

type Message = { content?: unknown; tool_calls?: unknown };
/** A chat message's text, with the arguments of its OpenAI-style tool calls. */
function messageText(m: Message): string {
  const calls = Array.isArray(m?.tool_calls) ? JSON.stringify(m.tool_calls) : '';
  return contentText(m?.content) + calls;
}

/**
 * Prompt tokens of a chat or Messages request as the chat template renders it: 4 tokens of markup
 * a message, the system prompt, and the tool definitions (a template writes them into the system
 * turn as JSON; Claude Code's 24 tools are 62,849 of its first request's 76,160 bytes).
 */
export function chatTokens(messages: Message[], system?: unknown, tools?: unknown): number {
  let n = system ? countTokens(contentText(system)) + 4 : 0;
  if (Array.isArray(tools) && tools.length) n += countTokens(JSON.stringify(tools)) + (system ? 0 : 4);
  for (const m of messages) n += countTokens(messageText(m)) + 4;
  return n;
}

const WORDS = [
  'the',
  'model',
  'is',
  'warm',
  'and',
  'ready',
  'to',
  'serve',
  'tokens',
  'from',
  'its',
  'cache',
  'on',
  'every',
  'GPU',
  'while',
  'operators',
  'sleep',
];
/** Deterministic text for generated tokens: one word per token. */
export function wordFor(seed: number, i: number): string {
  let x = (seed ^ Math.imul(i + 1, 2654435761)) >>> 0;
  x ^= x >>> 15;
  x = Math.imul(x, 2246822507) >>> 0;
  return WORDS[x % WORDS.length]!;
}
