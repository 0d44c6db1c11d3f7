// Progress and logs go to stderr; stdout carries only results.
import { c } from './format.js';

export interface Progress {
  phase(text: string): void;
  update(text: string): void;
  done(): void;
}

/** On a TTY one self-rewriting line; elsewhere one line per phase (logs, cron, CI). */
export function progress(opts: { quiet?: boolean } = {}): Progress {
  const tty = Boolean(process.stderr.isTTY) && !process.env.CI;
  let last = '';
  let lastPhase = '';
  const started = Date.now();
  const elapsed = () => c.dim(`[${((Date.now() - started) / 1000).toFixed(1)}s]`);
  return {
    phase(text) {
      if (opts.quiet || text === lastPhase) return;
      lastPhase = text;
      if (tty) {
        process.stderr.write(`\r\x1b[2K${elapsed()} ${text}`);
        last = text;
      } else process.stderr.write(`${elapsed()} ${text}\n`);
    },
    update(text) {
      if (opts.quiet || !tty) return;
      process.stderr.write(`\r\x1b[2K${elapsed()} ${text}`);
      last = text;
    },
    done() {
      if (tty && last) process.stderr.write('\n');
      last = '';
    },
  };
}

export const say = (line = '') => process.stdout.write(line + '\n');
export const note = (line: string) => process.stderr.write(line + '\n');
