// Every value read from a server is checked for shape here (the answers every probe reads in
// client/answers.ts, without zod): a bad answer is a finding about that server
// ("/v1/models answered {"data":"oops"}"), never a crash of the run.
import { z } from 'zod';
import { createParser } from 'eventsource-parser';

export {
  servedModels,
  completionAnswer,
  tokenizeAnswer,
  errorMessage,
  type ServedModel,
  type CompletionAnswer,
  type Checked,
} from './answers.js';
import type { Checked } from './answers.js';

// ---- generations: what a real client would refuse is refused here too --------------------------

/** A token count: a whole number, not negative, not beyond any context a server has (2^31). */
const count = z
  .number()
  .int()
  .nonnegative()
  .max(2 ** 31);
const OpenAIUsage = z
  .object({ prompt_tokens: count, completion_tokens: count, total_tokens: count.optional() })
  .passthrough();
const finish = z.string().nullish();

// ---- Anthropic Messages streams (vLLM's /v1/messages, what Claude Code reads) ----------------

const AnthropicUsage = z.object({ input_tokens: count.optional(), output_tokens: count }).passthrough();
const Block = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text'), text: z.string() }).passthrough(),
  z.object({ type: z.literal('thinking'), thinking: z.string() }).passthrough(),
  z
    .object({
      type: z.literal('tool_use'),
      id: z.string().min(1),
      name: z.string().min(1),
      input: z.record(z.unknown()),
    })
    .passthrough(),
]);
const Delta = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text_delta'), text: z.string() }).passthrough(),
  z.object({ type: z.literal('thinking_delta'), thinking: z.string() }).passthrough(),
  z.object({ type: z.literal('signature_delta'), signature: z.string() }).passthrough(),
  z.object({ type: z.literal('input_json_delta'), partial_json: z.string() }).passthrough(),
]);
const index = z.number().int().nonnegative();
const MessagesEvent = z.discriminatedUnion('type', [
  z
    .object({
      type: z.literal('message_start'),
      message: z
        .object({
          id: z.string(),
          type: z.literal('message'),
          role: z.literal('assistant'),
          content: z.array(z.unknown()),
          model: z.string(),
          usage: AnthropicUsage,
        })
        .passthrough(),
    })
    .passthrough(),
  z.object({ type: z.literal('content_block_start'), index, content_block: Block }).passthrough(),
  z.object({ type: z.literal('content_block_delta'), index, delta: Delta }).passthrough(),
  z.object({ type: z.literal('content_block_stop'), index }).passthrough(),
  z
    .object({
      type: z.literal('message_delta'),
      delta: z.object({ stop_reason: z.string().nullable() }).passthrough(),
      usage: AnthropicUsage,
    })
    .passthrough(),
  z.object({ type: z.literal('message_stop') }).passthrough(),
  z.object({ type: z.literal('ping') }).passthrough(),
  z
    .object({ type: z.literal('error'), error: z.object({ type: z.string(), message: z.string() }).passthrough() })
    .passthrough(),
]);
type MessagesEvent = z.infer<typeof MessagesEvent>;

/**
 * SSE text -> its events (`event:` and `data:` fields), each data parsed as JSON or kept as text.
 * The WHATWG event-stream grammar (eventsource-parser), as the SDKs read it: CR LF, LF or CR end a
 * line, a comment-only message is no event, the last message needs no blank line after it.
 */
function sseEvents(text: string): Array<{ event?: string; data: string; json?: unknown }> {
  const out: Array<{ event?: string; data: string; json?: unknown }> = [];
  const parser = createParser({
    onEvent: ({ event, data }) => {
      let json: unknown;
      try {
        json = JSON.parse(data);
      } catch {
        /* [DONE] or not JSON */
      }
      out.push({ event, data, json });
    },
  });
  parser.feed(text);
  parser.feed('\n\n');
  return out;
}

interface MessagesStream {
  stopReason: string | null;
  outputTokens: number;
  blocks: Array<{ type: string; text: string; name?: string; input?: unknown }>;
}

/** A content block of a Messages stream as it is read: its text so far, and whether it is still open. */
type OpenBlock = { type: string; text: string; name?: string; input?: unknown; open: boolean };

/** Adds a content_block_delta to its block: the problem when the delta is not of the block's kind, else undefined. */
function addDelta(b: OpenBlock, d: z.infer<typeof Delta>): string | undefined {
  const want =
    b.type === 'tool_use'
      ? 'input_json_delta'
      : b.type === 'thinking'
        ? ['thinking_delta', 'signature_delta']
        : 'text_delta';
  if (Array.isArray(want) ? !want.includes(d.type) : d.type !== want) return `a ${d.type} in a ${b.type} block`;
  b.text +=
    d.type === 'text_delta'
      ? d.text
      : d.type === 'thinking_delta'
        ? d.thinking
        : d.type === 'input_json_delta'
          ? d.partial_json
          : '';
  return undefined;
}

/**
 * Closes a block (content_block_stop); a tool_use block's joined pieces become its input: the problem when they are not
 * a JSON object, else undefined.
 */
function closeBlock(b: OpenBlock): string | undefined {
  b.open = false;
  if (b.type === 'tool_use') {
    try {
      b.input = b.text === '' ? {} : JSON.parse(b.text);
    } catch {
      return `the tool_use block's input is not JSON: ${JSON.stringify(b.text.slice(0, 80))}`;
    }
    if (!b.input || typeof b.input !== 'object' || Array.isArray(b.input))
      return `the tool_use block's input is not an object: ${JSON.stringify(b.text.slice(0, 80))}`;
  }
  return undefined;
}

/**
 * A streamed Messages answer, read as the Anthropic SDK reads it: every event of a known shape,
 * message_start first, each block started, filled and stopped in index order, message_delta with
 * the stop reason, message_stop last; a tool_use block's input_json_delta pieces join into a JSON object.
 */
export function readMessagesStream(text: string): Checked<MessagesStream> {
  const evs = sseEvents(text);
  const fail = (problem: string): Checked<MessagesStream> => ({ ok: false, problem });
  if (!evs.length) return fail('the stream is empty');
  const blocks: OpenBlock[] = [];
  let stopReason: string | null | undefined;
  let outputTokens = 0;
  let stopped = false;
  for (const [k, e] of evs.entries()) {
    const r = MessagesEvent.safeParse(e.json);
    if (!r.success) {
      const where = r.error.issues[0];
      return fail(
        `event ${k + 1} is not a Messages event (${where ? `${where.path.join('.') || 'data'}: ${where.message}` : '?'}): ${JSON.stringify(e.data.slice(0, 80))}`,
      );
    }
    const ev = r.data;
    if (e.event !== undefined && e.event !== ev.type)
      return fail(`event ${k + 1}: "event: ${e.event}" carries a ${ev.type}`);
    if (stopped) return fail(`${ev.type} after message_stop`);
    if (k === 0 && ev.type !== 'message_start') return fail(`the stream starts with ${ev.type}, not message_start`);
    switch (ev.type) {
      case 'error':
        return fail(`the stream carries an error event: ${ev.error.type}: ${ev.error.message}`);
      case 'content_block_start':
        if (ev.index !== blocks.length) return fail(`content_block_start index ${ev.index}, expected ${blocks.length}`);
        if (blocks.some((b) => b.open))
          return fail(`content_block_start ${ev.index} while block ${blocks.length - 1} is open`);
        blocks.push({
          type: ev.content_block.type,
          text: '',
          name: 'name' in ev.content_block ? String(ev.content_block.name) : undefined,
          open: true,
        });
        break;
      case 'content_block_delta': {
        const b = blocks[ev.index];
        if (!b?.open) return fail(`content_block_delta for block ${ev.index}, which is not open`);
        const problem = addDelta(b, ev.delta);
        if (problem) return fail(problem);
        break;
      }
      case 'content_block_stop': {
        const b = blocks[ev.index];
        if (!b?.open) return fail(`content_block_stop for block ${ev.index}, which is not open`);
        const problem = closeBlock(b);
        if (problem) return fail(problem);
        break;
      }
      case 'message_delta':
        if (blocks.some((b) => b.open)) return fail('message_delta while a content block is open');
        stopReason = ev.delta.stop_reason;
        outputTokens = ev.usage.output_tokens;
        break;
      case 'message_stop':
        if (stopReason === undefined) return fail('message_stop without a message_delta (no stop_reason)');
        stopped = true;
        break;
    }
  }
  if (!stopped) return fail(`the stream ends without message_stop (last: ${evs.at(-1)!.data.slice(0, 60)})`);
  return {
    ok: true,
    value: { stopReason: stopReason ?? null, outputTokens, blocks: blocks.map(({ open: _o, ...b }) => b) },
  };
}

interface ChatStream {
  finishReason: string | null;
  content: string;
  toolCalls: Array<{ id?: string; name?: string; arguments: string }>;
  usage?: { prompt_tokens: number; completion_tokens: number };
}

const ChatChunk = z
  .object({
    object: z.literal('chat.completion.chunk'),
    choices: z.array(
      z
        .object({
          index: z.number().int().nonnegative(),
          delta: z
            .object({
              role: z.string().optional(),
              content: z.string().nullish(),
              tool_calls: z
                .array(
                  z
                    .object({
                      index: z.number().int().nonnegative(),
                      id: z.string().nullish(),
                      function: z
                        .object({ name: z.string().nullish(), arguments: z.string().nullish() })
                        .passthrough()
                        .nullish(),
                    })
                    .passthrough(),
                )
                .nullish(),
            })
            .passthrough(),
          finish_reason: finish.optional(),
        })
        .passthrough(),
    ),
    usage: OpenAIUsage.nullish(),
  })
  .passthrough();

/**
 * A streamed chat completion as the OpenAI SDK reads it: chunks of the right shape, [DONE] last, the usage chunk
 * (choices []) before it.
 */
export function readChatStream(text: string, wantUsage: boolean): Checked<ChatStream> {
  const evs = sseEvents(text);
  const fail = (problem: string): Checked<ChatStream> => ({ ok: false, problem });
  if (!evs.length) return fail('the stream is empty');
  if (evs.at(-1)!.data !== '[DONE]')
    return fail(`the stream does not end with data: [DONE] (last: ${evs.at(-1)!.data.slice(0, 60)})`);
  const out: ChatStream = { finishReason: null, content: '', toolCalls: [] };
  const chunks = evs.slice(0, -1);
  for (const [k, e] of chunks.entries()) {
    const r = ChatChunk.safeParse(e.json);
    if (!r.success) {
      const where = r.error.issues[0];
      return fail(
        `chunk ${k + 1} is not a chat.completion.chunk (${where ? `${where.path.join('.') || 'data'}: ${where.message}` : '?'}): ${JSON.stringify(e.data.slice(0, 80))}`,
      );
    }
    const c = r.data;
    if (c.usage) out.usage = c.usage;
    if (!c.choices.length) {
      if (!c.usage) return fail(`chunk ${k + 1} has no choices and no usage`);
      if (k !== chunks.length - 1) return fail('the usage chunk is not the last before [DONE]');
      continue;
    }
    const ch = c.choices[0]!;
    if (out.finishReason !== null) return fail(`chunk ${k + 1} comes after finish_reason ${out.finishReason}`);
    out.content += ch.delta.content ?? '';
    for (const tc of ch.delta.tool_calls ?? []) {
      const t = (out.toolCalls[tc.index] ??= { arguments: '' });
      if (tc.id) t.id = tc.id;
      if (tc.function?.name) t.name = tc.function.name;
      t.arguments += tc.function?.arguments ?? '';
    }
    if (ch.finish_reason) out.finishReason = ch.finish_reason;
  }
  if (out.finishReason === null) return fail('no chunk carries a finish_reason');
  if (wantUsage && !out.usage) return fail('stream_options.include_usage was asked, and no usage chunk came');
  for (const t of out.toolCalls) {
    if (!t.id || !t.name) return fail('a tool call without an id or a function name');
    try {
      const a = JSON.parse(t.arguments || '{}');
      if (!a || typeof a !== 'object' || Array.isArray(a)) throw new Error('not an object');
    } catch {
      return fail(`the ${t.name} call's arguments are not a JSON object: ${JSON.stringify(t.arguments.slice(0, 80))}`);
    }
  }
  return { ok: true, value: out };
}
