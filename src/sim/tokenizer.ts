// The simulator's one approximate tokenizer, documented in the README:
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

type Content = string | Array<{ type?: string; text?: string }> | null | undefined;
export function contentText(c: Content): string {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => (typeof p?.text === 'string' ? p.text : '')).join('');
  return '';
}

export function chatTokens(messages: Array<{ content?: Content }>, system?: Content): number {
  let n = system ? countTokens(contentText(system)) + 4 : 0;
  for (const m of messages) n += countTokens(contentText(m.content)) + 4;
  return n;
}

const WORDS = ['the', 'model', 'is', 'warm', 'and', 'ready', 'to', 'serve', 'tokens', 'from', 'its', 'cache', 'on', 'every', 'GPU', 'while', 'operators', 'sleep'];
/** Deterministic text for generated tokens: one word per token. */
export function wordFor(seed: number, i: number): string {
  let x = (seed ^ Math.imul(i + 1, 2654435761)) >>> 0;
  x ^= x >>> 15;
  x = Math.imul(x, 2246822507) >>> 0;
  return WORDS[x % WORDS.length]!;
}
