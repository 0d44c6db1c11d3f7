// SPARKCTL_SIM_TRACE=FILE: what the simulator actually did for each streamed request (time to its
// first token and the gaps between tokens, in ms, from the moment the request reached its handler).
// The time model says what should happen; timers and a busy event loop make it a little late. With
// this trace a client can be measured against what the server really sent, not only against the
// model (scripts/bench-bench.mjs does). The file is created exclusively (never through a link or
// over a file someone left there); lines are buffered and written twice a second and at exit.
import { closeSync, constants, openSync, writeSync } from 'node:fs';

export interface TraceRecord {
  ttftMs: number;
  itlMs: number[];
}

export class SimTrace {
  private fd: number;
  private buf: string[] = [];

  constructor(path: string) {
    this.fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    setInterval(() => this.flush(), 500).unref();
    process.on('exit', () => {
      this.flush();
      closeSync(this.fd);
    });
  }

  record(r: TraceRecord) {
    this.buf.push(JSON.stringify({ ttftMs: +r.ttftMs.toFixed(3), itlMs: r.itlMs.map((x) => +x.toFixed(3)) }));
  }

  flush() {
    if (!this.buf.length) return;
    const text = `${this.buf.join('\n')}\n`;
    this.buf = [];
    writeSync(this.fd, text);
  }
}
