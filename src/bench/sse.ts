// Reads an OpenAI-style SSE stream the way vLLM's benchmark client does: messages split on blank
// lines, ":" comments skipped, "data: [DONE]" ends it. Every byte is hostile: a message that is
// not JSON, or a buffer that grows without a message boundary, is an error, never a crash.
export const MAX_SSE_MESSAGE = 4 * 1024 * 1024;

export class SseError extends Error {}

export class SseSplitter {
  private buf = '';
  private decoder = new TextDecoder();

  /** The data payloads completed by this chunk (without "data: "), "[DONE]" included. */
  push(chunk: Uint8Array): string[] {
    this.buf += this.decoder.decode(chunk, { stream: true });
    const out: string[] = [];
    for (;;) {
      const i = this.buf.search(/\r?\n\r?\n/);
      if (i < 0) break;
      const msg = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + (this.buf[i] === '\r' ? 4 : 2)).replace(/^\n/, '');
      const data = dataOf(msg);
      if (data !== undefined) out.push(data);
    }
    if (this.buf.length > MAX_SSE_MESSAGE) throw new SseError(`an SSE message grew past ${MAX_SSE_MESSAGE} bytes without an end`);
    return out;
  }

  /** What is left when the stream ends (a last message without its blank line). */
  end(): string[] {
    const rest = this.buf + this.decoder.decode();
    this.buf = '';
    const data = rest.trim() ? dataOf(rest) : undefined;
    return data !== undefined ? [data] : [];
  }
}

function dataOf(msg: string): string | undefined {
  const lines = msg.split(/\r?\n/).filter((l) => l.startsWith('data:'));
  if (!lines.length) return undefined; // comments (pings), event-only messages
  return lines
    .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5))
    .join('\n')
    .trim();
}
