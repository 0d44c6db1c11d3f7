// What the simulated model answers: how long (a model stops on its own, at a length that grows
// with the request; ignore_eos runs to max_tokens as vLLM does), and whether it calls a tool.
// The tool rule is deterministic so a client's tool loop can be tested end to end: the server
// must have tool calling on (--enable-auto-tool-choice with a --tool-call-parser), the request
// must define a tool that reads files (named Read, or taking file_path / path), and the last user
// turn must ask to read a path. Then the answer is that tool call; the next turn, which carries
// the tool's result, is answered in text that quotes the result's first line.
import { randomBytes } from 'node:crypto';
import { countTokens, contentText } from './tokenizer.js';

type Json = Record<string, any>;

export interface ToolCall {
  /** vLLM's tool-call id: chatcmpl-tool- and 32 hex digits */
  id: string;
  name: string;
  input: Record<string, string>;
}

/** Fewest tokens a simulated answer has before it may stop (short requests then run to max_tokens, as tests expect). */
export const MIN_NATURAL = 64;

/** The length the model would stop at on its own: 64 tokens plus up to 64 + promptTokens/64, drawn from r in [0, 1). */
export function naturalLength(r: number, promptTokens: number): number {
  return MIN_NATURAL + Math.floor(r * (64 + Math.min(promptTokens, 262_144) / 64));
}

/** A tool definition, Anthropic ({name, input_schema}) or OpenAI ({type: function, function: {name, parameters}}). */
function toolOf(t: unknown): { name: string; props: string[] } | undefined {
  if (!t || typeof t !== 'object') return undefined;
  const o = t as Json;
  const f = o.type === 'function' && o.function && typeof o.function === 'object' ? o.function : o;
  if (typeof f.name !== 'string') return undefined;
  const schema = f.input_schema ?? f.parameters;
  const props =
    schema && typeof schema === 'object' && schema.properties && typeof schema.properties === 'object'
      ? Object.keys(schema.properties)
      : [];
  return { name: f.name, props };
}

/** The tool that reads a file and the argument that takes its path, if the request defines one. */
function readTool(tools: unknown[]): { name: string; arg: string } | undefined {
  const defs = tools.map(toolOf).filter((x): x is { name: string; props: string[] } => !!x);
  const byName = defs.find(
    (d) => /^read(_?file)?$/i.test(d.name) && d.props.some((p) => p === 'file_path' || p === 'path'),
  );
  const d = byName ?? defs.find((x) => x.props.includes('file_path')) ?? defs.find((x) => x.props.includes('path'));
  if (!d) return undefined;
  return { name: d.name, arg: d.props.includes('file_path') ? 'file_path' : 'path' };
}

/** The text of a user turn's last text part (Claude Code puts its reminders in parts before the prompt). */
function lastUserText(m: Json): string {
  if (typeof m.content === 'string') return m.content;
  if (!Array.isArray(m.content)) return '';
  const texts = m.content.filter((p: Json) => p && typeof p === 'object' && typeof p.text === 'string');
  return texts.length ? texts[texts.length - 1].text : '';
}

const PATH = /(?:^|[\s'"`(])((?:~|\.{1,2})?\/[^\s'"`()<>]+|[\w.-]+\.[A-Za-z0-9]{1,8})(?=$|[\s'"`),.:;!?]*(?:\s|$))/;

/** The path a prompt asks to read ("read /tmp/x/notes.txt and ..."), if it asks. */
export function pathToRead(text: string): string | undefined {
  const at = text.search(/\b(read|open|cat|show)\b/i);
  if (at < 0) return undefined;
  const m = PATH.exec(text.slice(at));
  return m?.[1]?.replace(/[.,:;!?]+$/, '');
}

/**
 * The conversation's last turn, past the system messages Claude Code appends after it (its "mid-conversation system"
 * notes).
 */
function lastTurn(messages: unknown): Json | undefined {
  if (!Array.isArray(messages)) return undefined;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m && typeof m === 'object' && (m as Json).role !== 'system') return m as Json;
  }
  return undefined;
}

/** Whether this turn is answered by a call to a read tool, and which. */
export function toolCallFor(body: Json, toolsEnabled: boolean): ToolCall | undefined {
  if (!toolsEnabled || !Array.isArray(body.tools) || !body.tools.length) return undefined;
  const choice = body.tool_choice;
  if (choice === 'none' || (choice && typeof choice === 'object' && choice.type === 'none')) return undefined;
  const last = lastTurn(body.messages);
  if (!last || last.role !== 'user') return undefined;
  // A turn that carries a tool's result is answered in text.
  if (Array.isArray(last.content) && last.content.some((p: Json) => p?.type === 'tool_result')) return undefined;
  const tool = readTool(body.tools);
  const path = pathToRead(lastUserText(last));
  if (!tool || !path) return undefined;
  return { id: `chatcmpl-tool-${randomBytes(16).toString('hex')}`, name: tool.name, input: { [tool.arg]: path } };
}

/** Tokens of a tool call as Qwen3.5 writes it (qwen3_coder XML). */
export function toolCallTokens(call: ToolCall): number {
  const params = Object.entries(call.input)
    .map(([k, v]) => `<parameter=${k}>\n${v}\n</parameter>\n`)
    .join('');
  return countTokens(`<tool_call>\n<function=${call.name}>\n${params}</function>\n</tool_call>`);
}

/**
 * When the last turn carries a tool's result (Anthropic tool_result, OpenAI role "tool"): the
 * answer's opening, quoting the result's first non-empty line (line numbers of `cat -n` output
 * dropped), so a test can see the tool really ran.
 */
export function toolResultQuote(messages: unknown): string | undefined {
  const last = lastTurn(messages);
  let text: string | undefined;
  if (last?.role === 'tool') text = contentText(last.content);
  else if (last?.role === 'user' && Array.isArray(last.content)) {
    const r = last.content.find((p: Json) => p?.type === 'tool_result');
    if (r) text = contentText(r.content);
  }
  if (text === undefined) return undefined;
  const line = text
    .split('\n')
    .map((l) => l.replace(/^\s*\d+[\t→]/, '').trim())
    .find((l) => l.length > 0 && !l.startsWith('<'));
  return `The tool returned: ${(line ?? '(nothing)').slice(0, 200)}`;
}

/** The quote cut into token-sized pieces (4 bytes of ASCII each), so it streams one token at a time. */
export function pieces(text: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += 4) out.push(text.slice(i, i + 4));
  return out;
}
