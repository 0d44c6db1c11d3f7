// Human output helpers: colour that respects NO_COLOR and pipes, tables, shell quoting.
import { CONTROL_CLASS, controlsReplaced, shownEscaped, terminalText } from '../util/control.js';

const PLAIN_COMMENT = new RegExp(`^[^${CONTROL_CLASS}"\\\\]*$`);

export const useColor = (): boolean =>
  !process.env.NO_COLOR && process.env.FORCE_COLOR !== '0' && Boolean(process.stdout.isTTY);

const wrap = (code: number) => (s: string) => (useColor() ? `\x1b[${code}m${s}\x1b[0m` : s);
export const c = {
  red: wrap(31),
  green: wrap(32),
  yellow: wrap(33),
  dim: wrap(2),
  bold: wrap(1),
};

export function statusMark(status: string): string {
  switch (status) {
    case 'pass':
      return c.green('PASS');
    case 'warn':
      return c.yellow('WARN');
    case 'fail':
      return c.red('FAIL');
    default:
      // a status no check of ours gives came from outside (a node's report): shown escaped
      return c.dim(shownEscaped(status.toUpperCase()));
  }
}

const SAFE = /^[A-Za-z0-9_\-./:=@,+%]+$/;
/** POSIX shell quoting: the output can be pasted into a shell and runs the same argv. */
export function shellQuote(arg: string): string {
  if (arg !== '' && SAFE.test(arg)) return arg;
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** A suggested command line (in a fix, a hint, an install note): every word quoted for a POSIX shell. */
export const commandLine = (...argv: string[]): string => argv.map(shellQuote).join(' ');

/**
 * A value inside a `#` comment of generated text (shell, YAML, a unit file): a comment ends at the
 * line's end, so quoting cannot protect it; anything but plain printable text is written as a JSON
 * string (control characters and line separators become \n, \u2028 ...), so it stays one line.
 */
export function commentValue(v: string): string {
  return PLAIN_COMMENT.test(v)
    ? v
    : controlsReplaced(JSON.stringify(v), (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export function shellCommand(argv: string[], env: Record<string, string> = {}, multiline = true): string {
  const envPart = Object.entries(env).map(([k, v]) => `${k}=${shellQuote(v)}`);
  const parts: string[] = [...envPart, ...argv.map(shellQuote)];
  if (!multiline) return parts.join(' ');
  // One flag (with its value) per line, as the documents print it.
  const lines: string[] = [];
  let cur = '';
  for (const p of parts) {
    if (p.startsWith('--') && cur) {
      lines.push(cur);
      cur = p;
    } else cur = cur ? `${cur} ${p}` : p;
  }
  if (cur) lines.push(cur);
  return lines.join(' \\\n    ');
}

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;
const visibleLength = (s: string) => s.replace(ANSI, '').length;

export function table(cells: string[][], header?: string[]): string {
  // each cell as the terminal will show it, so that an escaped hostile cell keeps the columns aligned
  const colour = useColor();
  const rows = cells.map((r) => r.map((x) => terminalText(x, colour)));
  const all = header ? [header, ...rows] : rows;
  const widths: number[] = [];
  for (const r of all) r.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, visibleLength(cell))));
  const fmt = (r: string[]) =>
    r
      .map((cell, i) => (i === r.length - 1 ? cell : cell + ' '.repeat((widths[i] ?? 0) - visibleLength(cell))))
      .join('  ')
      .trimEnd();
  const out = all.map(fmt);
  if (header) out.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
  return out.join('\n');
}

export function envelope(kind: string, body: Record<string, unknown>): string {
  return JSON.stringify({ version: 1, kind, ...body }, null, 2);
}

/** A byte count in the unit that keeps its digits: 0.00 GiB says nothing about a 64 KiB cache. */
export function formatBytes(n: number): string {
  const units: Array<[number, string]> = [
    [2 ** 30, 'GiB'],
    [2 ** 20, 'MiB'],
    [2 ** 10, 'KiB'],
  ];
  for (const [size, unit] of units) if (Math.abs(n) >= size) return `${(n / size).toFixed(2)} ${unit}`;
  return `${Math.round(n)} B`;
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 120) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, '0')}s`;
}
