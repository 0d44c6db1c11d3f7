// A growing log file read from where it left off: the supervisor takes its new lines (phases, the
// stall timer, the tail quoted in failures); `logs -f` takes its new bytes as they come (progress
// bars rewrite one line with \r and would otherwise show only when finished).
import { openSync, closeSync, statSync, readSync } from 'node:fs';

export class LogTail {
  private offset = 0;
  private partial = '';
  /** lines completed since the last poll() */
  private pending: string[] = [];
  readonly ring: string[] = [];
  lastActivity = Date.now();

  constructor(
    readonly path: string,
    readonly keep = 200,
    opts: { fromEnd?: boolean } = {},
  ) {
    if (opts.fromEnd) {
      try {
        this.offset = statSync(path).size;
      } catch {
        /* not there yet: read it from the start once it is */
      }
    }
  }

  /** The bytes appended since the last read ('' when none); a truncated file is read again from its start. */
  read(): string {
    let size: number;
    try {
      size = statSync(this.path).size;
    } catch {
      return '';
    }
    if (size < this.offset) this.offset = 0;
    if (size === this.offset) return '';
    const fd = openSync(this.path, 'r');
    const buf = Buffer.alloc(size - this.offset);
    readSync(fd, buf, 0, buf.length, this.offset);
    closeSync(fd);
    this.offset = size;
    this.lastActivity = Date.now();
    const text = buf.toString('utf8');
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop() ?? '';
    this.pending.push(...lines);
    for (const l of lines) {
      this.ring.push(l);
      if (this.ring.length > this.keep) this.ring.shift();
    }
    return text;
  }

  /** The lines completed since the last poll. */
  poll(): string[] {
    this.read();
    return this.pending.splice(0);
  }

  text(): string {
    return [...this.ring, this.partial].join('\n');
  }
}
