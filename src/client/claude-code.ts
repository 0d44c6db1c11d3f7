// What Claude Code needs from a server, as measured with the real CLI (data, not guesses), and the
// pure rules client-env and the probe draw from it: the output budget a context leaves after a
// Claude Code turn, and a request shaped like Claude Code's own.

/**
 * Claude Code 2.1.197 (npm @anthropic-ai/claude-code), measured 2026-12-01 with
 * `claude -p "Say hello" --output-format json`, offline (CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1,
 * DISABLE_TELEMETRY=1, DISABLE_AUTOUPDATER=1, a fresh CLAUDE_CONFIG_DIR, ANTHROPIC_BASE_URL at the
 * server, ANTHROPIC_AUTH_TOKEN=dummy, ANTHROPIC_MODEL and ANTHROPIC_DEFAULT_{OPUS,SONNET,HAIKU}_MODEL
 * = the served name): against sparkctl's simulator with SPARKCTL_SIM_REQUEST_LOG, and against the
 * real vLLM 0.27.2 CPU build (tiny Qwen3, 65,536-token context) through a recording proxy.
 */
export const CLAUDE_CODE = {
  version: '2.1.197',
  /** what it calls, in order: a HEAD / (vLLM answers 404; harmless), then its turn. No count_tokens, no /v1/models. */
  paths: ['HEAD /', 'POST /v1/messages?beta=true'],
  /** max_tokens of every request unless CLAUDE_CODE_MAX_OUTPUT_TOKENS lowers it */
  defaultMaxTokens: 32_000,
  stream: true,
  /** the model field is the served name as given, "/" included (it sent Qwen/Qwen3.5-9B and tiny/qwen3-code) */
  modelNameAsGiven: true,
  firstRequest: {
    bytes: 76_160,
    systemChars: 5_705,
    toolsChars: 62_849,
    messagesChars: 6_605,
    /** the 24 tools it defines (Read takes file_path) */
    tools: [
      'Agent',
      'Bash',
      'CronCreate',
      'CronDelete',
      'CronList',
      'Edit',
      'EnterWorktree',
      'ExitWorktree',
      'NotebookEdit',
      'Read',
      'ReportFindings',
      'ScheduleWakeup',
      'SendMessage',
      'Skill',
      'TaskCreate',
      'TaskGet',
      'TaskList',
      'TaskOutput',
      'TaskStop',
      'TaskUpdate',
      'WebFetch',
      'WebSearch',
      'Workflow',
      'Write',
    ],
    /**
     * input tokens as counted by: the simulator (4 bytes a token), the tiny Qwen3's 2,048-entry BPE, Qwen3.5's
     * tokenizer (about)
     */
    tokens: { simulator: 18_839, tinyQwen3: 32_115, qwen: 20_500 },
  },
  /**
   * How it meets refusals: a 400 is shown at once as "API Error: 400 ..." (exit 1 with is_error);
   * a 500 (vLLM's answer on /v1/messages to a request the context cannot hold) is retried with
   * backoff: 8 attempts in 100 s, and the session looks hung. An answer that stops at max_tokens is
   * an error to it ("response exceeded the N output token maximum").
   */
  retriesOn500: { attempts: 8, seconds: 100 },
} as const;

/** Room for the turns after the first (tool results, files read) before a session must compact. */
const CONVERSATION_HEADROOM = 16_384;
/** Fewest output tokens worth running Claude Code with (one file written through a tool call). */
const MIN_OUTPUT_TOKENS = 8_192;
/** Input a Claude Code turn is planned for: its first request (Qwen's count) and the headroom. */
export const INPUT_RESERVE = CLAUDE_CODE.firstRequest.tokens.qwen + CONVERSATION_HEADROOM;
/** The least context that holds a Claude Code turn. */
export const MIN_CONTEXT = INPUT_RESERVE + MIN_OUTPUT_TOKENS;

interface OutputBudget {
  /** the context holds a Claude Code turn */
  fits: boolean;
  /** CLAUDE_CODE_MAX_OUTPUT_TOKENS: what the context leaves after the input reserve, at most Claude Code's default */
  maxOutputTokens: number;
  maxModelLen: number;
}

export function outputBudget(maxModelLen: number): OutputBudget {
  const left = maxModelLen - INPUT_RESERVE;
  return {
    fits: left >= MIN_OUTPUT_TOKENS,
    maxOutputTokens: Math.max(0, Math.min(CLAUDE_CODE.defaultMaxTokens, left)),
    maxModelLen,
  };
}

/** The context lengths worth suggesting, least first: the least that fits, rounded up to 16K, then 64K and 128K. */
export function suggestedContexts(modelMax: number): number[] {
  const least = Math.ceil(MIN_CONTEXT / 16_384) * 16_384;
  return [...new Set([least, 65_536, 131_072])].filter((x) => x >= least && x <= modelMax).sort((a, b) => a - b);
}

/** Whether vLLM, started with these arguments, parses tool calls (Claude Code's every request has tools). */
export function toolCallingOn(argv: readonly string[]): boolean {
  return (
    argv.includes('--enable-auto-tool-choice') &&
    argv.some((a) => a === '--tool-call-parser' || a.startsWith('--tool-call-parser='))
  );
}

const FILLER =
  'Use the tools to read, search and change files; keep answers short and exact; say what you changed and why. ';
const fill = (chars: number, lead = '') =>
  (lead + FILLER.repeat(Math.ceil(chars / FILLER.length))).slice(0, Math.max(lead.length, chars));

/** Tool definitions with Claude Code's names and measured total size; Read has its real schema. */
export function claudeCodeTools(): Array<{ name: string; description: string; input_schema: Record<string, unknown> }> {
  const names = CLAUDE_CODE.firstRequest.tools;
  const schemaOf = (name: string) =>
    name === 'Read'
      ? {
          type: 'object',
          properties: { file_path: { type: 'string', description: 'The absolute path to the file to read' } },
          required: ['file_path'],
          additionalProperties: false,
        }
      : { type: 'object', properties: { input: { type: 'string' } }, additionalProperties: false };
  const bare = names.map((name) => ({ name, description: '', input_schema: schemaOf(name) }));
  const per = Math.floor((CLAUDE_CODE.firstRequest.toolsChars - JSON.stringify(bare).length) / names.length);
  return bare.map((t) => ({
    ...t,
    description: fill(per, t.name === 'Read' ? 'Reads a file from the local filesystem. ' : `${t.name}. `),
  }));
}

/**
 * A first request shaped like Claude Code's: its system prompt, tools and first-turn sizes, streamed,
 * asking to read a file (so a model that uses its tools answers with a Read call).
 */
export function claudeCodeRequest(model: string, maxTokens: number, path = '/etc/hostname') {
  const prompt = `Read the file ${path} and tell me what it says.`;
  return {
    model,
    max_tokens: maxTokens,
    stream: true,
    system: [
      {
        type: 'text',
        text: fill(
          CLAUDE_CODE.firstRequest.systemChars,
          'You are an interactive agent that helps users with software engineering tasks. ',
        ),
      },
    ],
    tools: claudeCodeTools(),
    messages: [
      {
        role: 'user',
        content: [
          {
            type: 'text',
            text: `<system-reminder>\n${fill(CLAUDE_CODE.firstRequest.messagesChars - prompt.length - 40)}\n</system-reminder>\n`,
          },
          { type: 'text', text: prompt },
        ],
      },
    ],
  };
}

export interface ServedFacts {
  /** the context the server serves (vLLM's --max-model-len) */
  maxModelLen: number;
  /** --enable-auto-tool-choice with a --tool-call-parser */
  toolCalling: boolean;
}

interface ClaudeCodeVerdict {
  ok: boolean;
  budget: OutputBudget;
  /** what Claude Code would meet, each with what it would have seen */
  problems: string[];
}

/** Can Claude Code run a turn on this server, and with how many output tokens. */
export function claudeCodeVerdict(s: ServedFacts): ClaudeCodeVerdict {
  const budget = outputBudget(s.maxModelLen);
  const problems: string[] = [];
  if (!s.toolCalling)
    problems.push(
      `the server does not parse tool calls (no --enable-auto-tool-choice --tool-call-parser), and Claude Code sends ${CLAUDE_CODE.firstRequest.tools.length} tool definitions with every request: vLLM answers each with 400 "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`,
    );
  if (!budget.fits)
    problems.push(
      `the served context of ${s.maxModelLen} tokens cannot hold a Claude Code turn: its first request alone is about ${CLAUDE_CODE.firstRequest.tokens.qwen} input tokens (Claude Code ${CLAUDE_CODE.version}), and a turn needs ${MIN_CONTEXT} (${INPUT_RESERVE} input with room for the conversation, ${MIN_OUTPUT_TOKENS} output); vLLM refuses such a request with HTTP 500 "This model's maximum context length is ${s.maxModelLen} tokens", which Claude Code retries for ${CLAUDE_CODE.retriesOn500.seconds} s and more`,
    );
  return { ok: problems.length === 0, budget, problems };
}
