// A sparkrun recipe's `command:` template -> the argv it stands for, without a shell. Pure.
//
// sparkrun fills `{key}` from the config chain (defaults, then `model`), leaves an unknown `{key}`
// as it is, and hands the text to bash in the container. eugr's runner fills the same template with
// Python's str.format, where `{{` and `}}` stand for one brace (its recipes write JSON that way).
// sparkctl never runs a shell: the text is split into words as bash would split this small subset
// (whitespace, backslash-newline continuations, '...' and "..." quoting, a backslash escape), and
// anything a shell would interpret instead (a pipe, a ;, a $ expansion, a redirection, a command
// substitution) is refused with the place it is at, so no part of a recipe ever means more here
// than the words it spells.
import { UsageError } from '../../errors.js';

interface Rendered {
  /** the words of the command, placeholders filled */
  words: string[];
  /** the placeholders filled, each once */
  used: string[];
  /** placeholders no value was given for (left as {name}, as sparkrun leaves them) */
  unresolved: string[];
}

const PLACEHOLDER = /\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** A value as sparkrun's Python would print it into the template (True/False, 0.8, text). */
export function templateValue(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  return undefined;
}

/** Fill the template (placeholders, `{{`/`}}` escapes) and split it into words. */
export function renderCommand(template: string, values: Record<string, unknown>): Rendered {
  const used = new Set<string>();
  const unresolved = new Set<string>();
  const text = template.replace(PLACEHOLDER, (m, name: string | undefined) => {
    if (m === '{{') return '{';
    if (m === '}}') return '}';
    const v = Object.hasOwn(values, name!) ? templateValue(values[name!]) : undefined;
    if (v === undefined) {
      unresolved.add(name!);
      return m;
    }
    used.add(name!);
    return v;
  });
  return { words: splitWords(text), used: [...used], unresolved: [...unresolved] };
}

const SHELL_FIX =
  'write the command as `vllm serve MODEL --flag value ...` only: environment variables go under env:, and sparkctl runs no shell (nothing else in a command can be imported)';

function refuse(what: string, text: string, at: number): never {
  const line = text.slice(0, at).split('\n').length;
  const near = text.slice(Math.max(0, at - 20), at + 20).replace(/\s+/g, ' ');
  throw new UsageError(
    `recipe command: ${what} at line ${line} (near ${JSON.stringify(near)}): a shell would interpret it, and sparkctl runs no shell`,
    [SHELL_FIX],
  );
}

/** Words as bash splits them, for the subset a serve command needs; everything else refused. */
export function splitWords(text: string): string[] {
  const words: string[] = [];
  let cur: string | undefined;
  const push = (s: string) => {
    cur = (cur ?? '') + s;
  };
  let i = 0;
  while (i < text.length) {
    const ch = text[i]!;
    if (ch === '\\') {
      const next = text[i + 1];
      if (next === '\n')
        i += 2; // a continuation: nothing
      else if (next === undefined) refuse('a backslash at the end', text, i);
      else {
        push(next);
        i += 2;
      }
      continue;
    }
    if (ch === ' ' || ch === '\t' || ch === '\n') {
      if (cur !== undefined) words.push(cur);
      cur = undefined;
      i++;
      continue;
    }
    if (ch === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) refuse('an unclosed single quote', text, i);
      push(text.slice(i + 1, end));
      i = end + 1;
      continue;
    }
    if (ch === '"') {
      let j = i + 1;
      let s = '';
      for (;;) {
        if (j >= text.length) refuse('an unclosed double quote', text, i);
        const c = text[j]!;
        if (c === '"') break;
        if (c === '$' || c === '`')
          refuse(`${c === '$' ? 'a $ expansion' : 'a backtick'} inside double quotes`, text, j);
        if (c === '\\' && j + 1 < text.length && '"\\$`\n'.includes(text[j + 1]!)) {
          if (text[j + 1] !== '\n') s += text[j + 1];
          j += 2;
          continue;
        }
        s += c;
        j++;
      }
      push(s);
      i = j + 1;
      continue;
    }
    if (ch === '#' && cur === undefined) {
      // a comment runs to the end of the line
      const nl = text.indexOf('\n', i);
      i = nl < 0 ? text.length : nl;
      continue;
    }
    if ('|&;<>()$`'.includes(ch)) refuse(`"${ch}"`, text, i);
    if (ch === '\r') refuse('a carriage return', text, i);
    push(ch);
    i++;
  }
  if (cur !== undefined) words.push(cur);
  return words;
}
