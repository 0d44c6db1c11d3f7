// SPARKCTL_SIM_TRACE=FILE: what the simulator actually did for each streamed request (time to its
// first token and the gaps between tokens, in ms, from the moment the request reached its handler).
// The time model says what should happen; timers and a busy event loop make it a little late. With
// this trace a client can be measured against what the server really sent, not only against the
// model (scripts/bench-bench.mjs does).
// SPARKCTL_SIM_REQUEST_LOG=FILE: every request a client made (method, path, status, sizes, and the
// fields that show a client's shape: model, max_tokens, stream, tool names): how Claude Code's
// requests were measured, and how a test proves a client talked to nothing else.
// Both files are created exclusively (never through a link or over a file someone left there);
// lines are buffered and written twice a second and at exit.
import { closeSync, constants, openSync, writeSync } from 'node:fs';

interface TraceRecord {
  ttftMs: number;
  itlMs: number[];
}

class JsonLines {
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

  protected push(line: unknown) {
    this.buf.push(JSON.stringify(line));
  }

  flush() {
    if (!this.buf.length) return;
    const text = `${this.buf.join('\n')}\n`;
    this.buf = [];
    writeSync(this.fd, text);
  }
}

export class SimTrace extends JsonLines {
  record(r: TraceRecord) {
    this.push({ ttftMs: +r.ttftMs.toFixed(3), itlMs: r.itlMs.map((x) => +x.toFixed(3)) });
  }
}

export interface RequestRecord {
  method: string;
  /** the path with its query (Claude Code asks for /v1/messages?beta=true) */
  url: string;
  status: number;
  bytes: number;
  userAgent?: string;
  model?: unknown;
  maxTokens?: unknown;
  stream?: boolean;
  tools?: string[];
  promptTokens?: number;
  systemChars?: number;
  toolsChars?: number;
  messages?: number;
}

export class RequestLog extends JsonLines {
  record(r: RequestRecord) {
    this.push({ t: new Date().toISOString(), ...r });
  }
}
