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
// Written by hand, one pass, no regular expression with nested repetition: a probe loads it.

export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  /** samples by metric name, in the order the server wrote them */
  byName: Map<string, PromSample[]>;
  /** lines that are neither a comment nor a sample (1-based line number, the first 60 characters) */
  malformed: Array<{ line: number; text: string }>;
  /** samples of a series (name and labels) already read: not counted again */
  duplicates: number;
  /** the text did not end with a newline: its last line was left unread */
  unterminated: boolean;
}

/** A longer line is no sample: vLLM's longest are a few hundred characters. */
export const MAX_LINE_CHARS = 16 * 1024;

const isNameStart = (c: number) => (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c === 58; // a-z A-Z _ :
const isNameChar = (c: number) => isNameStart(c) || (c >= 48 && c <= 57);
const isSpace = (c: number) => c === 32 || c === 9;
const NUMBER = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;
const TIMESTAMP = /^-?\d+$/;

/** A sample value as the exposition format writes it; anything else (a word, hex) is NaN. */
export function promValue(s: string): number {
  if (s === '+Inf' || s === 'Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  return NUMBER.test(s) ? Number(s) : Number.NaN;
}

/** One sample line (already trimmed, not a comment) -> its parts, or undefined when it is not one. */
function sampleOf(line: string): PromSample | undefined {
  const n = line.length;
  let i = 0;
  if (!isNameStart(line.charCodeAt(0))) return undefined;
  while (i < n && isNameChar(line.charCodeAt(i))) i++;
  const name = line.slice(0, i);
  const labels: Record<string, string> = {};
  if (line.charCodeAt(i) === 123 /* { */) {
    i++;
    for (;;) {
      while (i < n && isSpace(line.charCodeAt(i))) i++;
      if (line.charCodeAt(i) === 125 /* } */) {
        i++;
        break;
      }
      const ls = i;
      if (!isNameStart(line.charCodeAt(i)) || line.charCodeAt(i) === 58) return undefined;
      while (i < n && isNameChar(line.charCodeAt(i)) && line.charCodeAt(i) !== 58) i++;
      const label = line.slice(ls, i);
      while (i < n && isSpace(line.charCodeAt(i))) i++;
      if (line.charCodeAt(i++) !== 61 /* = */) return undefined;
      while (i < n && isSpace(line.charCodeAt(i))) i++;
      if (line.charCodeAt(i++) !== 34 /* " */) return undefined;
      let value = '';
      let from = i;
      for (;;) {
        if (i >= n) return undefined; // the quote never closes
        const c = line.charCodeAt(i);
        if (c === 34) break;
        if (c === 92 /* \ */) {
          value += line.slice(from, i);
          const e = line[i + 1];
          if (e === undefined) return undefined;
          value += e === 'n' ? '\n' : e === '\\' || e === '"' ? e : `\\${e}`;
          i += 2;
          from = i;
          continue;
        }
        i++;
      }
      value += line.slice(from, i);
      i++; // the closing quote
      labels[label] = value;
      while (i < n && isSpace(line.charCodeAt(i))) i++;
      if (line.charCodeAt(i) === 44 /* , */) i++;
      else if (line.charCodeAt(i) !== 125) return undefined;
    }
  }
  // the value, then at most an integer timestamp
  if (!isSpace(line.charCodeAt(i))) return undefined;
  const rest = line
    .slice(i)
    .trim()
    .split(/[ \t]+/);
  if (rest.length > 2 || !rest[0] || (rest.length === 2 && !TIMESTAMP.test(rest[1]!))) return undefined;
  return { name, labels, value: promValue(rest[0]) };
}

const seriesKey = (s: PromSample) => {
  const keys = Object.keys(s.labels);
  if (!keys.length) return s.name;
  return `${s.name}\0${keys
    .sort()
    .map((k) => `${k}\0${s.labels[k]}`)
    .join('\0')}`;
};

export function parseExposition(text: string): Exposition {
  const byName = new Map<string, PromSample[]>();
  const malformed: Exposition['malformed'] = [];
  const seen = new Set<string>();
  let duplicates = 0;
  const lines = text.split('\n');
  const last = lines.pop()!; // '' when the text ends with its newline
  for (let k = 0; k < lines.length; k++) {
    const raw = lines[k]!;
    if (raw.length > MAX_LINE_CHARS) {
      malformed.push({ line: k + 1, text: `${raw.slice(0, 60)}... (${raw.length} characters)` });
      continue;
    }
    const line = raw.trim();
    if (!line || line.charCodeAt(0) === 35 /* # */) continue;
    const s = sampleOf(line);
    if (!s) {
      malformed.push({ line: k + 1, text: line.slice(0, 60) });
      continue;
    }
    const key = seriesKey(s);
    if (seen.has(key)) {
      duplicates++;
      continue;
    }
    seen.add(key);
    const a = byName.get(s.name);
    if (a) a.push(s);
    else byName.set(s.name, [s]);
  }
  return { byName, malformed, duplicates, unterminated: last.trim() !== '' };
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
