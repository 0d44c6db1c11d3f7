// A growing log file read from where it left off: the supervisor takes its new lines (phases, the
// stall timer, the tail quoted in failures); `logs -f` takes its new bytes as they come (progress
// bars rewrite one line with \r and would otherwise show only when finished).
import { statSync } from 'node:fs';
import { readTail } from '../../util/read.js';

/** The most bytes one read takes: a log that grew by more since the last look is read from its last 4 MiB. */
const READ_MAX = 4 * 1024 * 1024;

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
    let got: ReturnType<typeof readTail>;
    try {
      // a regular file only (a FIFO or device planted at the log's name is never read), the tail only
      got = readTail(this.path, this.offset, READ_MAX);
    } catch {
      return '';
    }
    const { buf, size, skipped } = got;
    if (size === this.offset && !buf.length) return '';
    if (size < this.offset || skipped) this.partial = '';
    this.offset = size;
    if (!buf.length) return '';
    this.lastActivity = Date.now();
    const text = buf.toString('utf8');
    // A progress bar (tqdm, as vLLM's "Loading safetensors checkpoint shards") rewrites its line
    // with \r: each rewrite is a line of its own here, so the last one (100%) is seen, not only the
    // first. A \r\n split across two reads gives one empty line, which no reader minds.
    const lines = (this.partial + text).split(/\r\n|\n|\r/);
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
