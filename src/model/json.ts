// config.json as Python's json module reads it (transformers and vLLM load configs with it): the
// bare tokens NaN, Infinity and -Infinity are numbers there, and Hugging Face writes some configs
// with them (e.g. "mamba_dt_limit": [0.0, Infinity]). JSON.parse refuses them, so they are swapped
// for marked strings outside of string literals and revived as numbers. Pure.

const MARK = '\u0000py-json:';
import { own } from '../util/own.js';
const TOKENS: Record<string, number> = {
  NaN: Number.NaN,
  Infinity: Number.POSITIVE_INFINITY,
  '-Infinity': Number.NEGATIVE_INFINITY,
};

/** JSON.parse that also accepts NaN, Infinity and -Infinity as values, the way Python's json.loads does. */
export function parsePythonJson(text: string): unknown {
  return JSON.parse(markNonFinite(text), (_k, v) =>
    typeof v === 'string' && v.startsWith(MARK) ? own(TOKENS, v.slice(MARK.length)) : v,
  );
}

function markNonFinite(text: string): string {
  // Fast path: nothing to mark (the common case), so the text is parsed as is.
  if (!/NaN|Infinity/.test(text)) return text;
  let out = '';
  let i = 0;
  while (i < text.length) {
    const ch = text[i]!;
    if (ch === '"') {
      // copy the string literal verbatim, escapes included
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    const tok = text.startsWith('-Infinity', i)
      ? '-Infinity'
      : text.startsWith('Infinity', i)
        ? 'Infinity'
        : text.startsWith('NaN', i)
          ? 'NaN'
          : undefined;
    if (tok) {
      out += JSON.stringify(MARK + tok);
      i += tok.length;
      continue;
    }
    out += ch;
    i++;
  }
  return out;
}
