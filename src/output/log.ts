// Progress and logs go to stderr; stdout carries only results.
import { c, useColor } from './format.js';
import { terminalText } from '../util/control.js';

interface Progress {
  phase(text: string): void;
  update(text: string): void;
  /** On a TTY one live line per row (a replica each), redrawn in place; elsewhere nothing (phase() says it). */
  rows(rows: string[]): void;
  done(): void;
}

/** On a TTY one self-rewriting line; elsewhere one line per phase (logs, cron, CI). */
export function progress(opts: { quiet?: boolean } = {}): Progress {
  const tty = Boolean(process.stderr.isTTY) && !process.env.CI;
  let last = '';
  let lastPhase = '';
  // lines drawn by the last rows(): the cursor sits at the end of the last of them
  let drawn = 0;
  const started = Date.now();
  const elapsed = () => c.dim(`[${((Date.now() - started) / 1000).toFixed(1)}s]`);
  return {
    phase(raw) {
      const text = terminalText(raw, useColor());
      if (opts.quiet || text === lastPhase) return;
      lastPhase = text;
      if (tty) {
        process.stderr.write(`\r\x1b[2K${elapsed()} ${text}`);
        last = text;
      } else process.stderr.write(`${elapsed()} ${text}\n`);
    },
    update(raw) {
      if (opts.quiet || !tty) return;
      const text = terminalText(raw, useColor());
      process.stderr.write(`\r\x1b[2K${elapsed()} ${text}`);
      last = text;
    },
    rows(raw) {
      if (opts.quiet || !tty || !raw.length) return;
      const rows = raw.map((r) => terminalText(r, useColor()));
      // back to the first line drawn, then every row on its own cleared line (as many as were drawn,
      // so a row that went away leaves no stale text)
      const n = Math.max(rows.length, drawn);
      let out = `${drawn > 1 ? `\x1b[${drawn - 1}A` : ''}\r`;
      for (let i = 0; i < n; i++)
        out += `\x1b[2K${rows[i] === undefined ? '' : `${elapsed()} ${rows[i]}`}${i < n - 1 ? '\n' : ''}`;
      process.stderr.write(out);
      drawn = n;
      last = rows.join('\n');
    },
    done() {
      if (tty && last) process.stderr.write('\n');
      last = '';
      drawn = 0;
    },
  };
}

/** A result line on stdout; text from outside in it is shown escaped (util/control.ts terminalText). */
export const say = (line = '') => process.stdout.write(`${terminalText(line, useColor())}\n`);
/** A line on stderr (progress, warnings, notes), escaped the same way. */
export const note = (line: string) => process.stderr.write(`${terminalText(line, useColor())}\n`);
