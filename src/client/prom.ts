// Prometheus text exposition (what vLLM's /metrics answers) -> samples by name. The one reader of
// that text: the probe, probe history and the bench's scraper each take their numbers from here.
//
// One rule for a missing value: a metric that is absent, or present with no sample, reads as
// `undefined` (never 0); a value the server wrote is kept as written (`NaN`, `+Inf`, a word that is
// no number reads NaN), and each caller decides what such a reading means to it. The text is the
// server's: a line that is neither a comment nor a sample is listed in `malformed` (the caller
// decides whether that makes the whole answer unreadable), a line over MAX_LINE_CHARS is not
// scanned, a series written twice counts once (the first, as Prometheus keeps it), and a last
// line without its newline is not read (the format ends every line with one: it may be cut).
// A line is matched by one anchored pattern whose alternatives never overlap (linear, also on a
// hostile line); labels are unescaped only when a caller asks for them (the probe never does).

export interface PromSample {
  name: string;
  /** label values unescaped; read on first use */
  readonly labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  /** samples by metric name, in the order the server wrote them */
  byName: Map<string, PromSample[]>;
  /** lines that are neither a comment nor a sample (1-based line number, the first 60 characters): the first MAX_MALFORMED of them */
  malformed: Array<{ line: number; text: string }>;
  /** how many lines were neither a comment nor a sample (all of them, where `malformed` keeps the first MAX_MALFORMED) */
  malformedLines: number;
  /** samples of a series (name and labels) already read: not counted again */
  duplicates: number;
  /** the text did not end with a newline: its last line was left unread */
  unterminated: boolean;
}

/** A longer line is no sample: vLLM's longest are a few hundred characters. */
export const MAX_LINE_CHARS = 16 * 1024;

/** Lines that are no sample kept to be named (a hostile answer of millions of them is counted, not kept: no caller names more than one). */
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

const unescaped = (quoted: string) => quoted.slice(1, -1).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c === '\\' || c === '"' ? c : `\\${c}`));

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
    // the series as written (name and label block): the same one again is not read twice
    const key = m[2] ? m[1]! + m[2] : m[1]!;
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
