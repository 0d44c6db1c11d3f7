// The one control-character rule. A control character (C0 but for what a caller keeps, DEL, C1 such
// as NEL and CSI, the Unicode line and paragraph separators) in a value from outside (a node's
// answer, a log line, a model name, a recipe key) is either refused where a value must be one line
// of plain text, or shown escaped where it is printed: an escape sequence reaching the operator's
// terminal is interpreted by it (clear the screen, retitle the window, rewrite a line, a hyperlink).

/** Every control character of the rule (one, not global: for .test). */
export const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;
/** the same, but a tab and a newline pass (multi-line text kept as lines) */
const CONTROLS_BUT_LINES = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029]/g;

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
export const shownEscaped = (s: string, opts: { lines?: boolean } = {}): string => s.replace(opts.lines ? CONTROLS_BUT_LINES : CONTROLS, escapedChar);
