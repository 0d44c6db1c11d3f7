// The one control-character rule. A control character (C0 but for what a caller keeps, DEL, C1 such
// as NEL and CSI, the Unicode line and paragraph separators) in a value from outside (a node's
// answer, a log line, a model name, a recipe key) is either refused where a value must be one line
// of plain text, or shown escaped where it is printed: an escape sequence reaching the operator's
// terminal is interpreted by it (clear the screen, retitle the window, rewrite a line, a hyperlink).

/**
 * The rule's characters as the body of a regex character class, for a pattern that must exclude them
 * (an absolute path with none: `new RegExp(`^/[^${CONTROL_CLASS}]+$`)`): every pattern of the house
 * builds on this one, so no pattern lets DEL, C1 or a line separator through where another does not.
 */
export const CONTROL_CLASS = '\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029';
/** the same, but a tab and a newline pass (multi-line text kept as lines) */
const CONTROL_CLASS_BUT_LINES = '\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u2028\\u2029';

/** Every control character of the rule (one, not global: for .test). */
export const CONTROL = new RegExp(`[${CONTROL_CLASS}]`);
const CONTROLS = new RegExp(`[${CONTROL_CLASS}]`, 'g');
const CONTROLS_BUT_LINES = new RegExp(`[${CONTROL_CLASS_BUT_LINES}]`, 'g');

/**
 * Text with each control character of the rule replaced by `by` (a string, or a function of the character; `lines`: a
 * tab and a newline kept): a comment line of a generated file, help text read from a program, an escaped value.
 */
export const controlsReplaced = (
  s: string,
  by: string | ((c: string) => string),
  opts: { lines?: boolean } = {},
): string => s.replace(opts.lines ? CONTROLS_BUT_LINES : CONTROLS, by as (c: string) => string);

/**
 * A line from outside cut to printable ASCII (every other character '?') and to `max` characters:
 * for the last words of a failed command or a server's error quoted inside one of sparkctl's own
 * lines, where even a harmless non-ASCII letter is not worth the doubt.
 */
export const asciiLine = (s: string, max: number): string => s.replace(/[^\x20-\x7e]/g, '?').slice(0, max);

export const hasControl = (s: string): boolean => CONTROL.test(s);

/** One control character as it is shown: \x1b, \x7f, \u009b, \u2028. */
const escapedChar = (ch: string): string => {
  const n = ch.charCodeAt(0);
  return n <= 0xff && n < 0x80 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
};

/**
 * Text from outside as a terminal may show it: each control character written as its escape (\x1b),
 * never the character. `lines`: newlines and tabs pass (a log's lines, a node's several-line answer).
 */
export const shownEscaped = (s: string, opts: { lines?: boolean } = {}): string =>
  s.replace(opts.lines ? CONTROLS_BUT_LINES : CONTROLS, escapedChar);

// What reaches the operator's terminal: every line sparkctl prints (say, note, the error lines,
// progress text, the gateway's log lines, table cells) goes through terminalText, so text from
// outside that a printer forgot to escape is still shown as data. Kept: a newline and a tab, and,
// when sparkctl colours its own output, exactly the colour codes it writes (output/format.ts `c`:
// reset, bold, dim, red, green, yellow), which move no cursor, clear nothing, retitle no window and
// open no link. Everything else is escaped; a character past ASCII as \uXXXX, so that JSON printed
// with it (JSON.stringify leaves DEL, C1 and U+2028/9 raw) stays valid JSON with the same value.
const OWN_COLOURS = '\\x1b\\[(?:0|1|2|31|32|33)m';
const TERMINAL = new RegExp(`${OWN_COLOURS}|[${CONTROL_CLASS_BUT_LINES}]`, 'g');
const terminalChar = (ch: string): string => {
  const n = ch.charCodeAt(0);
  return n < 0x7f ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
};

/** A line as sparkctl may write it to a terminal (see above); `colour`: its own colour codes pass. */
export const terminalText = (s: string, colour = false): string =>
  colour
    ? s.replace(TERMINAL, (m) => (m.length > 1 ? m : terminalChar(m)))
    : s.replace(CONTROLS_BUT_LINES, terminalChar);
