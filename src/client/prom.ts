// Prometheus text exposition (what vLLM's /metrics answers) -> samples by name. The one reader of
// that text: the probe, probe history and the bench's scraper each take their numbers from here.
//
// One rule for a missing value: a metric that is absent, or present with no sample, reads as
// `undefined` (never 0); a value the server wrote is kept as written (`NaN`, `+Inf`, a word that is
// no number reads NaN), and each caller decides what such a reading means to it. The text is the
// server's: a line that is neither a comment nor a sample is listed in `malformed` (the caller
// decides whether that makes the whole answer unreadable), a line over MAX_LINE_CHARS is not
// scanned, a series written twice counts once (the first, as Prometheus keeps it; a series is its
// name and its label set, whatever the order or spacing the labels are written in), and a last
// line without its newline is not read (the format ends every line with one: it may be cut).
// A line is matched by one anchored pattern whose alternatives never overlap (linear, also on a
// hostile line); labels are unescaped only when a caller asks for them (the probe never does) or
// when a label block is not written in the one spelling a series key takes (vLLM's are).

interface PromSample {
  name: string;
  /** label values unescaped; read on first use */
  readonly labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  /** samples by metric name, in the order the server wrote them */
  byName: Map<string, PromSample[]>;
  /**
   * lines that are neither a comment nor a sample (1-based line number, the first 60 characters): the first
   * MAX_MALFORMED of them
   */
  malformed: Array<{ line: number; text: string }>;
  /**
   * how many lines were neither a comment nor a sample (all of them, where `malformed` keeps the first MAX_MALFORMED)
   */
  malformedLines: number;
  /** samples of a series (name and labels) already read: not counted again */
  duplicates: number;
  /** the text did not end with a newline: its last line was left unread */
  unterminated: boolean;
}

/** A longer line is no sample: vLLM's longest are a few hundred characters. */
export const MAX_LINE_CHARS = 16 * 1024;

/**
 * Lines that are no sample kept to be named (a hostile answer of millions of them is counted, not kept: no caller names
 * more than one).
 */
export const MAX_MALFORMED = 100;

const LABEL_VALUE = String.raw`"(?:[^"\\]|\\.)*"`;
const LABELS = String.raw`\{[ \t]*(?:[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*${LABEL_VALUE}[ \t]*(?:,[ \t]*|(?=\})))*\}`;
const SAMPLE = new RegExp(String.raw`^([a-zA-Z_:][a-zA-Z0-9_:]*)(${LABELS})?[ \t]+(\S+)(?:[ \t]+(-?\d+))?$`);
const LABEL = new RegExp(String.raw`([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*(${LABEL_VALUE})`, 'g');
const NUMBER = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;

/** A sample value as the exposition format writes it; anything else (a word, hex) is NaN. */
export function promValue(s: string): number {
  if (s === '+Inf' || s === 'Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  return NUMBER.test(s) ? Number(s) : Number.NaN;
}

const unescaped = (quoted: string) =>
  quoted.slice(1, -1).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c === '\\' || c === '"' ? c : `\\${c}`));

class Sample implements PromSample {
  #block: string | undefined;
  #labels: Record<string, string> | undefined;
  constructor(
    public name: string,
    block: string | undefined,
    public value: number,
  ) {
    this.#block = block;
  }
  get labels(): Record<string, string> {
    if (!this.#labels) {
      this.#labels = {};
      if (this.#block) for (const m of this.#block.matchAll(LABEL)) this.#labels[m[1]!] = unescaped(m[2]!);
    }
    return this.#labels;
  }
}

/** A label value written again the one way the format allows: backslash, quote and newline escaped. */
const escaped = (v: string) => v.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`));

/**
 * A series' identity: its name and its labels sorted by name, each value in one spelling (the
 * format's own escapes), written `name{a="1",b="2"}`; a label with an empty value is no label (as
 * Prometheus reads it), so `m{a=""}` and `m{}` are the series `m`. `block` is a label block the
 * sample pattern matched. A block already written that way (vLLM's are) is its own key, seen by
 * one scan that makes no string but the names; any other is read pair by pair.
 */
function seriesKey(name: string, block: string | undefined): string {
  if (!block) return name;
  if (canonicalBlock(block)) return name + block;
  const pairs: Array<[string, string]> = [];
  for (const m of block.matchAll(LABEL)) if (m[2]!.length > 2) pairs.push([m[1]!, escaped(unescaped(m[2]!))]);
  if (!pairs.length) return name;
  // by name alone (stable): a name written twice keeps its order, as the labels read keeps the last
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return `${name}{${pairs.map(([k, v]) => `${k}="${v}"`).join(',')}}`;
}

/** `{a="1",b="2"}`: one pair or more, names ascending, no space, no trailing comma, no empty value, no escape. */
function canonicalBlock(block: string): boolean {
  let last = '';
  let i = 1;
  for (;;) {
    const k0 = i;
    let c = block.charCodeAt(i);
    while (c !== 61 /* = */) {
      if (c === 32 || c === 9 || c === 44 || c === 125) return false; // a space, an empty pair, `{}` or a trailing comma
      c = block.charCodeAt(++i);
    }
    const k = block.slice(k0, i);
    if (k <= last) return false;
    last = k;
    if (block.charCodeAt(++i) !== 34 /* " */ || block.charCodeAt(i + 1) === 34) return false; // a space, or ""
    for (c = block.charCodeAt(++i); c !== 34; c = block.charCodeAt(++i)) if (c === 92 /* \ */) return false;
    c = block.charCodeAt(++i);
    if (c === 125) return true;
    if (c !== 44) return false;
    i++;
  }
}

export function parseExposition(text: string): Exposition {
  const byName = new Map<string, PromSample[]>();
  const malformed: Exposition['malformed'] = [];
  let malformedLines = 0;
  const bad = (line: number, text: () => string) => {
    if (malformedLines++ < MAX_MALFORMED) malformed.push({ line, text: text() });
  };
  const seen = new Set<string>();
  let duplicates = 0;
  const lines = text.split('\n');
  const last = lines.pop()!; // '' when the text ends with its newline
  for (let k = 0; k < lines.length; k++) {
    const raw = lines[k]!;
    if (raw.length > MAX_LINE_CHARS) {
      bad(k + 1, () => `${raw.slice(0, 60)}... (${raw.length} characters)`);
      continue;
    }
    const line = raw.trim();
    if (!line || line.charCodeAt(0) === 35 /* # */) continue;
    const m = SAMPLE.exec(line);
    if (!m) {
      bad(k + 1, () => line.slice(0, 60));
      continue;
    }
    // the series (name and label set): the same one again, in any label order, is not read twice
    const key = seriesKey(m[1]!, m[2]);
    if (seen.has(key)) {
      duplicates++;
      continue;
    }
    seen.add(key);
    const s = new Sample(m[1]!, m[2], promValue(m[3]!));
    const a = byName.get(s.name);
    if (a) a.push(s);
    else byName.set(s.name, [s]);
  }
  return { byName, malformed, malformedLines, duplicates, unterminated: last.trim() !== '' };
}

/** The samples of the first name that has any (a renamed metric: the new name first, then the old). */
export function samplesOf(e: Exposition, ...names: string[]): PromSample[] | undefined {
  for (const n of names) {
    const a = e.byName.get(n);
    if (a?.length) return a;
  }
  return undefined;
}

/** The sum over every series of the first name that has samples; undefined when none has. */
export function sumOf(e: Exposition, ...names: string[]): number | undefined {
  const a = samplesOf(e, ...names);
  return a?.reduce((t, s) => t + s.value, 0);
}

/** The largest sample of the first name that has samples (NaN when any is NaN); undefined when none has. */
export function maxOf(e: Exposition, ...names: string[]): number | undefined {
  const a = samplesOf(e, ...names);
  if (!a) return undefined;
  let m = -Infinity;
  for (const s of a) {
    if (Number.isNaN(s.value)) return Number.NaN;
    if (s.value > m) m = s.value;
  }
  return m;
}
