// Progress of a pull on stderr: per file and in total, rate and time left. On a TTY one line
// redrawn at most 5 times a second, plus a line per finished file; elsewhere (logs, CI) a line per
// finished file and one per tenth of the total, so a log of a 100 GB pull stays short.
import { c, formatBytes, formatDuration, useColor } from '../output/format.js';
import { terminalText } from '../util/control.js';
import type { PullEvent } from '../model/pull.js';

/** Where a pull stands: files done of all, bytes here (startHave of them before it began) of all, files in flight. */
interface PullTally {
  done: number;
  files: number;
  have: number;
  startHave: number;
  total: number;
  active: Map<string, { got: number; size: number }>;
}

/** The progress line: files and bytes so far, the rate over secs and the time left, and two files in flight. */
function progressLine(t: PullTally, secs: number): string {
  const { done, files, have, startHave, total, active } = t;
  const rate = (have - startHave) / secs;
  const left = rate > 0 ? ((total - have) / rate) * 1000 : undefined;
  const pct = total ? Math.floor((have / total) * 100) : 100;
  const cur = [...active.entries()]
    .slice(0, 2)
    .map(([p, a]) => `${p} ${a.size ? Math.floor((a.got / a.size) * 100) : 100}%`);
  return `${done}/${files} files, ${formatBytes(have)} of ${formatBytes(total)} (${pct}%), ${formatBytes(rate)}/s${left !== undefined ? `, ${formatDuration(left)} left` : ''}${cur.length ? `  ${cur.join(', ')}` : ''}`;
}

export function pullProgress(
  opts: { quiet?: boolean; tty?: boolean; write?: (s: string) => void; now?: () => number } = {},
) {
  const out = opts.write ?? ((s: string) => process.stderr.write(s));
  // the one escape sequence of its own (redraw the line) kept, the rest as terminalText shows it: a path or a revision
  // is the Hub's
  const write = (s: string) =>
    out(s.startsWith('\r\x1b[2K') ? `\r\x1b[2K${terminalText(s.slice(5), useColor())}` : terminalText(s, useColor()));
  const tty = opts.tty ?? (Boolean(process.stderr.isTTY) && !process.env.CI);
  const now = opts.now ?? Date.now;
  let total = 0;
  let have = 0;
  let startHave = 0;
  let files = 0;
  let done = 0;
  let t0 = now();
  let lastDraw = 0;
  let lastTenth = 0;
  let drawn = false;
  const active = new Map<string, { got: number; size: number }>();
  const sizes = new Map<string, number>();
  const line = () =>
    progressLine({ done, files, have, startHave, total, active }, Math.max((now() - t0) / 1000, 0.001));
  const clear = () => {
    if (tty && drawn) write('\r\x1b[2K');
    drawn = false;
  };
  return (e: PullEvent) => {
    if (opts.quiet) return;
    switch (e.type) {
      case 'resolved':
        if (e.revision !== e.commit) write(`${e.revision} is commit ${e.commit}\n`);
        return;
      case 'planned':
        files = e.files.length;
        total = e.totalBytes;
        have = 0;
        startHave = e.haveBytes;
        t0 = now();
        for (const f of e.files) {
          sizes.set(f.path, f.size);
          if (f.present) done++;
        }
        write(
          `${files} files, ${formatBytes(total)}${e.haveBytes ? ` (${formatBytes(e.haveBytes)} already here)` : ''}; ${e.skipped.length} left on the Hub\n`,
        );
        for (const f of e.files) if (f.present) have += f.size;
        return;
      case 'bytes': {
        have += e.delta;
        const a = active.get(e.path) ?? { got: 0, size: sizes.get(e.path) ?? 0 };
        a.got += e.delta;
        active.set(e.path, a);
        const t = now();
        if (tty && t - lastDraw > 200) {
          lastDraw = t;
          write(`\r\x1b[2K${line()}`);
          drawn = true;
        } else if (!tty && total && Math.floor((have / total) * 10) > lastTenth) {
          lastTenth = Math.floor((have / total) * 10);
          write(`${line()}\n`);
        }
        return;
      }
      case 'file':
        active.delete(e.path);
        if (e.status === 'present') return;
        done++;
        clear();
        write(`${c.green('ok')} ${e.path} (${formatBytes(e.bytes)}, ${e.status}, SHA verified)\n`);
        return;
    }
  };
}
