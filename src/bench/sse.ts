// Reads an OpenAI-style SSE stream the way vLLM's benchmark client does: the WHATWG event-stream
// grammar (eventsource-parser: any of CR LF, LF or CR ends a line, a blank line ends a message),
// ":" comments skipped, "data: [DONE]" ends it. Every byte is hostile: a message that is not JSON,
// or a buffer that grows without a message boundary, is an error, never a crash.
import { createParser, type EventSourceParser } from 'eventsource-parser';

const MAX_SSE_MESSAGE = 4 * 1024 * 1024;

export class SseError extends Error {}

export class SseSplitter {
  private decoder = new TextDecoder();
  private done: string[] = [];
  private overflow = false;
  private parser: EventSourceParser = createParser({
    maxBufferSize: MAX_SSE_MESSAGE,
    onEvent: (e) => this.done.push(e.data.trim()),
    onError: (e) => {
      // an unknown field is ignored, as the grammar says; only an unbounded message is an error
      if (e.type === 'max-buffer-size-exceeded') this.overflow = true;
    },
  });

  /** The data payloads completed by this chunk (without "data: "), "[DONE]" included. */
  push(chunk: Uint8Array): string[] {
    return this.feed(this.decoder.decode(chunk, { stream: true }));
  }

  /** What is left when the stream ends (a last message without its blank line). */
  end(): string[] {
    return this.feed(`${this.decoder.decode()}\n\n`);
  }

  private feed(text: string): string[] {
    if (this.overflow) throw new SseError(`an SSE message grew past ${MAX_SSE_MESSAGE} bytes without an end`);
    this.parser.feed(text);
    if (this.overflow) throw new SseError(`an SSE message grew past ${MAX_SSE_MESSAGE} bytes without an end`);
    const out = this.done;
    this.done = [];
    return out;
  }
}
