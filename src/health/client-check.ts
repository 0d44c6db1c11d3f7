// The probe's client step: one request shaped like the client's own (Claude Code: its system
// prompt, 24 tools, streaming, the max_tokens it would send; an OpenAI agent: the same tools on
// chat completions), read the way that client reads the answer. A failure says what the client
// would have seen.
import { http } from '../client/http.js';
import { CLAUDE_CODE, MIN_CONTEXT, claudeCodeRequest, outputBudget } from '../client/claude-code.js';
import { errorMessage } from '../client/answers.js';
import { readChatStream, readMessagesStream } from '../client/shapes.js';
import type { Target } from './target.js';

interface ClientCheck {
  status: 'pass' | 'warn' | 'fail';
  detail: string;
  ms: number;
}

interface Opts {
  timeoutMs: number;
  /** this step's own deadline (ProbeSettings.clientTimeoutMs); timeoutMs when unset */
  clientTimeoutMs?: number;
  signal?: AbortSignal;
}

/** What the client shows for an error answer, and why it happened where that is known. */
function refusal(status: number, message: string, maxModelLen: number | undefined, client: string): string {
  const seen = `${client} would see "API Error: ${status} ${message}"`;
  const retried =
    status >= 500 && client === 'Claude Code'
      ? ` and retry it (${CLAUDE_CODE.retriesOn500.attempts} attempts in ${CLAUDE_CODE.retriesOn500.seconds} s: the session looks hung)`
      : '';
  const why = /maximum context length|cannot be greater than max_model_len/.test(message)
    ? `: the served context${maxModelLen ? ` of ${maxModelLen} tokens` : ''} cannot hold its request (a Claude Code turn needs ${MIN_CONTEXT}); sparkctl client-env NAME --claude-code names what fits`
    : /tool choice requires|requires --tool-call-parser/.test(message)
      ? ': the server parses no tool calls; serve it with engine.toolCallParser (--enable-auto-tool-choice --tool-call-parser)'
      : '';
  return `${seen}${retried}${why}`;
}

export async function claudeCodeCheck(
  t: Target,
  model: string,
  maxModelLen: number | undefined,
  o: Opts,
): Promise<ClientCheck> {
  const budget = maxModelLen ? outputBudget(maxModelLen) : undefined;
  // What Claude Code sends: client-env's CLAUDE_CODE_MAX_OUTPUT_TOKENS where the context holds a
  // turn, else its own default (a user who set nothing).
  const maxTokens = budget?.fits ? budget.maxOutputTokens : CLAUDE_CODE.defaultMaxTokens;
  const r = await http(`${t.url}/v1/messages?beta=true`, {
    body: claudeCodeRequest(model, maxTokens),
    timeoutMs: o.clientTimeoutMs ?? o.timeoutMs,
    signal: o.signal,
    apiKey: t.apiKey,
    headers: { 'anthropic-version': '2023-06-01', 'anthropic-beta': 'claude-code-20250219' },
  });
  const shape = `a Claude Code ${CLAUDE_CODE.version}-shaped request (${CLAUDE_CODE.firstRequest.tools.length} tools, about ${CLAUDE_CODE.firstRequest.tokens.qwen} tokens, max_tokens ${maxTokens}, streamed)`;
  if (!r.ok)
    return {
      status: 'fail',
      detail:
        r.error === 'timeout'
          ? `no complete answer to ${shape} within ${o.clientTimeoutMs ?? o.timeoutMs} ms (raise it with probe --step-timeout 5m for a slow prefill)`
          : `POST /v1/messages: ${r.message}`,
      ms: r.ms,
    };
  if (r.status !== 200)
    return {
      status: 'fail',
      detail: `${shape}: ${refusal(r.status, errorMessage(r.json, r.body), maxModelLen, 'Claude Code')}`,
      ms: r.ms,
    };
  const s = readMessagesStream(r.body);
  if (!s.ok) return { status: 'fail', detail: `the stream Claude Code reads is broken: ${s.problem}`, ms: r.ms };
  const v = s.value;
  if (budget && !budget.fits)
    return {
      status: 'fail',
      detail: `the served context of ${maxModelLen} tokens cannot hold a Claude Code turn (${MIN_CONTEXT} needed); this one request fit, the next turns will not`,
      ms: r.ms,
    };
  if (v.stopReason === 'max_tokens')
    return {
      status: 'fail',
      detail: `the answer stopped at max_tokens (${v.outputTokens}): Claude Code reports "response exceeded the ${maxTokens} output token maximum"`,
      ms: r.ms,
    };
  const tool = v.blocks.find((b) => b.type === 'tool_use');
  if (v.stopReason === 'tool_use') {
    if (!tool)
      return {
        status: 'fail',
        detail: 'stop_reason tool_use with no tool_use block: Claude Code has no call to run',
        ms: r.ms,
      };
    const known = (CLAUDE_CODE.firstRequest.tools as readonly string[]).includes(tool.name ?? '');
    if (!known)
      return { status: 'fail', detail: `the model called "${tool.name}", a tool the request did not define`, ms: r.ms };
    return {
      status: 'pass',
      detail: `Claude Code's turn runs: ${v.blocks.length} block(s), a ${tool.name} call with ${JSON.stringify(tool.input).slice(0, 80)}, stop_reason tool_use; ${maxTokens} output tokens a turn`,
      ms: r.ms,
    };
  }
  if (v.stopReason === 'end_turn' || v.stopReason === 'stop_sequence')
    return {
      status: 'warn',
      detail: `Claude Code's turn runs (stop_reason ${v.stopReason}), but the model answered in text instead of calling Read: it may not use its tools`,
      ms: r.ms,
    };
  return { status: 'fail', detail: `stop_reason ${JSON.stringify(v.stopReason)}: not one Claude Code knows`, ms: r.ms };
}

/** The same tools and prompt on chat completions, as an OpenAI-SDK agent sends them (no max_tokens: vLLM's default). */
export async function openaiCheck(t: Target, model: string, o: Opts): Promise<ClientCheck> {
  const cc = claudeCodeRequest(model, 1);
  const tools = cc.tools.map((x) => ({
    type: 'function',
    function: { name: x.name, description: x.description, parameters: x.input_schema },
  }));
  const messages = [
    { role: 'system', content: cc.system[0]!.text },
    { role: 'user', content: cc.messages[0]!.content.map((p) => p.text).join('') },
  ];
  const r = await http(`${t.url}/v1/chat/completions`, {
    body: { model, messages, tools, stream: true, stream_options: { include_usage: true } },
    timeoutMs: o.clientTimeoutMs ?? o.timeoutMs,
    signal: o.signal,
    apiKey: t.apiKey,
  });
  if (!r.ok)
    return {
      status: 'fail',
      detail:
        r.error === 'timeout'
          ? `no complete streamed chat answer within ${o.clientTimeoutMs ?? o.timeoutMs} ms`
          : `POST /v1/chat/completions: ${r.message}`,
      ms: r.ms,
    };
  if (r.status !== 200)
    return {
      status: 'fail',
      detail: `streamed chat with ${tools.length} tools: ${refusal(r.status, errorMessage(r.json, r.body), undefined, 'an OpenAI client')}`,
      ms: r.ms,
    };
  const s = readChatStream(r.body, true);
  if (!s.ok) return { status: 'fail', detail: `the stream an OpenAI client reads is broken: ${s.problem}`, ms: r.ms };
  const v = s.value;
  if (v.finishReason === 'length')
    return {
      status: 'fail',
      detail: `the answer ran into the context (finish_reason length after ${v.usage?.completion_tokens ?? '?'} tokens)`,
      ms: r.ms,
    };
  // JSON mode, which some clients ask for (vLLM honours response_format)
  const j = await http(`${t.url}/v1/chat/completions`, {
    body: {
      model,
      max_tokens: 1,
      messages: [{ role: 'user', content: 'ping' }],
      response_format: { type: 'json_object' },
    },
    timeoutMs: o.clientTimeoutMs ?? o.timeoutMs,
    signal: o.signal,
    apiKey: t.apiKey,
  });
  const json =
    j.ok && j.status === 200
      ? ''
      : `; JSON mode (response_format json_object) refused: ${j.ok ? `HTTP ${j.status} ${errorMessage(j.json, j.body)}` : j.message}`;
  if (v.finishReason === 'tool_calls' && v.toolCalls.length)
    return {
      status: json ? 'warn' : 'pass',
      detail: `streamed chat runs: a ${v.toolCalls[0]!.name} call, finish_reason tool_calls, usage last${json}`,
      ms: r.ms + j.ms,
    };
  return {
    status: 'warn',
    detail: `streamed chat runs (finish_reason ${v.finishReason}), but the model answered in text instead of calling a tool${json}`,
    ms: r.ms + j.ms,
  };
}
