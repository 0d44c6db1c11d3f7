// vLLM's own table of its options, as `vllm serve --help=all` prints it: each option's names, the
// group it is in, its help text, the default argparse prints at its end (`(default: X)`), and what
// the help text itself says of a deprecation or a replacement ("[DEPRECATED] ...", "X has been
// replaced by Y", "use --y instead"). The text comes from a process sparkctl runs (the host's vllm,
// one in an image, the simulator), so it is read as hostile: bounded, control characters dropped, a
// shape that is not argparse's is a finding, never an exception. Pure: table-tested over the real
// 0.27.2 capture (test/fixtures/vllm-help/).
import { controlsReplaced } from '../util/control.js';

/** One option as the help prints it. */
export interface HelpEntry {
  /** every spelling on its line, long and short (`--tensor-parallel-size`, `-tp`), the --no- twin included */
  names: string[];
  /** the argparse group heading it is under (`options`, `Frontend`, `ModelConfig`, ...) */
  group: string;
  /** the help text, its lines joined by one space, without the `(default: X)` at its end */
  help: string;
  /** the default argparse printed, spacing collapsed; undefined where the help states none */
  default?: string;
  /** the help text marks it deprecated ([DEPRECATED], "is deprecated", "will be removed") */
  deprecated: boolean;
  /** the option the help text names as its replacement (`--cp-kv-cache-interleave-size`), where it names one */
  replacedBy?: string;
  /** the words of the help text that say so (bounded), to show as vLLM's own */
  said?: string;
  /** the line span in the text (the simulator keeps these blocks) */
  lines: [number, number];
}

export interface HelpTable {
  entries: HelpEntry[];
  /** what in the text was not argparse's shape, or cut: each a sentence */
  findings: string[];
}

/** Bounds on what is read: the real 0.27.2 text is 110 KB, 1,899 lines, 286 options. */
export const HELP_LIMITS = {
  bytes: 2 * 1024 * 1024,
  lines: 40_000,
  lineChars: 4_096,
  entries: 4_000,
  helpChars: 8_192,
  saidChars: 240,
};

// colour codes out, lines kept, then every other control character of the house's rule dropped
const clean = (text: string) =>
  controlsReplaced(
    text
      .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
      .replace(/\r\n?/g, '\n')
      .replace(/\t/g, ' '),
    '',
    { lines: true },
  );

const HEADING = /^(\S[^:]{0,80}):$/;
const OPTION = /^ {2}(-\S.*)$/;
const NAME = /^-{1,2}[A-Za-z0-9?][A-Za-z0-9_.?+-]*$/;

/**
 * An option line split into its invocation and (where it fits on the line) the first help line: at
 * the first run of two or more spaces followed by text. One pass: the regex this replaced
 * (`^(\S.*?)(?: {2,}(\S.*))?$`) backtracked quadratically on a line ending in a long run of spaces
 * (20,000 spaces: 9 s), and the text is a process's output, hostile.
 */
export function splitInvocation(line: string): [invocation: string, help: string | undefined] {
  let run = 0;
  for (let i = 0; i < line.length; i++) {
    if (line[i] === ' ') {
      run++;
      continue;
    }
    if (run >= 2 && i - run > 0) return [line.slice(0, i - run), line.slice(i)];
    run = 0;
  }
  return [line, undefined];
}

/** The spellings of an option line's invocation (`--x X, -x X` or `--x, --no-x`). */
function namesOf(invocation: string): string[] | undefined {
  const out: string[] = [];
  // a metavar may hold ", " itself (`--config-format ['auto', 'hf', 'mistral']`): a spelling follows ", -"
  for (const part of invocation.split(/, (?=-)/)) {
    const name = part.trim().split(' ')[0] ?? '';
    if (!NAME.test(name)) return undefined;
    out.push(name);
  }
  return out.length ? out : undefined;
}

/** `cp_kv_cache_interleave_size` or `--cp-kv-cache-interleave-size` -> `--cp-kv-cache-interleave-size`. */
export function optionName(word: string): string | undefined {
  const w = word.replace(/^[`'"]+|[`'".,;:)]+$/g, '');
  if (w.startsWith('--')) return NAME.test(w) ? w : undefined;
  // a bare identifier only when it is clearly one (an underscore or dash inside), never an English word
  if (!/^[a-z0-9]+(?:[_-][a-z0-9]+)+$/.test(w)) return undefined;
  return `--${w.replace(/_/g, '-')}`;
}

// What vLLM's help texts say of a replacement. Only these forms are read as one; anything else is not.
const REPLACED = [
  /\bhas been (?:replaced|superseded) by\s+(\S+)/i,
  /\b(?:is|was) (?:replaced|superseded) by\s+(\S+)/i,
  /\brenamed to\s+(\S+)/i,
  /\bin favou?r of\s+(\S+)/i,
  /\b(?:please )?use\s+(--[A-Za-z0-9][\w.-]*)[`'"]?\s+instead\b/i,
  /\bplease use\s+(--[A-Za-z0-9][\w.-]*)/i,
];
const DEPRECATED =
  /\[deprecated\]|\bis deprecated\b|\bhas been deprecated\b|\bdeprecated (?:since|in) v?\d|\bwill be removed\b/i;

function sentenceAround(help: string, at: number): string {
  const dot = help.lastIndexOf('. ', at);
  const start = dot < 0 ? 0 : dot + 2;
  const endDot = help.indexOf('. ', at);
  const end = endDot < 0 ? help.length : endDot + 1;
  return help.slice(start, end).slice(0, HELP_LIMITS.saidChars);
}

/** What the help text says of deprecation and replacement. */
export function readDeprecation(
  help: string,
  own: readonly string[],
): Pick<HelpEntry, 'deprecated' | 'replacedBy' | 'said'> {
  for (const re of REPLACED) {
    const m = re.exec(help);
    const name = m ? optionName(m[1]!) : undefined;
    if (m && name && !own.includes(name))
      return { deprecated: true, replacedBy: name, said: sentenceAround(help, m.index) };
  }
  const d = DEPRECATED.exec(help);
  return d ? { deprecated: true, said: sentenceAround(help, d.index) } : { deprecated: false };
}

/** The `(default: X)` argparse appends, split off the help text. */
export function splitDefault(help: string): { help: string; default?: string } {
  const t = help.trimEnd();
  const at = t.lastIndexOf('(default:');
  if (at < 0 || !t.endsWith(')')) return { help: t };
  return {
    help: t.slice(0, at).trimEnd(),
    default: t
      .slice(at + '(default:'.length, -1)
      .replace(/\s+/g, ' ')
      .trim(),
  };
}

/** A default as compared: argparse's words with every space dropped (a wrapped line may split one). */
export const defaultKey = (d: string) => d.replace(/\s+/g, '');

/** The help text's lines within HELP_LIMITS (characters, lines, characters per line), each cut said in `findings`. */
function boundedLines(raw: unknown, findings: string[]): string[] {
  let text = typeof raw === 'string' ? raw : '';
  if (text.length > HELP_LIMITS.bytes) {
    findings.push(`the help text is ${text.length} characters; read the first ${HELP_LIMITS.bytes}`);
    text = text.slice(0, HELP_LIMITS.bytes);
  }
  const lines = clean(text).split('\n');
  if (lines.length > HELP_LIMITS.lines) {
    findings.push(`the help text has ${lines.length} lines; read the first ${HELP_LIMITS.lines}`);
    lines.length = HELP_LIMITS.lines;
  }
  // argparse wraps at the terminal's width: a line of thousands of characters is no help text of vLLM's
  let long = 0;
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.length <= HELP_LIMITS.lineChars) continue;
    lines[i] = lines[i]!.slice(0, HELP_LIMITS.lineChars);
    long++;
  }
  if (long) findings.push(`${long} line(s) longer than ${HELP_LIMITS.lineChars} characters: cut there`);
  return lines;
}

/** Parse `vllm serve --help=all`'s text. Never throws. */
export function parseHelpAll(raw: string): HelpTable {
  const findings: string[] = [];
  const lines = boundedLines(raw, findings);
  const entries: HelpEntry[] = [];
  let group: string | undefined;
  let cur: { names: string[]; group: string; parts: string[]; start: number; end: number } | undefined;
  let odd = 0;
  const close = () => {
    if (!cur) return;
    let joined = cur.parts.join(' ').replace(/\s+/g, ' ').trim();
    if (joined.length > HELP_LIMITS.helpChars) joined = joined.slice(0, HELP_LIMITS.helpChars);
    const { help, default: def } = splitDefault(joined);
    entries.push({
      names: cur.names,
      group: cur.group,
      help,
      ...(def !== undefined ? { default: def } : {}),
      ...readDeprecation(help, cur.names),
      lines: [cur.start, cur.end],
    });
    cur = undefined;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const h = HEADING.exec(line);
    if (h) {
      close();
      group = h[1]!.trim();
      continue;
    }
    if (group === undefined) continue; // usage, description, a log line before the help
    if (!line.trim()) {
      // a blank line ends an option unless its help goes on, indented, right after
      if (cur && /^ {3,}\S/.test(lines[i + 1] ?? '')) continue;
      close();
      continue;
    }
    const o = OPTION.exec(line);
    if (o) {
      close();
      // the invocation, then (where it fits) two or more spaces and the first help line
      const m = splitInvocation(o[1]!);
      const names = namesOf(m[0]);
      if (!names) {
        odd++;
        continue;
      }
      if (entries.length >= HELP_LIMITS.entries) {
        findings.push(`more than ${HELP_LIMITS.entries} options; the rest not read`);
        break;
      }
      cur = { names, group, parts: m[1] ? [m[1]] : [], start: i, end: i };
      continue;
    }
    if (cur && /^ {3,}\S/.test(line)) {
      cur.parts.push(line.trim());
      cur.end = i;
      continue;
    }
    // a group's description, a positional argument and its help, the epilog (the JSON tip): not options
    close();
  }
  close();
  if (!entries.length) findings.push('no option found: not the text of `vllm serve --help=all`');
  if (odd) findings.push(`${odd} option line(s) whose spellings are not option names: skipped`);
  const seen = new Map<string, number>();
  for (const e of entries) for (const n of e.names) seen.set(n, (seen.get(n) ?? 0) + 1);
  const dup = [...seen].filter(([, k]) => k > 1).map(([n]) => n);
  if (dup.length)
    findings.push(
      `listed more than once: ${dup.slice(0, 5).join(', ')}${dup.length > 5 ? ` and ${dup.length - 5} more` : ''} (the first is used)`,
    );
  return { entries, findings };
}

/** The entry of an option by any of its spellings (the first listed, where the text lists one twice). */
export function entryOf(t: HelpTable, flag: string): HelpEntry | undefined {
  return t.entries.find((e) => e.names.includes(flag));
}

/** The canonical (first long) name of an entry. */
export const nameOf = (e: Pick<HelpEntry, 'names'>) => e.names.find((n) => n.startsWith('--')) ?? e.names[0]!;
