import { shownEscaped } from '../../util/control.js';
import { interrupts } from '../../util/interrupt.js';
import { existsSync, readdirSync } from 'node:fs';
import { readTail } from '../../util/read.js';
import { LogTail } from '../../engine/runtime/logtail.js';
import { join } from 'node:path';
import { Registry } from '../../engine/registry.js';
import { stateDir } from '../common.js';
import { UsageError } from '../../errors.js';

/** The last `n` lines, from at most the last 16 MiB of the log (a regular file only: a FIFO or device is refused). */
function lastLines(path: string, n: number): string[] {
  const { buf, skipped } = readTail(path, 0, 16 * 1024 * 1024);
  const lines = buf.toString('utf8').split('\n');
  if (skipped) lines.shift(); // the end of a line that began before the window
  if (lines.at(-1) === '') lines.pop();
  return n > 0 ? lines.slice(-n) : []; // slice(-0) would be the whole file
}

export async function run(name: string, opts: { follow?: boolean; lines: number }) {
  const dir = stateDir();
  const reg = new Registry(dir);
  let files = reg.find(name).map(({ inst }) => ({ name: inst.name, path: inst.logFile }));
  if (!files.length) {
    // A stopped server's log stays: look in the log folder by instance or profile name.
    const logDir = join(dir, 'logs');
    files = (existsSync(logDir) ? readdirSync(logDir) : [])
      .filter((f) => f === `${name}.log` || new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-\\d+\\.log$`).test(f))
      .map((f) => ({ name: f.replace(/\.log$/, ''), path: join(logDir, f) }));
  }
  if (!files.length) throw new UsageError(`no server or log named "${name}"`, ['sparkctl status lists the running ones']);
  const prefix = files.length > 1;
  for (const f of files) for (const l of lastLines(f.path, opts.lines)) process.stdout.write(`${prefix ? `[${f.name}] ` : ''}${shownEscaped(l, { lines: true })}\n`);
  if (!opts.follow) return;
  const tails = files.map((f) => ({ ...f, tail: new LogTail(f.path, 0, { fromEnd: true }) }));
  const stopped = interrupts();
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      for (const f of tails) {
        // a log's bytes are the server's: an escape sequence in them is shown, never sent to the terminal raw
        const text = shownEscaped(f.tail.read(), { lines: true });
        if (!text) continue;
        process.stdout.write(
          prefix
            ? text
                .split('\n')
                .map((l, i, a) => (i === a.length - 1 && l === '' ? '' : `[${f.name}] ${l}`))
                .join('\n')
            : text,
        );
      }
    }, 200);
    stopped.signal.addEventListener('abort', () => {
      clearInterval(timer);
      resolve();
    });
  });
}
